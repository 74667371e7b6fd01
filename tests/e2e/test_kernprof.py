"""tests/e2e/test_kernprof.py - @profile, kernprof's and memory_profiler's
convention: exact Hits against a sys.settrace line-event counter of our own,
python-profiling.md §10.3's measured values, Time against the program's own
clock, Increment against the exact sizes of Python objects, memory_profiler
0.61's own table, the text layouts, `import memline`, another tracer or
profiler in the program, fork children.  On every CPython 3.10-3.13 found
here; a CPython a fresh Debian 12 lacks (pyenv's) is a counted skip."""

import json

from harness import *  # noqa: F401,F403
from harness import ROOT, OPTS, Fail, Skip, check, eq, memline, rcli, report, run, test, text, Run
from test_python import imports, interpreter, per_version, py_fixture, py_line, python_profile

DEBIAN_PY = "/usr/bin/python3"


def debian_python():
	if not os.path.exists(DEBIAN_PY):
		raise Skip("no %s" % DEBIAN_PY)
	return DEBIAN_PY


def kp_lines(prof, *extra):
	"""The lines view's document of a profile with @profile functions."""
	return report(prof, "lines", *extra)["lines"]


def kp_func(doc, name):
	fs = [f for f in doc["functions"] if f["name"] == name]
	eq(len(fs), 1, "functions named %s in %s" % (name, [f["name"] for f in doc["functions"]]))
	return fs[0]


def by_line(fn):
	return {l["line"]: l for l in fn["lines"]}


def hits_at(fn, fixture, marker):
	return by_line(fn)[py_line(fixture, marker)]


# ------------------------------------------------ Hits: the settrace oracle

@per_version
def kernprof_hits_equal_settrace(py):
	"""Every line of 17 decorated functions (loops on one line,
	comprehensions, generator expressions, exceptions, recursion, generators driven by send, throw
	and close, coroutines, an async generator, methods, a static and a class
	method, a property, nested functions, four threads): Hits equal the line
	events a sys.settrace function counts in an independent run."""
	oracle = run([py, py_fixture("kp_oracle.py")], timeout=120)
	eq(oracle.returncode, 0, "the oracle's exit status: %s" % text(oracle.stderr)[-300:])
	want = json.loads(text(oracle.stdout))
	r = Run(py, [py_fixture("kp_cases.py")])
	doc = kp_lines(python_profile(r))
	eq(doc["timer"]["estimated"], False, "exact timer")
	got = {}
	for f in doc["functions"]:
		eq(f["hits_exact"], True, "hits_exact of %s" % f["name"])
		for l in f["lines"]:
			if l["hits"]:
				got["%d:%d" % (f["first_line"], l["line"])] = l["hits"]
	eq(len(doc["functions"]), 17, "decorated functions")
	eq(got, want, "hits (first line:line -> hits) against sys.settrace's line events")
	calls = {f["name"]: f["calls"] for f in doc["functions"]}
	for name, n in (("collatz", 340), ("rec", 6), ("gen", 2), ("raises", 8), ("echo", 1),
			("coro", 1), ("outer.<locals>.inner", 5)):
		eq(calls.get(name), n, "%s's calls" % name)
	names = sorted(f["name"] for f in doc["functions"])
	for name in ("Shape.area", "Shape.make", "Shape.unit", "Shape.double", "agen", "coro",
		     "echo", "outer.<locals>.inner"):
		check(name in names, "%s among the functions: %s" % (name, names))


@test
def kernprof_hits_section_10_3():
	"""python-profiling.md §10.3, measured on Debian's 3.11.2: is_prime 100,
	2, 260, 235, 73, 25; loops 1, 4, 3, 8, 7, 1 (x6); gen 5, 4."""
	r = Run(debian_python(), [py_fixture("kp_s103.py")])
	doc = kp_lines(python_profile(r))
	want = {"is_prime": [100, 2, 260, 235, 73, 25],
		"loops": [1, 4, 3, 8, 7, 1, 1, 1, 1, 1, 1], "gen": [5, 4]}
	for name, hits in want.items():
		got = [l["hits"] for l in kp_func(doc, name)["lines"] if l["hits"]]
		eq(got, hits, "%s's hits" % name)


# ------------------------------------------------ Time

