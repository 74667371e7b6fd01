#!/usr/bin/python3
"""tests/e2e/run.py - end-to-end tests: fixture programs under `memline run`,
then `memline report --json`, asserting exact bytes, counts, functions and
source lines.  Standard library only.

    tests/e2e/run.py [--build DIR] [-k SUBSTR] [-v]

Prints `ok NAME` or `FAIL NAME: reason` per test, then
`e2e: N passed, M failed`; exits 1 if any test failed."""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXSRC = os.path.join(ROOT, "tests", "fixtures")
TESTS = []
OPTS = None  # parsed command line


class Fail(Exception):
	pass


class Skip(Exception):
	"""A test that cannot run here (an optional tool or device is absent):
	reported as `skip NAME: why` and counted apart from passes."""
	pass


def test(fn):
	TESTS.append(fn)
	return fn


def check(cond, msg):
	if not cond:
		raise Fail(msg)


def eq(got, want, what):
	if got != want:
		raise Fail("%s: got %r, want %r" % (what, got, want))


# ---------------------------------------------------------------- helpers

def build_path(*parts):
	return os.path.join(OPTS.build, *parts)


def memline():
	return build_path("memline")


def rcli():
	"""The memline that reads profiles: --cli (an ASan build) or the build's."""
	return OPTS.cli or memline()


def fixture(name):
	return build_path("fixtures", name)


def fixture_source(name):
	for ext in (".c", ".cc"):
		p = os.path.join(FIXSRC, name + ext)
		if os.path.exists(p):
			return p
	raise Fail("no source for fixture " + name)


def line_of(name, marker):
	"""The line number of the `L:marker` comment in fixture name's source."""
	pat = re.compile(r"L:%s \*/" % re.escape(marker))
	with open(fixture_source(name)) as f:
		hits = [i for i, text in enumerate(f, 1) if pat.search(text)]
	if len(hits) != 1:
		raise Fail("marker L:%s found %d times in %s" % (marker, len(hits), name))
	return hits[0]


def line_of_file(base, marker):
	"""The line of the `L:marker` comment in tests/fixtures/BASE (a fixture
	source that is not a program)."""
	pat = re.compile(r"L:%s \*/" % re.escape(marker))
	with open(os.path.join(FIXSRC, base)) as f:
		hits = [i for i, text in enumerate(f, 1) if pat.search(text)]
	if len(hits) != 1:
		raise Fail("marker L:%s found %d times in %s" % (marker, len(hits), base))
	return hits[0]


def no_core():
	import resource
	resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(argv, cwd=None, env=None, timeout=60):
	try:
		return subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
				      stderr=subprocess.PIPE, timeout=timeout,
				      preexec_fn=no_core)
	except subprocess.TimeoutExpired:
		raise Fail("timed out: " + " ".join(argv))


def text(b):
	return b.decode("utf-8", "replace")


def one_line_error(p, what, *keywords):
	"""Asserts p failed with exactly one line on stderr holding a keyword."""
	err = text(p.stderr).strip()
	check(p.returncode != 0, "%s: exit status 0, want non-zero" % what)
	check(p.returncode > 0, "%s: killed by signal %d" % (what, -p.returncode))
	lines = err.splitlines()
	check(len(lines) == 1, "%s: want one error line, got %d: %r" % (what, len(lines), err))
	low = err.lower()
	check(any(k in low for k in keywords),
	      "%s: error %r mentions none of %s" % (what, err, keywords))
	return err


class Run:
	"""One `memline run` of a fixture in a fresh directory."""

	def __init__(self, prog, args=(), opts=(), env=None, expect_rc=0, rc_ok=None):
		self.dir = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
		path = prog if os.path.isabs(prog) else fixture(prog)
		cmd = [memline(), "run", "-o", self.dir] + list(opts) + ["--", path] + list(args)
		self.proc = run(cmd, cwd=self.dir, env=env)
		rc = self.proc.returncode
		if rc_ok is None:
			rc_ok = (expect_rc,)
		check(rc in rc_ok, "memline run %s: exit %d, want %s; stderr: %s"
		      % (os.path.basename(path), rc, " or ".join(map(str, rc_ok)),
			 text(self.proc.stderr).strip()[-400:]))
		left = [f for f in os.listdir(self.dir) if not f.endswith(".mlp")]
		eq(left, [], "files other than profiles (half-written?)")
		said = sorted(os.path.basename(m) for m in
			      re.findall(r"^memline: wrote (\S+)$", text(self.proc.stderr), re.M))
		eq(said, sorted(os.listdir(self.dir)), "profiles named by 'memline: wrote' lines")

	def files(self, prog=None):
		pat = "memline.%s.*.mlp" % (prog or "*")
		return sorted(glob.glob(os.path.join(self.dir, pat)))

	def file(self, prog):
		fs = self.files(prog)
		check(len(fs) == 1, "want 1 profile of %s, got %d: %s"
		      % (prog, len(fs), [os.path.basename(f) for f in os.listdir(self.dir)]))
		return fs[0]


def report(files, view, *extra):
	"""Runs `memline report FILES VIEW --json EXTRA` and returns the document."""
	if isinstance(files, str):
		files = [files]
	cmd = [rcli(), "report"] + list(files) + [view, "--json"] + list(extra)
	p = run(cmd)
	check(p.returncode == 0, "report %s: exit %d: %s"
	      % (view, p.returncode, text(p.stderr).strip()[-400:]))
	try:
		doc = json.loads(text(p.stdout))
	except ValueError as e:
		raise Fail("report %s: invalid JSON: %s" % (view, e))
	docs = doc if len(files) > 1 else [doc]
	check(isinstance(doc, list) == (len(files) > 1) and len(docs) == len(files),
	      "report of %d files: want %s" % (len(files), "an array" if len(files) > 1 else "one document"))
	for d, f in zip(docs, files):
		eq(d.get("schema"), "memline.report", "schema")
		eq(d.get("version"), 1, "schema version")
		eq(d.get("view"), view, "view")
		check(view in d, "no %r object in the document" % view)
		eq(os.path.basename(d["profile"]["path"]), os.path.basename(f), "document order")
	return doc


# ------------------------------------------------- the JSON schema, read
# (docs/json.md), in one place: reports become plain tuples and flat rows.

def frame_key(fr):
	return (fr.get("function"), os.path.basename(fr.get("file") or ""), fr.get("line") or 0)


def leak_stacks(doc):
	"""[(bytes, blocks, [(function, file basename, line), ...innermost first])]"""
	return [(s["bytes"], s["blocks"], [frame_key(f) for f in s["frames"]])
		for s in doc["leaks"]["records"]]


def leak_summary(doc):
	s = doc["leaks"]["summary"]
	return (s["in_use_bytes"], s["in_use_blocks"], s["allocs"], s["frees"], s["alloc_bytes"])


def flat(r):
	"""A row with "self" and "total" amounts, flattened."""
	sf, tt = r["self"], r["total"]
	return {"self_bytes": sf["alloc_bytes"], "incl_bytes": tt["alloc_bytes"],
		"self_allocs": sf["allocs"], "allocs": tt["allocs"],
		"frees": tt["frees"], "freed_bytes": tt["freed_bytes"],
		"peak_bytes": tt["peak_bytes"], "self_peak_bytes": sf["peak_bytes"],
		"leaked_bytes": tt["leaked_bytes"], "leaked_blocks": tt["leaked_blocks"]}


def ops_rows(doc):
	"""{function name: flat row}"""
	return {r["name"]: flat(r) for r in doc["ops"]["functions"]}


def line_rows(doc):
	"""{line number: row} of the functions asked for; every line of a
	function has a row, zeros included."""
	out = {}
	for fn in doc["lines"]["functions"]:
		for r in fn["lines"]:
			out[r["line"]] = {"self_bytes": r["self_alloc_bytes"],
					  "incl_bytes": r["total_alloc_bytes"],
					  "peak_bytes": r["peak_bytes"],
					  "leaked_bytes": r["leaked_bytes"],
					  "allocs": r["allocs"], "text": r["text"]}
	return out


def in_file(frames, src):
	return [f for f in frames if f[1] == os.path.basename(src)]


def user_leaks(doc, name):
	"""Leak stacks whose innermost frame is in fixture name's source."""
	src = os.path.basename(fixture_source(name))
	return [s for s in leak_stacks(doc) if s[2] and s[2][0][1] == src]


def lines_of(prof, function):
	return line_rows(report(prof, "lines", "--function", function))


def row(rows, line, what):
	check(line in rows, "%s: no row for line %d (have %s)" % (what, line, sorted(rows)[:40]))
	return rows[line]


def expect_line(rows, line, what, **want):
	r = row(rows, line, what)
	for k, v in want.items():
		eq(r.get(k), v, "%s line %d %s" % (what, line, k))


# ------------------------------------------------------------ the tests

ENTRY_POINTS = [  # marker, requested bytes
	("malloc", 101), ("calloc", 201), ("realloc", 901), ("reallocarray", 301),
	("posix_memalign", 401), ("aligned_alloc", 512), ("memalign", 601),
	("valloc", 701), ("pvalloc", 801),
]


def check_entry_points(r, skip=()):
	prof = r.file("entry_points")
	rows = lines_of(prof, "main")
	want = [(m, s) for m, s in ENTRY_POINTS if m not in skip]
	for marker, size in ENTRY_POINTS:
		size = 0 if marker in skip else size
		expect_line(rows, line_of("entry_points", marker), marker,
			    self_bytes=size, allocs=int(size > 0), leaked_bytes=0)
	eq(user_leaks(report(prof, "leaks"), "entry_points"), [], "entry_points leaks")
	main = ops_rows(report(prof, "ops"))["main"]
	eq(main["self_bytes"], sum(s for _, s in want), "main self bytes")
	eq(main["self_allocs"], len(want), "main allocs")
	eq((main["frees"], main["freed_bytes"]), (len(want), main["self_bytes"]), "main frees")


@test
def entry_points():
	check_entry_points(Run("entry_points"))


JEMALLOC_SO = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


@test
def entry_points_jemalloc_preloaded():
	check(os.path.exists(JEMALLOC_SO), "libjemalloc2 is not installed")
	env = dict(os.environ, LD_PRELOAD=JEMALLOC_SO)
	check_entry_points(Run("entry_points", args=["jemalloc"], env=env),
			   skip=("reallocarray", "pvalloc"))


CXX_NEW = [("new", 110), ("new_array", 220), ("new_nothrow", 330),
	   ("new_array_nothrow", 440), ("new_aligned", 550), ("new_array_aligned", 660),
	   ("new_aligned_nothrow", 770), ("new_array_aligned_nothrow", 880),
	   ("new_expr", 4), ("new_expr_aligned", 384), ("new_expr_array", 40)]


