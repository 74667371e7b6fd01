"""tests/e2e/test_torch.py - PyTorch: ops by ATen op and CUDA memory per
tensor.  Without PyTorch, through stand-ins of its libraries
(tests/cuda_double: fake_c10.cc, fake_caching.cc, fake_aten.cc, on the
driver double) and of its Python side (tests/fixtures/py/faketorch).  With
Debian's python3-torch (CPU), against torch.profiler(profile_memory=True)
run in the same process: docs/torch.md says what is compared and why."""

import sys

from harness import *
from test_cuda import cuda_env, cuda_fixture, cuda_line

PY = "/usr/bin/python3"
PYFIX = os.path.join(ROOT, "tests", "fixtures", "py")
MiB = 1 << 20

# The stand-in program's blocks (fake_caching.cc rounds to 512 bytes):
# empty(1000) 1024, zeros(4 MiB) 4 MiB, add(3000) a 1536-byte scratch freed
# inside the op and a 3072-byte output, pool_backward(600000) 600064,
# sum(100) 512; the add's output is freed outside any op.
BLOCKS = {"empty": 1024, "zeros": 4 << 20, "add": 1536 + 3072, "pool": 600064, "sum": 512}
LIVE_AT_END = 1024 + (4 << 20) + 600064 + 512
PEAK = LIVE_AT_END + 3072
SEGMENTS = 2 * MiB + 4 * MiB


def ops_by_name(doc):
	return {r["name"]: r for r in doc["ops"]["ops"]}


def torch_kinds(prof):
	doc = report(prof, "leaks")["leaks"]["cuda"]
	return {k["kind"]: k for k in doc["kinds"]}


def check_standin_ops(ops, names):
	"""The stand-in's ops, net as torch.profiler counts them."""
	empty, add, zeros, pool, s = (ops[names[k]] for k in ("empty", "add", "zeros", "pool", "sum"))
	eq((empty["self_cuda_memory_usage"], empty["cuda_memory_usage"]), (1024 + 3072 + (4 << 20),) * 2,
	   "aten::empty CUDA (its own output, add's and zeros')")
	eq((add["self_cuda_memory_usage"], add["cuda_memory_usage"]), (0, 3072),
	   "aten::add CUDA: its scratch allocated and freed inside it counts 0")
	eq(add["cuda_freed_self"]["alloc_bytes"], 1536, "aten::add freed its scratch")
	eq((zeros["self_cuda_memory_usage"], zeros["cuda_memory_usage"]), (0, 4 << 20), "aten::zeros")
	eq(pool["self_cuda_memory_usage"], 600064, "max_pool2d_with_indices_backward")
	eq(s["self_cuda_memory_usage"], 512, "sum")
	eq(empty["cuda_reserved_self"]["alloc_bytes"], SEGMENTS, "segments reserved under aten::empty")


def standin_run(variant):
	plain = run([cuda_fixture("drv_torch"), variant], env=cuda_env())
	eq(plain.returncode, 0, "drv_torch alone: %s" % text(plain.stderr))
	r = Run(cuda_fixture("drv_torch"), [variant], env=cuda_env())
	eq(text(r.proc.stdout), text(plain.stdout), "the program's output under memline "
	   "(every c10 call forwarded to the stand-in libc10)")
	eq(text(plain.stdout).splitlines()[0], "c10 reports 8 net %d cpu frees 2" % LIVE_AT_END,
	   "what the stand-in libc10 was told")
	return r.file("drv_torch")


