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
def fatal_abort():
	check_fatal("abort", signal.SIGABRT)


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
	passed = failed = 0
	try:
		for fn in TESTS:
			if OPTS.filter not in fn.__name__:
				continue
			t0 = time.time()
			try:
				fn()
				print("ok %s" % fn.__name__ + (" (%.1fs)" % (time.time() - t0) if OPTS.verbose else ""))
				passed += 1
			except Fail as e:
				print("FAIL %s: %s" % (fn.__name__, str(e).replace("\n", " ")[:600]))
				failed += 1
			except Exception as e:  # a harness bug or an unexpected document
				print("FAIL %s: %s: %s" % (fn.__name__, type(e).__name__, str(e)[:300]))
				failed += 1
			sys.stdout.flush()
	finally:
		shutil.rmtree(OPTS.tmp, ignore_errors=True)
	print("e2e: %d passed, %d failed" % (passed, failed))
	return 1 if failed else 0


if __name__ == "__main__":
	sys.exit(main())