@test
def cxx_new_delete():
	prof = Run("cxx_new").file("cxx_new")
	rows = lines_of(prof, "main")
	for marker, size in CXX_NEW:
		expect_line(rows, line_of("cxx_new", marker), marker,
			    self_bytes=size, allocs=1, leaked_bytes=0)
	leaks = user_leaks(report(prof, "leaks"), "cxx_new")
	eq([(b, n, f[0][2]) for b, n, f in leaks], [(99, 1, line_of("cxx_new", "cxx_leak"))],
	   "cxx_new leaks (every delete variant must match its new)")


@test
def realloc_chain():
	prof = Run("realloc_chain").file("realloc_chain")
	rows = lines_of(prof, "main")
	L = lambda m: line_of("realloc_chain", m)
	expect_line(rows, L("r_null"), "realloc(NULL)", self_bytes=100, allocs=1, leaked_bytes=0)
	expect_line(rows, L("r_grow"), "grow", self_bytes=1000, allocs=1, leaked_bytes=0)
	expect_line(rows, L("r_shrink"), "shrink", self_bytes=10, allocs=1, leaked_bytes=0)
	if L("r_zero") in rows:
		expect_line(rows, L("r_zero"), "realloc(p, 0)", self_bytes=0, allocs=0)
	expect_line(rows, L("r_base"), "base", self_bytes=50, allocs=1, leaked_bytes=0)
	expect_line(rows, L("r_leak"), "leak", self_bytes=70, allocs=1, leaked_bytes=70)
	leaks = user_leaks(report(prof, "leaks"), "realloc_chain")
	eq([(b, n, f[0][2]) for b, n, f in leaks], [(70, 1, L("r_leak"))], "realloc leaks")


@test
def failed_allocations():
	prof = Run("failed_alloc").file("failed_alloc")
	main = ops_rows(report(prof, "ops"))["main"]
	eq(main["self_bytes"], 33, "main self bytes")
	eq(main["self_allocs"], 1, "main allocs")
	rows = lines_of(prof, "main")
	expect_line(rows, line_of("failed_alloc", "ok"), "malloc(33)", self_bytes=33, allocs=1,
		    leaked_bytes=0)
	eq(user_leaks(report(prof, "leaks"), "failed_alloc"), [], "leaks")


def valgrind_numbers(prog):
	"""(in-use bytes, in-use blocks, allocs, frees, bytes allocated) by valgrind."""
	p = run(["valgrind", "--leak-check=full", prog], timeout=120)
	err = re.sub(r"(\d),(\d)", r"\1\2", text(p.stderr))
	m1 = re.search(r"in use at exit: (\d+) bytes in (\d+) blocks", err)
	m2 = re.search(r"total heap usage: (\d+) allocs, (\d+) frees, (\d+) bytes allocated", err)
	check(m1 and m2, "cannot read valgrind's summary")
	return tuple(int(x) for x in m1.groups() + m2.groups())


@test
def leaks_like_valgrind():
	prof = Run("leak").file("leak")
	doc = report(prof, "leaks")
	L = lambda m: line_of("leak", m)
	want = [(1000, 1, [("main", "leak.c", L("keep"))]),
		(99, 3, [("make_name", "leak.c", L("make_name")),
			 ("leak_some", "leak.c", L("leak_some")),
			 ("main", "leak.c", L("main_leak_some"))])]
	got = [(b, n, in_file(f, "leak.c")) for b, n, f in user_leaks(doc, "leak")]
	eq(got, want, "leak stacks, largest first")
	mine = leak_summary(doc)
	eq(mine, (1099, 4, 5, 1, 5195), "summary (leaked bytes, blocks, allocs, frees, bytes)")
	if shutil.which("valgrind"):
		eq(mine, valgrind_numbers(fixture("leak")), "summary vs valgrind")


@test
def totals_like_valgrind():
	"""Whole-process totals of single-threaded C fixtures equal valgrind's
	(valgrind runs __libc_freeres at exit and preloads no TLS, so threaded
	programs differ by design; C++ programs differ by libstdc++'s pool)."""
	check(shutil.which("valgrind"), "valgrind is not installed")
	for name, rc in (("realloc_chain", 0), ("failed_alloc", 0), ("peak", 0),
			 ("recursive", 0), ("exit_status", 42), ("underscore_exit", 3)):
		prof = Run(name, expect_rc=rc).file(name)
		eq(leak_summary(report(prof, "leaks")), valgrind_numbers(fixture(name)),
		   name + " (in use bytes, blocks, allocs, frees, bytes) vs valgrind")


@test
def peak_by_line():
	prof = Run("peak").file("peak")
	doc = report(prof, "peak")["peak"]
	eq(doc["peak_bytes"], 12000, "peak bytes")
	L = lambda m: line_of("peak", m)
	by_line = {(os.path.basename(r["file"] or ""), r["line"]): r for r in doc["lines"]}
	want = {("peak.c", L("p_a1")): 1000, ("peak.c", L("p_a2")): 2000,
		("peak.c", L("p_grab")): 9000}
	got = {k: r["bytes"] for k, r in by_line.items() if k[0] == "peak.c" and r["bytes"]}
	# p_call_grab is an inclusive line; self lines at the peak are the three above.
	got.pop(("peak.c", L("p_call_grab")), None)
	eq(got, want, "bytes at peak by line")
	stacks = [(s["bytes"], s["blocks"], in_file([frame_key(f) for f in s["frames"]], "peak.c"))
		  for s in doc["stacks"]]
	grab = [("grab", "peak.c", L("p_grab")), ("main", "peak.c", L("p_call_grab"))]
	check((9000, 3, grab) in stacks, "no peak stack 9000 B in 3 blocks via grab: %s" % stacks[:5])
	rows = lines_of(prof, "main")
	expect_line(rows, L("p_after"), "after the peak", self_bytes=5000, peak_bytes=0, leaked_bytes=0)
	expect_line(rows, L("p_call_grab"), "grab()", incl_bytes=9000, peak_bytes=9000, allocs=3)


@test
def cxx_before_constructor_like_valgrind():
	"""Allocations made before libmemline's constructor are recorded: in
	every C++ program libstdc++'s constructor allocates its emergency
	exception pool first.  Allocation count and bytes equal valgrind's
	(valgrind's __libc_freeres then frees the pool at exit; memline, like
	the program, leaves it allocated, so in-use and frees differ by it)."""
	check(shutil.which("valgrind"), "valgrind is not installed")
	prof = Run("cxx_new").file("cxx_new")
	mine = leak_summary(report(prof, "leaks"))
	vg = valgrind_numbers(fixture("cxx_new"))
	eq((mine[2], mine[4]), (vg[2], vg[4]), "cxx_new (allocs, bytes allocated) vs valgrind")
	eq((mine[1], mine[3]), (vg[1] + 1, vg[3] - 1),
	   "cxx_new (blocks in use, frees): valgrind's plus / minus the pool")


ALLOC_ENTRY_NAMES = {"malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
		     "aligned_alloc", "memalign", "valloc", "pvalloc"}


@test
def no_allocator_entry_rows():
	"""The dynamic loader allocates each thread's TLS vector through an
	inline wrapper named calloc (glibc's rtld-malloc.h): the entry point,
	seen as an inlined frame at allocate_dtv's return address, is not a row
	of its own."""
	prof = Run("threads16").file("threads16")
	ops = ops_rows(report(prof, "ops"))
	eq(sorted(n for n in ops if n in ALLOC_ENTRY_NAMES), [], "allocator entry points as rows")
	leaks = report(prof, "leaks")
	inner = [s["frames"][0]["function"] for s in leaks["leaks"]["records"] if s["frames"]]
	eq(sorted(f for f in inner if f in ALLOC_ENTRY_NAMES), [],
	   "allocator entry points as innermost leak frames")
	if "allocate_dtv" in ops:	# the loader has debug info (libc6-dbg)
		eq(ops["allocate_dtv"]["self_allocs"], 16, "allocate_dtv: one TLS calloc per thread")


@test
def threads16_exact():
	prof = Run("threads16").file("threads16")
	rows = lines_of(prof, "worker")
	expect_line(rows, line_of("threads16", "t_alloc"), "16 threads", allocs=16000,
		    self_bytes=1000 * 8 * sum(range(1, 17)), leaked_bytes=0)
	eq(user_leaks(report(prof, "leaks"), "threads16"), [], "threads16 leaks")
	w = ops_rows(report(prof, "ops"))["worker"]
	total = 1000 * 8 * sum(range(1, 17))
	eq((w["self_allocs"], w["self_bytes"], w["frees"], w["freed_bytes"], w["leaked_bytes"]),
	   (16000, total, 16000, total, 0), "worker allocs, bytes, frees, freed bytes, leaked")


@test
def recursion_counted_once():
	prof = Run("recursive").file("recursive")
	ops = ops_rows(report(prof, "ops"))
	L = lambda m: line_of("recursive", m)
	eq((ops["rec"]["self_bytes"], ops["rec"]["incl_bytes"]), (320, 320),
	   "rec self, inclusive bytes")
	eq((ops["outer"]["self_bytes"], ops["outer"]["incl_bytes"]), (0, 320),
	   "outer self, inclusive bytes")
	eq(ops["main"]["incl_bytes"], 320, "main inclusive bytes")
	rows = lines_of(prof, "rec")
	expect_line(rows, L("rec_alloc"), "rec alloc", self_bytes=320, incl_bytes=320, allocs=5)
	expect_line(rows, L("rec_call"), "recursive call", self_bytes=0, incl_bytes=256, allocs=4)


