#!/usr/bin/env python3
"""bench/driver.py - runs alloc_bench plain, under memline, heaptrack and
valgrind, side by side in one run, and prints a table of medians and the two
ratios the project targets.  Called by bench/run.sh; see docs/bench.md.

Method, in short:
  * Every configuration (tool x thread count) runs REPS times, interleaved
    (rep 1 of every configuration, then rep 2, ...) so that noise on a shared
    machine spreads over all of them; medians are quoted.
  * Time is the wall time of the whole process as the user waits for it,
    taken with time.monotonic_ns() around the child: it includes the tool's
    start-up, heaptrack's interpreter and compressor finishing, and memline
    writing its profile at exit.  The program's own work-phase time
    (clock_gettime around its threads) is shown too, and the CPU time
    (user+system) of the process and its descendants: heaptrack's
    interpreter runs on another core, which wall time alone hides.
  * added ns/alloc = (median tool wall - median plain wall) / allocations.
  * valgrind is ~100x slower, so it runs at two smaller counts and its cost
    per allocation is the slope between them, which cancels its start-up;
    its added cost is that slope minus plain's cost per allocation.
"""
import argparse
import glob
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RESULT_RE = re.compile(r"allocs=(\d+) threads=(\d+) work_ns=(\d+)")


def children_cpu_ns():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((ru.ru_utime + ru.ru_stime) * 1e9)


def run_once(argv, env, cwd, cpu_out=None):
    """Runs argv; returns (wall_ns, work_ns, allocs) or raises RuntimeError.
    If cpu_out is a list, appends the user+system CPU time of the child and
    all its waited-for descendants (heaptrack's interpreter and zstd)."""
    c0 = children_cpu_ns()
    t0 = time.monotonic_ns()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    wall = time.monotonic_ns() - t0
    if cpu_out is not None:
        cpu_out.append(children_cpu_ns() - c0)
    m = RESULT_RE.search(proc.stdout)
    if proc.returncode != 0 or not m:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise RuntimeError(f"exit {proc.returncode}: {tail}")
    return wall, int(m.group(3)), int(m.group(1))


def file_size(pattern):
    """Total size of the files matching pattern, and how many there were."""
    paths = glob.glob(pattern)
    return sum(os.path.getsize(p) for p in paths), len(paths)


class Tool:
    """How to run the benchmark under one tool and find its output file."""

    def __init__(self, name, wrap, output_glob, note):
        self.name = name
        self.wrap = wrap            # (prog argv, out dir) -> (argv, env)
        self.output_glob = output_glob  # out dir -> glob, or None
        self.note = note


def make_tools(args):
    base_env = dict(os.environ)
    base_env.pop("LD_PRELOAD", None)
    tools = [Tool("plain", lambda argv, d: (argv, base_env), None, "")]

    cli = os.path.join(args.build, "memline")
    lib = os.path.join(args.build, "libmemline.so")
    if os.access(cli, os.X_OK):
        tools.append(Tool(
            "memline",
            lambda argv, d: ([cli, "run", "-o", d, "--"] + argv, base_env),
            lambda d: os.path.join(d, "memline.*", "memline.*.mlp"),
            f"{cli} run -o DIR --"))
        if args.sample:
            tools.append(Tool(
                "ml-sample",
                lambda argv, d: ([cli, "run", "--sample", str(args.sample), "-o", d, "--"] + argv,
                                 base_env),
                lambda d: os.path.join(d, "memline.*", "memline.*.mlp"),
                f"{cli} run --sample {args.sample} -o DIR -- (estimates)"))
    elif os.path.exists(lib):
        def preload(argv, d):
            env = dict(base_env, LD_PRELOAD=lib, MEMLINE_OUTPUT_DIR=d)
            return argv, env
        tools.append(Tool("memline", preload,
                          lambda d: os.path.join(d, "memline.*.mlp"),
                          f"LD_PRELOAD={lib} (no CLI built)"))
    else:
        print(f"note: no {lib}: memline is not measured (run `make` first)")

    if args.baseline:
        bcli = os.path.join(args.baseline, "memline")
        if os.access(bcli, os.X_OK):
            tools.append(Tool(
                "ml-base",
                lambda argv, d: ([bcli, "run", "-o", d, "--"] + argv, base_env),
                lambda d: os.path.join(d, "memline.*", "memline.*.mlp"),
                f"{bcli} run -o DIR -- (another build, for a before/after in one run)"))
        else:
            print(f"note: no {bcli}: the baseline is not measured")

    if shutil.which("heaptrack") and not args.no_heaptrack:
        tools.append(Tool(
            "heaptrack",
            lambda argv, d: (["heaptrack", "-o", os.path.join(d, "ht")] + argv,
                             base_env),
            lambda d: os.path.join(d, "ht.*"),
            "heaptrack -o FILE (default: zstd -c, level 3)"))
    elif not args.no_heaptrack:
        print("note: heaptrack not installed: not measured")
    return tools


