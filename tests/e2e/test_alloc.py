"""tests/e2e/test_alloc.py - end-to-end tests of the allocation entry points
(malloc family, C++ new/delete, jemalloc API), exact bytes and counts
against valgrind, peaks, threads."""

from harness import *


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


def plain_stdout(name):
	p = subprocess.run([fixture(name)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
	eq(p.returncode, 0, "%s without memline: exit status" % name)
	return text(p.stdout)


@test
def cxx_new_handler():
	"""Where libstdc++'s new is malloc, memline's new calls malloc itself
	and leaves libstdc++ only its failure: the new-handler still runs once,
	std::bad_alloc still reaches the program, as without memline, and the
	thread's later allocations are recorded (the guard released on the
	exception's way out)."""
	r = Run("cxx_handler")
	eq(text(r.proc.stdout), plain_stdout("cxx_handler"), "stdout with and without memline")
	eq(text(r.proc.stdout), "handled 2 caught 3\n", "the handler ran once each time it was set, all threw")
	prof = r.file("cxx_handler")
	rows = lines_of(prof, "main")
	expect_line(rows, line_of("cxx_handler", "after_throw"), "new int[3] x 100",
		    self_bytes=1200, allocs=100, leaked_bytes=0)
	leaks = user_leaks(report(prof, "leaks"), "cxx_handler")
	eq([(b, n, f[0][2]) for b, n, f in leaks], [(8, 1, line_of("cxx_handler", "handler_leak"))],
	   "cxx_handler leaks")


@test
def sampled_failed_allocations():
	"""Under --sample an allocation that is no sample point is counted
	before the real call: when the call fails (malloc, calloc, realloc,
	the aligned family, new with its handler and bad_alloc), nothing is
	left counted, and the sampled run's exact totals equal an exact run's.
	The sizes of SIZE_MAX - k are below the countdown as it compares them."""
	for name in ("failed_alloc", "cxx_handler"):
		exact = Run(name)
		want = report(exact.file(name), "leaks")["leaks"]["summary"]
		r = Run(name, opts=["--sample", "8192"])
		eq(text(r.proc.stdout), text(exact.proc.stdout), name + " output under --sample")
		got = report(r.file(name), "leaks")["profile"]["sampled"]
		eq((got["allocs"], got["alloc_bytes"]), (want["allocs"], want["alloc_bytes"]),
		   name + ": exact totals (allocations, bytes) under --sample and in an exact run")


@test
def cxx_own_unsized_delete():
	"""A program that replaces operator delete(void *) only: libstdc++'s
	sized delete and delete[] call the program's, and with memline they
	still do (memline's deletes free directly only where every operator
	libstdc++'s would call is memline's); every new and delete counted."""
	r = Run("cxx_own_delete")
	eq(text(r.proc.stdout), plain_stdout("cxx_own_delete"), "stdout with and without memline")
	eq(text(r.proc.stdout), "deletes 11\n", "the program's delete ran for every delete")
	rows = lines_of(r.file("cxx_own_delete"), "main")
	expect_line(rows, line_of("cxx_own_delete", "own_new"), "new Obj x 10",
		    self_bytes=320, allocs=10, leaked_bytes=0)
	expect_line(rows, line_of("cxx_own_delete", "own_new_array"), "new int[7]",
		    self_bytes=28, allocs=1, leaked_bytes=0)


@test
def cxx_local_scope():
	"""A C program that dlopens a C++ library RTLD_LOCAL (python3 importing
	torch): libstdc++ is in that library's scope only, yet its operator
	new/delete calls reach memline's first.  memline finds the real ones
	there: a failed new[] throws std::bad_alloc (the program catches it,
	exits 0) instead of aborting, and every new and delete is counted."""
	r = Run("local_cxx", args=[fixture("liblocalcxx.so")])
	check("local_cxx: ok" in text(r.proc.stdout), "stdout: " + text(r.proc.stdout)[-300:])
	prof = r.file("local_cxx")
	rows = line_rows(report(prof, "lines", "--function", "localcxx_work"))
	expect_line(rows, line_of_file("localcxx.inc", "lcx_new"), "new int[6] x 1000",
		    self_bytes=24000, allocs=1000, leaked_bytes=0)
	leaks = [s for s in leak_stacks(report(prof, "leaks"))
		 if s[2] and s[2][0][1] == "localcxx.inc"]
	eq([(b, n, f[0][2]) for b, n, f in leaks],
	   [(4242, 1, line_of_file("localcxx.inc", "lcx_leak"))], "the library's leak")


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
def first_event_a_free():
	"""A thread whose first call into memline is a free (of blocks another
	thread allocated) while that thread, until then the only one recording
	(plain mode, no atomics), keeps allocating in the same arena: the new
	thread's state, and so the switch to atomics, comes before its free
	touches the live table.  Every block is counted and freed.  (The race
	this closes, a locked remove beside the owner's unlocked inserts in one
	shard, is rare: the test checks this path's counts; it cannot force the
	interleaving.)"""
	prof = Run("first_free").file("first_free")
	rows = lines_of(prof, "main")
	expect_line(rows, line_of("first_free", "given"), "given", allocs=20000,
		    self_bytes=20000 * 24, leaked_bytes=0)
	expect_line(rows, line_of("first_free", "churn"), "churn", allocs=200000,
		    self_bytes=200000 * 40, leaked_bytes=0)
	eq(user_leaks(report(prof, "leaks"), "first_free"), [], "first_free leaks")


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
	for label, want in (("helper (dup_static.c)", got[:1]), ("helper (dup_static_b.inc)", got[1:])):
		fns = report(prof, "lines", "--function", label)["lines"]["functions"]
		eq([(os.path.basename(f["file"]), f["first_line"],
		     [(r["line"], r["self_alloc_bytes"], r["allocs"], r["leaked_bytes"])
		      for r in f["lines"] if r["allocs"]]) for f in fns], want,
		   "lines --function %r (the ops table's label): that file's table" % label)
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


def used_of(p, what):
	m = re.search(r"^used (\d+) (\d+)$", text(p.stdout), re.M)
	check(m, "%s: no 'used' line in %r" % (what, text(p.stdout)))
	return int(m.group(1)), int(m.group(2))


@test
def hooks_stack_use():
	"""Issue 8 item 3: the entry points use well under 1 KiB of the program's
	stack beyond the allocator's own (the recording runs on memline's side
	stack), on the main thread and on a new thread whose first allocation
	happens on a coroutine's stack; coroutines on 4 and 8 KiB stacks with
	an unreadable page below run under memline, with the line sampler too."""
	plain = used_of(run([fixture("coro_stack")]), "alone")
	r = Run("coro_stack")
	ours = used_of(r.proc, "under memline")
	for where, a, b in zip(("main thread", "new thread"), plain, ours):
		check(b - a < 1024, "%s: %d bytes of the coroutine's stack alone, %d under memline "
		      "(%d more)" % (where, a, b, b - a))
	for size in (4096, 8192):
		r = Run("coro_stack", args=[str(size)])
		eq(text(r.proc.stdout), "ok\n", "coroutines on %d-byte stacks" % size)
	r = Run("coro_stack", args=["8192"], opts=["--lines", "--rate", "20000"])
	eq(text(r.proc.stdout), "ok\n", "coroutines on 8 KiB stacks, sampled at 20 kHz")


@test
def fast_stacks_match_libunwind():
	"""Every stack the walker's fast path records (its node cache, reused
	walks) is checked against a full libunwind walk from the same point
	(MEMLINE_VERIFY_UNWIND): a large program (Debian's python3 running a
	json/regex workload: ~110k allocations through the interpreter), 16
	threads allocating at once, and stack_shapes (call paths changed
	between allocations in every way the reuse must notice).  Python frames are off in python3
	(MEMLINE_PY_FRAMES=0): with them on, native stacks take the full walk
	and Python objects' stacks the Python room's own path, checked by
	python_fast_stacks_exact.  The json/regex run leaves the PyMem
	allocators alone (--no-pymem: its ~3.4 M Python objects would take
	libunwind over a minute under load); a smaller script checks the
	stacks of Python objects (the PyMem hooks' entry) too."""
	py = "/usr/bin/python3"
	check(os.path.exists(py), "no /usr/bin/python3")
	env = dict(os.environ, MEMLINE_VERIFY_UNWIND="1", MEMLINE_PY_FRAMES="0")
	script = os.path.join(ROOT, "bench", "programs", "py_json_regex.py")
	r = Run(py, args=[script, "1"], opts=["--no-pymem"], env=env)
	n, bad = verified(r, "python3")
	check(n > 50000, "python3: only %d stacks checked" % n)
	eq(bad, 0, "python3: stacks that differ from libunwind's (of %d)" % n)
	objs = os.path.join(ROOT, "tests", "fixtures", "py", "objects.py")
	r = Run(py, args=[objs], env=env)
	n, bad = verified(r, "python3 objects.py")
	check(n > 10000, "python3 objects.py: only %d stacks checked" % n)
	eq(bad, 0, "python3 objects.py: stacks that differ from libunwind's (of %d)" % n)
	r = Run("threads16", env=env)
	n, bad = verified(r, "threads16")
	check(n >= 16, "threads16: only %d stacks checked" % n)
	eq(bad, 0, "threads16: stacks that differ from libunwind's (of %d)" % n)
	# Call paths that change between allocations in every way the reuse
	# of the previous walk must notice (same shape, other return
	# addresses; other depths; rbp-based frames), optimized, without
	# frame pointers.
	r = Run("stack_shapes", env=env)
	eq(text(r.proc.stdout), "ok 1\n", "stack_shapes output")
	n, bad = verified(r, "stack_shapes")
	check(n > 100000, "stack_shapes: only %d stacks checked" % n)
	eq(bad, 0, "stack_shapes: stacks that differ from libunwind's (of %d)" % n)


@test
def sampled_estimates():
	"""memline run --sample BYTES (issue 12 item 4): a line that allocates
	100 MiB in 1 KiB blocks is estimated within 5% in each of 20 runs (fixed
	seeds 1-20, so the test is deterministic; at --sample 8192 one standard
	deviation is about 0.9%, 5% is 5.5 of them), the estimates average out
	near the truth, every view marks them and gives their uncertainty, and
	the exact totals of every allocation are kept."""
	want = 100 << 20
	line = line_of("sample_line", "hundred")
	ests, sds = [], []
	for seed in range(1, 21):
		env = dict(os.environ, MEMLINE_SAMPLE_SEED=str(seed))
		r = Run("sample_line", opts=["--sample", "8192"], env=env)
		prof = r.file("sample_line")
		doc = report(prof, "lines", "--function", "hundred_mib")
		rows = [x for fn in doc["lines"]["functions"] for x in fn["lines"] if x["line"] == line]
		check(rows, "no row for line %d" % line)
		row = rows[0]
		check(row.get("estimated") is True, "line row not marked estimated: %r" % row)
		est, sd = row["self_alloc_bytes"], row["self_alloc_bytes_stddev"]
		check(abs(est - want) <= want * 0.05, "seed %d: %d bytes estimated, %d true (%.2f%%)"
		      % (seed, est, want, 100.0 * (est - want) / want))
		check(0.004 * want < sd < 0.02 * want, "seed %d: stddev %d" % (seed, sd))
		ests.append(est)
		sds.append(sd)
	mean = sum(ests) / len(ests)
	check(abs(mean - want) <= want * 0.01, "mean of 20 estimates %.0f, true %d" % (mean, want))
	# The views say what they show: JSON fields, text markers.
	doc = report(prof, "leaks")
	s = doc["profile"]["sampled"]
	eq((s["rate_bytes"], s["allocs"] >= 102401), (8192, True), "sampled settings")
	check(s["alloc_bytes"] >= want + 5000000, "exact bytes %d" % s["alloc_bytes"])
	ops = report(prof, "ops")
	f = [x for x in ops["ops"]["functions"] if x["name"] == "hundred_mib"][0]
	check(f["self"]["estimated"] and f["self"]["alloc_bytes_stddev"] > 0, "ops JSON: %r" % f["self"])
	for view, extra in (("leaks", ()), ("peak", ()), ("ops", ()), ("lines", ("--function", "hundred_mib"))):
		p = run([rcli(), "report", prof, view] + list(extra))
		out = text(p.stdout)
		check(p.returncode == 0 and out.startswith("SAMPLED (memline run --sample 8192)"),
		      "%s text: %r" % (view, out[:200]))
		check("~" in out and "+-" in out, "%s text marks no estimate: %r" % (view, out[:600]))
	# The 5,000,000-byte block is larger than the rate: always sampled, exact.
	main = ops_rows(ops)["main"]
	eq(main["self_bytes"], 5000000, "main's block (always sampled)")


@test
def static_libstdcxx_new():
	"""A program with its own copy of operator new (-static-libstdc++): each
	allocation is charged to the line that called new, not to operator new."""
	src = fixture_source("cxx_new")
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	exe = os.path.join(d, "cxx_new_static")
	p = run(["c++", "-g", "-O0", "-fno-omit-frame-pointer", "-static-libstdc++", "-o", exe, src])
	check(p.returncode == 0, "c++: " + text(p.stderr))
	prof = Run(exe).file("cxx_new_static")
	rows = lines_of(prof, "main")
	# libstdc++'s aligned new rounds the size up to the alignment before it
	# calls aligned_alloc, which is what memline then sees (docs/comparison.md).
	rounded = {"new_aligned": 576, "new_array_aligned": 704, "new_aligned_nothrow": 832,
		   "new_array_aligned_nothrow": 896}
	for marker, size in CXX_NEW:
		expect_line(rows, line_of("cxx_new", marker), marker,
			      self_bytes=rounded.get(marker, size), allocs=1, leaked_bytes=0)
	leaks = user_leaks(report(prof, "leaks"), "cxx_new")
	eq([(b, n, f[0]) for b, n, f in leaks],
	   [(99, 1, ("main", "cxx_new.cc", line_of("cxx_new", "cxx_leak")))], "leaks")
	ops = ops_rows(report(prof, "ops"))
	check(not any(k.startswith("operator new") for k in ops),
	      "operator new has a row: %s" % sorted(k for k in ops if "operator" in k))