@test
def same_named_statics_apart():
	"""Two static helper()s of two files: two ops rows, two lines tables."""
	prof = Run("dup_static").file("dup_static")
	A = lambda m: line_of("dup_static", m)
	B = lambda m: line_of_file("dup_static_b.inc", m)
	funcs = report(prof, "ops")["ops"]["functions"]
	helpers = sorted((r["label"], os.path.basename(r["file"]), flat(r)["self_bytes"],
			  flat(r)["allocs"], flat(r)["leaked_bytes"])
			 for r in funcs if r["name"] == "helper")
	eq(helpers, [("helper (dup_static.c)", "dup_static.c", 200, 2, 200),
		     ("helper (dup_static_b.inc)", "dup_static_b.inc", 4000, 1, 4000)],
	   "helper rows: label, file, self bytes, allocs, leaked")
	labels = {r["label"]: flat(r) for r in funcs}
	eq((labels["helper_b_entry"]["self_bytes"], labels["helper_b_entry"]["incl_bytes"]),
	   (0, 4000), "helper_b_entry self, inclusive")
	eq(labels["main"]["incl_bytes"], 4200, "main inclusive")
	p = run([rcli(), "report", prof, "ops"])
	eq(p.returncode, 0, "ops text exit status")
	names = re.findall(r"^ +(helper.*?) {2,}\d", text(p.stdout), re.M)
	eq(sorted(names), ["helper (dup_static.c)", "helper (dup_static_b.inc)", "helper_b_entry"],
	   "ops text helper names")
	fns = report(prof, "lines", "--function", "helper")["lines"]["functions"]
	got = [(os.path.basename(f["file"]), f["first_line"],
		[(r["line"], r["self_alloc_bytes"], r["allocs"], r["leaked_bytes"])
		 for r in f["lines"] if r["allocs"]]) for f in fns]
	eq(got, [("dup_static.c", A("helper_a") - 2, [(A("helper_a"), 200, 2, 200)]),
		 ("dup_static_b.inc", B("helper_b") - 2, [(B("helper_b"), 4000, 1, 4000)])],
	   "lines --function helper: one table per file")
	p = run([rcli(), "report", prof, "lines", "--function", "helper"])
	eq(p.returncode, 0, "lines text exit status")
	eq([os.path.basename(f) for f in re.findall(r"^Filename: (\S+)$", text(p.stdout), re.M)],
	   ["dup_static.c", "dup_static_b.inc"], "lines text Filename headers")
	# the same with the line timer (line_profiler's layout)
	prof = Run("dup_static", opts=["--lines"]).file("dup_static")
	fns = report(prof, "lines", "--function", "helper")["lines"]["functions"]
	got = [(os.path.basename(f["file"]), f["first_line"],
		[(r["line"], r["self_alloc_bytes"], r["allocs"]) for r in f["lines"] if r["allocs"]])
	       for f in fns]
	eq(got, [("dup_static.c", A("helper_a") - 2, [(A("helper_a"), 200, 2)]),
		 ("dup_static_b.inc", B("helper_b") - 2, [(B("helper_b"), 4000, 1)])],
	   "timed lines --function helper: one table per file")


@test
def jemalloc_api():
	r = Run("jemalloc_linked", rc_ok=(10, 11))
	grown = r.proc.returncode == 10
	prof = r.file("jemalloc_linked")
	rows = lines_of(prof, "main")
	L = lambda m: line_of("jemalloc_linked", m)
	expect_line(rows, L("je_mallocx"), "mallocx", self_bytes=1001, allocs=1, leaked_bytes=0)
	expect_line(rows, L("je_rallocx"), "rallocx", self_bytes=2002, allocs=1, leaked_bytes=0)
	expect_line(rows, L("je_mallocx_aligned"), "aligned mallocx", self_bytes=4004, allocs=1,
		    leaked_bytes=0)
	expect_line(rows, L("je_malloc"), "malloc", self_bytes=5005, allocs=1, leaked_bytes=0)
	expect_line(rows, L("je_leak"), "leak", self_bytes=6006, allocs=1, leaked_bytes=6006)
	if not grown and L("je_xallocx") in rows:
		expect_line(rows, L("je_xallocx"), "failed xallocx", self_bytes=0, allocs=0)
	leaks = user_leaks(report(prof, "leaks"), "jemalloc_linked")
	eq([(b, n, f[0][2]) for b, n, f in leaks], [(6006, 1, L("je_leak"))], "jemalloc leaks")


@test
def jemalloc_cxx():
	prof = Run("jemalloc_cxx").file("jemalloc_cxx")
	rows = lines_of(prof, "main")
	L = lambda m: line_of("jemalloc_cxx", m)
	expect_line(rows, L("jx_array"), "new[]", self_bytes=1111, allocs=1, leaked_bytes=0)
	expect_line(rows, L("jx_scalar"), "new", self_bytes=8, allocs=1, leaked_bytes=0)
	expect_line(rows, L("jx_nothrow"), "new nothrow", self_bytes=3333, allocs=1, leaked_bytes=0)
	leaks = user_leaks(report(prof, "leaks"), "jemalloc_cxx")
	eq([(b, n, f[0][2]) for b, n, f in leaks], [(2222, 1, L("jx_leak"))], "leaks")


def leaked_lines(prof, name):
	return sorted((f[0][2], b, n) for b, n, f in user_leaks(report(prof, "leaks"), name))


@test
def fork_child_separate():
	r = Run("fork_prog")
	fs = r.files("fork_prog")
	eq(len(fs), 2, "profiles of fork_prog")
	L = lambda m: line_of("fork_prog", m)
	by_lines = {tuple(leaked_lines(f, "fork_prog")): f for f in fs}
	parent = [(L("f_before"), 111, 1), (L("f_parent"), 333, 1)]
	check(tuple(parent) in by_lines, "no parent profile with leaks %s: %s" % (parent, list(by_lines)))
	child = [k for k in by_lines if k != tuple(parent)]
	eq(len(child), 1, "child profiles")
	child_rows = lines_of(by_lines[child[0]], "main")
	expect_line(child_rows, L("f_child"), "child", self_bytes=222, allocs=1, leaked_bytes=222)
	if L("f_before") in child_rows:
		expect_line(child_rows, L("f_before"), "parent's malloc in child", allocs=0, self_bytes=0)
	# Both files in one report: one document each, in order, the child's
	# marked as a fork child.
	docs = report(fs, "lines", "--function", "main")
	forked = {os.path.basename(d["profile"]["path"]): d["profile"]["forked"] for d in docs}
	eq(forked[os.path.basename(by_lines[tuple(parent)])], False, "parent forked flag")
	eq(forked[os.path.basename(by_lines[child[0]])], True, "child forked flag")


@test
def fork_no_follow():
	r = Run("fork_prog", opts=["--no-follow"])
	eq([os.path.basename(f).split(".")[1] for f in r.files()], ["fork_prog"], "profiles")
	L = lambda m: line_of("fork_prog", m)
	eq(leaked_lines(r.files()[0], "fork_prog"), [(L("f_before"), 111, 1), (L("f_parent"), 333, 1)],
	   "parent leaks")


@test
def exec_follows():
	r = Run("exec_prog", args=[fixture("exec_target")])
	L = lambda m: line_of("exec_prog", m)
	eq(leaked_lines(r.file("exec_prog"), "exec_prog"),
	   [(L("x_before"), 123, 1), (L("x_after_fail"), 456, 1)],
	   "exec_prog leaks (a failed exec keeps profiling)")
	eq(leaked_lines(r.file("exec_target"), "exec_target"),
	   [(line_of("exec_target", "x_target"), 789, 1)], "exec_target leaks")
	pid = lambda f: os.path.basename(f).split(".")[2]
	eq(pid(r.file("exec_prog")), pid(r.file("exec_target")), "pid across exec")


@test
def exec_no_follow():
	r = Run("exec_prog", args=[fixture("exec_target")], opts=["--no-follow"])
	eq(r.files("exec_target"), [], "exec_target profiled despite --no-follow")
	L = lambda m: line_of("exec_prog", m)
	eq(leaked_lines(r.file("exec_prog"), "exec_prog"),
	   [(L("x_before"), 123, 1), (L("x_after_fail"), 456, 1)], "exec_prog leaks")


@test
def vfork_exec_no_repeat():
	r = Run("vfork_exec", args=[fixture("exec_target")])
	L = lambda m: line_of("vfork_exec", m)
	pid = lambda f: int(os.path.basename(f).split(".")[2])
	target = r.file("exec_target")
	parent = [f for f in r.files("vfork_exec") if pid(f) != pid(target)]
	eq(len(parent), 1, "parent profiles")
	eq(leaked_lines(parent[0], "vfork_exec"), [(L("v_before"), 100, 1), (L("v_after"), 200, 1)],
	   "parent leaks")
	eq(leaked_lines(target, "exec_target"), [(line_of("exec_target", "x_target"), 789, 1)],
	   "exec_target leaks")
	# The vfork child ran in the parent's memory until its exec: a profile
	# of it must not repeat the parent's allocations.
	for f in r.files("vfork_exec"):
		if pid(f) == pid(target):
			eq(leaked_lines(f, "vfork_exec"), [], "the vfork child's profile repeats the parent's leaks")


def spawn_pid(f):
	return int(os.path.basename(f).split(".")[2])


@test
def posix_spawn_follows():
	r = Run("spawn_prog", args=["inherit", fixture("exec_target")])
	eq(leaked_lines(r.file("spawn_prog"), "spawn_prog"),
	   [(line_of("spawn_prog", "s_parent"), 321, 1)], "spawn_prog leaks")
	target = r.file("exec_target")
	eq(leaked_lines(target, "exec_target"), [(line_of("exec_target", "x_target"), 789, 1)],
	   "spawned exec_target leaks")
	check(spawn_pid(target) != spawn_pid(r.file("spawn_prog")), "the child has its own pid")


@test
def posix_spawn_no_follow():
	r = Run("spawn_prog", args=["inherit", fixture("exec_target")], opts=["--no-follow"])
	eq(r.files("exec_target"), [], "exec_target profiled despite --no-follow")
	eq(leaked_lines(r.file("spawn_prog"), "spawn_prog"),
	   [(line_of("spawn_prog", "s_parent"), 321, 1)], "spawn_prog leaks")


@test
def posix_spawn_env_replaces_preload():
	"""posix_spawn with an environment whose LD_PRELOAD names another
	library only: the child is still profiled (libmemline goes first)."""
	check(os.path.exists(JEMALLOC_SO), "libjemalloc2 is not installed")
	r = Run("spawn_prog", args=["replace", fixture("exec_target"), JEMALLOC_SO])
	eq(leaked_lines(r.file("exec_target"), "exec_target"),
	   [(line_of("exec_target", "x_target"), 789, 1)], "spawned exec_target leaks")
	r = Run("spawn_prog", args=["replace", fixture("exec_target"), JEMALLOC_SO],
		opts=["--no-follow"])
	eq(r.files("exec_target"), [], "exec_target profiled despite --no-follow")


@test
def underscore_exit():
	r = Run("underscore_exit", expect_rc=3)
	eq(leaked_lines(r.file("underscore_exit"), "underscore_exit"),
	   [(line_of("underscore_exit", "u_leak"), 555, 1)], "leaks")


@test
def pthread_exit_main():
	r = Run("thread_exit")
	L = lambda m: line_of("thread_exit", m)
	eq(leaked_lines(r.file("thread_exit"), "thread_exit"),
	   [(L("te_thread"), 666, 1), (L("te_main"), 777, 1)], "leaks")


def check_fatal(arg, sig):
	r = Run("fatal_signal", args=[arg], expect_rc=128 + sig)
	eq(leaked_lines(r.file("fatal_signal"), "fatal_signal"),
	   [(line_of("fatal_signal", "s_leak"), 888, 1)], "leaks at " + arg)
	left = [f for f in os.listdir(r.dir) if ".tmp" in f]
	eq(left, [], "temporary files left")


@test
def fatal_sigsegv():
	check_fatal("segv", signal.SIGSEGV)