def measure(tools, prog, threads_list, allocs, reps):
    """Returns {(tool, threads): {wall:[], work:[], size:[], files:[], err}}."""
    res = {(t.name, n): {"wall": [], "work": [], "cpu": [], "size": [], "files": [],
                         "err": None, "allocs": 0}
           for t in tools for n in threads_list}
    for rep in range(reps):
        for n in threads_list:
            for tool in tools:
                r = res[(tool.name, n)]
                if r["err"]:
                    continue
                with tempfile.TemporaryDirectory(prefix="mlbench.") as d:
                    argv, env = tool.wrap([prog, str(allocs), str(n)], d)
                    try:
                        cpu = []
                        wall, work, total = run_once(argv, env, d, cpu)
                    except RuntimeError as e:
                        r["err"] = str(e)
                        print(f"  {tool.name} threads={n}: FAILED: {e}")
                        continue
                    r["wall"].append(wall)
                    r["work"].append(work)
                    r["cpu"].append(cpu[0])
                    r["allocs"] = total
                    if tool.output_glob:
                        size, count = file_size(tool.output_glob(d))
                        r["size"].append(size)
                        r["files"].append(count)
        print(f"  rep {rep + 1}/{reps} done", flush=True)
    return res


def valgrind_slope(prog, threads_list, lo, hi, reps, tool_args):
    """Median wall at lo and hi allocations per thread; ns per allocation is
    the slope.  Returns {threads: (slope_ns, med_lo_s, med_hi_s) or error}."""
    out = {}
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for n in threads_list:
        walls = {lo: [], hi: []}
        allocs = {}
        try:
            for _ in range(reps):
                for count in (lo, hi):
                    with tempfile.TemporaryDirectory(prefix="mlbench.") as d:
                        argv = (["valgrind", "-q"] + tool_args(d) +
                                [prog, str(count), str(n)])
                        wall, _, total = run_once(argv, env, d)
                        walls[count].append(wall)
                        allocs[count] = total
        except RuntimeError as e:
            out[n] = str(e)
            continue
        m_lo = statistics.median(walls[lo])
        m_hi = statistics.median(walls[hi])
        out[n] = ((m_hi - m_lo) / (allocs[hi] - allocs[lo]), m_lo / 1e9,
                  m_hi / 1e9, allocs[lo], allocs[hi])
    return out


def fmt_bytes(n):
    return f"{n:,}" if n else "-"


def print_table(tools, res, threads_list, vg):
    print()
    hdr = (f"{'tool':<10} {'thr':>3} {'allocs':>10} {'wall med s':>10} "
           f"{'(min..max)':>15} {'work med s':>10} {'added ns/alloc':>14} "
           f"{'cpu added':>9} {'file bytes (med)':>17}")
    print(hdr)
    print("-" * len(hdr))
    added = {}
    cpu_added = {}
    sizes = {}
    for n in threads_list:
        plain = res.get(("plain", n))
        plain_med = statistics.median(plain["wall"]) if plain and plain["wall"] else None
        plain_cpu = statistics.median(plain["cpu"]) if plain_med is not None else None
        for tool in tools:
            r = res[(tool.name, n)]
            if r["err"] or not r["wall"]:
                print(f"{tool.name:<10} {n:>3} FAILED: {r['err']}")
                continue
            med = statistics.median(r["wall"])
            work = statistics.median(r["work"])
            add = cadd = ""
            if tool.name != "plain" and plain_med is not None:
                added[(tool.name, n)] = (med - plain_med) / r["allocs"]
                add = f"{added[(tool.name, n)]:.1f}"
                cpu_added[(tool.name, n)] = (statistics.median(r["cpu"]) -
                                             plain_cpu) / r["allocs"]
                cadd = f"{cpu_added[(tool.name, n)]:.1f}"
            size = int(statistics.median(r["size"])) if r["size"] else 0
            sizes[(tool.name, n)] = size
            rng = f"{min(r['wall']) / 1e9:.3f}..{max(r['wall']) / 1e9:.3f}"
            print(f"{tool.name:<10} {n:>3} {r['allocs']:>10,} {med / 1e9:>10.3f} "
                  f"{rng:>15} {work / 1e9:>10.3f} {add:>14} {cadd:>9} "
                  f"{fmt_bytes(size):>17}")
        for name, table in vg.items():
            v = table.get(n)
            if v is None:
                continue
            if isinstance(v, str):
                print(f"{name:<10} {n:>3} FAILED: {v}")
                continue
            slope, m_lo, m_hi, a_lo, a_hi = v
            plain_per = plain_med / plain["allocs"] if plain_med else 0.0
            added[(name, n)] = slope - plain_per
            print(f"{name:<10} {n:>3} {a_lo:>,}->{a_hi:,}: wall med {m_lo:.3f}"
                  f"->{m_hi:.3f} s, slope {slope:.1f} ns/alloc, "
                  f"added {added[(name, n)]:.1f}")
    return added, cpu_added, sizes