def standin_blocks(variant):
	prof = standin_run(variant)
	kinds = torch_kinds(prof)
	t = kinds.get("torch_cuda")
	check(t, "no torch_cuda kind (kinds: %s)" % sorted(kinds))
	eq((t["in_use_bytes"], t["in_use_blocks"], t["allocs"], t["frees"], t["alloc_bytes"]),
	   (LIVE_AT_END, 4, 6, 2, sum(BLOCKS.values())), "torch_cuda summary (blocks)")
	d = kinds["cuda_device"]
	eq((d["allocs"], d["alloc_bytes"], d["in_use_bytes"]), (2, SEGMENTS, SEGMENTS),
	   "cuda_device: the caching allocator's segments, kept")
	check("torch_cuda_freed" not in kinds and "torch_cpu_freed" not in kinds,
	      "free events listed as memory")
	rows = {}
	for f in report(prof, "lines", "--function", "main")["lines"]["functions"]:
		rows.update({r["line"]: r for r in f["lines"]})
	L = lambda m: cuda_line("drv_torch", m)
	for m, key in (("t_empty", "empty"), ("t_zeros", "zeros"), ("t_add", "add"), ("t_pool", "pool"),
		       ("t_sum", "sum")):
		eq(row(rows, L(m), m)["cuda_total_alloc_bytes"], BLOCKS[key], "CUDA Alloc of line " + m)
	eq((rows[L("t_add")]["cuda_net_bytes"], rows[L("t_free")]["cuda_net_bytes"]), (3072, -3072),
	   "CUDA Net: the add line keeps its output, the free line gives it back")
	eq((rows[L("t_empty")]["cuda_reserved_bytes"], rows[L("t_zeros")]["cuda_reserved_bytes"]),
	   (2 * MiB, 4 * MiB), "CUDA Rsvd: the segments, on the lines that grew the cache")
	peaks = {p["kind"]: p["peak_bytes"] for p in report(prof, "peak")["peak"]["cuda_peaks"]}
	eq(peaks.get("torch_cuda"), PEAK, "torch_cuda peak (torch.cuda.max_memory_allocated)")
	doc = report(prof, "ops")["ops"]
	eq((doc["by"], doc["op_names_exact"], doc["cuda_torch_blocks"]), ("op", False, True),
	   "ops by op, names from C++ ids (no schemas in a C program)")
	ops = ops_by_name(report(prof, "ops"))
	check_standin_ops(ops, {"empty": "aten::empty_memory_format", "add": "aten::add_Tensor",
				"zeros": "aten::zeros", "pool": "aten::max_pool2d_with_indices_backward",
				"sum": "aten::sum_dim_IntList"})
	cpu_empty, cpu_add = ops["aten::empty_memory_format"], ops["aten::add_Tensor"]
	eq((cpu_empty["self_cpu_memory_usage"], cpu_add["self_cpu_memory_usage"],
	    cpu_add["cpu_memory_usage"]), (700 + 2000, 0, 2000),
	   "CPU tensor storage: add's 1000-byte scratch is freed inside it (c10::free_cpu)")
	p = run([rcli(), "report", prof, "ops"])
	out = text(p.stdout)
	check("aten::max_pool2d_with_indices_backward" in out and "Self CUDA Rsvd" in out and
	      "reserved (segments): 6.00 MiB" in out, "ops text: %s" % out[:600])


@test
def torch_standin_blocks_v2():
	standin_blocks("v2")


@test
def torch_standin_blocks_v1():
	standin_blocks("v1")


STANDIN_OPS = {"empty": "aten::empty", "add": "aten::add", "zeros": "aten::zeros",
	       "pool": "aten::max_pool2d_with_indices_backward", "sum": "aten::sum"}