@test
def fatal_sigsegv_dlopened_module():
	"""A module dlopen'd after start-up is in a profile written from a
	fatal signal handler (where the loader's module list cannot be
	walked): its leak symbolizes to its function and line."""
	r = Run("dlopen_crash", args=[fixture("libdlmod.so")], expect_rc=128 + signal.SIGSEGV)
	doc = report(r.file("dlopen_crash"), "leaks")
	eq(doc["profile"]["end_reason"], "signal", "end of the profile")
	mine = [s for s in doc["leaks"]["records"] if s["bytes"] == 555]
	eq(len(mine), 1, "the 555-byte leak records")
	fr = mine[0]["frames"][0]
	eq((fr["function"], os.path.basename(fr.get("file") or ""), fr.get("line"),
	    os.path.basename(fr.get("module") or "")),
	   ("dlmod_leak", "dlmod.inc", line_of_file("dlmod.inc", "m_leak"), "libdlmod.so"),
	   "innermost frame of the leak")


@test
def fatal_abort():
	check_fatal("abort", signal.SIGABRT)


# Signals whose default action ends the process without a core: Ctrl-C,
# kill, a closed terminal, `prog | head -1`.  The profile must be written,
# like for SIGSEGV (found profiling Debian programs: python's
# multiprocessing.Pool workers, `yes | head`, Ctrl-C lost their profiles).
def check_term_signal(arg, sig):
	r = Run("term_signal", args=[arg], expect_rc=128 + sig)
	prof = r.file("term_signal")
	doc = report(prof, "leaks")
	eq((doc["profile"]["end_reason"], doc["profile"]["end_status"]), ("signal", int(sig)),
	   "end of the profile")
	eq(leaked_lines(prof, "term_signal"), [(line_of("term_signal", "t_leak"), 444, 1)],
	   "leaks at " + arg)


@test
def term_sigterm():
	check_term_signal("term", signal.SIGTERM)


@test
def term_sigint():
	check_term_signal("int", signal.SIGINT)


@test
def term_sighup():
	check_term_signal("hup", signal.SIGHUP)


@test
def term_sigpipe():
	check_term_signal("pipe", signal.SIGPIPE)


@test
def term_handlers_invisible():
	"""memline's handlers for SIGINT, SIGTERM, ... must not show: a program
	that finds them not SIG_DFL changes course (exit 10..20 here), and the
	SIGTERM it then takes must still leave the profile."""
	r = Run("sig_query", expect_rc=128 + signal.SIGTERM)
	prof = r.file("sig_query")
	eq(leaked_lines(prof, "sig_query"), [(line_of("sig_query", "sq_leak"), 333, 1)], "leaks")


@test
def term_handler_reinstalled():
	"""bash takes the SIGINT handler it found at start and reinstalls it
	with signal() (SA_RESTART, no SA_RESETHAND): `memline run -- bash -c
	'kill -INT $$'` then looped forever, rewriting its profile.  The
	fixture does the same; it must die of SIGINT, with its profile."""
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	p = run([memline(), "run", "-o", d, "--", fixture("sig_reinstall")], cwd=d, timeout=10)
	eq(p.returncode, 128 + signal.SIGINT, "exit status")
	eq([f for f in os.listdir(d) if not f.endswith(".mlp")], [], "files other than profiles")
	prof = glob.glob(os.path.join(d, "memline.sig_reinstall.*.mlp"))
	eq(len(prof), 1, "profiles of sig_reinstall")
	eq(leaked_lines(prof[0], "sig_reinstall"), [(line_of("sig_reinstall", "sr_leak"), 111, 1)],
	   "leaks")
	sh = shutil.which("bash")
	if sh:
		p = run([memline(), "run", "-o", d, "--", sh, "-c", "kill -INT $$; echo not reached"],
			cwd=d, timeout=10)
		eq((p.returncode, text(p.stdout)), (128 + signal.SIGINT, ""), "bash -c 'kill -INT $$'")


@test
def python_keyboard_interrupt():
	"""python installs its KeyboardInterrupt handler only where SIGINT is
	SIG_DFL at start: under memline, Ctrl-C must still raise it."""
	py = "/usr/bin/python3"
	check(os.path.exists(py), "no /usr/bin/python3")
	script = ("import os, signal, time\n"
		  "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,"
		  " signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)\n"
		  "try:\n"
		  "    os.kill(os.getpid(), signal.SIGINT)\n"
		  "    time.sleep(5)\n"
		  "except KeyboardInterrupt:\n"
		  "    print('KeyboardInterrupt')\n")
	plain = run([py, "-c", script])
	r = Run(py, args=["-c", script], rc_ok=(0, 128 + signal.SIGINT))
	eq(text(r.proc.stdout), text(plain.stdout), "python's output")
	eq(r.proc.returncode, plain.returncode, "python's exit status")


@test
def term_during_exit_write():
	"""SIGTERM while a process writes its exit profile (Pool.terminate on
	python's workers) must neither lose the profile nor leave a temporary:
	the Run checks that only profiles are left."""
	kids = 40
	r = Run("term_in_exit", args=[str(kids)])
	fs = r.files("term_in_exit")
	eq(len(fs), kids + 1, "profiles of term_in_exit (the parent and its children)")
	# Reading all 41 takes seconds: the count and the Run's check carry the
	# test; a few children are read to see that they are complete.
	docs = report(fs[:4], "leaks")
	want = [(line_of("term_in_exit", "ti_child"), 222, 1)]
	children = 0
	for d in docs:
		if not d["profile"]["forked"]:
			continue
		children += 1
		got = sorted((f[0][2], b, n) for b, n, f in user_leaks(d, "term_in_exit"))
		eq(got, want, "leaks of child %d" % d["profile"]["pid"])
	check(children >= 3, "fork children among the first 4 profiles: %d" % children)


@test
def exec_env_replaces_preload():
	"""`memline run -- env LD_PRELOAD=libjemalloc.so.2 PROG`: env replaces
	memline's LD_PRELOAD before its exec; following execs must still profile
	PROG (valgrind --trace-children does)."""
	check(os.path.exists(JEMALLOC_SO), "libjemalloc2 is not installed")
	env_prog = shutil.which("env")
	check(env_prog is not None, "no env program")
	r = Run(env_prog, args=["LD_PRELOAD=" + JEMALLOC_SO, fixture("exec_target")])
	eq(leaked_lines(r.file("exec_target"), "exec_target"),
	   [(line_of("exec_target", "x_target"), 789, 1)], "exec_target leaks")


@test
def exec_env_cleared():
	"""`memline run -o DIR -- env -i PROG`: PROG gets an empty environment;
	its profile must still go to DIR (not PROG's working directory) and be
	named by a `memline: wrote` line."""
	env_prog = shutil.which("env")
	check(env_prog is not None, "no env program")
	out = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	cwd = tempfile.mkdtemp(prefix="ml-e2e-cwd-", dir=OPTS.tmp)
	p = run([memline(), "run", "-o", out, "--", env_prog, "-i", fixture("exec_target")], cwd=cwd)
	eq(p.returncode, 0, "exit status; stderr: %s" % text(p.stderr).strip()[-300:])
	eq(sorted(os.listdir(cwd)), [], "files written in the program's working directory")
	prof = glob.glob(os.path.join(out, "memline.exec_target.*.mlp"))
	eq(len(prof), 1, "profiles of exec_target in -o DIR")
	said = sorted(os.path.basename(m) for m in
		      re.findall(r"^memline: wrote (\S+)$", text(p.stderr), re.M))
	eq(said, sorted(os.listdir(out)), "profiles named by 'memline: wrote' lines")
	eq(leaked_lines(prof[0], "exec_target"), [(line_of("exec_target", "x_target"), 789, 1)],
	   "exec_target leaks")


@test
def exit_status_passed_on():
	r = Run("exit_status", expect_rc=42)
	rows = lines_of(r.file("exit_status"), "main")
	expect_line(rows, line_of("exit_status", "es_alloc"), "malloc(42)", self_bytes=42, allocs=1)


@test
def depth_option():
	r = Run("recursive", opts=["--depth", "2"])
	doc = report(r.file("recursive"), "leaks")  # nothing leaks, but it must load
	ops = ops_rows(report(r.file("recursive"), "ops"))
	eq(ops["rec"]["self_bytes"], 320, "rec self bytes at depth 2")
	check("main" not in ops or ops["main"]["incl_bytes"] == 0,
	      "main seen at depth 2: %r" % ops.get("main"))


# ---------------------------------------------------------------- errors

def run_error(prog, *keywords, rc=126, opts=()):
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	p = run([memline(), "run", "-o", d] + list(opts) + ["--", prog], cwd=d)
	one_line_error(p, "run " + os.path.basename(prog), *keywords)
	eq(p.returncode, rc, "exit status of run " + os.path.basename(prog))
	eq(glob.glob(os.path.join(d, "*.mlp")), [], "profiles written")


@test
def error_missing_program():
	run_error(os.path.join(OPTS.tmp, "no-such-program"), "not found", "no such", rc=127)
	run_error("memline-no-such-program-in-path", "not found", rc=127)


@test
def error_usage():
	prof = Run("leak").file("leak")
	for argv, rc, words in ((["run"], 2, ("no program",)),
				(["run", "--depth", "0", "--", fixture("leak")], 2, ("depth",)),
				(["bogus"], 2, ("unknown command",)),
				(["report", prof], 2, ("view",)),
				(["report", prof, "ops", "--sort", "bogus"], 2, ("sort key",)),
				(["report", prof, "lines"], 2, ("--function",)),
				(["report", prof, "lines", "--function", "no_such_fn"], 1, ("no_such_fn",)),
				(["report", os.path.join(OPTS.tmp, "none.mlp"), "leaks"], 1, ("none.mlp",))):
		p = run([memline()] + argv, cwd=OPTS.tmp)
		one_line_error(p, " ".join(argv[:3]), *words)
		eq(p.returncode, rc, "exit status of memline %s" % " ".join(os.path.basename(a) for a in argv))


@test
def error_not_executable():
	p = os.path.join(OPTS.tmp, "not-executable")
	shutil.copy(fixture("exit_status"), p)
	os.chmod(p, 0o644)
	run_error(p, "not executable", "permission", "executable")


@test
def error_static_binary():
	run_error(fixture("static_prog"), "static")


@test
def error_setuid_binary():
	p = os.path.join(OPTS.tmp, "setuid-copy")
	shutil.copy(fixture("exit_status"), p)
	os.chmod(p, 0o755 | stat.S_ISUID)
	run_error(p, "setuid", "set-user-id", "setgid")


@test
def error_unwritable_output_dir():
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	for bad in (os.path.join(d, "missing", "dir"), os.path.join(d, "file")):
		if bad.endswith("file"):
			open(bad, "w").close()
		p = run([memline(), "run", "-o", bad, "--", fixture("exit_status")], cwd=d)
		one_line_error(p, "run -o " + bad, "-o", "output", "director", "writable")
		eq(p.returncode, 126, "exit status of run -o " + bad)
	if os.geteuid() != 0:  # root writes anywhere
		ro = os.path.join(d, "ro")
		os.mkdir(ro, 0o555)
		p = run([memline(), "run", "-o", ro, "--", fixture("exit_status")], cwd=d)
		one_line_error(p, "run -o read-only", "writable", "permission")


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


