"""tests/e2e/test_python.py - Python programs under memline: the oracles of
python-profiling.md §10 (tracemalloc's per-line bytes, traceback's stacks,
exact buffers, threads, sampled time against the program's own clock) on
every CPython 3.10-3.13 found here, launchers, the program's unchanged
world, child processes, and every view in Python terms.  A CPython a fresh
Debian 12 lacks (pyenv's) is a counted skip."""

import glob
import json

from harness import *  # noqa: F401,F403
from harness import (ROOT, OPTS, Fail, Skip, check, eq, memline, rcli, report, run, run_dir_of,
		     test, text, verified, Run)

PYFIX = os.path.join(ROOT, "tests", "fixtures", "py")
PYENV = "/root/.pyenv/versions"

# (label, how to find it): Debian's own, and pyenv's where installed.
INTERPRETERS = [
	("3_10", "pyenv", "3.10"),
	("3_11", "pyenv", "3.11"),
	("3_11_debian", "/usr/bin/python3.11", "3.11"),
	("3_12", "pyenv", "3.12"),
	("3_13", "pyenv", "3.13"),
]


def interpreter(where, minor):
	"""The path of the interpreter, or raises Skip."""
	if where != "pyenv":
		if not os.path.exists(where):
			raise Skip("no %s" % where)
		return where
	found = sorted(glob.glob(os.path.join(PYENV, minor + ".*", "bin", "python" + minor)))
	found = [p for p in found if re.match(r".*/%s\.\d+/bin/" % re.escape(minor), p)]
	if not found:
		raise Skip("no CPython %s here (pyenv)" % minor)
	return found[-1]


def imports(py, module):
	"""Whether interpreter py imports module (Debian's python3-* packages
	import only under Debian's python3)."""
	return run([py, "-c", "import " + module], timeout=120).returncode == 0


def py_fixture(name):
	return os.path.join(PYFIX, name)


def py_line(name, marker):
	"""The line of the `# L:marker` comment in tests/fixtures/py/NAME."""
	pat = re.compile(r"# L:%s$" % re.escape(marker))
	with open(py_fixture(name)) as f:
		hits = [i for i, t in enumerate(f, 1) if pat.search(t.rstrip())]
	if len(hits) != 1:
		raise Fail("marker L:%s found %d times in %s" % (marker, len(hits), name))
	return hits[0]


def per_version(fn):
	"""Registers fn(py) once per interpreter: NAME_3_10, NAME_3_11, ..."""
	for label, where, minor in INTERPRETERS:
		def one(where=where, minor=minor):
			fn(interpreter(where, minor))
		one.__name__ = "%s_%s" % (fn.__name__, label)
		test(one)
	return fn


def python_profile(r):
	"""The one profile of the Python process of a Run."""
	fs = [f for f in r.files() if re.match(r"memline\.python3[.\d]*\.\d+", os.path.basename(f))]
	check(len(fs) == 1, "want 1 python profile, got %s" % [os.path.basename(f) for f in r.files()])
	return fs[0]


def is_py(fr):
	return fr.get("python") is True


def innermost_py_lines(doc, view, src):
	"""{line: [bytes, blocks]} of the records whose innermost frame is a
	Python frame in src (tracemalloc's own rule: the allocation's innermost
	Python frame)."""
	out = {}
	for r in doc[view]["records"]:
		fr = r["frames"]
		if not fr or not is_py(fr[0]) or os.path.basename(fr[0]["file"] or "") != src:
			continue
		e = out.setdefault(fr[0]["line"], [0, 0])
		e[0] += r["bytes"]
		e[1] += r["blocks"]
	return out


# ------------------------------------------------ §10.1: tracemalloc

@per_version
def python_objects_equal_tracemalloc(py):
	"""Live bytes of Python objects per line at the same moment equal
	tracemalloc's statistics("lineno") of an independent run (within 1%,
	exact here)."""
	oracle = run([py, py_fixture("objects.py"), "tracemalloc"], timeout=120)
	eq(oracle.returncode, 0, "the tracemalloc run's exit status")
	want = {int(k): v for k, v in json.loads(text(oracle.stdout)).items()}
	r = Run(py, [py_fixture("objects.py")])
	doc = report(python_profile(r), "leaks", "--kind", "python", "--limit", "100000")
	got = innermost_py_lines(doc, "leaks", "objects.py")
	for marker in ("list", "bytes", "bytearray", "dictcomp", "str"):
		line = py_line("objects.py", marker)
		check(line in want, "tracemalloc has no line %d (%s): %s" % (line, marker, want))
		check(line in got, "memline has no line %d (%s): %s" % (line, marker, got))
		# Within 1%: a temporary that goes to a free list (the [None] of
		# [None] * 1000) stays on its line for memline (its memory is still
		# allocated), while tracemalloc moves it to wherever it is reused.
		w, g = want[line][0], got[line][0]
		check(abs(g - w) <= w / 100, "line %d (%s): memline %d bytes, tracemalloc %d"
		      % (line, marker, g, w))


@per_version
def python_leaks_program_first(py):
	"""The leaks view of a Python program lists the program's blocks and
	sums in one line what the interpreter and the modules it imported hold
	at exit (--native lists those too); the amounts add up to the total.
	Two calls on one line share the line's stack."""
	r = Run(py, [py_fixture("exit_leak.py")])
	prof = python_profile(r)
	doc = report(prof, "leaks", "--limit", "100000")["leaks"]
	recs, summary = doc["records"], doc["summary"]
	check(recs, "no records")
	for rec in recs:
		check(any((f.get("file") or "").endswith("exit_leak.py") for f in rec["frames"]),
		      "a record listed without the program's frames: %r" % rec["frames"][:4])
	keep = py_line("exit_leak.py", "keep")
	buffers = [rec for rec in recs if rec["frames"][0].get("line") == keep and
		   rec["bytes"] == sum(1033 + i for i in range(50))]
	eq([rec["blocks"] for rec in buffers], [50], "the bytes objects at line %d" % keep)
	# Two calls on one line are one frame (the line's), so their objects
	# share one stack; each call its own was the instruction-level way.
	pair = py_line("exit_leak.py", "pair")
	pairs = [rec for rec in recs if rec["frames"][0].get("line") == pair and
		 rec["bytes"] == sum(2033 + i + 3033 + i for i in range(50))]
	eq([rec["blocks"] for rec in pairs], [100], "the pairs' objects at line %d" % pair)
	check(summary["interpreter_records"] > 0, "nothing summed as the interpreter's")
	eq(sum(rec["bytes"] for rec in recs) + summary["interpreter_bytes"],
	   summary["in_use_bytes"], "listed + interpreter's bytes")
	full = report(prof, "leaks", "--limit", "100000", "--native")["leaks"]
	eq(full["total_records"], len(recs) + summary["interpreter_records"],
	   "records with --native")
	eq(full["summary"]["interpreter_records"], 0, "summed with --native")
	p = run([rcli(), "report", prof, "leaks"])
	out = text(p.stdout)
	check("Not listed: %d records" % summary["interpreter_records"] in out,
	      "the text view's line for the interpreter's records: " + out[-600:])