def standin_python(variant, api):
	"""The stand-in's Python side: op names from torch._C's schemas (read at
	once from the dispatcher's lists of 2.x and 1.13, at exit and before a
	fork from an older 1.x's), record_function scopes as regions, per-block
	CUDA bytes."""
	cdir = build_path("cuda")
	script = os.path.join(PYFIX, "torch_standin.py")
	env = cuda_env()
	env["FAKE_TORCH_API"] = api
	plain = run([PY, script, cdir, variant, "fork"], env=env)
	eq(plain.returncode, 0, "torch_standin.py alone: %s" % text(plain.stderr)[-300:])
	r = Run(PY, [script, cdir, variant, "fork"], env=env)
	eq(text(r.proc.stdout), text(plain.stdout), "output under memline")
	eq(text(plain.stdout).strip(), "c10 reports 8 net %d cpu frees 1 step %d" % (LIVE_AT_END, LIVE_AT_END),
	   "what the stand-in saw")
	profs = r.files()
	eq(len(profs), 2, "profiles of the program and its fork child")
	docs = [report(p, "ops")["ops"] for p in profs]
	child = [d for d in docs if len(d["ops"]) == 1]
	check(len(child) == 1, "the child's ops: %s" % [[o["name"] for o in d["ops"]] for d in docs])
	eq([(o["name"], o["self_cuda_memory_usage"]) for o in child[0]["ops"]],
	   [("aten::max_pool2d_with_indices_backward", 1024)], "the fork child's op, named exactly")
	prof = [p for p, d in zip(profs, docs) if len(d["ops"]) > 1][0]
	doc = report(prof, "ops")["ops"]
	eq(doc["op_names_exact"], True, "names from the schemas")
	ops = ops_by_name(report(prof, "ops"))
	check_standin_ops(ops, STANDIN_OPS)
	check(not any(n.startswith(("aten::empty_memory_format", "aten::add_Tensor", "aten::sum_dim"))
		      for n in ops), "C++ ids left among the names: %s" % sorted(ops))
	regions = report(prof, "regions")["regions"]["children"]
	check("standin_step" in regions, "record_function scope not a region: %s" % sorted(regions))
	eq(regions["standin_step"]["count"], 2, "record_function scopes entered")
	# Python lines: each op's call site, and PyTorch's CUDA blocks on the
	# lines of the Python function that asked for them.
	PL = lambda m: fixture_line("torch_standin.py", "# L:" + m)
	for key, m in (("pool", "py_pool"), ("zeros", "py_zeros"), ("sum", "py_sum")):
		site = ops[STANDIN_OPS[key]]["called_from"][0]
		eq((os.path.basename(site["file"]), site["line"], site["function"]),
		   ("torch_standin.py", PL(m), "step"), STANDIN_OPS[key] + " called from")
	rows = {}
	for f in report(prof, "lines", "--function", "step")["lines"]["functions"]:
		rows.update({r["line"]: r for r in f["lines"]})
	for key, m in (("empty", "py_empty"), ("zeros", "py_zeros"), ("add", "py_add"), ("pool", "py_pool"),
		       ("sum", "py_sum")):
		eq(row(rows, PL(m), m)["cuda_total_alloc_bytes"], BLOCKS[key], "CUDA Alloc of Python line " + m)
	eq((rows[PL("py_add")]["cuda_net_bytes"], rows[PL("py_free")]["cuda_net_bytes"]), (3072, -3072),
	   "CUDA Net of Python lines: the add keeps its output, the free gives it back")
	eq(rows[PL("py_cpu_add")].get("cuda_total_alloc_bytes", 0), 0, "no CUDA on the CPU add's line")


@test
def torch_standin_python_v1():
	standin_python("v1", "1")


@test
def torch_standin_python_v1_13():
	standin_python("v1", "1.13")


@test
def torch_standin_python_v2():
	standin_python("v2", "2")


@test
def torch_standin_python_os_exit():
	"""A program that leaves with os._exit runs no atexit handler: with the
	dispatcher's lists (1.13, 2.x) its profile names ops exactly all the
	same, as they were read when torch._C loaded."""
	script = os.path.join(PYFIX, "torch_standin.py")
	for variant, api in (("v1", "1.13"), ("v2", "2")):
		env = cuda_env()
		env["FAKE_TORCH_API"] = api
		r = Run(PY, [script, build_path("cuda"), variant, "exit"], env=env)
		check(text(r.proc.stdout).startswith("c10 reports 8 "), "API %s: output %r" % (api, text(r.proc.stdout)))
		profs = r.files()
		eq(len(profs), 1, "API %s: profiles" % api)
		doc = report(profs[0], "ops")
		eq(doc["ops"]["op_names_exact"], True, "API %s: names from the schemas" % api)
		check_standin_ops(ops_by_name(doc), STANDIN_OPS)


# ------------------------------------------------------ Debian's PyTorch