# ------------------------------------------------------------------ CUDA
# Against the test double of the driver (build/cuda/libcuda.so.1, found
# through LD_LIBRARY_PATH) and, when nvcc was there at build time, the real
# CUDA runtime.  Sources and L: markers are in tests/cuda_double/.

CUDA_SRC = os.path.join(ROOT, "tests", "cuda_double")
MiB2 = 2 << 20


def cuda_fixture(name):
	return build_path("cuda", name)


def cuda_env(driver=True, extra_preload=None):
	env = dict(os.environ)
	env.pop("LD_LIBRARY_PATH", None)
	if driver:
		env["LD_LIBRARY_PATH"] = build_path("cuda")
	if extra_preload:
		env["LD_PRELOAD"] = extra_preload
	return env


def cuda_line(name, marker):
	pat = re.compile(r"L:%s( \*/|$)" % re.escape(marker))
	for ext in (".c", ".cu"):
		p = os.path.join(CUDA_SRC, name + ext)
		if os.path.exists(p):
			with open(p) as f:
				hits = [i for i, t in enumerate(f, 1) if pat.search(t.rstrip("\n"))]
			if len(hits) != 1:
				raise Fail("marker L:%s found %d times in %s" % (marker, len(hits), p))
			return hits[0]
	raise Fail("no source for CUDA fixture " + name)


def cuda_leaks(prof):
	"""({kind: summary}, sorted [(kind, bytes, blocks, innermost line)])"""
	doc = report(prof, "leaks")["leaks"]
	check("cuda" in doc, "leaks: no cuda object although the profile has CUDA kinds")
	kinds = {k["kind"]: (k["in_use_bytes"], k["in_use_blocks"], k["allocs"], k["frees"],
			     k["alloc_bytes"]) for k in doc["cuda"]["kinds"]}
	recs = sorted((r["kind"], r["bytes"], r["blocks"], r["frames"][0]["line"])
		      for r in doc["cuda"]["records"])
	return kinds, recs, doc["cuda"]


def cuda_lines(prof, fn="main"):
	out = {}
	for f in report(prof, "lines", "--function", fn)["lines"]["functions"]:
		for r in f["lines"]:
			out[r["line"]] = r
	return out


# (marker, kind, bytes) of every allocation drv_runtime makes in main.
DRV_ALLOCS = [("dev_leak", "cuda_device", 1000), ("dev_freed", "cuda_device", 2000),
	      ("pitch", "cuda_device", 5120), ("managed", "cuda_managed", 3000),
	      ("host_alloc", "cuda_pinned", 4000), ("alloc_host", "cuda_pinned", 5000),
	      ("register", "cuda_pinned", 6000), ("array", "cuda_array", 2048),
	      ("array3d", "cuda_array", 512), ("async_freed", "cuda_pool", 7000),
	      ("async_leak", "cuda_pool", 7100), ("pool", "cuda_pool", 7200),
	      ("ctx_alloc", "cuda_device", 8000)]


def check_drv_runtime(args, reset=False):
	r = Run(cuda_fixture("drv_runtime"), args, env=cuda_env())
	eq(text(r.proc.stdout), "pitch 512\n", "drv_runtime output")
	prof = r.file("drv_runtime")
	kinds, recs, cuda = cuda_leaks(prof)
	L = lambda m: cuda_line("drv_runtime", m)
	if reset:  # the primary context took every block along
		want_recs = []
		live = {"cuda_device": (0, 0), "cuda_managed": (0, 0), "cuda_pinned": (0, 0),
			"cuda_pool": (0, 0), "cuda_array": (0, 0)}
	else:
		want_recs = sorted([("cuda_device", 1000, 1, L("dev_leak")),
				    ("cuda_device", 5120, 1, L("pitch")),
				    ("cuda_managed", 3000, 1, L("managed")),
				    ("cuda_pinned", 4000, 1, L("host_alloc")),
				    ("cuda_array", 2048, 1, L("array")),
				    ("cuda_pool", 7100, 1, L("async_leak")),
				    ("cuda_pool", 7200, 1, L("pool"))])
		live = {"cuda_device": (6120, 2), "cuda_managed": (3000, 1), "cuda_pinned": (4000, 1),
			"cuda_pool": (14300, 2), "cuda_array": (2048, 1)}
	eq(recs, want_recs, "CUDA leak records (kind, bytes, blocks, line)")
	allocs = {"cuda_device": (4, 16120), "cuda_managed": (1, 3000), "cuda_pinned": (3, 15000),
		  "cuda_pool": (3, 21300), "cuda_array": (2, 2560)}
	eq(sorted(kinds), sorted(allocs), "CUDA kinds seen")
	for k, (n, b) in allocs.items():
		eq((kinds[k][2], kinds[k][4]), (n, b), "%s allocs and bytes" % k)
		eq(kinds[k][:2], live[k], "%s in use at exit" % k)
		eq(kinds[k][3], n - live[k][1], "%s frees" % k)
	gpu_live = sum(live[k][0] for k in live if k != "cuda_pinned")
	eq(cuda["leaked_bytes"], gpu_live, "CUDA leaked bytes (GPU kinds)")
	rows = cuda_lines(prof)
	for marker, kind, size in DRV_ALLOCS:
		row = rows[L(marker)]
		want = 0 if kind == "cuda_pinned" else size
		eq(row["cuda_total_alloc_bytes"], want, "line %s CUDA bytes" % marker)
		# The double mallocs inside every call: never charged to the line.
		eq(row["total_alloc_bytes"], 0, "line %s heap bytes" % marker)
	eq(rows[L("reg_buf")]["total_alloc_bytes"], 6000, "the registered buffer's own malloc")
	# Driver calls that allocate nothing of the program's (cuCtxCreate's
	# context struct, cuInit's 7777 bytes of driver state) hold the guard.
	eq(rows[L("ctx_create")]["total_alloc_bytes"], 0, "cuCtxCreate's host malloc charged to its line")
	eq(rows[L("ctx_create")]["allocs"], 0, "cuCtxCreate's host allocations at its line")
	heap_sizes = [x["bytes"] for x in report(prof, "leaks")["leaks"]["records"]]
	check(7777 not in heap_sizes, "cuInit's driver state charged as a heap leak: %r" % heap_sizes)
	# CUDA Peak: bytes live at the combined GPU peak (ctx_alloc's moment).
	at_gpu_peak = {"dev_leak", "pitch", "managed", "array", "async_leak", "pool", "ctx_alloc"}
	for marker, kind, size in DRV_ALLOCS:
		eq(rows[L(marker)]["cuda_peak_bytes"], size if marker in at_gpu_peak else 0,
		   "line %s CUDA bytes live at the GPU peak" % marker)
	heap_lines = report(prof, "lines", "--function", "main", "--kind", "heap")
	hl = {r["line"]: r for f in heap_lines["lines"]["functions"] for r in f["lines"]}
	for marker, kind, size in DRV_ALLOCS:
		eq(hl[L(marker)]["allocs"], 0, "heap allocations charged to line %s" % marker)
	pinned = report(prof, "lines", "--function", "main", "--kind", "cuda_pinned")
	pl = {r["line"]: r for f in pinned["lines"]["functions"] for r in f["lines"]}
	for marker, kind, size in DRV_ALLOCS:
		eq(pl[L(marker)]["total_alloc_bytes"], size if kind == "cuda_pinned" else 0,
		   "pinned bytes at line %s" % marker)
	ops = report(prof, "ops", "--sort", "self_cuda_memory_usage")["ops"]
	top = ops["functions"][0]
	eq(top["name"], "main", "top function by self_cuda_memory_usage")
	gpu_total = sum(s for m, k, s in DRV_ALLOCS if k != "cuda_pinned")
	eq(top["cuda_self"]["alloc_bytes"], gpu_total, "main's Self CUDA Mem")
	eq(ops["cuda_self_total_bytes"], gpu_total, "Self CUDA Mem total")
	peak = report(prof, "peak")["peak"]
	peaks = {p["kind"]: p for p in peak["cuda_peaks"]}
	# Device: d1 1000 + pitch 5120 + ctx_alloc 8000 live together (d2 freed).
	eq(peaks["cuda_device"]["peak_bytes"], 14120, "cuda_device peak")
	eq(sorted((l["line"], l["bytes"]) for l in peaks["cuda_device"]["lines"]),
	   sorted([(L("dev_leak"), 1000), (L("pitch"), 5120), (L("ctx_alloc"), 8000)]),
	   "lines live at the cuda_device peak")
	eq(peaks["cuda_pool"]["peak_bytes"], 14300, "cuda_pool peak")
	check("cuda_gpu" not in peaks, "the combined GPU total listed as a kind peak")
	# The combined GPU peak (device + managed + pool + array; pinned is not
	# GPU memory): every block live together once ctx_alloc's 8000 came in,
	# before its context's destroy: 1000+5120+3000+2048+7100+7200+8000.
	gp = peak["gpu_peak"]
	eq(gp["peak_bytes"], 33468, "GPU peak bytes")
	eq(sorted((l["line"], l["bytes"], l["blocks"]) for l in gp["lines"]),
	   sorted([(L("dev_leak"), 1000, 1), (L("pitch"), 5120, 1), (L("managed"), 3000, 1),
		   (L("array"), 2048, 1), (L("async_leak"), 7100, 1), (L("pool"), 7200, 1),
		   (L("ctx_alloc"), 8000, 1)]), "lines live at the GPU peak")
	eq(gp["total_records"], 7, "stacks live at the GPU peak")
	eq(sum(st["bytes"] for st in gp["stacks"]), 33468, "GPU peak stacks' bytes")
	# The same allocation set the device peak (its clock read just before).
	for k in ("cuda_device", "cuda_pool", "cuda_array", "cuda_managed"):
		check(gp["peak_time_ns"] >= peaks[k]["peak_time_ns"], "GPU peak before the %s peak" % k)
	txt = text(run([rcli(), "report", prof, "peak"]).stdout)
	m = re.search(r"^GPU peak: 32\.68 KiB \(33468 bytes\) at [0-9.]+ s$", txt, re.M)
	check(m, "no 'GPU peak: 32.68 KiB (33468 bytes) at T s' line in peak text")
	after = txt[m.end():] if m else ""
	check(re.match(r"\s*8000 bytes \(7\.81 KiB\) in 1 blocks live at the peak \(record 1 of 7\)\n"
		       r"   at main \(drv_runtime\.c:%d\)\n" % L("ctx_alloc"), after),
	      "GPU peak's first record: %r" % after[:200])
	check(re.search(r"drv_runtime\.c:%d\s+main\s+7\.81 KiB\s+8000\s+1$" % L("ctx_alloc"), after, re.M),
	      "GPU peak line table lacks ctx_alloc: %r" % after[:600])
	# The per-kind leaks do not list the combined total.
	eq(sorted(kinds), sorted(allocs), "leak kinds without cuda_gpu")
	gk = report(prof, "lines", "--function", "main", "--kind", "cuda_gpu")
	gl = {r["line"]: r for f in gk["lines"]["functions"] for r in f["lines"]}
	eq(sum(r["total_alloc_bytes"] for r in gl.values()), gpu_total, "--kind cuda_gpu bytes")
	return prof


