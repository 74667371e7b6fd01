"""tests/e2e/test_report.py - end-to-end tests of `memline report` on good,
truncated, corrupt and fuzzed profiles, text views, the newest profile,
build-id mismatches (the `report_` tests also run with the ASan+UBSan build
of the CLI)."""

from harness import *


def fnv1a(data, h=0xcbf29ce484222325):
	for b in data:
		h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
	return h


def reseal(data):
	"""Recomputes the header checksum so only deeper validation can reject."""
	hs = struct.unpack_from("<I", data, 12)[0]
	data = bytearray(data)
	struct.pack_into("<Q", data, 24, fnv1a(bytes(data[hs:])))
	return bytes(data)


_GOOD = []


def good_profile():
	if not _GOOD:
		r = Run("leak")
		with open(r.file("leak"), "rb") as f:
			_GOOD.append(f.read())
	return _GOOD[0]


def bad_profiles():
	"""(name, bytes, keywords of the expected error)."""
	g = good_profile()
	out = [("empty", b"", ("truncated", "empty", "not a memline")),
	       ("not-a-profile", b"hello, this is not a profile\n" * 10, ("not a memline",)),
	       ("header-only", g[:64], ("truncated",)),
	       ("truncated", g[:len(g) // 2], ("truncated",)),
	       ("truncated-1", g[:-1], ("truncated",))]
	v = bytearray(g)
	struct.pack_into("<I", v, 8, 99)
	out.append(("version-99", bytes(v), ("version",)))
	c = bytearray(g)
	c[len(c) // 2] ^= 0x5a
	out.append(("bit-flip", bytes(c), ("corrupt", "checksum")))
	# A section length far past the end, with a valid checksum.
	s = bytearray(g)
	struct.pack_into("<Q", s, 64 + 8, 1 << 40)
	out.append(("section-size", reseal(s), ("corrupt", "truncated", "invalid")))
	return out


def check_bad_profiles(cli):
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	for name, data, keywords in bad_profiles():
		path = os.path.join(d, "memline.bad.%s.mlp" % name)
		with open(path, "wb") as f:
			f.write(data)
		for view in ("leaks", "ops"):
			p = run([cli, "report", path, view])
			err = one_line_error(p, "report %s %s" % (name, view), *keywords)
			eq(p.returncode, 1, "exit status of report %s %s" % (name, view))
			check(os.path.basename(path) in err, "error %r does not name the file" % err)
			check("sanitizer" not in err.lower(), "sanitizer report: " + err)


@test
def report_bad_profiles():
	check_bad_profiles(rcli())


@test
def report_fuzz_no_crash():
	import random
	rnd = random.Random(1234)
	g = good_profile()
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	path = os.path.join(d, "memline.fuzz.1.mlp")
	for i in range(60):
		b = bytearray(g)
		for _ in range(rnd.randint(1, 4)):
			pos = rnd.randrange(64, len(b))
			b[pos] = rnd.randrange(256)
		with open(path, "wb") as f:
			f.write(reseal(b))
		p = run([rcli(), "report", path, "leaks", "--json"])
		check(p.returncode >= 0 and p.returncode < 128,
		      "fuzz case %d: exit %d: %s" % (i, p.returncode, text(p.stderr)[-300:]))


@test
def report_missing_source():
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	src = os.path.join(d, "gone.c")
	shutil.copy(fixture_source("leak"), src)
	exe = os.path.join(d, "gone")
	p = run(["cc", "-g", "-O0", "-o", exe, src])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	os.unlink(src)
	r = Run(exe)
	prof = r.file("gone")
	doc = report(prof, "lines", "--function", "make_name")
	eq(doc["lines"]["functions"][0]["source_found"], False, "source_found")
	expect_line(line_rows(doc), line_of("leak", "make_name"), "make_name", self_bytes=99,
		    allocs=3, leaked_bytes=99, text=None)
	p = run([rcli(), "report", prof, "lines", "--function", "make_name"])
	eq(p.returncode, 0, "text report exit status")
	check(str(line_of("leak", "make_name")) in text(p.stdout), "text report lacks the line")


@test
def report_newest_in_cwd():
	r = Run("exit_status", expect_rc=42)
	time.sleep(0.02)
	Run("leak").file("leak")  # another directory: not picked
	p = run([rcli(), "report", "leaks", "--json"], cwd=r.dir)
	eq(p.returncode, 0, "report without a file: exit; stderr %s" % text(p.stderr).strip())
	doc = json.loads(text(p.stdout))
	eq(doc.get("schema"), "memline.report", "schema")


@test
def report_text_views():
	prof = Run("leak").file("leak")
	L = lambda m: line_of("leak", m)
	want = {"leaks": ["99 bytes in 3 blocks were never freed (record 2 of 2)",
			  "   at make_name (leak.c:%d)" % L("make_name"),
			  "   by leak_some (leak.c:%d)" % L("leak_some"),
			  "   by main (leak.c:%d)" % L("main_leak_some"),
			  "    in use at exit: 1099 bytes (1.07 KiB) in 4 blocks",
			  "  total heap usage: 5 allocs, 1 frees, 5195 bytes (5.07 KiB) allocated"],
		"peak": ["peak heap: 5.07 KiB (5195 bytes)"],
		"ops": ["Self CPU Mem", "# of Allocs", "make_name"],
		"lines": ["Line #", "Line Contents", "leak_some(); /* L:main_leak_some */"]}
	for view in (["leaks"], ["peak"], ["ops"], ["lines", "--function", "main"]):
		p = run([rcli(), "report", prof] + view)
		eq(p.returncode, 0, "report %s exit" % view)
		out = text(p.stdout)
		for w in want[view[0]]:
			check(w in out, "report %s: no %r in:\n%s" % (view[0], w, out[:1500]))
	# lines: the row of the call to leak_some, columns in order.
	p = run([rcli(), "report", prof, "lines", "--function", "main"])
	row_re = r"^\s*%d\s+0 B\s+99 B\s+99 B\s+99 B\s+3\s+leak_some\(\);" % L("main_leak_some")
	check(re.search(row_re, text(p.stdout), re.M), "lines: no row %r" % row_re)


@test
def example_leaky():
	"""The demo program: its leak, its peak and its hot function."""
	exe = build_path("examples", "leaky")
	prof = Run(exe, args=["100"]).file("leaky")
	src = os.path.join(ROOT, "examples", "leaky.c")
	leaks = [(b, n, f[0][:2]) for b, n, f in leak_stacks(report(prof, "leaks"))]
	eq(leaks, [(150, 10, ("copy_string", "leaky.c"))], "leaky's leaks")
	peak = report(prof, "peak")["peak"]
	top = peak["stacks"][0]
	eq((top["bytes"], top["blocks"], top["frames"][0]["function"]), (1048576, 256, "build_index"),
	   "largest at the peak")
	ops = ops_rows(report(prof, "ops"))
	eq((ops["tokenize"]["self_allocs"], ops["tokenize"]["self_bytes"], ops["tokenize"]["peak_bytes"]),
	   (900, 900 * 32, 0), "tokenize: allocations, bytes, at peak")
	if shutil.which("valgrind"):
		eq(leak_summary(report(prof, "leaks")), valgrind_numbers(exe), "leaky vs valgrind")
	check(os.path.exists(src), "no examples/leaky.c")


@test
def report_build_id_mismatch():
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	src, exe = os.path.join(d, "rebuilt.c"), os.path.join(d, "rebuilt")
	shutil.copy(fixture_source("leak"), src)
	p = run(["cc", "-g", "-O0", "-o", exe, src])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	prof = Run(exe).file("rebuilt")
	with open(src, "a") as f:
		f.write("int rebuilt_marker(void) { return 7; }\n")
	p = run(["cc", "-g", "-O0", "-o", exe, src])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	p = run([rcli(), "report", prof, "leaks"])
	eq(p.returncode, 0, "report exit")
	err = text(p.stderr)
	check("build-id" in err and "rebuilt" in err, "no build-id warning: %r" % err)


@test
def report_all_views():
	"""Every view, text and JSON, on C, C++ and multi-process profiles."""
	profs = [[Run("cxx_new").file("cxx_new")], Run("fork_prog").files("fork_prog"),
		 [Run("threads16").file("threads16")]]
	views = (["leaks"], ["peak"], ["ops"], ["ops", "--sort", "cpu_memory_usage", "--limit", "3"],
		 ["lines", "--function", "main"], ["leaks", "--limit", "1"])
	for files in profs:
		for v in views:
			for js in ([], ["--json"]):
				p = run([rcli(), "report"] + files + v + js)
				eq(p.returncode, 0, "report %s %s exit (stderr %s)"
				   % (os.path.basename(files[0]), v, text(p.stderr).strip()[-300:]))
				check(p.stdout.strip(), "report %s printed nothing" % v)
	doc = report(profs[0], "ops", "--limit", "3")
	eq(len(doc["ops"]["functions"]), 3, "ops --limit 3 rows")
	keys = {"self_cpu_memory_usage": lambda r: r["self"]["alloc_bytes"],
		"cpu_memory_usage": lambda r: r["total"]["alloc_bytes"],
		"count": lambda r: r["self"]["allocs"],
		"peak_cpu_memory": lambda r: r["total"]["peak_bytes"],
		"leaked_cpu_memory": lambda r: r["total"]["leaked_bytes"],
		"self_peak_cpu_memory": lambda r: r["self"]["peak_bytes"],
		"allocs": lambda r: r["total"]["allocs"]}
	for key, value in keys.items():
		rows = report(profs[2], "ops", "--sort", key)["ops"]["functions"]
		vals = [value(r) for r in rows]
		eq(vals, sorted(vals, reverse=True), "ops --sort %s order" % key)
		check(key == "leaked_cpu_memory" or (vals and vals[0] > 0), "ops --sort %s: top row is 0" % key)