def torch_python():
	p = run([PY, "-c", "import torch, sys; sys.exit(0 if torch.__version__ else 1)"], timeout=120)
	if p.returncode != 0:
		raise Skip("%s cannot import torch (install python3-torch)" % PY)
	return PY


def profiled_torch(script, *args):
	"""Runs a torch script under memline; the script writes torch.profiler's
	numbers to OUT.json (tests/fixtures/py/torch_rows.py: {key:
	[self_cpu_memory_usage, cpu_memory_usage, count, tree_self, ties]}).
	Returns (profile, torch's rows)."""
	py = torch_python()
	d = tempfile.mkdtemp(prefix="ml-torch-", dir=OPTS.tmp)
	out = os.path.join(d, "torch.json")
	r = Run(py, [os.path.join(PYFIX, script), out] + list(args))
	with open(out) as f:
		return r.files()[0], json.load(f)


def compare_with_torch(prof, theirs, what):
	"""Every ATen op torch.profiler gave 1 MB of self CPU memory or more
	(key_averages() or its event tree): the same name in memline's table,
	Self CPU Mem within 2% of key_averages()'s.  The one exception, checked
	precisely: key_averages() charges a memory record by its microsecond,
	so a record made in the microsecond where a nested op (aten::resolve_conj
	in aten::mm, aten::empty) starts or ends goes to either, differently
	from run to run (torch_rows.py).  Where key_averages() is off the event
	tree (nanoseconds: the op that ran when the record was made), memline
	must be within 2% of the tree, and the difference is reported with the
	bytes of such records (ties).  (It was required to be no more than them;
	once in three suites on 2026-11-27, key_averages() gave aten::conv2d
	2,768,896 bytes of self memory that its own tree gives none, with no
	record at a tie: a split of key_averages() that torch_rows.py does not
	model.  memline gave 0, as the tree.)  Every op it gave any self CPU
	memory: in memline's table too."""
	ops = ops_by_name(report(prof, "ops", "--by", "op"))
	big = {k: v for k, v in theirs.items()
	       if k.startswith("aten::") and max(abs(v[0]), abs(v[3])) >= 1000000}
	check(big, "%s: no op of 1 MB or more in torch.profiler's table" % what)
	for name, (self_mem, total_mem, calls, tree, ties) in sorted(big.items()):
		check(name in ops, "%s: %s (torch self %d) not in memline's table" % (what, name, self_mem))
		got = ops[name]["self_cpu_memory_usage"]
		check(abs(got - tree) <= 0.02 * abs(tree),
		      "%s: %s self CPU memory: memline %d, torch.profiler's event tree %d" % (what, name, got, tree))
		if abs(got - self_mem) <= 0.02 * abs(self_mem):
			continue
		sys.stderr.write("  %s: %s: torch.profiler's key_averages %d, its event tree %d (%d B at "
				 "microsecond ties%s), memline %d\n"
				 % (what, name, self_mem, tree, ties,
				    "" if abs(self_mem - tree) <= ties else ": more than them", got))
	for name, v in theirs.items():
		if name.startswith("aten::") and (v[0] or v[3]):
			check(name in ops, "%s: %s (torch self %d) not in memline's table" % (what, name, v[0]))
	return ops


@test
def torch_ops_formula():
	"""python-profiling.md 10.5: the formula's values exactly, and
	torch.profiler's within 2% (it moves the 800 B of arange between runs)."""
	prof, theirs = profiled_torch("torch_ops.py")
	ops = compare_with_torch(prof, theirs, "torch_ops.py")
	want = {"aten::empty": (4262224, 4262224), "aten::mm": (262144, 262144),
		"aten::add": (262144, 262144), "aten::resize_": (800, 800), "aten::zeros": (0, 262144),
		"aten::ones": (0, 80), "aten::arange": (0, 800)}
	for name, (s, t) in want.items():
		check(name in ops, "no %s row" % name)
		eq((ops[name]["self_cpu_memory_usage"], ops[name]["cpu_memory_usage"]), (s, t), name)
	eq(ops["aten::empty"]["self"]["allocs"], 3, "aten::empty tensor blocks (the 4th is empty)")
	out = text(run([rcli(), "report", prof, "ops", "--limit", "5"]).stdout)
	check(re.search(r"^ +aten::empty +4\.06 MiB +4\.06 MiB ", out, re.M) and
	      "Op names: from PyTorch's operator schemas" in out, "ops text: %s" % out[:800])