@per_version
def python_objects_malloc_only(py):
	"""Without the PyMem wrappers (--no-pymem) memline sees malloc alone:
	per line, exactly the blocks over 512 bytes tracemalloc traces (those
	pymalloc asks malloc for)."""
	oracle = run([py, py_fixture("objects.py"), "tracemalloc"], timeout=120)
	want = {int(k): v for k, v in json.loads(text(oracle.stdout)).items()}
	r = Run(py, [py_fixture("objects.py")], opts=["--no-pymem"])
	prof = python_profile(r)
	got = innermost_py_lines(report(prof, "leaks", "--kind", "heap", "--limit", "100000"),
				 "leaks", "objects.py")
	for marker in ("list", "bytes", "bytearray", "dictcomp", "str"):
		line = py_line("objects.py", marker)
		check(want[line][2] > 0, "line %d (%s) has no block over 512 bytes" % (line, marker))
		eq(got.get(line, [0])[0], want[line][2], "heap bytes on line %d (%s)" % (line, marker))
	py_doc = report(prof, "leaks", "--kind", "python")
	eq(py_doc["leaks"]["summary"]["allocs"], 0, "Python objects recorded with --no-pymem")


# ------------------------------------------------ §10.4: hybrid stacks

@per_version
def python_stack_equals_traceback(py):
	"""The Python part of the stack of bytearray(600) at the end of
	deep(18) equals traceback.extract_stack() taken on that line."""
	r = Run(py, [py_fixture("deep.py")])
	want = json.loads(text(r.proc.stdout))
	doc = report(python_profile(r), "leaks", "--kind", "python", "--limit", "100000")
	line = py_line("deep.py", "alloc")
	# One stack for every object the line made (the interpreter's frames
	# below it left out): the bytearray, its 601-byte buffer, the tuple...
	recs = [s for s in doc["leaks"]["records"] if s["frames"]
		and is_py(s["frames"][0]) and s["frames"][0]["line"] == line
		and os.path.basename(s["frames"][0]["file"]) == "deep.py"]
	eq(len(recs), 1, "records of line %d" % line)
	check(recs[0]["bytes"] >= 601 + 56, "line %d's bytes: %d" % (line, recs[0]["bytes"]))
	frames = recs[0]["frames"]
	check(all(is_py(f) for f in frames),
	      "interpreter frames shown by default: %s" % [f["function"] for f in frames if not is_py(f)])
	got = [(f["function"].split(".")[-1], f["file"], f["line"]) for f in reversed(frames)]
	eq(got, [tuple(x) for x in want], "Python frames, outermost first")
	eq(frames[-2]["function"], "Holder.run", "the method's qualified name")


@per_version
def python_fast_stacks_exact(py):
	"""Python objects' stacks come from a per-thread cache of the previous
	object's frames (python/stackfast.c): every one is checked against
	libunwind's capture decorated with a full walk (MEMLINE_VERIFY_UNWIND),
	on reuse.py's traps for a stale cache (paths that alternate, a
	generator resumed from two callers, two functions taking turns in one
	frame slot, code objects made and dropped, recursion of changing
	depth past the cache's limit, native parts short and long in turns,
	four threads), and each path has exactly its objects in the leaks
	view; by default (the interpreter's frames below the line left out)
	and with run --native (kept)."""
	for opts in ([], ["--native"]):
		fast_stacks_exact(py, opts)


@per_version
def python_fast_stacks_sampled(py):
	"""Under --sample with pymalloc, OBJ's free is pymalloc's own and code
	objects' deaths are seen at the code type's tp_dealloc
	(python/hooks.c): at --sample 1 (every object a sample point) every
	stack of reuse.py, whose code objects are made and dropped, is checked
	against libunwind's capture decorated with a full walk."""
	env = dict(os.environ, MEMLINE_VERIFY_UNWIND="1")
	r = Run(py, [py_fixture("reuse.py")], env=env, opts=["--sample", "1"])
	n, bad = verified(r, "reuse.py")
	check(n > 20000, "only %d stacks checked" % n)
	eq(bad, 0, "stacks that differ from libunwind's (of %d)" % n)


def fast_stacks_exact(py, opts):
	env = dict(os.environ, MEMLINE_VERIFY_UNWIND="1")
	r = Run(py, [py_fixture("reuse.py")], env=env, opts=opts)
	n, bad = verified(r, "reuse.py")
	check(n > 20000, "%s: only %d stacks checked" % (opts, n))
	eq(bad, 0, "%s: stacks that differ from libunwind's (of %d)" % (opts, n))
	doc = report(python_profile(r), "leaks", "--kind", "python", "--limit", "100000")
	got = {}
	for rec in doc["leaks"]["records"]:
		if not rec["blocks"] or rec["bytes"] % rec["blocks"]:
			continue
		size = rec["bytes"] // rec["blocks"] - 33	# a bytes object: one block
		if not 1001 <= size <= 1010:
			continue
		key, thread = [], False
		for f in rec["frames"]:
			base = os.path.basename(f["file"] or "")
			if is_py(f) and (base == "reuse.py" or base.startswith("made")):
				key.append((f["function"].split(".")[-1], base, f["line"]))
			thread = thread or base == "threading.py"
		if not key or key[0][0] == "<module>":
			continue	# imports' objects (every case is in a function)
		key = tuple(key) + (("thread",) if thread else ())
		got[(size, key)] = got.get((size, key), 0) + rec["blocks"]
	L = lambda m: ("reuse.py", py_line("reuse.py", m))
	fr = lambda fn, m: (fn,) + L(m)
	mod = lambda m: fr("<module>", m)
	rounds = 200
	want = {}
	for via, call in (("via_a", "call_a"), ("via_b", "call_b")):
		path = (fr("leaf", "leaf"), fr(via, via), fr("alternate", call))
		want[(1001, path + (mod("m_alt"),))] = rounds
		want[(1010, path + ("thread",))] = 4 * rounds
	for res, call in (("resume_1", "call_1"), ("resume_2", "call_2")):
		want[(1003, (fr("gen", "gen"), fr(res, res), fr("resumed", call), mod("m_res")))] = rounds
	for fn in ("first", "second"):
		want[(1004, (fr(fn, fn), fr("turns", "turns"), mod("m_turns")))] = rounds
	for k in range(3):
		want[(1005, (("made", "made%d.py" % k, 2), fr("made", "made"), mod("m_made")))] = rounds
	want[(1008, (fr("native", "shallow"), mod("m_native")))] = rounds
	for depth in range(0, 150, 7):
		want[(1006, (fr("rec", "rec"),) + (fr("rec", "rec_call"),) * depth +
		      (fr("recursion", "recursion"), mod("m_rec")))] = rounds // 10
	eq(sorted(got.items()), sorted(want.items()), "%s: objects per Python path" % opts)


