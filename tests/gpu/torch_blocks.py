#!/usr/bin/env python3
"""tests/gpu/torch_blocks.py - PyTorch's CUDA memory per tensor, on a real GPU,
against PyTorch's own numbers.

    torch_blocks.py run OUT.json            (under `memline run`)
    torch_blocks.py check OUT.json DIR      (DIR: the reports, below)
    torch_blocks.py nocache                 (under `memline run --no-torch-cache`)
    torch_blocks.py nocache-check DIR       (DIR/lines.json of `lines --function
                                            nocache`, DIR/ops.json)

`run` does all its CUDA work inside torch.profiler(profile_memory=True), so
that torch.profiler's window is memline's: work() runs marked lines (# L:)
and measures torch.cuda.memory_allocated() around each, on that same line,
then an NVTX range and a record_function scope.  OUT.json gets the deltas,
torch.cuda.max_memory_allocated()/max_memory_reserved() and
torch.profiler's per-op CUDA memory.

`check` reads memline's reports of that run from DIR (lines.json:
`report lines --function work --json`, ops.json: `report ops --json --limit all`,
peak.json: `report peak --json`, regions.json: `report regions --json`) and
prints one line per comparison, `ok ...` or `FAIL ...`:
  - per marked line: memline's CUDA Net (blocks allocated less blocks freed
    while the line ran) == the line's delta of memory_allocated();
    CUDA Alloc == the block sizes PyTorch rounds to (empty(1000): 4096);
  - memline's torch_cuda peak == max_memory_allocated(), its cuda_device
    peak >= max_memory_reserved() (cuBLAS and others use the driver too);
  - every ATen op with 1 MB or more of self CUDA memory in torch.profiler:
    the same name in memline's table, within 2%; op names from the schemas;
  - the NVTX range and the record_function scope are regions.
`nocache` allocates two tensors with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (what
`memline run --no-torch-cache` sets): each is a cudaMalloc of its exact
size, which memline attributes to its line, and PyTorch reports no blocks.
Exits 1 if any comparison failed."""

import json
import os
import re
import sys

MB = 1000000


def run(out):
	import torch
	from torch.profiler import ProfilerActivity, profile, record_function
	dev = torch.device("cuda")
	torch.cuda.init()
	d = {}
	keep = []

	def work():
		t = torch.cuda.memory_allocated
		s = t(); a = torch.empty(1000, device=dev); d["g_empty"] = t() - s  # L:g_empty
		s = t(); b = torch.empty(1024, 1024, device=dev); d["g_big"] = t() - s  # L:g_big
		s = t(); c = torch.ones(512, 512, device=dev); d["g_ones"] = t() - s  # L:g_ones
		s = t(); m = c @ c; d["g_mm"] = t() - s  # L:g_mm
		s = t(); r = (m * 2).relu(); d["g_temp"] = t() - s  # L:g_temp
		s = t(); r.add_(1); d["g_inplace"] = t() - s  # L:g_inplace
		s = t(); g = torch.arange(10000).to(dev); d["g_copy"] = t() - s  # L:g_copy
		s = t(); del a; d["g_free"] = t() - s  # L:g_free
		s = t(); b = b[:512].clone(); d["g_rebind"] = t() - s  # L:g_rebind
		keep.extend([b, c, m, r, g])

	with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
		work()
		torch.cuda.nvtx.range_push("nvtx_step")
		with record_function("rf_step"):
			x = torch.randn(2048, 2048, device=dev)  # 16 MiB
			y = x @ x
			z = torch.softmax(y, dim=1)
			keep.extend([y, z])
			del x
		torch.cuda.nvtx.range_pop()
		torch.cuda.synchronize()
	ops = {}
	for e in prof.key_averages():
		self_mem = getattr(e, "self_device_memory_usage", None)
		if self_mem is None:
			self_mem = e.self_cuda_memory_usage
		total = getattr(e, "device_memory_usage", None)
		if total is None:
			total = e.cuda_memory_usage
		ops[e.key] = [self_mem, total, e.count]
	with open(out, "w") as f:
		json.dump({"deltas": d, "max_allocated": torch.cuda.max_memory_allocated(),
			   "max_reserved": torch.cuda.max_memory_reserved(),
			   "allocated": torch.cuda.memory_allocated(), "ops": ops,
			   "torch": torch.__version__}, f)
	print("torch %s: max_memory_allocated %d, max_memory_reserved %d"
	      % (torch.__version__, torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()))


def nocache():
	import torch
	dev = torch.device("cuda")
	assert os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1"

	def nocache_work():
		a = torch.empty(1000, device=dev)  # L:n_empty
		b = torch.empty(1024, 1024, device=dev)  # L:n_big
		return a, b
	kept = nocache_work()
	torch.cuda.synchronize()
	print("nocache: %d tensors" % len(kept))


def check_nocache(d):
	c = Checker()
	rows = {}
	for fn in load(os.path.join(d, "lines.json"))["lines"]["functions"]:
		for r in fn["lines"]:
			rows[r["line"]] = r
	for name, want in (("n_empty", 4000), ("n_big", 4 << 20)):
		got = rows.get(marker_lines()[name], {}).get("cuda_total_alloc_bytes")
		c.expect(got == want, "--no-torch-cache: line %s is one cudaMalloc of exactly %d bytes "
			 "(memline: %s)" % (name, want, got))
	doc = load(os.path.join(d, "ops.json"))["ops"]
	c.expect(doc.get("cuda_torch_blocks") is False,
		 "--no-torch-cache: PyTorch reports no blocks; CUDA Mem is the driver's")
	print("torch_nocache: %d passed, %d failed" % (c.passed, c.failed))
	return 1 if c.failed else 0