@test
def torch_ops_reference_model():
	"""The model of reference/pytorch_key_averages.md (forward, backward,
	record_function), with batch 64 so that several ops pass 1 MB."""
	prof, theirs = profiled_torch("torch_model.py", "64")
	ops = compare_with_torch(prof, theirs, "torch_model.py")
	for name in ("aten::max_pool2d_with_indices_backward", "aten::threshold_backward",
		     "aten::clamp_min", "aten::native_batch_norm_backward"):
		check(name in ops, "no %s row" % name)
		eq(ops[name]["self_cpu_memory_usage"], theirs[name][3], name + " self CPU memory (event tree)")
	regions = report(prof, "regions")["regions"]["children"]
	check("model_inference" in regions, "record_function scope not a region: %s" % sorted(regions))
	eq(regions["model_inference"]["count"], 1, "model_inference entered once")


def fixture_line(script, marker):
	"""The line number of the line of tests/fixtures/py/SCRIPT that holds marker."""
	with open(os.path.join(PYFIX, script)) as f:
		for n, line in enumerate(f, 1):
			if marker in line:
				return n
	raise AssertionError("no %r in %s" % (marker, script))


@test
def torch_ops_training_loop():
	"""An MNIST-style training loop written the usual way (conv, ReLU, max
	pool, dropout, linear, nll_loss, SGD with momentum; two steps): every op
	torch.profiler gives 1 MB or more within 2% (the same names), the big
	ones exactly, and each op's call site is the line of the script that
	called it: the forward's lines, `loss.backward()` for the backward ops."""
	prof, theirs = profiled_torch("torch_train.py", "2", "32")
	ops = compare_with_torch(prof, theirs, "torch_train.py")
	for name in ("aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward",
		     "aten::clamp_min", "aten::threshold_backward", "aten::mm", "aten::addmm"):
		check(name in ops, "no %s row" % name)
		eq(ops[name]["self_cpu_memory_usage"], theirs[name][3], name + " self CPU memory (event tree)")
	pool = fixture_line("torch_train.py", "# the pooling line")
	backward = fixture_line("torch_train.py", "# the backward line")
	for name, line in (("aten::max_pool2d_with_indices", pool),
			   ("aten::max_pool2d_with_indices_backward", backward),
			   ("aten::threshold_backward", backward)):
		site = ops[name]["called_from"][0]
		eq((os.path.basename(site["file"]), site["line"], site["function"]),
		   ("torch_train.py", line, "Net.forward" if line == pool else "train"),
		   name + " called from")
		eq(site["cpu_bytes"], ops[name]["total"]["alloc_bytes"], name + " bytes at its call site")
	out = text(run([rcli(), "report", prof, "ops", "--limit", "8"]).stdout)
	check(re.search(r"^ +Name +CPU Mem .*Called From$", out, re.M) and
	      re.search(r"^ +aten::max_pool2d_with_indices +.* torch_train\.py:%d$" % pool, out, re.M),
	      "ops text with call sites: %s" % out[:1500])