def print_ratios(added, cpu_added, sizes, threads_list):
    print()
    for n in threads_list:
        ml, ht = cpu_added.get(("memline", n)), cpu_added.get(("heaptrack", n))
        if ml is not None and ht:
            print(f"threads={n}: (CPU time, for reference) memline / heaptrack "
                  f"added CPU ns per allocation = {ml:.1f} / {ht:.1f} = "
                  f"{ml / ht:.3f}")
        ml, ht = added.get(("memline", n)), added.get(("heaptrack", n))
        if ml is not None:
            ok = "meets" if ml <= 100 else "MISSES"
            print(f"threads={n}: memline added time per allocation (malloc/free pair) = "
                  f"{ml:.1f} ns  (target <= 100: {ok})")
        if ml is not None and ht:
            ok = "meets" if ml / ht <= 0.15 else "MISSES"
            print(f"threads={n}: memline added time / heaptrack added time = "
                  f"{ml:.1f} / {ht:.1f} ns = {ml / ht:.3f}  "
                  f"(target <= 0.15: {ok})")
        base = added.get(("ml-base", n))
        if base is not None:
            rel = f", / heaptrack's = {base / ht:.3f}" if ht else ""
            print(f"threads={n}: baseline build (ml-base) added time per allocation = "
                  f"{base:.1f} ns{rel}")
        sm = added.get(("ml-sample", n))
        if sm is not None:
            print(f"threads={n}: memline --sample added time per allocation = {sm:.1f} ns")
        fs_ml, fs_ht = sizes.get(("memline", n)), sizes.get(("heaptrack", n))
        if fs_ml and fs_ht:
            ok = "meets" if fs_ml / fs_ht <= 0.02 else "MISSES"
            print(f"threads={n}: memline .mlp size / heaptrack .zst size = "
                  f"{fs_ml:,} / {fs_ht:,} B = {fs_ml / fs_ht:.4f}  "
                  f"(target <= 0.02: {ok})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="memline build directory")
    ap.add_argument("--bin", required=True, help="directory of alloc_bench")
    ap.add_argument("--allocs", type=int, default=2_000_000,
                    help="allocations per thread (default 2000000)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--vg-lo", type=int, default=50_000)
    ap.add_argument("--vg-hi", type=int, default=250_000)
    ap.add_argument("--vg-reps", type=int, default=3)
    ap.add_argument("--no-valgrind", action="store_true")
    ap.add_argument("--no-heaptrack", action="store_true")
    ap.add_argument("--baseline", help="another memline build directory, run the same way "
                    "(\"ml-base\"), interleaved with the others")
    ap.add_argument("--sample", type=int, default=524288,
                    help="also run memline --sample BYTES (0: not)")
    args = ap.parse_args()

    prog = os.path.join(args.bin, "alloc_bench")
    threads_list = [int(t) for t in args.threads.split(",")]
    tools = make_tools(args)
    print(f"alloc_bench: {args.allocs:,} allocations per thread, threads "
          f"{threads_list}, {args.reps} reps each, interleaved; medians.")
    for t in tools[1:]:
        print(f"  {t.name}: {t.note}")
    res = measure(tools, prog, threads_list, args.allocs, args.reps)

    vg = {}
    if not args.no_valgrind and shutil.which("valgrind"):
        print(f"valgrind: {args.vg_lo:,} and {args.vg_hi:,} allocations per "
              f"thread, {args.vg_reps} reps each; cost = slope between them.")
        vg["memcheck"] = valgrind_slope(
            prog, threads_list, args.vg_lo, args.vg_hi, args.vg_reps,
            lambda d: ["--tool=memcheck", "--num-callers=24", "--leak-check=no"])
        vg["massif"] = valgrind_slope(
            prog, threads_list, args.vg_lo, args.vg_hi, args.vg_reps,
            lambda d: ["--tool=massif", "--depth=24",
                       f"--massif-out-file={d}/massif.out"])
    added, cpu_added, sizes = print_table(tools, res, threads_list, vg)
    print_ratios(added, cpu_added, sizes, threads_list)
    return 0


if __name__ == "__main__":
    sys.exit(main())