@test
def cuda_runtime_lookup_v2():
	check_drv_runtime(["v2"])


@test
def cuda_timed_lines_columns():
	# The line_profiler layout (a --lines profile) has the CUDA columns too.
	r = Run(cuda_fixture("drv_runtime"), ["v2"], opts=["--lines"], env=cuda_env())
	prof = r.file("drv_runtime")
	doc = report(prof, "lines", "--function", "main")
	check("timer" in doc["lines"], "not the timed lines view: %r" % sorted(doc["lines"]))
	rows = {x["line"]: x for f in doc["lines"]["functions"] for x in f["lines"]}
	L = lambda m: cuda_line("drv_runtime", m)
	at_gpu_peak = {"dev_leak", "pitch", "managed", "array", "async_leak", "pool", "ctx_alloc"}
	leaked = {"dev_leak", "pitch", "managed", "array", "async_leak", "pool"}
	for marker, kind, size in DRV_ALLOCS:
		gpu = 0 if kind == "cuda_pinned" else size
		row = rows[L(marker)]
		eq((row["cuda_self_alloc_bytes"], row["cuda_total_alloc_bytes"], row["cuda_peak_bytes"],
		    row["cuda_leaked_bytes"], row["total_alloc_bytes"]),
		   (gpu, gpu, gpu if marker in at_gpu_peak else 0, gpu if marker in leaked else 0, 0),
		   "timed line %s: CUDA self, total, at GPU peak, leaked; heap" % marker)
	out = text(run([rcli(), "report", prof, "lines", "--function", "main"]).stdout).splitlines()
	head = [x for x in out if x.startswith("Line #")]
	check(head and re.search(r"  Allocs   CUDA Alloc    CUDA Peak  CUDA Leaked  Line Contents$", head[0]),
	      "timed header without CUDA columns: %r" % head[:1])
	row = [x for x in out if x.endswith("/* L:ctx_alloc */")]
	check(row and re.search(r" 7\.81 KiB +7\.81 KiB +0 B  \tCHECK\(mem_alloc\(&d4, 8000\)\);", row[0]),
	      "timed ctx_alloc row: %r" % row[:1])
	row = [x for x in out if x.endswith("/* L:dev_leak */")]
	check(row and re.search(r" 1000 B +1000 B +1000 B  \tCHECK", row[0]), "timed dev_leak row: %r" % row[:1])


@test
def cuda_static_runtime_self_line():
	# nvcc's default links libcudart into the program without debug info;
	# fake_cudart.o has that shape (cudaMalloc -> libcudart_static_<sha1> ->
	# the driver).  The runtime's frames are the allocation entry point: the
	# calling line gets the SELF CUDA bytes.
	name = "drv_static_rt"
	r = Run(cuda_fixture(name), env=cuda_env())
	eq(text(r.proc.stdout), "ok\n", "drv_static_rt output")
	prof = r.file(name)
	L = lambda m: cuda_line(name, m)
	rows = cuda_lines(prof)
	eq([(rows[L(m)]["cuda_self_alloc_bytes"], rows[L(m)]["cuda_total_alloc_bytes"])
	    for m in ("static_leak", "static_freed", "user_call")],
	   [(1000, 1000), (2000, 2000), (0, 3000)], "main's lines: CUDA self and total")
	# A program function named cuda* with debug info keeps its own line.
	urows = cuda_lines(prof, "cuda_user_alloc")
	eq((urows[L("user_helper")]["cuda_self_alloc_bytes"], urows[L("user_helper")]["cuda_total_alloc_bytes"]),
	   (3000, 3000), "cuda_user_alloc's line: CUDA self and total")
	kinds, recs, cuda = cuda_leaks(prof)
	eq(recs, sorted([("cuda_device", 1000, 1, L("static_leak")), ("cuda_device", 3000, 1, L("user_helper"))]),
	   "CUDA leak records start at the program's line")
	funcs = [rr["frames"][0]["function"] for rr in cuda["records"]]
	eq(sorted(funcs), ["cuda_user_alloc", "main"], "innermost functions of the CUDA leaks")
	ops = {f["name"]: f for f in report(prof, "ops", "--sort", "self_cuda_memory_usage")["ops"]["functions"]}
	eq(ops["main"]["cuda_self"]["alloc_bytes"], 3000, "main's Self CUDA Mem")
	check(not any(n.startswith(("cudaMalloc", "libcudart_static_")) and ops[n]["cuda_total"]["alloc_bytes"]
		      for n in ops), "a runtime frame still holds CUDA bytes")
	# Host mallocs the runtime makes are heap with the runtime's frame as
	# self (not stripped: only CUDA stacks are): 64 bytes of state.
	fn = [n for n in ops if n.startswith("libcudart_static_5f3a9c0e1d2b4a6f")]
	eq(len(fn), 1, "the runtime's internal function in ops (its heap)")
	eq(ops[fn[0]]["self"]["alloc_bytes"], 64, "the runtime's own host block, self at its frame")
	eq(rows[L("static_leak")]["self_alloc_bytes"], 0, "no heap self bytes at the cudaMalloc line")


@test
def cuda_static_runtime_self_line_nvcc():
	# The real static runtime (nvcc's default, rt_static) needs a real driver
	# and GPU: NVIDIA's runtime stops at its own check of the test double.
	prog = nvcc_fixture("rt_static")
	plain = run([prog], env=cuda_env(driver=False))
	if "cuda error" in text(plain.stdout):
		raise Skip("no usable GPU driver (%s)" % text(plain.stdout).strip()[:80])
	r = Run(prog, ["leak"], env=cuda_env(driver=False))
	m = re.search(r"^pitch (\d+)$", text(r.proc.stdout), re.M)
	check(m, "rt_static leak: no pitch line: %r" % text(r.proc.stdout)[-200:])
	pitch = int(m.group(1)) if m else 0
	L = lambda mk: cuda_line("rt_alloc", mk)
	recs = report(r.file("rt_static"), "leaks")["leaks"]["cuda"]["records"]
	got = sorted((x["kind"], x["bytes"], x["frames"][0]["function"], x["frames"][0]["line"])
		     for x in recs)
	want = sorted([("cuda_device", 1 << 20, "main", L("rt_malloc")),
		       ("cuda_managed", 2 << 20, "main", L("rt_managed")),
		       ("cuda_pinned", 3 << 20, "main", L("rt_host")),
		       ("cuda_pinned", 4 << 20, "main", L("rt_hostalloc")),
		       ("cuda_device", pitch * 100, "main", L("rt_pitch")),
		       ("cuda_array", 256 * 256 * 4, "main", L("rt_array")),
		       ("cuda_pool", 5 << 20, "main", L("rt_async"))])
	eq(got, want, "static runtime: CUDA leaks start at main's lines")


@test
def cuda_runtime_lookup_v1():
	check_drv_runtime(["v1"])


@test
def cuda_runtime_lookup_per_thread_stream():
	check_drv_runtime(["v2", "ptsz"])


@test
def cuda_primary_context_reset_frees():
	check_drv_runtime(["v2", "reset"], reset=True)


@test
def cuda_vmm_pytorch_sequence():
	r = Run(cuda_fixture("drv_vmm"), env=cuda_env())
	prof = r.file("drv_vmm")
	kinds, recs, cuda = cuda_leaks(prof)
	L = lambda m: cuda_line("drv_vmm", m)
	eq(kinds["cuda_vmm"], (2 * MiB2, 2, 4, 2, 4 * MiB2), "cuda_vmm (physical) summary")
	eq(kinds["cuda_mapped"], (2 * MiB2, 2, 4, 2, 4 * MiB2), "cuda_mapped summary")
	eq(kinds["cuda_reserved"], (16 * MiB2, 1, 1, 0, 16 * MiB2),
	   "cuda_reserved summary")
	eq(recs, sorted([("cuda_vmm", MiB2, 1, L("create")), ("cuda_vmm", MiB2, 1, L("create_leak")),
			 ("cuda_mapped", MiB2, 1, L("map")), ("cuda_mapped", MiB2, 1, L("map_leak")),
			 ("cuda_reserved", 16 * MiB2, 1, L("reserve"))]), "VMM leak records")
	eq(cuda["leaked_bytes"], 2 * MiB2, "CUDA leaked bytes count physical memory only")
	peaks = {p["kind"]: p["peak_bytes"] for p in report(prof, "peak")["peak"]["cuda_peaks"]}
	eq(peaks["cuda_vmm"], 3 * MiB2, "physical peak: three chunks")
	# Mapped ranges and reservations are not GPU memory: the GPU peak is
	# the physical peak.
	gp = report(prof, "peak")["peak"]["gpu_peak"]
	eq(gp["peak_bytes"], 3 * MiB2, "GPU peak counts VMM physical only")
	eq(sum(l["bytes"] for l in gp["lines"]), 3 * MiB2, "lines live at the GPU peak")


def check_drv_graph(mode):
	# Graph memory nodes: counted as pool blocks when the alloc node is
	# added; a free node frees at once; destroying the graph frees nothing.
	r = Run(cuda_fixture("drv_graph"), [mode], env=cuda_env())
	eq(text(r.proc.stdout), "graph 1\n", "drv_graph output")
	prof = r.file("drv_graph")
	kinds, recs, cuda = cuda_leaks(prof)
	L = lambda m: cuda_line("drv_graph", m)
	eq(sorted(kinds), ["cuda_pool"], "CUDA kinds seen (the failed alloc node adds none)")
	eq(kinds["cuda_pool"], (9100, 1, 3, 2, 27300),
	   "cuda_pool: in use bytes/blocks, allocs, frees, alloc bytes")
	eq(recs, [("cuda_pool", 9100, 1, L("graph_leak"))], "graph leak records")
	eq(cuda["leaked_bytes"], 9100, "CUDA leaked bytes")
	rows = cuda_lines(prof)
	for marker, size, leaked in (("graph_freed", 9000, 0), ("graph_leak", 9100, 9100),
				     ("graph_later", 9200, 0), ("graph_bad", 0, 0)):
		row = rows.get(L(marker), {})
		eq((row.get("cuda_total_alloc_bytes", 0), row.get("cuda_leaked_bytes", 0),
		    row.get("total_alloc_bytes", 0)), (size, leaked, 0),
		   "line %s: CUDA bytes, CUDA leaked, heap bytes" % marker)
	peak = report(prof, "peak")["peak"]
	peaks = {p["kind"]: p for p in peak["cuda_peaks"]}
	eq(peaks["cuda_pool"]["peak_bytes"], 27300, "cuda_pool peak: all three graph allocations")
	eq(sorted((l["line"], l["bytes"]) for l in peaks["cuda_pool"]["lines"]),
	   sorted([(L("graph_freed"), 9000), (L("graph_leak"), 9100), (L("graph_later"), 9200)]),
	   "lines live at the cuda_pool peak")
	eq(peak["gpu_peak"]["peak_bytes"], 27300, "GPU peak")