def marker_lines():
	lines = {}
	with open(os.path.abspath(__file__)) as f:
		for n, text in enumerate(f, 1):
			m = re.search(r"#\s*L:(\w+)\s*$", text)
			if m:
				lines[m.group(1)] = n
	return lines


class Checker:
	def __init__(self):
		self.failed = 0
		self.passed = 0

	def expect(self, ok, what):
		print("%s %s" % ("ok" if ok else "FAIL", what))
		if ok:
			self.passed += 1
		else:
			self.failed += 1


def load(path):
	with open(path) as f:
		return json.load(f)


def check_lines(c, t, d):
	rows = {}
	for fn in load(os.path.join(d, "lines.json"))["lines"]["functions"]:
		for r in fn["lines"]:
			rows[r["line"]] = r
	for name, line in sorted(marker_lines().items(), key=lambda x: x[1]):
		if not name.startswith("g_"):
			continue
		want = t["deltas"][name]
		r = rows.get(line)
		if r is None or "cuda_net_bytes" not in r:
			c.expect(False, "line %d (%s): no CUDA Net in memline's lines view (row %r)"
				 % (line, name, r))
			continue
		got = r["cuda_net_bytes"]
		c.expect(got == want, "line %d (%s): memline CUDA Net %d == delta of "
			 "torch.cuda.memory_allocated() %d" % (line, name, got, want))
	empty = rows.get(marker_lines()["g_empty"], {})
	c.expect(empty.get("cuda_total_alloc_bytes") == 4096,
		 "torch.empty(1000) is one block of 4096 bytes, as PyTorch rounds it (memline: %s)"
		 % empty.get("cuda_total_alloc_bytes"))
	big = rows.get(marker_lines()["g_big"], {})
	c.expect(big.get("cuda_total_alloc_bytes") == 4 << 20,
		 "torch.empty(1024, 1024) is one block of 4194304 bytes (memline: %s)"
		 % big.get("cuda_total_alloc_bytes"))


def check_peaks(c, t, d):
	peak = load(os.path.join(d, "peak.json"))["peak"]
	peaks = {p["kind"]: p["peak_bytes"] for p in peak.get("cuda_peaks", [])}
	got = peaks.get("torch_cuda")
	c.expect(got == t["max_allocated"], "torch_cuda peak %s == torch.cuda.max_memory_allocated() %d"
		 % (got, t["max_allocated"]))
	seg = peaks.get("cuda_device", 0) + peaks.get("cuda_vmm", 0)
	c.expect(seg >= t["max_reserved"], "segment peak %d >= torch.cuda.max_memory_reserved() %d "
		 "(the difference, %d, is memory others took from the driver, e.g. cuBLAS)"
		 % (seg, t["max_reserved"], seg - t["max_reserved"]))


def check_ops(c, t, d):
	doc = load(os.path.join(d, "ops.json"))["ops"]
	c.expect(doc.get("by") == "op" and doc.get("op_names_exact") is True,
		 "ops by ATen op, names from PyTorch's schemas (by %s, exact %s)"
		 % (doc.get("by"), doc.get("op_names_exact")))
	ops = {r["name"]: r for r in doc.get("ops", [])}
	theirs = {k: v for k, v in t["ops"].items() if k.startswith("aten::")}
	big = {k: v for k, v in theirs.items() if abs(v[0]) >= MB}
	c.expect(bool(big), "torch.profiler has ops of 1 MB or more of self CUDA memory: %s"
		 % sorted(big))
	for name, (self_mem, total, calls) in sorted(big.items()):
		got = ops.get(name, {}).get("self_cuda_memory_usage")
		ok = got is not None and abs(got - self_mem) <= 0.02 * abs(self_mem)
		c.expect(ok, "%s: self CUDA memory memline %s, torch.profiler %d" % (name, got, self_mem))
	unknown = sorted(n for n, r in ops.items()
			 if r.get("self_cuda_memory_usage") and n not in theirs)
	c.expect(not unknown, "every op memline gives CUDA memory is an op torch.profiler names "
		 "(unknown: %s)" % unknown)


def check_regions(c, d):
	regions = load(os.path.join(d, "regions.json"))["regions"]
	names = set()

	def walk(node):
		for name, child in node.get("children", {}).items():
			names.add(name)
			walk(child)
	walk(regions)
	c.expect("rf_step" in names, "record_function('rf_step') is a region (regions: %s)"
		 % sorted(names))
	c.expect("nvtx_step" in names, "torch.cuda.nvtx.range_push('nvtx_step') is a region")


def check(out, d):
	t = load(out)
	c = Checker()
	print("torch %s" % t.get("torch"))
	for step in (lambda: check_lines(c, t, d), lambda: check_peaks(c, t, d),
		     lambda: check_ops(c, t, d), lambda: check_regions(c, d)):
		try:
			step()
		except (OSError, ValueError, KeyError) as e:
			c.expect(False, "cannot read a report: %s: %s" % (type(e).__name__, e))
	print("torch_blocks: %d passed, %d failed" % (c.passed, c.failed))
	return 1 if c.failed else 0


if __name__ == "__main__":
	if len(sys.argv) >= 3 and sys.argv[1] == "run":
		run(sys.argv[2])
	elif len(sys.argv) >= 2 and sys.argv[1] == "nocache":
		nocache()
	elif len(sys.argv) >= 3 and sys.argv[1] == "nocache-check":
		sys.exit(check_nocache(sys.argv[2]))
	elif len(sys.argv) >= 4 and sys.argv[1] == "check":
		sys.exit(check(sys.argv[2], sys.argv[3]))
	else:
		sys.exit(__doc__)