@per_version
def kernprof_time_exact(py):
	"""Time per line from the monotonic clock: the sleeping lines hold at
	least their sleeps, the function's total is the sum of its lines and
	at most what the program measured around its two calls."""
	r = Run(py, [py_fixture("kp_time.py")])
	measured = int(text(r.proc.stdout).split()[0])
	fn = kp_func(kp_lines(python_profile(r)), "waits")
	rows = by_line(fn)
	for marker, floor in (("sleep50", 100e6), ("sleep20", 40e6)):
		row = hits_at(fn, "kp_time.py", marker)
		eq(row["hits"], 2, marker + " hits")
		check(row["time_ns"] >= floor, "%s: %d ns, want >= %d" % (marker, row["time_ns"], floor))
	eq(fn["total_time_ns"], sum(l["time_ns"] for l in rows.values()), "total = sum of lines")
	check(fn["total_time_ns"] <= measured, "total %d ns > the program's own %d ns"
	      % (fn["total_time_ns"], measured))
	check(fn["total_time_ns"] >= 140e6, "total %d ns < the sleeps' 140 ms" % fn["total_time_ns"])
	eq(fn["calls"], 2, "calls")


# ------------------------------------------------ memory

@per_version
def kernprof_increment_exact(py):
	"""Increment is the exact net change of live bytes across each
	execution, summed (two calls): bytearray(10**6) is 1,000,057 bytes,
	bytes(2*10**6) 2,000,033, bytearray(8 MiB) 8,388,665; past line 256,
	where 3.12+'s callbacks get int objects made for them."""
	r = Run(py, [py_fixture("kp_memory.py")])
	fn = kp_func(kp_lines(python_profile(r)), "grow")
	want = {"bytearray": (2, 2000114), "bytes": (2, 4000066), "del": (2, -2000114),
		"loop": (8, 0), "big": (6, 6 * 8388665), "delbig": (6, -6 * 8388665),
		"return": (2, 0)}
	for marker, (hits, inc) in want.items():
		row = hits_at(fn, "kp_memory.py", marker)
		eq((row["hits"], row["cpu_increment_bytes"]), (hits, inc), marker + ": hits, increment")
	# Mem usage: the live bytes at an execution's end, the most of any.
	use = {m: hits_at(fn, "kp_memory.py", m)["cpu_mem_usage_bytes"]
	       for m in ("bytearray", "bytes", "del", "loop", "big")}
	eq(use["bytes"] - use["bytearray"], 2000033, "usage after bytes - after bytearray")
	eq(use["bytes"] - use["del"], 1000057, "usage after bytes - after del")
	# The loop line's most is with its range iterator alive, as the big line's.
	eq(use["big"] - use["loop"], 8388665, "usage after the 8 MiB bytearray - before")
	# memline's own @profile code (3.10, 3.11's wrappers) is in no stack,
	# and decorating costs the decorated line no import of its own.
	leaks = report(python_profile(r), "leaks", "--limit", "100000")["leaks"]["records"]
	own = os.path.join(os.path.dirname(memline()), "python")
	files = {f["file"] for x in leaks for f in x["frames"] if f.get("python") and f["file"]}
	eq(sorted(f for f in files if f.startswith(own + "/")), [], "memline's own Python files in stacks")
	deco = py_line("kp_memory.py", "deco")
	lines = report(python_profile(r), "lines", "--function", "<module>")["lines"]["functions"]
	row = [l for f in lines if f["file"].endswith("kp_memory.py") for l in f["lines"]
	       if l["line"] == deco]
	check(row and row[0]["total_alloc_bytes"] < 16384,
	      "the @profile line's allocations: %s" % (row and row[0]))