@test
def torch_ops_adam_loop():
	"""A user's training loop (tests/fixtures/py/torch_adam.py): Conv2d with
	padding (aten::mkldnn_convolution, whose oneDNN scratch buffers are
	allocated and freed inside it: net 0 of its own), Linear (aten::addmm;
	aten::mm in backward, with aten::resolve_conj nested: it allocates
	nothing), CrossEntropyLoss, Adam (aten::sqrt, aten::div): every op of
	1 MB or more as compare_with_torch says, and these exactly as torch's
	event tree has them."""
	prof, theirs = profiled_torch("torch_adam.py", "4", "64")
	ops = compare_with_torch(prof, theirs, "torch_adam.py")
	for name in ("aten::mkldnn_convolution", "aten::mm", "aten::resolve_conj", "aten::addmm",
		     "aten::clamp_min", "aten::threshold_backward", "aten::max_pool2d_with_indices",
		     "aten::max_pool2d_with_indices_backward", "aten::sqrt", "aten::div",
		     "aten::_log_softmax"):
		check(name in theirs, "torch.profiler has no %s: not the model meant" % name)
		got = ops[name]["self_cpu_memory_usage"] if name in ops else 0
		eq(got, theirs[name][3], name + " self CPU memory (torch's event tree)")
	conv = ops["aten::mkldnn_convolution"]
	check(conv["self"]["alloc_bytes"] > 0 and conv["cpu_memory_usage"] >= 4 * 64 * 8 * 28 * 28 * 4,
	      "aten::mkldnn_convolution: scratch allocated in it, outputs in aten::empty: %s" % conv)
	eq(ops["aten::mm"]["cpu_memory_usage"], theirs["aten::mm"][1], "aten::mm CPU Mem")


@test
def torch_audit_hook_leaves():
	"""Debian's PyTorch: after `import torch` no audit hook of memline's is
	left (the PyTorch room's leaves once record_function scopes are in), so
	CPython builds no audit event's arguments (tests/fixtures/py/audit_quiet.py)."""
	r = Run(torch_python(), [os.path.join(PYFIX, "audit_quiet.py"), "torch"])
	eq(text(r.proc.stdout), "copied False with the program's hook True called True\n",
	   "under memline, after import torch")


@test
def torch_standin_op_time():
	"""Sampled time per op (memline run --lines): the op that burns 300 ms
	of CPU gets its samples as self time, against the thread CPU time the
	program measured in the same run."""
	r = Run(cuda_fixture("drv_torch"), ["v2", "spin"], opts=["--lines"], env=cuda_env())
	m = re.search(r"^spin (\d+) ns$", text(r.proc.stdout), re.M)
	check(m, "no spin line in %r" % text(r.proc.stdout))
	doc = report(r.file("drv_torch"), "ops")["ops"]
	period = doc["period_ns"]
	spin = ops_by_name({"ops": doc})["aten::spin"]
	want = int(m.group(1)) / period
	check(want >= 100, "the spin ran only %.1f periods" % want)
	check(abs(spin["self_samples"] - want) <= max(3, want / 20),
	      "aten::spin: %d self samples, measured %.1f periods of CPU" % (spin["self_samples"], want))
	eq(spin["samples"], spin["self_samples"], "aten::spin total samples (no op inside it)")
	out = text(run([rcli(), "report", r.file("drv_torch"), "ops"]).stdout)
	check(re.search(r"^ +aten::spin +\d+\.\d\d% +\d", out, re.M) and
	      "times are estimated from" in out, "ops text with time columns: %s" % out[:900])


@test
def report_torch_views():
	"""Every view of the stand-ins' profiles, text and JSON (also under ASan:
	the op names, the per-op sums, the TORCH section's reader)."""
	profs = [standin_run("v2")]
	r = Run(PY, [os.path.join(PYFIX, "torch_standin.py"), build_path("cuda"), "v1"], env=cuda_env())
	profs += r.files()
	for prof in profs:
		for view, extra in (("ops", []), ("ops", ["--by", "function"]), ("ops", ["--sort", "count"]),
				    ("ops", ["--kind", "torch_cuda", "--by", "op"]), ("leaks", []),
				    ("peak", []), ("lines", ["--function", "main"]), ("regions", [])):
			for js in ([], ["--json"]):
				p = run([rcli(), "report", prof, view] + extra + js)
				if view == "lines" and "python" in os.path.basename(prof):
					continue	# no C main there
				eq(p.returncode, 0, "report %s %s %s: %s" % (view, " ".join(extra), " ".join(js),
									  text(p.stderr)[-300:]))
