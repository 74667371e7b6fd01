"""tests/gpu/kp_torch.py - @profile on a real GPU with PyTorch (run by
tests/gpu/run.sh, not by make check).

    memline run -- python3 tests/gpu/kp_torch.py OUT.json
        a decorated function allocates and frees CUDA tensors; writes
        torch's reserved-byte change across each marked line (the caching
        allocator's segments: what cudaMalloc and memline see) to OUT.json
    python3 tests/gpu/kp_torch.py --compare OUT.json LINES.json
        LINES.json: `memline report PROFILE lines --json`; memline's CUDA
        Increment per marked line must equal torch's reserved change."""
import json
import sys

MARKS = {}


def mark(name, line):
    MARKS[name] = line


def work(out):
    import torch
    torch.cuda.init()
    deltas = {}
    r = torch.cuda.memory_reserved

    @profile
    def steps():
        r0 = r()
        a = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")  # L:a64
        deltas["a64"] = r() - r0
        r0 = r()
        b = torch.empty(200 << 20, dtype=torch.uint8, device="cuda")  # L:b200
        deltas["b200"] = r() - r0
        del a, b
        r0 = r()
        torch.cuda.empty_cache()  # L:empty
        deltas["empty"] = r() - r0
        return 0

    steps()
    torch.cuda.synchronize()
    src = open(__file__).read().splitlines()
    lines = {m: i + 1 for i, t in enumerate(src) for m in ("a64", "b200", "empty")
             if t.rstrip().endswith("# L:" + m)}
    json.dump({"deltas": deltas, "lines": lines}, open(out, "w"))


def compare(torch_json, lines_json):
    t = json.load(open(torch_json))
    doc = json.load(open(lines_json))["lines"]
    fns = [f for f in doc["functions"] if f["name"].endswith("steps")]
    if len(fns) != 1:
        print("kp_torch: want one decorated 'steps', got %s" % [f["name"] for f in doc["functions"]])
        return 1
    rows = {l["line"]: l for l in fns[0]["lines"]}
    bad = 0
    for m, line in t["lines"].items():
        ours = rows.get(line, {}).get("cuda_increment_bytes")
        theirs = t["deltas"][m]
        ok = ours == theirs and rows[line]["hits"] == 1
        print("%s line %d: memline CUDA Increment %s, torch reserved change %d, hits %s%s"
              % (m, line, ours, theirs, rows.get(line, {}).get("hits"), "" if ok else "  <- differs"))
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    work(sys.argv[1])