@test
def kernprof_increment_vs_memory_profiler():
	"""memory_profiler 0.61 on the same program: its Increment (RSS, which
	tracks the heap where every large block is mmap'd: glibc's mmap
	threshold pinned for both runs) within 2% of memline's on every line of
	a MiB or more, and Occurrences equal to Hits on every line."""
	py = debian_python()
	if not imports(py, "memory_profiler"):
		raise Skip("python3-memory-profiler is not installed")
	env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
	p = run([py, "-m", "memory_profiler", py_fixture("kp_mprof.py")], env=env, timeout=120)
	eq(p.returncode, 0, "memory_profiler's exit status: %s" % text(p.stderr)[-300:])
	theirs = {}
	for l in text(p.stdout).splitlines():
		m = re.match(r"^\s*(\d+)\s+([-\d.]+) MiB\s+([-\d.]+) MiB\s+(\d+)\s", l)
		if m:
			theirs[int(m.group(1))] = (float(m.group(3)), int(m.group(4)))
	r = Run(py, [py_fixture("kp_mprof.py")], env=env)
	fn = kp_func(kp_lines(python_profile(r)), "churn")
	compared = 0
	for l in fn["lines"]:
		if not l["hits"]:
			continue
		check(l["line"] in theirs, "memory_profiler has no row for line %d" % l["line"])
		inc, occ = theirs[l["line"]]
		eq(l["hits"], occ, "line %d: hits vs Occurrences" % l["line"])
		ours = l["cpu_increment_bytes"] / 2 ** 20
		if abs(ours) >= 1:
			compared += 1
			check(abs(ours - inc) <= abs(inc) * 0.02, "line %d: memline %.3f MiB, "
			      "memory_profiler %.3f MiB" % (l["line"], ours, inc))
	eq(compared, 6, "lines of a MiB or more compared")
	eq(hits_at(fn, "kp_mprof.py", "a40")["cpu_increment_bytes"], 40 * 2 ** 20 + 57,
	   "bytearray(40 MiB), exactly")


@test
def kernprof_cuda_increment_exact():
	"""CUDA memory on the decorated lines (the driver's test double, from
	ctypes): CUDA Increment is the exact device bytes each line allocated
	or freed, summed over two calls; the text has the CUDA columns."""
	py = debian_python()
	double = os.path.join(OPTS.build, "cuda")
	if not os.path.exists(os.path.join(double, "libcuda.so.1")):
		raise Skip("no CUDA driver test double (tests/cuda_double needs cuda.h)")
	r = Run(py, [py_fixture("kp_cuda.py")], env=dict(os.environ, LD_LIBRARY_PATH=double))
	prof = python_profile(r)
	fn = kp_func(kp_lines(prof), "device_work")
	for marker, inc in (("alloc3", 2 * (3 << 20)), ("alloc5000", 2 * 5000),
			    ("free3", -2 * (3 << 20)), ("return", 0)):
		row = hits_at(fn, "kp_cuda.py", marker)
		eq((row["hits"], row["cuda_increment_bytes"]), (2, inc), marker + ": hits, CUDA increment")
	use = hits_at(fn, "kp_cuda.py", "alloc5000")["cuda_mem_usage_bytes"]
	eq(use, (3 << 20) + 2 * 5000, "CUDA usage after the second call's two allocations")
	p = run([rcli(), "report", prof, "lines"])
	head = [l for l in text(p.stdout).splitlines() if l.startswith("Line #")]
	check(head and "CUDA Increment" in head[0], "CUDA columns: %r" % head)


# ------------------------------------------------ text

@test
def report_kernprof_layouts():
	"""`report lines` with no --function: every decorated function like
	`kernprof -l -v`, memory columns on the same rows; --layout
	memory_profiler: memory_profiler's table."""
	r = Run(debian_python(), [py_fixture("kp_time.py")])
	prof = python_profile(r)
	p = run([rcli(), "report", prof, "lines"])
	eq(p.returncode, 0, "report lines: %s" % text(p.stderr))
	out = text(p.stdout).splitlines()
	eq(out[0], "Timer unit: 1e-06 s", "first line")
	eq(out[1], "", "blank line")
	check(re.match(r"^Total time: [0-9.e+-]+ s$", out[2]), "total line: %r" % out[2])
	check(out[3].startswith("File: ") and out[3].endswith("kp_time.py"), "file: %r" % out[3])
	eq(out[4], "Function: waits at line %d" % (py_line("kp_time.py", "sleep50") - 2), "function")
	check(out[6].startswith("Line #      Hits         Time  Per Hit   % Time    Increment"),
	      "header: %r" % out[6])
	check(out[6].endswith("  Line Contents"), "header end: %r" % out[6])
	eq(out[7], "=" * len(out[6]), "rule")
	row = [l for l in out if l.endswith("# L:sleep50")][0]
	check(re.match(r"^ +\d+ +2 +\d+\.\d +\d+\.\d +\d+\.\d ", row), "row: %r" % row)
	p = run([rcli(), "report", prof, "lines", "--layout", "memory_profiler", "--function", "waits"])
	out = text(p.stdout).splitlines()
	check(out[0].startswith("Filename: ") and out[0].endswith("kp_time.py"), "mp: %r" % out[0])
	eq(out[2], "Line #    Mem usage    Increment  Occurrences   Line Contents", "mp header")
	eq(out[3], "=" * len(out[2]), "mp rule")
	row = [l for l in out if l.endswith("# L:sum")][0]
	check(re.match(r"^ +\d+ +[\d.]+ MiB +[-\d.]+ MiB +2   ", row), "mp row: %r" % row)
	p = run([rcli(), "report", prof, "lines", "--layout", "bogus"])
	check(p.returncode != 0 and "layout" in text(p.stderr), "--layout bogus: %s" % text(p.stderr))


