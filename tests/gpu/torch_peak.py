#!/usr/bin/python3
"""tests/gpu/torch_peak.py - PyTorch's CUDA peak against memline's.

    torch_peak.py OUT.json                  (run under memline)
    torch_peak.py --compare OUT.json PEAK.json CONF

The first form allocates and frees tensors in phases (so the peak is in the
middle, not at the end), then writes torch.cuda.max_memory_reserved() and
max_memory_allocated() to OUT.json.  The second compares them with
`memline report FILE peak --json`:
  - default caching allocator: its segments are cudaMalloc'd, so memline's
    cuda_device peak must equal max_memory_reserved (plus any memory
    libraries such as cuBLAS took directly, which PyTorch does not count);
  - expandable_segments:True: segments are VMM; memline's cuda_vmm peak
    (physical bytes) must equal max_memory_reserved;
  - backend:cudaMallocAsync: tensors come from cudaMallocAsync one by one;
    memline's cuda_pool peak must be >= max_memory_allocated and
    <= max_memory_reserved."""

import json
import sys


def run(out):
	import torch
	dev = torch.device("cuda")
	keep = []
	for i in range(4):
		keep.append(torch.empty(((i + 1) * 8) << 20, dtype=torch.uint8, device=dev))
	tmp = [torch.ones(3 << 20, device=dev) for _ in range(5)]
	torch.cuda.synchronize()
	del tmp
	x = torch.randn(2048, 2048, device=dev)
	y = x @ x
	torch.cuda.synchronize()
	del x, y
	keep = keep[:1]
	torch.cuda.synchronize()
	json.dump({"max_memory_reserved": torch.cuda.max_memory_reserved(),
		   "max_memory_allocated": torch.cuda.max_memory_allocated(),
		   "conf": torch.cuda.get_allocator_backend()}, open(out, "w"))
	print("reserved peak %d, allocated peak %d" % (torch.cuda.max_memory_reserved(),
							torch.cuda.max_memory_allocated()))


def compare(torch_json, peak_json, conf):
	t = json.load(open(torch_json))
	doc = json.load(open(peak_json))["peak"]
	peaks = {p["kind"]: p["peak_bytes"] for p in doc.get("cuda_peaks", [])}
	gpu = doc.get("gpu_peak", {}).get("peak_bytes", 0)
	reserved, allocated = t["max_memory_reserved"], t["max_memory_allocated"]
	print("%s: torch reserved %d allocated %d; memline peaks %s, GPU peak %d"
	      % (conf, reserved, allocated, peaks, gpu))
	if conf.startswith("expandable"):
		got = peaks.get("cuda_vmm", 0)
		ok = got >= reserved
	elif conf.startswith("backend:cudaMallocAsync"):
		got = peaks.get("cuda_pool", 0)
		ok = allocated <= got <= reserved
	else:
		got = peaks.get("cuda_device", 0)
		ok = got >= reserved
	print("  memline %d vs torch %d: %s (difference %d: memory PyTorch does not count, "
	      "e.g. cuBLAS workspaces)" % (got, reserved, "ok" if ok else "MISMATCH", got - reserved))
	return 0 if ok else 1


if __name__ == "__main__":
	if len(sys.argv) > 1 and sys.argv[1] == "--compare":
		sys.exit(compare(sys.argv[2], sys.argv[3], sys.argv[4]))
	run(sys.argv[1])
