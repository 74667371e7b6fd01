"""tests/e2e/test_cuda.py - end-to-end tests of CUDA memory through the test
double of the driver (build/cuda/libcuda.so.1) and, when nvcc was there at
build time, the real CUDA runtime. Sources and L: markers are in
tests/cuda_double/."""

from harness import *


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