@test
def cuda_graph_mem_nodes_v2():
	check_drv_graph("v2")


@test
def cuda_graph_mem_nodes_v1():
	check_drv_graph("v1")


@test
def cuda_graph_mem_nodes_dlsym():
	check_drv_graph("dlsym")


@test
def cuda_linked_counted_once():
	r = Run(cuda_fixture("drv_linked"), env=cuda_env())
	prof = r.file("drv_linked")
	kinds, recs, cuda = cuda_leaks(prof)
	L = lambda m: cuda_line("drv_linked", m)
	eq(kinds["cuda_device"], (4444, 2, 2, 0, 4444), "cuda_device: two calls, counted once each")
	eq(kinds["cuda_managed"], (0, 0, 1, 1, 2222), "cuda_managed")
	eq(recs, sorted([("cuda_device", 1111, 1, L("linked_alloc")),
			 ("cuda_device", 3333, 1, L("linked_proc"))]), "leak records")


@test
def cuda_local_library_linked_with_driver():
	r = Run(cuda_fixture("drv_local"), env=cuda_env())
	eq(text(r.proc.stdout), "ok\n", "drv_local output")
	kinds, recs, cuda = cuda_leaks(r.file("drv_local"))
	eq(kinds["cuda_device"], (4321, 1, 2, 1, 5555), "cuda_device through an RTLD_LOCAL library")
	eq([(k, b, n) for k, b, n, _ in recs], [("cuda_device", 4321, 1)], "leak record")
	lines = cuda_lines(r.file("drv_local"))
	eq(lines[cuda_line("drv_local", "local_leak")]["cuda_total_alloc_bytes"], 4321,
	   "CUDA bytes at the program's line")


@test
def cuda_dlsym_keeps_rtld_next():
	probe = cuda_fixture("libprobe_preload.so")
	r = Run(cuda_fixture("drv_runtime"), ["v2"], env=cuda_env(extra_preload=probe))
	err = text(r.proc.stderr)
	check("probe: saw mallocs" in err, "the other preloaded library did not run: %r" % err[-300:])
	kinds, recs, cuda = cuda_leaks(r.file("drv_runtime"))
	eq(kinds["cuda_device"][2], 4, "CUDA still recorded beside the other preload")


@test
def cuda_no_driver_unchanged():
	plain = run([cuda_fixture("drv_runtime"), "v2"], env=cuda_env(driver=False))
	r = Run(cuda_fixture("drv_runtime"), ["v2"], env=cuda_env(driver=False),
		expect_rc=plain.returncode)
	eq(text(r.proc.stdout), text(plain.stdout), "output without a driver")
	doc = report(r.file("drv_runtime"), "leaks")["leaks"]
	check("cuda" not in doc, "CUDA records without a driver")


@test
def cuda_pytorch_note_and_no_torch_cache():
	r = Run(cuda_fixture("drv_runtime"), ["v2", "torch"], opts=["--no-torch-cache"],
		env=cuda_env())
	eq(text(r.proc.stdout), "caching 1\npitch 512\n", "PYTORCH_NO_CUDA_MEMORY_CACHING set")
	prof = r.file("drv_runtime")
	eq(report(prof, "leaks")["leaks"]["cuda"]["pytorch_caching_allocator"], True,
	   "pytorch_caching_allocator with libc10_cuda loaded")
	p = run([rcli(), "report", prof, "leaks"])
	check("PYTORCH_NO_CUDA_MEMORY_CACHING=1" in text(p.stdout) and
	      "caching allocator's segments" in text(p.stdout), "no PyTorch note in the leaks text")
	r = Run(cuda_fixture("drv_runtime"), ["v2"], env=cuda_env())
	prof = r.file("drv_runtime")
	eq(report(prof, "leaks")["leaks"]["cuda"]["pytorch_caching_allocator"], False,
	   "pytorch_caching_allocator without PyTorch")
	check("PyTorch" not in text(run([rcli(), "report", prof, "leaks"]).stdout),
	      "PyTorch note without PyTorch")


def nvcc_fixture(name):
	p = cuda_fixture(name)
	if not os.path.exists(p):
		raise Skip("%s not built (no nvcc at /usr/local/cuda/bin when the fixtures were made)"
			   % name)
	return p


def stub_driver_dir():
	stub = "/usr/local/cuda/lib64/stubs/libcuda.so"
	if not os.path.exists(stub):
		return None
	d = tempfile.mkdtemp(prefix="ml-stub-", dir=OPTS.tmp)
	os.symlink(stub, os.path.join(d, "libcuda.so.1"))
	return d


def check_real_runtime(name):
	prog = nvcc_fixture(name)
	envs = [("the test double", cuda_env()), ("no driver", cuda_env(driver=False))]
	for _, e in envs:
		e["MEMLINE_CUDA_TRACE"] = "1"
	stub = stub_driver_dir()
	if stub:
		e = cuda_env(driver=False)
		e["LD_LIBRARY_PATH"] = stub
		envs.append(("the toolkit's stub driver", e))
	for what, env in envs:
		plain = run([prog], env=env)
		r = Run(prog, env=env, expect_rc=plain.returncode)
		eq(text(r.proc.stdout), text(plain.stdout), "%s with %s: output" % (name, what))
		doc = report(r.file(name), "leaks")["leaks"]
		check("cuda" not in doc, "%s with %s: bogus CUDA records" % (name, what))
		err = text(r.proc.stderr)
		if what == "the test double":
			# The runtime found the driver through our dlsym and wrapped
			# lookups, before it stopped at its check of the driver.
			for sym in ("cuGetProcAddress_v2", "cuMemAlloc_v2", "cuMemFree_v2"):
				check("memline: cuda: wrapped %s " % sym in err,
				      "%s with the double: %s not wrapped; stderr %r" % (name, sym, err[-300:]))
		if what == "no driver":
			check("memline: cuda: wrapped" not in err, "%s without a driver: wrapped something" % name)


@test
def cuda_real_runtime_static():
	check_real_runtime("rt_static")


@test
def cuda_real_runtime_shared():
	check_real_runtime("rt_shared")


# ------------------------------------------------ the line timer (lineprof/)

def timed_lines(prof, function):
	"""(function object, {line: row}) of `lines --function` on a --lines profile."""
	doc = report(prof, "lines", "--function", function)
	fns = [f for f in doc["lines"]["functions"] if f["name"] == function]
	check(len(fns) == 1, "lines %s: want one function, got %d" % (function, len(fns)))
	return doc, fns[0], {r["line"]: r for r in fns[0]["lines"]}


def pct_of(fn, rows, line):
	check(fn["samples"] > 0, "%s has no samples" % fn["name"])
	return 100.0 * rows[line]["samples"] / fn["samples"]