@per_version
def python_threads_own_lines(py):
	"""Two threads, each its own line and its own stack: 1,000,033 and
	2,000,033 bytes."""
	r = Run(py, [py_fixture("threads.py")])
	doc = report(python_profile(r), "leaks", "--kind", "python", "--limit", "100000")
	got = innermost_py_lines(doc, "leaks", "threads.py")
	eq(got.get(py_line("threads.py", "one")), [1000033, 1], "thread one's line")
	eq(got.get(py_line("threads.py", "two")), [2000033, 1], "thread two's line")
	for name, size in (("one", 1000033), ("two", 2000033)):
		recs = [s for s in doc["leaks"]["records"] if s["bytes"] == size]
		eq(len(recs), 1, "records of %d bytes" % size)
		funcs = [f["function"] for f in recs[0]["frames"] if is_py(f)]
		eq(funcs[0], name, "innermost function of thread %s" % name)
		check("<module>" not in funcs, "thread %s's stack shows the main thread: %s" % (name, funcs))


# ------------------------------------------------ buffers

@per_version
def python_buffers_exact(py):
	"""bytes objects, numpy arrays and torch CPU tensors at their exact
	requested size on their line (numpy and torch where importable)."""
	r = Run(py, [py_fixture("buffers.py")])
	doc = report(python_profile(r), "leaks", "--kind", "cpu", "--limit", "100000")

	def sizes_on(marker):
		"""Block sizes of the records with the marker's line on their stack
		(numpy's own Python and C frames come inside it)."""
		line, out = py_line("buffers.py", marker), []
		for s in doc["leaks"]["records"]:
			if any(is_py(f) and os.path.basename(f["file"]) == "buffers.py" and f["line"] == line
			       for f in s["frames"]):
				out += [s["bytes"] // s["blocks"]] * s["blocks"]
		return out
	eq(sizes_on("bytes"), [3000033], "bytes(3000000)")
	if imports(py, "numpy"):
		check(8000000 in sizes_on("numpy"), "np.ones(10**6): %s" % sizes_on("numpy"))
		check(600000 in sizes_on("numpy2"), "np.empty((500, 300), float32): %s" % sizes_on("numpy2"))


@test
def python_torch_tensors_exact():
	"""torch CPU tensors (Debian's python3-torch): exact sizes on their line,
	under c10::alloc_cpu and the aten frames.  Slow (importing torch makes
	a profile of some 700,000 stacks: about a minute to report): runs with
	MEMLINE_E2E_SLOW=1."""
	py = interpreter("/usr/bin/python3.11", "3.11")
	if not os.environ.get("MEMLINE_E2E_SLOW"):
		raise Skip("slow: set MEMLINE_E2E_SLOW=1")
	if not imports(py, "torch"):
		raise Skip("torch does not import here (python3-torch)")
	r = Run(py, [py_fixture("torch_tensors.py")], opts=["--no-pymem", "--depth", "16"])
	p = run([rcli(), "report", python_profile(r), "leaks", "--kind", "heap", "--json",
		 "--limit", "1000000"], timeout=600)
	eq(p.returncode, 0, "report's exit status")
	doc = json.loads(text(p.stdout))
	for marker, size in (("empty", 4000000), ("zeros", 524288)):
		line = py_line("torch_tensors.py", marker)
		recs = [s for s in doc["leaks"]["records"] if s["bytes"] == size and
			[f for f in s["frames"] if is_py(f)][:1] and
			[f for f in s["frames"] if is_py(f)][0]["line"] == line]
		eq(len(recs), 1, "records of %d bytes on line %d" % (size, line))
		funcs = [f["function"] for f in recs[0]["frames"]]
		check(any(f.startswith("c10::alloc_cpu") for f in funcs), "no c10::alloc_cpu in %s" % funcs)


# ------------------------------------------------ §10.8: time per line

@per_version
def python_lines_time_share(py):
	"""--lines: the % Time of two Python lines of main() (3:1 work) within 3
	points of each line's share of the thread CPU time the fixture measured
	around it in the same run."""
	r = Run(py, [py_fixture("timing.py"), "1500000"], opts=["--lines"])
	truth = json.loads(text(r.proc.stdout))
	doc = report(python_profile(r), "lines", "--function", "main")
	fns = [f for f in doc["lines"]["functions"] if f["name"] == "main"]
	eq(len(fns), 1, "functions named main")
	fn = fns[0]
	rows = {x["line"]: x for x in fn["lines"]}
	check(fn["samples"] > 100, "main has %d samples" % fn["samples"])
	total = truth["a"] + truth["b"]
	for marker, key in (("phase_a", "a"), ("phase_b", "b")):
		line = py_line("timing.py", marker)
		got = 100.0 * rows[line]["samples"] / fn["samples"]
		want = 100.0 * truth[key] / total
		check(abs(got - want) <= 3.0, "line %d (%s): %.1f%% of main's samples, %.1f%% of its "
		      "CPU time" % (line, marker, got, want))


# ------------------------------------------------ launchers

def expect_bytes_on(prof, src, line, size):
	doc = report(prof, "leaks", "--kind", "python", "--limit", "100000")
	got = innermost_py_lines(doc, "leaks", src)
	check(got.get(line, [0])[0] >= size, "%s line %d: %s, want %d bytes" % (src, line, got.get(line), size))


@test
def python_boot_dir_missing():
	"""A runtime whose boot scripts are missing (a libmemline.so copied
	without python/ beside it) says so in one line: a script written for
	kernprof then stops at NameError: 'profile' for a reason the user sees;
	a program that does not use them runs as it does alone."""
	py = interpreter("/usr/bin/python3", "3.11")
	d = tempfile.mkdtemp(dir=OPTS.tmp)
	gone = os.path.join(d, "no-such-dir")
	env = dict(os.environ, MEMLINE_PY_BOOT_DIR=gone)
	p = run([memline(), "run", "-o", d, "--", py, "-c", "print(6 * 7)"], env=env)
	eq((p.returncode, text(p.stdout)), (0, "42\n"), "the program's exit status and output")
	eq([l for l in text(p.stderr).splitlines() if "boot scripts" in l],
	   ["memline: no boot scripts in %s: @profile and the memline module are not defined "
	    "(keep python/ beside libmemline.so)" % gone], "one line says why")
	p = run([memline(), "run", "-o", d, "--", py, "-c", "print(6 * 7)"])
	check("boot scripts" not in text(p.stderr), "the build's own boot scripts are found")


@test
def python_launch_module():
	"""python3 -m package."""
	py = interpreter("/usr/bin/python3", "3.11")
	d = tempfile.mkdtemp(dir=OPTS.tmp)
	p = run([memline(), "run", "-o", d, "--", py, "-m", "mlpkg"], cwd=PYFIX)
	eq(p.returncode, 0, "exit status (stderr %r)" % text(p.stderr)[-300:])
	profs = glob.glob(os.path.join(run_dir_of(d, p.stderr), "memline.python3*.mlp"))
	eq(len(profs), 1, "python profiles")
	expect_bytes_on(profs[0], "__main__.py", py_line("mlpkg/__main__.py", "module"), 2345678 + 33)
	doc = report(profs[0], "leaks", "--kind", "python", "--limit", "100000")
	# (a stack of runpy's own work keeps them: nothing else explains it)
	runpy = [r["frames"] for r in doc["leaks"]["records"]
		 if any(is_py(fr) and "runpy" in (fr["file"] or "") for fr in r["frames"]) and
		 any(is_py(fr) and (fr["file"] or "").endswith("__main__.py") for fr in r["frames"])]
	eq(runpy[:1], [], "runpy's frames (python -m's launcher) around the program's")
	doc = report(profs[0], "leaks", "--kind", "python", "--limit", "100000", "--native")
	check(any(is_py(fr) and "runpy" in (fr["file"] or "") for r in doc["leaks"]["records"]
		  for fr in r["frames"]), "--native keeps runpy's frames")


@test
def python_launch_shebang_and_env():
	"""A script started by its #! line (through env), and `env python3`."""
	py = interpreter("/usr/bin/python3", "3.11")
	env = dict(os.environ, PATH=os.path.dirname(py) + ":" + os.environ.get("PATH", ""))
	for argv in ([py_fixture("shebang.py")], ["env", "python3", py_fixture("shebang.py")]):
		r = Run(argv[0] if argv[0].startswith("/") else shutil.which(argv[0]), argv[1:], env=env)
		profs = [f for f in r.files() if re.match(r"memline\.python3", os.path.basename(f))]
		eq(len(profs), 1, "python profiles of %s" % argv)
		expect_bytes_on(profs[0], "shebang.py", py_line("shebang.py", "shebang"), 1234567 + 33)


@test
def python_launch_relative_path():
	"""`python3 ./sub/./script.py`: frames name the script by its clean
	absolute path (Python joins the path as given to the working directory)."""
	py = interpreter("/usr/bin/python3", "3.11")
	d = tempfile.mkdtemp(dir=OPTS.tmp)
	p = run([memline(), "run", "-o", d, "--", py, "./py/./shebang.py"],
		cwd=os.path.dirname(PYFIX))
	eq(p.returncode, 0, "exit status (stderr %r)" % text(p.stderr)[-300:])
	profs = glob.glob(os.path.join(run_dir_of(d, p.stderr), "memline.python3*.mlp"))
	eq(len(profs), 1, "python profiles")
	doc = report(profs[0], "leaks", "--kind", "python", "--limit", "100000")
	files = {fr["file"] for r in doc["leaks"]["records"] for fr in r["frames"]
		 if is_py(fr) and (fr["file"] or "").endswith("shebang.py")}
	eq(files, {py_fixture("shebang.py")}, "the script's file in Python frames")
	expect_bytes_on(profs[0], "shebang.py", py_line("shebang.py", "shebang"), 1234567 + 33)


@test
def python_launch_pyenv_shim():
	"""pyenv's shim: a bash script that execs pyenv, which execs python."""
	shim = "/root/.pyenv/shims/python3"
	if not os.path.exists(shim):
		raise Skip("no pyenv shim here")
	r = Run(shim, [py_fixture("shebang.py")])
	profs = [f for f in r.files() if re.match(r"memline\.python3\.\d+\.", os.path.basename(f))]
	check(len(profs) >= 1, "no profile of the python the shim ran: %s" % r.files())
	expect_bytes_on(profs[-1], "shebang.py", py_line("shebang.py", "shebang"), 1234567 + 33)


# ------------------------------------------------ the program's world

@per_version
def python_world_unchanged(py):
	"""sys.path, os.environ, __main__, sys.argv, sys.modules, the exit
	status and the output are what they are without memline."""
	plain = run([py, py_fixture("world.py"), "arg"])
	r = Run(py, [py_fixture("world.py"), "arg"], expect_rc=3)
	eq(plain.returncode, 3, "exit status without memline")
	want, got = json.loads(text(plain.stdout)), json.loads(text(r.proc.stdout))
	for key in sorted(want):
		eq(got[key], want[key], key)
	said = [l for l in text(r.proc.stderr).splitlines() if not l.startswith("memline: wrote ")]
	eq(said, [], "memline's lines on the program's stderr besides the summary")


# ------------------------------------------------ audit hooks leave

AUDIT_QUIET = "copied False with the program's hook True called True\n"


@per_version
def python_audit_hooks_leave(py):
	"""Once booted, memline's audit hooks leave the interpreter's list, so
	that CPython builds no audit event's arguments again (audit_quiet.py
	sees marshal.loads' copy of its buffer); a hook of the program's own is
	still called.  The PyTorch room's hook stays until torch is imported
	(MEMLINE_TORCH_PYTHON=0: none), then leaves: after `import torch` in
	the program, or at once for a torch imported before the run event (a
	sitecustomize).  torch is the stand-in, tests/fixtures/py/faketorch."""
	fake = os.path.join(PYFIX, "faketorch")
	site = tempfile.mkdtemp(prefix="ml-site-", dir=OPTS.tmp)
	with open(os.path.join(site, "sitecustomize.py"), "w") as f:
		f.write("import torch\n")
	plain = run([py, py_fixture("audit_quiet.py"), "torch"], env=dict(os.environ, PYTHONPATH=fake))
	eq(text(plain.stdout), AUDIT_QUIET, "without memline")
	cases = (("no PyTorch room", [], dict(os.environ, MEMLINE_TORCH_PYTHON="0")),
		 ("import torch", ["torch"], dict(os.environ, PYTHONPATH=fake)),
		 ("torch in sitecustomize", [], dict(os.environ, PYTHONPATH=site + os.pathsep + fake)))
	for what, args, env in cases:
		r = Run(py, [py_fixture("audit_quiet.py")] + args, env=env)
		eq(text(r.proc.stdout), AUDIT_QUIET, "under memline, " + what)


# ------------------------------------------------ children

@per_version
def python_children_fork_and_spawn(py):
	"""multiprocessing children (fork and spawn) have their Python frames."""
	# Not Run: multiprocessing's resource tracker may outlive the program,
	# so memline run can name its profile only once it is written.
	d = tempfile.mkdtemp(dir=OPTS.tmp)
	p = run([memline(), "run", "-o", d, "--", py, py_fixture("children.py")], cwd=d, timeout=120)
	eq(p.returncode, 0, "exit status (stderr %r)" % text(p.stderr)[-300:])
	line = py_line("children.py", "child")
	sizes = set()
	for prof in sorted(glob.glob(os.path.join(d, "memline.*", "memline.*.mlp"))):
		doc = report(prof, "leaks", "--kind", "python", "--limit", "100000")
		got = innermost_py_lines(doc, "leaks", "children.py")
		if line in got:
			sizes.add(got[line][0])
	eq(sorted(sizes), [3000033, 4000033], "children's bytes on line %d" % line)


# ------------------------------------------------ an interpreter memline does not read

@test
def python_unsupported_interpreter():
	"""CPython 3.9: one warning line, native frames, the program unchanged."""
	found = sorted(glob.glob(os.path.join(PYENV, "3.9.*", "bin", "python3.9")))
	if not found:
		raise Skip("no CPython 3.9 here (pyenv)")
	r = Run(found[-1], [py_fixture("world.py")], expect_rc=3)
	warns = [l for l in text(r.proc.stderr).splitlines() if "Python 3.9" in l]
	eq(len(warns), 1, "warning lines about Python 3.9")
	prof = python_profile(r)
	doc = report(prof, "leaks")
	check(all(not is_py(f) for s in doc["leaks"]["records"] for f in s["frames"]),
	      "Python frames from an interpreter memline does not read")


# ------------------------------------------------ boot scripts (issue 10's hook)

@test
def python_boot_scripts():
	"""*.py of MEMLINE_PY_BOOT_DIR run once per Python process, before
	__main__, in a namespace of their own; a failing one is one warning."""
	py = interpreter("/usr/bin/python3", "3.11")
	d = tempfile.mkdtemp(dir=OPTS.tmp)
	mark = os.path.join(d, "marks")
	with open(os.path.join(d, "10_mark.py"), "w") as f:
		f.write("import sys\nopen(%r, 'a').write('%%s %%s\\n' %% (__name__, "
			"hasattr(sys.modules['__main__'], '__file__')))\n" % mark)
	with open(os.path.join(d, "20_fail.py"), "w") as f:
		f.write("raise ValueError('boom')\n")
	env = dict(os.environ, MEMLINE_PY_BOOT_DIR=d)
	r = Run(py, [py_fixture("world.py")], env=env, expect_rc=3)
	with open(mark) as f:
		eq(f.read(), "__memline_boot__ False\n", "the boot script's run")
	warns = [l for l in text(r.proc.stderr).splitlines() if "boom" in l]
	eq(len(warns), 1, "warning lines about the failing boot script")
	plain = json.loads(text(run([py, py_fixture("world.py")]).stdout))
	eq(json.loads(text(r.proc.stdout))["modules"], plain["modules"], "sys.modules after boot")


# ------------------------------------------------ GIL waits (wall clock)

@per_version
def python_gil_wait(py):
	"""--clock wall: a thread that waits for the GIL (the main thread holds
	it in C) has its line's samples counted as GIL wait: at most the part
	of its wall time it did not run, at least that less the time it waited
	for a CPU (its own clocks and the kernel's schedstat, measured in the
	run: on a busy machine a thread holding the GIL may wait for a CPU).
	Margins: taking the GIL over after the wait costs CPU inside the wait's
	own frames (a few points more); sampling (a few points either way)."""
	r = Run(py, [py_fixture("gil.py")], opts=["--clock", "wall"])
	truth = json.loads(text(r.proc.stdout))["contender"]
	waited = 100.0 * (1 - truth["cpu"] / truth["wall"])
	if truth.get("cpu_wait") is not None:
		least = 100.0 * (1 - (truth["cpu"] + truth["cpu_wait"]) / truth["wall"]) - 10
	else:
		least = waited - 25
	doc = report(python_profile(r), "lines", "--function", "contender")
	fn = [f for f in doc["lines"]["functions"] if f["name"] == "contender"][0]
	check(fn["samples"] > 200, "contender has %d samples" % fn["samples"])
	got = 100.0 * fn["gil_wait_samples"] / fn["samples"]
	check(least <= got <= waited + 10, "GIL wait %.1f%% of the contender's samples; it did "
	      "not run %.1f%% of its wall time, %.1f%% waiting for a CPU" %
	      (got, waited, 100.0 * (truth.get("cpu_wait") or 0) / truth["wall"]))
	# The waits happen in the loop (where the eval loop lets the GIL go)
	# and in reading schedstat (file I/O lets it go): those lines hold
	# them all, the loop nearly all.
	line = py_line("gil.py", "contend")
	loop = sum(x["gil_wait_samples"] for x in fn["lines"] if x["line"] in (line - 1, line))
	io = sum(x["gil_wait_samples"] for x in fn["lines"]
		 if x["line"] in (py_line("gil.py", "start"), py_line("gil.py", "end")))
	eq(loop + io, fn["gil_wait_samples"], "GIL wait samples on the loop's and schedstat's lines")
	check(loop >= 0.8 * fn["gil_wait_samples"], "GIL wait samples on the loop's lines: %d of %d"
	      % (loop, fn["gil_wait_samples"]))
	ops = report(python_profile(r), "ops", "--sort", "self_cpu_time_total")
	names = [f["name"] for f in ops["ops"]["functions"][:3]]
	check("[waiting for the GIL]" in names, "top rows by self time: %s" % names)


# ------------------------------------------------ every view in Python terms

def view_doc(prof, view, *extra):
	return report(prof, view, *extra)


def records_on_line(doc, src, marker):
	"""The leaks records whose innermost Python frame is src's marked line."""
	line, out = py_line(src, marker), []
	for s in doc["leaks"]["records"]:
		py = [f for f in s["frames"] if is_py(f)][:1]
		if py and py[0]["line"] == line and os.path.basename(py[0]["file"] or "") == src:
			out.append(s)
	return out


@per_version
def python_run_native(py):
	"""memline run --native keeps the interpreter's own frames below the
	line that made each Python object: report --native shows them (the C
	path of each object apart); the default view shows the line's records
	with Python frames only, and the same bytes."""
	r = Run(py, [py_fixture("views.py")], opts=["--native"])
	prof = python_profile(r)
	native = view_doc(prof, "leaks", "--limit", "100000", "--native")
	recs = records_on_line(native, "views.py", "forward")
	check(len(recs) >= 2, "the bytearrays' objects and buffers apart: %d records" % len(recs))
	check(all(not is_py(s["frames"][0]) for s in recs),
	      "--native: a record without the interpreter's frames")
	eq(sorted(s["bytes"] for s in recs if s["bytes"] in (3 * 56, 3 * 200001)),
	   [3 * 56, 3 * 200001], "the objects' and the buffers' records")
	total = sum(s["bytes"] for s in recs)
	p = run([rcli(), "report", prof, "leaks", "--native"])
	eq((p.returncode, text(p.stderr)), (0, ""), "report --native of a run --native profile")
	leaks = view_doc(prof, "leaks", "--limit", "100000")
	recs = records_on_line(leaks, "views.py", "forward")
	eq(sum(s["bytes"] for s in recs), total, "the forward line's bytes, default view")
	check(all(all(is_py(f) for f in s["frames"]) for s in recs), "native frames shown by default")


@per_version
def python_views(py):
	"""leaks, peak, ops and lines of a Python program speak Python: Python
	functions are ops rows ranked by self memory under their qualified names
	(3.10's rebuilt from the source), lines takes a plain or full name,
	interpreter frames are left out unless --native, the default kind is cpu."""
	r = Run(py, [py_fixture("views.py")])
	prof = python_profile(r)
	# The exact blocks: bytearray(200000)'s buffers (200,001 bytes) and
	# objects (56, no free list), [0] * 200000's items (1,600,000); the lists'
	# own objects and their temporaries may come from a free list: a few
	# hundred bytes that depend on the interpreter's history.
	forward = 3 * (200001 + 56)
	inner = 3 * 200000 * 8
	ops = view_doc(prof, "ops", "--limit", "100000")
	eq(ops["kind"], "cpu", "the default kind of a Python profile")
	rows = {x["name"]: x for x in ops["ops"]["functions"]}
	for name in ("Model.forward", "Model.helper", "Model.helper.<locals>.inner", "step",
		     "deco.<locals>.wrapper", "main", "<module>"):
		check(name in rows, "no ops row %r" % name)
	got = rows["Model.helper.<locals>.inner"]["self"]["alloc_bytes"]
	check(inner <= got < inner + 1024, "inner's self bytes: %d" % got)
	check(rows["main"]["total"]["alloc_bytes"] >= forward + inner, "main's total bytes")
	order = [x["name"] for x in ops["ops"]["functions"]]
	check(order.index("Model.helper.<locals>.inner") < order.index("Model.forward") < order.index("main"),
	      "ranked by self memory: %s" % order[:12])
	for name in ("forward", "Model.forward"):
		lines = view_doc(prof, "lines", "--function", name)
		fns = lines["lines"]["functions"]
		eq([f["name"] for f in fns], ["Model.forward"], "functions for --function %s" % name)
		row = {x["line"]: x for x in fns[0]["lines"]}[py_line("views.py", "forward")]
		check(forward <= row["self_alloc_bytes"] < forward + 1024 and row["allocs"] >= 6,
		      "the forward line: %d bytes in %d blocks" % (row["self_alloc_bytes"], row["allocs"]))
		check("bytearray(n)" in (row["text"] or ""), "line text %r" % row["text"])
	p = run([rcli(), "report", prof, "lines", "--function", "no_such_function"])
	eq(p.returncode, 1, "lines --function of an unknown name: exit status")
	check(re.match(r"memline: no Python function 'no_such_function' ran in this profile",
		       text(p.stderr)) and text(p.stderr).count("\n") == 1,
	      "one line for an unknown Python function: %r" % text(p.stderr))
	step = view_doc(prof, "lines", "--function", "step")["lines"]["functions"][0]
	row = {x["line"]: x for x in step["lines"]}[py_line("views.py", "step")]
	# Self: nothing but 3.10's frame objects of the calls made from it.
	check(row["total_alloc_bytes"] >= forward + inner and row["self_alloc_bytes"] < 1024,
	      "the decorated function's line: %s" % row)
	# A line's Python objects share its stack (the interpreter's frames
	# below the line are not recorded): one record per line.
	leaks = view_doc(prof, "leaks", "--limit", "100000")
	recs = records_on_line(leaks, "views.py", "inner")
	eq(len(recs), 1, "records of the three lists")
	check(inner <= recs[0]["bytes"] < inner + 1024, "the lists' bytes: %d" % recs[0]["bytes"])
	check(all(is_py(f) for f in recs[0]["frames"]), "native frames shown by default")
	# The bytearrays' objects and buffers, and a free list's tuple or so.
	recs = records_on_line(leaks, "views.py", "forward")
	check(len(recs) == 1 and forward <= recs[0]["bytes"] < forward + 1024 and
	      recs[0]["blocks"] >= 6, "the forward line: %s" % [(s["bytes"], s["blocks"]) for s in recs])
	native = view_doc(prof, "leaks", "--limit", "100000", "--native")
	recs = records_on_line(native, "views.py", "inner")
	check(len(recs) == 1 and all(is_py(f) for f in recs[0]["frames"]),
	      "report --native of a run without run --native: %s" % recs[:1])
	p = run([rcli(), "report", prof, "leaks", "--native"])
	eq(p.returncode, 0, "report leaks --native: exit status")
	eq(text(p.stderr), "memline: note: %s: Python objects' stacks were recorded without the "
	   "interpreter's own frames below their lines (memline run --native records them)\n"
	   % prof, "report --native's note")
	peak = view_doc(prof, "peak", "--limit", "100000")
	check(any(l["line"] == py_line("views.py", "inner") and l["bytes"] >= inner
		  for l in peak["peak"]["lines"]), "the peak by line")


@test
def report_python_views_text():
	"""The views' text of a Python profile (also under ASan): function
	names, source lines, no interpreter frame by default."""
	py = interpreter("/usr/bin/python3.11", "3.11")
	r = Run(py, [py_fixture("views.py")])
	prof = python_profile(r)
	out = {}
	for view, extra in (("leaks", ["--limit", "3"]), ("peak", ["--limit", "3"]),
			    ("ops", ["--limit", "10"]), ("lines", ["--function", "forward"]),
			    ("leaks", ["--limit", "3", "--native"])):
		p = run([rcli(), "report", prof, view] + extra)
		eq(p.returncode, 0, "report %s %s: %s" % (view, extra, text(p.stderr)[-300:]))
		out[view + " ".join(extra)] = text(p.stdout)
	check("at Model.helper.<locals>.inner (views.py:%d)" % py_line("views.py", "inner")
	      in out["leaks--limit 3"], out["leaks--limit 3"][:600])
	check("_PyEval_EvalFrameDefault" not in out["leaks--limit 3"], "eval frames by default")
	check("keep[at[0]] = bytearray(n)" in out["lines--function forward"],
	      out["lines--function forward"][:600])
	check("Model.forward" in out["ops--limit 10"], out["ops--limit 10"][:800])


@test
def python_kind_peaks_and_timeline():
	"""heap and python share the runtime's one CPU peak: each kind's peak
	(peak's header and JSON) is its part of that moment, the sum of its
	records, and the parts add up to cpu's; the memory over time of a Python
	program is cpu (heap + Python objects) in timeline, trace, html and
	processes, and timeline refuses --kind heap/python in one line."""
	py = interpreter("/usr/bin/python3.11", "3.11")
	r = Run(py, [py_fixture("views.py")])
	prof = python_profile(r)
	peaks = {}
	for kind in ("heap", "python", "cpu"):
		pk = view_doc(prof, "peak", "--kind", kind, "--limit", "1000000")["peak"]
		eq(len(pk["stacks"]), pk["total_records"], "every %s record listed" % kind)
		eq(pk["peak_bytes"], sum(s["bytes"] for s in pk["stacks"]),
		   "%s's peak is the sum of its records at the peak" % kind)
		peaks[kind] = pk
		p = run([rcli(), "report", prof, "peak", "--kind", kind, "--limit", "1"])
		eq(p.returncode, 0, "peak --kind %s: %s" % (kind, text(p.stderr)))
		head = text(p.stdout).splitlines()[0]
		if kind == "cpu":
			want = r"peak cpu: \S+ \S+ \(%d bytes\) at " % pk["peak_bytes"]
		else:
			want = (r"%s at the CPU peak: \S+ \S+ \(%d bytes\) of \S+ \S+ "
				r"\(cpu: heap \+ Python objects\) at " % (kind, pk["peak_bytes"]))
		check(re.match(want, head), "peak --kind %s header: %r" % (kind, head))
	cpu = peaks["cpu"]["peak_bytes"]
	check(peaks["python"]["peak_bytes"] >= 3 * (200001 + 200000 * 8),
	      "the fixture's Python objects at the peak: %d" % peaks["python"]["peak_bytes"])
	check(peaks["heap"]["peak_bytes"] > 0, "heap's part of the peak")
	eq(peaks["heap"]["peak_bytes"] + peaks["python"]["peak_bytes"], cpu,
	   "heap's and python's parts add up to the CPU peak")
	for kind in ("heap", "python"):
		eq(peaks[kind]["cpu_peak_bytes"], cpu, "%s's cpu_peak_bytes" % kind)
		eq(peaks[kind]["peak_time_ns"], peaks["cpu"]["peak_time_ns"], "one moment")
	check("cpu_peak_bytes" not in peaks["cpu"], "cpu has no part of itself")

	tl = view_doc(prof, "timeline")["timeline"]
	names = [k["kind"] for k in tl["kinds"]]
	check("cpu" in names and "heap" not in names and "python" not in names,
	      "the series of a Python program: %s" % names)
	c = [k for k in tl["kinds"] if k["kind"] == "cpu"][0]
	eq(c["peak_bytes"], cpu, "the cpu curve's peak")
	eq(c["peak_time_ns"], peaks["cpu"]["peak_time_ns"], "the cpu curve's peak time")
	check(max(b for _, b in c["points"]) <= cpu, "no point above the peak")
	for kind in ("cpu", None):
		extra = ["--kind", kind] if kind else []
		p = run([rcli(), "report", prof, "timeline"] + extra)
		eq(p.returncode, 0, "timeline %s: %s" % (extra, text(p.stderr)))
		head = text(p.stdout).splitlines()[0]
		check(head.startswith("cpu: peak ") and "(heap + Python objects" in head,
		      "timeline %s label: %r" % (extra, head))
	only = view_doc(prof, "timeline", "--kind", "cpu")["timeline"]["kinds"]
	eq([k["kind"] for k in only], ["cpu"], "timeline --kind cpu: that curve alone")
	for kind in ("heap", "python"):
		p = run([rcli(), "report", prof, "timeline", "--kind", kind])
		check(p.returncode != 0, "timeline --kind %s must be refused" % kind)
		err = text(p.stderr).strip()
		eq(len(err.splitlines()), 1, "one line: %r" % err)
		check("one total" in err and "--kind cpu" in err, err)
		eq(text(p.stdout), "", "no curve drawn for --kind %s" % kind)
	arena = [k for k in tl["kinds"] if k["kind"] == "pyarena"]
	p = run([rcli(), "report", prof, "timeline", "--kind", "pyarena"])
	eq(p.returncode, 0, "timeline --kind pyarena: %s" % text(p.stderr))
	out = text(p.stdout)
	if arena:
		check(out.startswith("pyarena: peak "), out[:200])
	else:
		check(out.startswith("pyarena: no memory over time"), out[:200])
	check("cpu" not in out.splitlines()[0], "pyarena draws no cpu curve")

	p = run([rcli(), "report", prof, "processes"])
	check("CPU Peak" in text(p.stdout) and "Heap Peak" not in text(p.stdout),
	      text(p.stdout)[:400])
	p = run([rcli(), "report", prof, "processes", "--json"])
	h = json.loads(text(p.stdout))["processes"][0]["heap"]
	eq((h["kind"], h["peak_bytes"]), ("cpu", cpu), "processes' CPU totals")

	html = os.path.join(os.path.dirname(prof), "kinds.html")
	p = run([rcli(), "report", prof, "html", "-o", html])
	eq(p.returncode, 0, "html: %s" % text(p.stderr))
	page = open(html, encoding="utf-8").read()
	check('"timeline":[{"kind":"cpu","peak_bytes":%d,' % cpu in page, "html's cpu curve")
	check("kind === 'cpu' ? ' (heap + Python objects)'" in page, "html names the cpu curve")


# ------------------------------------------------ the offsets memline reads

@per_version
def python_layout_matches_headers(py):
	"""python/layout.c's offsets equal what the interpreter's own headers
	say (tests/python/layout_check.c, built against them and its libpython)."""
	info = run([py, "-c", "import sysconfig, sys; print(sysconfig.get_paths()['include']); "
		    "print(sysconfig.get_config_var('LIBDIR')); print('%d.%d' % sys.version_info[:2])"])
	inc, libdir, minor = text(info.stdout).split()
	if not os.path.exists(os.path.join(inc, "internal", "pycore_runtime.h")):
		raise Skip("no internal headers for %s (python3-dev)" % py)
	exe = os.path.join(OPTS.tmp, "layout_check_" + minor)
	cc = run(["cc", "-std=gnu11", "-I" + ROOT, "-I" + inc, "-I" + os.path.join(inc, "internal"),
		  "-o", exe, os.path.join(ROOT, "tests", "python", "layout_check.c"),
		  os.path.join(ROOT, "python", "layout.c"), "-L" + libdir, "-lpython" + minor,
		  "-Wl,-rpath," + libdir, "-lm"], timeout=120)
	eq(cc.returncode, 0, "building layout_check: %s" % text(cc.stderr)[-400:])
	p = run([exe])
	eq(text(p.stdout).strip().split(" (")[0], "layout: ok", "layout_check")


def sampled_rows(prof):
	"""{marker: row} of sampled.py's two lines (keep, churn) in the lines view."""
	out = {}
	for fn_name, marker in (("keep_many", "keep"), ("churn", "churn")):
		doc = report(prof, "lines", "--function", fn_name)
		fns = [f for f in doc["lines"]["functions"] if f["file"].endswith("sampled.py")]
		check(len(fns) == 1, "%s: want 1 function, got %d" % (fn_name, len(fns)))
		rows = {x["line"]: x for x in fns[0]["lines"]}
		out[marker] = rows[py_line("sampled.py", marker)]
	return out


@per_version
def python_sampled(py):
	"""memline run --sample with Python objects (issue 12 item 4): the
	estimates of a line's bytes (allocated, live at the end) are within 5%
	of an exact run's (at 8192 bytes one standard deviation of these
	amounts is 0.6-1.2%, so 5% is over 4 of them: the sample points move
	from run to run with the sizes of the environment's strings, the seed
	fixed or not);
	a line whose objects all died has (almost) none live (every free of a
	sampled object is seen: pymalloc hands them to the RAW domain,
	python/hooks.c);
	the program's own count of blocks moves as in the exact run; the same
	with PYTHONMALLOC=pymalloc_debug (the full wrappers)."""
	exact = Run(py, [py_fixture("sampled.py")])
	want = sampled_rows(python_profile(exact))
	# (The list type's free list keeps its last 80 list objects.)
	check(want["churn"]["leaked_bytes"] < 65536, "exact run: churn %r" % want["churn"])
	check(want["keep"]["leaked_bytes"] > 50 << 20, "exact run: kept %r" % want["keep"])
	for malloc in ("pymalloc", "pymalloc_debug"):
		env = dict(os.environ, MEMLINE_SAMPLE_SEED="5", PYTHONMALLOC=malloc)
		r = Run(py, [py_fixture("sampled.py")], opts=["--sample", "8192"], env=env)
		eq(text(r.proc.stdout), text(exact.proc.stdout), "%s: the program's output" % malloc)
		got = sampled_rows(python_profile(r))
		for marker, field in (("keep", "leaked_bytes"), ("keep", "total_alloc_bytes"),
				      ("churn", "total_alloc_bytes")):
			g, w = got[marker][field], want[marker][field]
			check(got[marker].get("estimated") is True, "%s: not estimated: %r"
			      % (malloc, got[marker]))
			check(abs(g - w) <= w * 0.05, "%s: %s %s estimated %d, exact %d (%.2f%%)"
			      % (malloc, marker, field, g, w, 100.0 * (g - w) / w))
		check(got["churn"]["leaked_bytes"] <= want["churn"]["total_alloc_bytes"] // 100,
		      "%s: the churn line's live bytes %d (of %d)" % (malloc, got["churn"]["leaked_bytes"],
								 want["churn"]["total_alloc_bytes"]))


@per_version
def python_sampled_exact_totals(py):
	"""memline run --sample counts every allocation exactly beside its
	estimates: the totals of a sampled run equal an exact run's (to the few
	that the environment moves), zero-byte requests to PyObject_Malloc and
	PyMem_Malloc included, which pymalloc passes on to the RAW domain
	(counted once, not also by the RAW wrapper); pymalloc's arenas, mapped
	while the lean wrappers' pymalloc runs, are recorded as in the exact run
	(each is larger than the rate: sampled for sure)."""
	exact = Run(py, [py_fixture("sampled_zero.py")])
	want = report(python_profile(exact), "leaks")["leaks"]["summary"]
	r = Run(py, [py_fixture("sampled_zero.py")], opts=["--sample", "8192"])
	eq(text(r.proc.stdout), text(exact.proc.stdout), "the program's output")
	got = report(python_profile(r), "leaks")["profile"]["sampled"]
	for mine, theirs in (("allocs", "allocs"), ("alloc_bytes", "alloc_bytes")):
		check(abs(got[mine] - want[theirs]) <= max(50, want[theirs] // 1000),
		      "exact %s under --sample %d, exact run %d" % (mine, got[mine], want[theirs]))
	arenas = lambda prof: sum(f["self"]["alloc_bytes"] for f in
				  report(prof, "ops", "--kind", "pyarena")["ops"]["functions"])
	a, w = arenas(python_profile(r)), arenas(python_profile(exact))
	check(w >= 16 << 20 and abs(a - w) <= (1 << 20) + w // 20,
	      "pymalloc's arenas: %d bytes under --sample, %d in the exact run" % (a, w))


@per_version
def python_debug_allocators(py):
	"""-X dev and PYTHONMALLOC=debug (debug allocators that check each block
	they free) with tracemalloc: the program runs to its end unchanged, and
	the Python objects are still seen."""
	for opts, env in ((["-X", "dev"], None), ([], dict(os.environ, PYTHONMALLOC="debug"))):
		plain = run([py] + opts + [py_fixture("devmode.py")], env=env)
		r = Run(py, opts + [py_fixture("devmode.py")], env=env)
		eq(text(r.proc.stdout), text(plain.stdout), "output with %s" % (opts or "PYTHONMALLOC=debug"))
		eq(text(plain.stdout), "ok True\n", "output without memline")
		doc = report(python_profile(r), "lines", "--function", "<module>", "--kind", "python")
		fn = [f for f in doc["lines"]["functions"] if f["file"].endswith("devmode.py")][0]
		row = {x["line"]: x for x in fn["lines"]}[py_line("devmode.py", "alloc")]
		check(row["total_alloc_bytes"] >= 10 * 1033,
		      "Python objects on the allocating line: %s" % row)


@test
def python_cuda_allocation_line():
	"""A CUDA allocation made from Python (ctypes, on the driver's test
	double) is on its Python line, with the Python caller's frames."""
	py = interpreter("/usr/bin/python3.11", "3.11")
	double = os.path.join(OPTS.build, "cuda")
	if not os.path.exists(os.path.join(double, "libcuda.so.1")):
		raise Skip("no CUDA driver test double (tests/cuda_double needs cuda.h)")
	env = dict(os.environ, LD_LIBRARY_PATH=double)
	r = Run(py, [py_fixture("cuda_ctypes.py")], env=env)
	doc = report(python_profile(r), "leaks", "--kind", "cuda_device")
	recs = [s for s in doc["leaks"]["records"] if s["bytes"] == 4444]
	eq(len(recs), 1, "records of the 4444-byte device allocation")
	pyf = [(f["function"], f["line"]) for f in recs[0]["frames"] if is_py(f)]
	eq(pyf[:2], [("allocate", py_line("cuda_ctypes.py", "cuda")), ("<module>", pyf[1][1])],
	   "the Python frames of the CUDA allocation")
