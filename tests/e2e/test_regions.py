"""tests/e2e/test_regions.py - end-to-end tests of named regions (memline.h
push/pop, NVTX ranges) as a tree."""

from harness import *


@test
def regions_tree():
	r = Run("lp_regions")
	prof = r.file("lp_regions")
	root = report(prof, "regions")["regions"]
	eq(root["name"], "root", "root name")
	ch = root["children"]
	eq(sorted(ch), ["grow", "outer", "tail"], "top-level regions")
	outer, tail, grow = ch["outer"], ch["tail"], ch["grow"]
	inner = outer["children"]["inner"]
	eq((outer["count"], inner["count"], tail["count"]), (3, 6, 1), "counts")
	eq((outer["alloc_bytes"], outer["self_alloc_bytes"], inner["alloc_bytes"]), (7500, 1500, 6000),
	   "region memory")
	eq((outer["allocs"], inner["allocs"]), (9, 6), "region allocs")
	check(0.12 <= inner["total"] < 0.6, "inner total %.3f s for 6 x 20 ms" % inner["total"])
	check(abs(outer["self"] - (outer["total"] - inner["total"])) < 1e-6, "outer self")
	check(outer["total"] >= inner["total"] and tail["total"] >= 0.01, "totals")
	eq(inner["children"], {}, "inner has no children")
	# realloc counts in the region as the lines view counts it: 100 + 1000 + 5000
	eq((grow["count"], grow["alloc_bytes"], grow["allocs"]), (1, 6100, 3), "grow region (realloc)")
	rows = lines_of(prof, "main")
	L = lambda m: line_of("lp_regions", m)
	eq([(row(rows, L(m), m)["self_bytes"], row(rows, L(m), m)["allocs"]) for m in ("g_malloc", "g_1000", "g_5000")],
	   [(100, 1), (1000, 1), (5000, 1)], "grow lines")
	p = run([rcli(), "report", prof, "regions"])
	out = text(p.stdout).splitlines()
	check(re.match(r"^outer: \d+\.\d{4}  \(count 3, self \d+\.\d{4}, alloc 7\.32 KiB in 9 allocs\)$", out[1]),
	      "outer line: %r" % out[1])
	check(out[2].startswith("  inner: "), "inner line indented: %r" % out[2])


@test
def regions_nvtx():
	plain = run([fixture("lp_nvtx")])
	if plain.returncode == 77:
		raise Skip("built without NVTX headers (nvtx3/nvToolsExt.h not found)")
	r = Run("lp_nvtx")
	ch = report(r.file("lp_nvtx"), "regions")["regions"]["children"]
	eq(sorted(ch), ["load", "step"], "NVTX regions")
	eq((ch["step"]["count"], ch["step"]["children"]["forward"]["count"], ch["load"]["count"]), (4, 4, 1),
	   "NVTX counts")
	eq((ch["step"]["is_nvtx"], ch["load"]["is_nvtx"]), (True, True), "is_nvtx")
	check(ch["load"]["total"] >= 0.005, "load range time %.4f" % ch["load"]["total"])