@test
def kernprof_lines_needs_decorations():
	"""A profile without @profile functions: `report lines` alone, and
	--layout memory_profiler, say what is missing in one line."""
	r = Run(debian_python(), [py_fixture("objects.py")])
	prof = python_profile(r)
	for extra in ([], ["--layout", "memory_profiler", "--function", "f"]):
		p = run([rcli(), "report", prof, "lines"] + extra)
		check(p.returncode != 0, "report lines %s: exit 0" % extra)
		err = text(p.stderr).strip()
		eq(len(err.splitlines()), 1, "one error line: %r" % err)
		check("@profile" in err, "error names @profile: %r" % err)


@test
def kernprof_sampled_lines_have_no_per_hit():
	"""Where hits are not exact (sampled lines of an undecorated
	function), no column pretends they are: no Per Hit, JSON hits null."""
	r = Run(debian_python(), [py_fixture("timing.py")], opts=["--lines"])
	prof = python_profile(r)
	p = run([rcli(), "report", prof, "lines", "--top", "1"])
	head = [l for l in text(p.stdout).splitlines() if l.startswith("Line #")]
	check(head and "Per Hit" not in head[0] and "Samples" in head[0], "header: %r" % head)
	doc = report(prof, "lines", "--top", "1")["lines"]
	rows = [l for f in doc["functions"] for l in f["lines"] if l["samples"]]
	check(rows and all(l["hits"] is None for l in rows), "sampled rows' hits: %s"
	      % [l["hits"] for l in rows][:5])


@test
def kernprof_beside_the_line_timer():
	"""memline run --lines: the decorated function keeps its exact table
	(no --function), the sampled table stays sampled (--top), and naming a
	decorated and an undecorated function prints one table of each."""
	r = Run(debian_python(), [py_fixture("kp_time.py")], opts=["--lines", "--clock", "wall"])
	prof = python_profile(r)
	doc = kp_lines(prof)
	eq(doc["timer"]["estimated"], False, "the @profile table's timer")
	eq(hits_at(kp_func(doc, "waits"), "kp_time.py", "sleep50")["hits"], 2, "exact hits")
	doc = kp_lines(prof, "--top", "3")
	eq(doc["timer"]["estimated"], True, "--top: the sampled table")
	check(all(l["hits"] is None for f in doc["functions"] for l in f["lines"]), "sampled hits")
	p = run([rcli(), "report", prof, "lines", "--function", "waits", "--function", "<module>"])
	eq(p.returncode, 0, "both kinds named: %s" % text(p.stderr)[-300:])
	heads = [l for l in text(p.stdout).splitlines() if l.startswith("Line #")]
	# (every module's <module> has samples: one sampled table each)
	check(len(heads) >= 2, "two kinds of tables: %s" % heads)
	check("Hits" in heads[0] and "Per Hit" in heads[0], "decorated first: %r" % heads[0])
	check(all("Samples" in h and "Per Hit" not in h for h in heads[1:]), "sampled: %r" % heads[1:])
	p = run([rcli(), "report", prof, "lines", "--json", "--function", "waits", "--function",
		 "<module>"])
	check(p.returncode != 0 and "@profile" in text(p.stderr), "--json with both kinds: %s"
	      % text(p.stderr))


# ------------------------------------------------ the program's world