@test
def lines_split_60_30_10():
	r = Run("lp_split", opts=["--lines"])
	prof = r.file("lp_split")
	doc, fn, rows = timed_lines(prof, "main")
	t = doc["lines"]["timer"]
	eq((t["estimated"], t["clock"], t["period_ns"]), (True, "cpu", 1000000000 // 997), "timer")
	check(fn["samples"] >= 500, "only %d samples in main" % fn["samples"])
	for marker, want in (("sixty", 60), ("thirty", 30), ("ten", 10)):
		got = pct_of(fn, rows, line_of("lp_split", marker))
		check(abs(got - want) <= 3, "%s: %.1f%% of main's time, want %d +- 3" % (marker, got, want))
		eq(rows[line_of("lp_split", marker)]["self_samples"], 0, marker + " self samples (all in burn)")
	# Inclusive: main's three lines hold all of burn's time; burn's own lines hold it as self.
	_, bfn, brows = timed_lines(prof, "burn")
	eq(bfn["self_samples"], bfn["samples"], "burn self == total")
	self_sum = sum(x["self_samples"] for x in brows.values())
	eq(self_sum, bfn["samples"], "burn's lines' self samples")
	check(abs(bfn["samples"] - fn["samples"]) <= 2, "burn %d vs main %d samples" % (bfn["samples"], fn["samples"]))
	# The text: line_profiler's layout.
	p = run([rcli(), "report", prof, "lines", "--function", "main"])
	out = text(p.stdout).splitlines()
	eq(out[0], "Timer unit: 1e-06 s", "first line")
	check(out[1].startswith("Time is estimated from "), "estimate note: %r" % out[1])
	check(re.match(r"^Total time: [0-9.e+-]+ s$", out[3]), "total line: %r" % out[3])
	check(out[4].startswith("File: ") and out[4].endswith("lp_split.c"), "file line: %r" % out[4])
	eq(out[5], "Function: main at line %d" % (line_of("lp_split", "sixty") - 3), "function line")
	check(out[7].startswith("Line #   Samples         Time  Per Hit   % Time"), "header: %r" % out[7])
	check(out[7].endswith("  Line Contents"), "header end: %r" % out[7])
	eq(out[8], "=" * len(out[7]), "rule")
	row = [l for l in out if l.endswith("/* L:sixty */")][0]
	check(re.match(r"^ {4}\d\d {6}[ \d]{3}\d +\d+\.\d +\d+\.\d +\d+\.\d ", row), "row: %r" % row)
	# -u: the unit scales Time.
	p = run([rcli(), "report", prof, "lines", "--function", "main", "-u", "1e-3"])
	eq(text(p.stdout).splitlines()[0], "Timer unit: 0.001 s", "-u 1e-3")
	# --top 2: burn and main (the most time, with source).
	p = run([rcli(), "report", prof, "lines", "--top", "2"])
	funcs = re.findall(r"^Function: (\S+) at line", text(p.stdout), re.M)
	eq(sorted(funcs), ["burn", "main"], "lines --top 2")
	# ops: time columns and the footer.
	ops = report(prof, "ops", "--sort", "self_cpu_time_total")["ops"]
	eq(ops["functions"][0]["name"], "burn", "top of ops by self_cpu_time_total")
	p = run([rcli(), "report", prof, "ops", "--sort", "cpu_time_total"])
	o = text(p.stdout)
	check("Self CPU %" in o and "CPU total %" in o and "CPU time avg" in o, "ops time headers")
	check(re.search(r"^Self CPU time total: [0-9.]+m?s", o, re.M), "ops footer")


@test
def lines_gcov_exact_hits():
	gcda = fixture("lp_gcov.gcda")
	if os.path.exists(gcda):
		os.unlink(gcda)
	r = Run("lp_gcov", opts=["--lines"])
	prof = r.file("lp_gcov")
	check(os.path.exists(gcda), "no %s after the run" % gcda)
	p = run(["gcov", "--json-format", "--stdout", gcda])
	check(p.returncode == 0, "gcov failed: %s" % text(p.stderr))
	want = {}
	for f in json.loads(text(p.stdout))["files"]:
		if os.path.basename(f["file"]) == "lp_gcov.c":
			for l in f["lines"]:
				want[l["line_number"]] = want.get(l["line_number"], 0) + l["count"]
	_, fn, rows = timed_lines(prof, "main")
	eq(fn["hits_exact"], True, "hits_exact")
	got = {n: x["hits"] for n, x in rows.items() if x["hits"] is not None}
	eq(got, {n: c for n, c in want.items() if fn["first_line"] <= n <= fn["last_line"]},
	   "hits vs gcov's line counts")
	for marker, count in (("inner_body", 3000000), ("call", 1000), ("seventh", 143), ("init", 1)):
		eq(rows[line_of("lp_gcov", marker)]["hits"], count, marker + " hits")
	p = run([rcli(), "report", prof, "lines", "--function", "main"])
	check(re.search(r"^Line #      Hits         Time", text(p.stdout), re.M), "Hits header")
	calls = {f["name"]: f.get("calls") for f in report(prof, "ops")["ops"]["functions"]}
	eq(calls.get("main"), 1, "main's calls from gcov")
	check(calls.get("step") in (None, 1000), "step's calls: %r" % calls.get("step"))


@test
def lines_llvm_cov_exact_hits():
	if not os.path.exists(fixture("lp_llvmcov")) or not shutil.which("llvm-cov") \
	   or not shutil.which("llvm-profdata"):
		raise Skip("clang, llvm-cov or llvm-profdata not installed")
	rawdir = tempfile.mkdtemp(prefix="ml-llvmcov-", dir=OPTS.tmp)
	env = dict(os.environ, LLVM_PROFILE_FILE=os.path.join(rawdir, "lp.profraw"))
	r = Run("lp_llvmcov", opts=["--lines"], env=env)
	prof = r.file("lp_llvmcov")
	merged = os.path.join(rawdir, "lp.profdata")
	p = run(["llvm-profdata", "merge", "-sparse", "-o", merged, env["LLVM_PROFILE_FILE"]])
	eq(p.returncode, 0, "llvm-profdata merge")
	p = run(["llvm-cov", "export", "-format=lcov", "-instr-profile", merged, fixture("lp_llvmcov")])
	want, cur = {}, None
	for l in text(p.stdout).splitlines():
		if l.startswith("SF:"):
			cur = os.path.basename(l[3:])
		elif l.startswith("DA:") and cur == "lp_gcov.c":
			n, c = l[3:].split(",")[:2]
			want[int(n)] = want.get(int(n), 0) + int(c)
	cmd = [rcli(), "report", prof, "lines", "--function", "main", "--json"]
	p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
	eq(p.returncode, 0, "report: %s" % text(p.stderr))
	fn = json.loads(text(p.stdout))["lines"]["functions"][0]
	eq(fn["hits_exact"], True, "hits_exact")
	got = {x["line"]: x["hits"] for x in fn["lines"] if x["hits"] is not None}
	eq(got, {n: c for n, c in want.items() if fn["first_line"] <= n <= fn["last_line"]},
	   "hits vs llvm-cov's line counts")
	for marker, count in (("inner_body", 3000000), ("call", 1000), ("seventh", 143)):
		eq(got.get(line_of("lp_gcov", marker)), count, marker + " hits")


@test
def lines_threads():
	r = Run("lp_threads", opts=["--lines"])
	prof = r.file("lp_threads")
	ops = {f["name"]: f for f in report(prof, "ops")["ops"]["functions"]}
	a, b = ops["spin_a"]["samples"], ops["spin_b"]["samples"]
	check(b >= 40, "spin_b has %d samples" % b)
	check(1.6 <= a / b <= 2.5, "spin_a/spin_b = %d/%d, want about 2" % (a, b))
	_, fn, rows = timed_lines(prof, "main")
	check(rows[line_of("lp_threads", "join")]["samples"] <= 3,
	      "main's join line has %d CPU samples" % rows[line_of("lp_threads", "join")]["samples"])
	doc, _, _ = timed_lines(prof, "spin_a")
	pid = doc["profile"]["pid"]
	per = {t["tid"]: t["samples"] for t in doc["lines"]["timer"]["per_thread"]}
	check(per.get(pid, 0) <= 3, "main thread (tid %d) has %d CPU samples" % (pid, per.get(pid, 0)))
	others = sorted((n for t, n in per.items() if t != pid), reverse=True)
	check(len(others) == 2, "sampled threads besides main: %r" % per)
	# A thread's own samples are its function's plus the few taken in its
	# start-up and exit code.
	slack = lambda n: max(3, n // 20)
	check(abs(others[0] - a) <= slack(a) and abs(others[1] - b) <= slack(b),
	      "per-thread samples %r vs spin_a %d, spin_b %d" % (others, a, b))
	eq(doc["lines"]["timer"]["threads"], 3, "threads with a timer")
	_, fa, ra = timed_lines(prof, "spin_a")
	check(ra[line_of("lp_threads", "a_loop")]["samples"] + ra[line_of("lp_threads", "a_loop") + 1]["samples"]
	      >= 0.9 * fa["samples"], "spin_a's time on its loop")


@test
def lines_wall_vs_cpu():
	read_line = line_of("lp_block", "read")
	r = Run("lp_block", opts=["--lines", "--clock", "wall"])
	doc, fn, rows = timed_lines(r.file("lp_block"), "main")
	eq(doc["lines"]["timer"]["clock"], "wall", "clock")
	check(pct_of(fn, rows, read_line) >= 60, "wall: read line has %.1f%%" % pct_of(fn, rows, read_line))
	r = Run("lp_block", opts=["--lines"])
	doc, fn, rows = timed_lines(r.file("lp_block"), "main")
	check(rows[read_line]["samples"] <= 2, "cpu: read line has %d samples" % rows[read_line]["samples"])
	check(rows[line_of("lp_block", "burn")]["samples"] >= 10, "cpu: burn line has samples")


@test
def lines_program_sigprof():
	plain = run([fixture("lp_sigprof")])
	eq(plain.returncode, 0, "lp_sigprof alone")
	r = Run("lp_sigprof", opts=["--lines"])
	err = text(r.proc.stderr)
	eq(err.count("memline: the program uses SIGPROF; line timing is off"), 1, "warning lines in %r" % err)
	check(re.match(r"^ticks [1-9]\d*$", text(r.proc.stdout).strip()), "program's own ticks: %r" % text(r.proc.stdout))
	t = report(r.file("lp_sigprof"), "lines", "--function", "main")["lines"]["timer"]
	eq(t["stepped_aside"], True, "stepped_aside")


@test
def lines_run_options():
	for opts, what in ((["--clock", "gpu"], "--clock"), (["--rate", "0"], "--rate"),
			   (["--rate", "x"], "--rate")):
		p = run([memline(), "run"] + opts + ["--", fixture("lp_split"), "1"])
		eq(p.returncode, 2, "run %s exit status" % " ".join(opts))
		check(what in text(p.stderr), "error names %s: %r" % (what, text(p.stderr)))
	r = Run("lp_split", args=["2000000"], opts=["--rate", "211"])
	t = report(r.file("lp_split"), "lines", "--function", "main")["lines"]["timer"]
	eq(t["period_ns"], 1000000000 // 211, "period at --rate 211")
	r = Run("lp_split", args=["2000000"])
	p = run([rcli(), "report", r.file("lp_split"), "lines", "--top", "1"])
	check(p.returncode == 1 and "--lines" in text(p.stderr), "--top without samples: %r" % text(p.stderr))


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


@test
def report_timed_views():
	"""The report side of the line timer and regions (run under ASan too)."""
	r = Run("lp_split", args=["3000000"], opts=["--lines", "--rate", "4999"])
	prof = r.file("lp_split")
	for args in (["lines", "--function", "main"], ["lines", "--function", "burn", "-u", "1"],
		     ["lines", "--top", "3"], ["ops"], ["ops", "--sort", "self_cpu_time_total"],
		     ["regions"]):
		for j in ([], ["--json"]):
			p = run([rcli(), "report", prof] + args + j)
			eq(p.returncode, 0, "report %s: %s" % (" ".join(args + j), text(p.stderr)[-300:]))
	r = Run("lp_regions")
	for j in ([], ["--json"]):
		p = run([rcli(), "report", r.file("lp_regions"), "regions"] + j)
		eq(p.returncode, 0, "report regions %s: %s" % (j, text(p.stderr)[-300:]))
	for bad in (["lines", "--top", "0"], ["lines", "--top", "2", "--function", "main"],
		    ["ops", "--top", "2"], ["lines", "--function", "main", "-u", "x"]):
		p = run([rcli(), "report", prof] + bad)
		eq(p.returncode, 2, "report %s exit status" % " ".join(bad))


# ------------------------------------------------------------- the runner

def main():
	global OPTS
	ap = argparse.ArgumentParser(description="memline end-to-end tests")
	ap.add_argument("--build", default="build")
	ap.add_argument("-k", dest="filter", default="")
	ap.add_argument("-v", dest="verbose", action="store_true")
	ap.add_argument("--cli", default=None, help="memline binary for report-only tests")
	OPTS = ap.parse_args()
	OPTS.build = os.path.abspath(OPTS.build)
	OPTS.cli = OPTS.cli and os.path.abspath(OPTS.cli)
	OPTS.tmp = tempfile.mkdtemp(prefix="memline-e2e-")
	passed = failed = skipped = 0
	try:
		for fn in TESTS:
			if OPTS.filter not in fn.__name__:
				continue
			t0 = time.time()
			try:
				fn()
				print("ok %s" % fn.__name__ + (" (%.1fs)" % (time.time() - t0) if OPTS.verbose else ""))
				passed += 1
			except Skip as e:
				print("skip %s: %s" % (fn.__name__, e))
				skipped += 1
			except Fail as e:
				print("FAIL %s: %s" % (fn.__name__, str(e).replace("\n", " ")[:600]))
				failed += 1
			except Exception as e:  # a harness bug or an unexpected document
				print("FAIL %s: %s: %s" % (fn.__name__, type(e).__name__, str(e)[:300]))
				failed += 1
			sys.stdout.flush()
	finally:
		shutil.rmtree(OPTS.tmp, ignore_errors=True)
	print("e2e: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
	return 1 if failed else 0


if __name__ == "__main__":
	sys.exit(main())
