#!/usr/bin/env python3
"""bench/rss.py - memline's own memory (RSS) per live block and per distinct
stack, measured: bench/rss_prog.c run plain and under memline, peak RSS of
the whole process (wait4's ru_maxrss: the profile's writing at exit
included), medians of REPS interleaved runs.

  blocks   10,000,000 blocks of 32 bytes kept live (one stack): the live
           table's bytes per block, and "does memline double the RSS of a
           program with 10 M live blocks?"
  stacks   2^20 = 1,048,576 distinct stacks (a 20-level recursion through
           one of two functions per level), one short-lived block each: the
           call-site trie's and the counters' bytes per stack

Also prints the RUNTIME section's own account (memline report --json)."""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(argv, env, cwd):
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    out = proc.stdout.read().decode()
    _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv}: exit {status}")
    return ru.ru_maxrss, out


def runtime_of(cli, d):
    files = glob.glob(os.path.join(d, "**", "*.mlp"), recursive=True)
    if not files:
        raise RuntimeError(f"no profile in {d}: {os.listdir(d)}")
    out = subprocess.run([cli, "report", files[0], "leaks", "--json", "--limit", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return json.loads(out)["profile"].get("runtime", {}), os.path.getsize(files[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--prog", required=True, help="the built bench/rss_prog")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=10_000_000)
    ap.add_argument("--bits", type=int, default=20)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.prog = os.path.abspath(args.prog)
    lib = os.path.join(args.build, "libmemline.so")
    cli = os.path.join(args.build, "memline")
    cases = {"blocks": ([args.prog, "blocks", str(args.blocks), "32"], args.blocks, "block"),
             "stacks": ([args.prog, "stacks", str(args.bits)], 1 << args.bits, "stack")}
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    res = {}
    extra = {}
    for rep in range(args.reps):
        for name, (argv, n, unit) in cases.items():
            for tool in ("plain", "memline"):
                with tempfile.TemporaryDirectory(prefix="mlrss.") as d:
                    e = dict(env)
                    if tool == "memline":
                        e.update(LD_PRELOAD=lib, MEMLINE_OUTPUT_DIR=d)
                    rss, _ = run(argv, e, d)
                    res.setdefault((name, tool), []).append(rss)
                    if tool == "memline" and name not in extra:
                        extra[name] = runtime_of(cli, d)
    print(f"{'case':<8} {'plain MiB':>10} {'memline MiB':>12} {'x plain':>8} {'added':>10} "
          f"{'bytes per':>12}")
    for name, (argv, n, unit) in cases.items():
        p = statistics.median(res[(name, "plain")]) / 1024
        m = statistics.median(res[(name, "memline")]) / 1024
        added = (m - p) * 1024 * 1024 / n
        print(f"{name:<8} {p:>10.1f} {m:>12.1f} {m / p:>8.2f} {m - p:>9.1f}M "
              f"{added:>7.1f} B/{unit}")
    for name, (rt, size) in extra.items():
        n = cases[name][1]
        print(f"  {name}: runtime's own account: live table {rt.get('live_table_bytes', 0):,} B "
              f"for {rt.get('live_blocks', 0):,} blocks, trie {rt.get('stack_bytes', 0):,} B for "
              f"{rt.get('stack_nodes', 0):,} nodes, counters {rt.get('counter_bytes', 0):,} B "
              f"for {rt.get('counters', 0):,}; profile {size:,} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