@per_version
def kernprof_import_memline(py):
	"""`import memline`: under memline the package is importable with no
	setup and memline.profile is the builtin profiler, which records; run
	without memline (PYTHONPATH=python/), it does nothing."""
	r = Run(py, [py_fixture("kp_import.py")])
	eq(text(r.proc.stdout).strip(), "active=True builtin=True same=True", "under memline")
	doc = kp_lines(python_profile(r))
	eq(sorted(f["name"] for f in doc["functions"]), ["f", "g"], "decorated with memline.profile")
	env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
	p = run([py, py_fixture("kp_import.py")], env=env)
	eq(p.returncode, 0, "without memline: %s" % text(p.stderr)[-300:])
	eq(text(p.stdout).strip(), "active=False builtin=False same=True", "without memline")


@per_version
def kernprof_keeps_the_programs_tracer(py):
	"""A program's own sys.settrace function sees every line event of a
	decorated function (3.10, 3.11: memline's C tracer calls it), and
	memline's hits equal what it counted."""
	r = Run(py, [py_fixture("kp_chain.py")])
	out = text(r.proc.stdout).splitlines()
	eq(out[1], "still mine", "the program's trace function after the calls")
	theirs = dict(tuple(map(int, kv.split(":"))) for kv in out[0].split())
	fn = kp_func(kp_lines(python_profile(r)), "work")
	ours = {l["line"]: l["hits"] for l in fn["lines"] if l["hits"]}
	eq(ours, theirs, "memline's hits vs the program's own tracer")


@per_version
def kernprof_keeps_cprofile(py):
	"""cProfile (a sys.monitoring tool on 3.12+) works beside @profile."""
	r = Run(py, [py_fixture("kp_cprofile.py")])
	eq(text(r.proc.stdout).strip(), "cprofile saw plain", "cProfile's output")
	fn = kp_func(kp_lines(python_profile(r)), "traced")
	eq([l["hits"] for l in fn["lines"] if l["hits"]], [1], "traced's hits")


@test
def kernprof_fork_child_own_hits():
	"""A fork child's profile has its own calls only."""
	r = Run(debian_python(), [py_fixture("kp_fork.py")])
	fs = r.files("python3*")
	eq(len(fs), 2, "profiles: %s" % fs)
	hits = sorted(hits_at(kp_func(kp_lines(f), "step"), "kp_fork.py", "step")["hits"] for f in fs)
	eq(hits, [1, 2], "step's hits in the parent and the child")
	# --merge: one table, the processes' hits and calls summed.
	p = run([rcli(), "report", r.run_dir, "lines", "--all", "--merge", "--json"])
	eq(p.returncode, 0, "lines --all --merge: %s" % text(p.stderr)[-300:])
	fn = kp_func(json.loads(text(p.stdout))["lines"], "step")
	eq((hits_at(fn, "kp_fork.py", "step")["hits"], fn["calls"]), (3, 3), "merged hits, calls")


@test
def kernprof_off_switch():
	"""MEMLINE_PYTRACE=0: profile is still a builtin, and decorates nothing."""
	env = dict(os.environ, MEMLINE_PYTRACE="0")
	r = Run(debian_python(), [py_fixture("kp_time.py")], env=env)
	p = run([rcli(), "report", python_profile(r), "lines"])
	check(p.returncode != 0 and "@profile" in text(p.stderr), "lines: %s" % text(p.stderr))


@test
def kernprof_missing_source_one_warning():
	"""A source file gone since the run: one warning for the file, for a
	function shown (not one per decorated function of the file, nor for
	functions --function left out); the tables keep their numbers."""
	import shutil
	import tempfile
	py = debian_python()
	d = tempfile.mkdtemp(dir=OPTS.tmp)
	script = os.path.join(d, "kp_cases.py")
	shutil.copy(py_fixture("kp_cases.py"), script)
	prof = python_profile(Run(py, [script]))
	os.unlink(script)
	for extra in ([], ["--function", "collatz"]):
		p = run([rcli(), "report", prof, "lines"] + extra)
		eq(p.returncode, 0, "lines %s: exit status" % extra)
		warns = [l for l in text(p.stderr).splitlines() if "warning: source file" in l]
		eq(len(warns), 1, "warnings for lines %s: %r" % (extra, warns))
		check(re.search(r"^Function: collatz at line", text(p.stdout), re.M),
		      "lines %s: no table of collatz" % extra)
