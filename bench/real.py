#!/usr/bin/env python3
"""bench/real.py - real programs plain, under memline, heaptrack and valgrind's
massif, side by side in one run: added time, peak RSS and profile size, as
ratios.  See docs/bench.md ("Real programs").

Programs (bench/programs/):
  cc1plus  gcc 12's C++ compiler proper on cxx_workload.cc, -O2 (preprocessed
           once beforehand, so only cc1plus itself runs)
  python   Debian's python3 on py_json_regex.py (json round trips, regexes)
  sqlite   sqlite3 on sqlite_script.sql (an in-memory reporting script)
  numpy    python3 + numpy on numpy_step.py (logistic regression steps)
  torch    the same steps with torch CPU tensors (skipped without torch)
  torchloop  python3 + torch on torch_loop.py: 3,000 SGD steps of a small MLP
           on tiny tensors, the framework's own allocations per step

Method: every (program, tool) runs REPS times, interleaved (rep 1 of all,
then rep 2, ...); medians are quoted.  Time is the wall time of the whole
process tree as the user waits for it (time.monotonic_ns around the
child), and its CPU time (user + system of the child and its waited-for
descendants: heaptrack's interpreter, memline's CLI).  RSS is the largest
peak resident set of any process of the tree (wait4's ru_maxrss).  Profile
sizes are the files each tool leaves: memline's .mlp files, heaptrack's
.zst (zstd -c, its default when zstd is installed), massif's massif.out.
massif is ~20-50x slower: it runs MASSIF_REPS times (default 1).
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS = os.path.join(HERE, "programs")
PY = "/usr/bin/python3"		# Debian's: numpy and torch import only there
CC1PLUS = "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus"


def python_has(module):
    return subprocess.run([PY, "-c", f"import {module}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def make_programs(work):
    """name -> argv (run with cwd = a fresh directory), or a reason to skip."""
    progs = {}
    if os.access(CC1PLUS, os.X_OK) and (shutil.which("g++-12") or shutil.which("g++")):
        ii = os.path.join(work, "cxx_workload.ii")
        gxx = shutil.which("g++-12") or shutil.which("g++")
        subprocess.run([gxx, "-std=c++17", "-E", os.path.join(PROGS, "cxx_workload.cc"),
                        "-o", ii], check=True)
        progs["cc1plus"] = [CC1PLUS, "-fpreprocessed", "-quiet", "-O2", "-std=c++17", ii,
                            "-o", "out.s"]
    else:
        progs["cc1plus"] = "no gcc 12 cc1plus"
    progs["python"] = [PY, os.path.join(PROGS, "py_json_regex.py"), "2"]
    if shutil.which("sqlite3"):
        progs["sqlite"] = [shutil.which("sqlite3"), ":memory:", f".read {PROGS}/sqlite_script.sql"]
    else:
        progs["sqlite"] = "no sqlite3 (apt-get install sqlite3)"
    progs["numpy"] = ([PY, os.path.join(PROGS, "numpy_step.py")] if python_has("numpy")
                      else "no numpy (apt-get install python3-numpy)")
    progs["torch"] = ([PY, os.path.join(PROGS, "numpy_step.py"), "--torch"]
                      if python_has("torch") else "no torch (apt-get install python3-torch)")
    progs["torchloop"] = ([PY, os.path.join(PROGS, "torch_loop.py")] if python_has("torch")
                          else "no torch (apt-get install python3-torch)")
    return progs


class Tool:
    def __init__(self, name, wrap, files):
        self.name = name
        self.wrap = wrap	# (argv, dir) -> argv
        self.files = files	# dir -> list of profile paths


def make_tools(args):
    cli = os.path.join(args.build, "memline")
    tools = [Tool("plain", lambda a, d: a, lambda d: [])]
    base = os.path.join(os.path.abspath(args.baseline), "memline") if args.baseline else None
    if not args.sample_only:
        tools.append(Tool("memline", lambda a, d: [cli, "run", "-o", d, "--"] + a,
                          lambda d: glob.glob(os.path.join(d, "**", "memline.*.mlp"),
                                              recursive=True)))
    if args.baseline and not args.sample_only:
        tools.append(Tool("ml-base", lambda a, d: [base, "run", "-o", d, "--"] + a,
                          lambda d: glob.glob(os.path.join(d, "**", "memline.*.mlp"),
                                              recursive=True)))
    if args.sample:
        rate = str(args.sample)
        tools.append(Tool("ml-sample", lambda a, d: [cli, "run", "-o", d, "--sample", rate, "--"] + a,
                          lambda d: glob.glob(os.path.join(d, "**", "memline.*.mlp"),
                                              recursive=True)))
        if args.baseline:
            tools.append(Tool("ml-base-s", lambda a, d: [base, "run", "-o", d, "--sample", rate,
                                                         "--"] + a,
                              lambda d: glob.glob(os.path.join(d, "**", "memline.*.mlp"),
                                                  recursive=True)))
    if shutil.which("heaptrack") and not args.no_heaptrack:
        # Its interpreter is capped at 12 GiB of address space: on cc1plus it
        # grows to ~19 GB here and dies (std::bad_alloc) anyway, taking the
        # shared machine's memory with it first.
        cap = ["prlimit", f"--as={12 << 30}", "--"] if shutil.which("prlimit") else []
        tools.append(Tool("heaptrack", lambda a, d: cap + ["heaptrack", "-o", os.path.join(d, "ht")] + a,
                          lambda d: glob.glob(os.path.join(d, "ht.*"))))
    if shutil.which("valgrind") and not args.no_valgrind:
        tools.append(Tool("massif", lambda a, d: ["valgrind", "-q", "--tool=massif",
                                                  f"--massif-out-file={d}/massif.out"] + a,
                          lambda d: glob.glob(os.path.join(d, "massif.out"))))
    return tools


def run_once(argv, cwd):
    """(wall ns, cpu ns, max rss KiB) of argv; raises RuntimeError on failure."""
    t0 = time.monotonic_ns()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic_ns() - t0
    err = proc.stderr.read()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = (err.strip().splitlines() or ["(no stderr)"])[-1]
        raise RuntimeError(f"exit {proc.returncode}: {tail}")
    cpu = int((ru.ru_utime + ru.ru_stime) * 1e9)
    return wall, cpu, ru.ru_maxrss


def memline_allocs(cli, files):
    """Allocations recorded in memline's profiles (from the leaks summary)."""
    total = 0
    for f in files:
        out = subprocess.run([cli, "report", f, "leaks", "--json", "--limit", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            doc = json.loads(out.stdout)
            total += doc["leaks"]["summary"]["allocs"]
        except (ValueError, KeyError):
            pass
    return total


def report_times(cli, path, reps=3):
    """Median (wall s, CPU s) of `memline report PATH VIEW [--limit 20]` for the
    main views: the whole listing (every record, to /dev/null) and the 20
    largest.  CPU time (user + sys) is the figure on a loaded machine."""
    out = {}
    for view, extra in (("leaks", []), ("peak", []), ("ops", []),
                        ("leaks", ["--limit", "20"]), ("peak", ["--limit", "20"])):
        walls, cpus = [], []
        for _ in range(reps):
            t0 = time.monotonic_ns()
            proc = subprocess.Popen([cli, "report", path, view] + extra,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, _, ru = os.wait4(proc.pid, 0)
            walls.append((time.monotonic_ns() - t0) / 1e9)
            cpus.append(ru.ru_utime + ru.ru_stime)
        out[" ".join([view] + extra)] = (statistics.median(walls), statistics.median(cpus))
    return out


def measure(args, progs, tools, work):
    res = {}
    cli = os.path.join(args.build, "memline")
    keep = {}
    for rep in range(args.reps):
        for name, argv in progs.items():
            if isinstance(argv, str):
                continue
            for tool in tools:
                if tool.name == "massif" and rep >= args.massif_reps:
                    continue
                r = res.setdefault((name, tool.name), {"wall": [], "cpu": [], "rss": [],
                                                       "size": [], "err": None})
                if r["err"]:
                    continue
                d = tempfile.mkdtemp(prefix=f"mlreal.{name}.{tool.name}.", dir=work)
                try:
                    wall, cpu, rss = run_once(tool.wrap(argv, d), d)
                except RuntimeError as e:
                    r["err"] = str(e)
                    left = sum(os.path.getsize(f) for f in tool.files(d))
                    print(f"  {name} under {tool.name}: FAILED: {e}" +
                          (f" (it left {left:,} bytes of profile)" if left else ""), flush=True)
                    continue
                files = tool.files(d)
                r["wall"].append(wall)
                r["cpu"].append(cpu)
                r["rss"].append(rss)
                r["size"].append(sum(os.path.getsize(f) for f in files))
                if tool.name == "memline" and name not in keep:
                    keep[name] = files
                    r["allocs"] = memline_allocs(cli, files)
                else:
                    shutil.rmtree(d)
        print(f"  rep {rep + 1}/{args.reps} done", flush=True)
    return res, keep


def med(xs):
    return statistics.median(xs) if xs else None


def print_table(progs, tools, res):
    hdr = (f"{'program':<8} {'tool':<9} {'wall s':>7} {'added':>7} {'cpu s':>7} {'added':>7} "
           f"{'ns/alloc':>8} {'max RSS MiB':>11} {'x plain':>7} {'file bytes':>12}")
    print(hdr)
    print("-" * len(hdr))
    summary = {}
    for name, argv in progs.items():
        if isinstance(argv, str):
            print(f"{name:<8} skipped: {argv}")
            continue
        plain = res.get((name, "plain"))
        pw, pc, pr = med(plain["wall"]), med(plain["cpu"]), med(plain["rss"])
        allocs = res.get((name, "memline"), {}).get("allocs", 0)
        for tool in tools:
            r = res.get((name, tool.name))
            if not r or r["err"] or not r["wall"]:
                print(f"{name:<8} {tool.name:<9} FAILED: {r and r['err']}")
                continue
            w, c, rss, size = med(r["wall"]), med(r["cpu"]), med(r["rss"]), med(r["size"])
            add_w = (w - pw) / pw * 100 if pw else 0
            add_c = (c - pc) / pc * 100 if pc else 0
            per = f"{(w - pw) / allocs:.0f}" if allocs and tool.name != "plain" else ""
            summary[(name, tool.name)] = {"wall": w, "cpu": c, "rss": rss, "size": size,
                                          "added_ns": (w - pw) / allocs if allocs else None}
            print(f"{name:<8} {tool.name:<9} {w / 1e9:>7.3f} "
                  f"{'' if tool.name == 'plain' else f'{add_w:+.0f}%':>7} {c / 1e9:>7.3f} "
                  f"{'' if tool.name == 'plain' else f'{add_c:+.0f}%':>7} {per:>8} "
                  f"{rss / 1024:>11.1f} {rss / pr if pr else 0:>7.2f} "
                  f"{f'{int(size):,}' if size else '-':>12}")
        if allocs:
            print(f"{'':<8} ({allocs:,} allocations recorded by memline)")
    return summary


def print_ratios(progs, summary):
    print()
    print(f"{'program':<8} {'time ratio':>10} {'cpu ratio':>9} {'rss ratio':>9} {'file ratio':>10}"
          "   (memline added / heaptrack added; RSS and file: memline / heaptrack)")
    for name in progs:
        ml, ht = summary.get((name, "memline")), summary.get((name, "heaptrack"))
        pl = summary.get((name, "plain"))
        if not (ml and ht and pl):
            continue
        tr = (ml["wall"] - pl["wall"]) / (ht["wall"] - pl["wall"]) if ht["wall"] > pl["wall"] else 0
        cr = (ml["cpu"] - pl["cpu"]) / (ht["cpu"] - pl["cpu"]) if ht["cpu"] > pl["cpu"] else 0
        print(f"{name:<8} {tr:>10.3f} {cr:>9.3f} {ml['rss'] / ht['rss']:>9.3f} "
              f"{ml['size'] / ht['size'] if ht['size'] else 0:>10.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="memline build directory")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--massif-reps", type=int, default=1)
    ap.add_argument("--programs", default="cc1plus,python,sqlite,numpy,torch,torchloop")
    ap.add_argument("--no-valgrind", action="store_true")
    ap.add_argument("--no-heaptrack", action="store_true")
    ap.add_argument("--baseline", metavar="DIR",
                    help="another memline build, run as ml-base beside it (a before/after "
                    "in one run)")
    ap.add_argument("--sample", type=int, default=0, metavar="BYTES",
                    help="also run memline --sample BYTES, as ml-sample (and the baseline's, "
                    "ml-base-s); 0: not (default)")
    ap.add_argument("--sample-only", action="store_true",
                    help="with --sample: leave out memline's exact runs (memline, ml-base)")
    args = ap.parse_args()
    if args.sample_only and not args.sample:
        ap.error("--sample-only needs --sample BYTES")
    args.build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="mlreal.")
    try:
        wanted = args.programs.split(",")
        progs = {k: v for k, v in make_programs(work).items() if k in wanted}
        tools = make_tools(args)
        print(f"real programs: {', '.join(progs)}; tools: {', '.join(t.name for t in tools)}; "
              f"{args.reps} interleaved reps (massif {args.massif_reps}); medians.")
        res, keep = measure(args, progs, tools, work)
        print()
        summary = print_table(progs, tools, res)
        print_ratios(progs, summary)
        cli = os.path.join(args.build, "memline")
        print()
        for name, files in keep.items():
            if len(files) == 1:
                t = report_times(cli, files[0])
                print(f"memline report on the {name} profile ({os.path.getsize(files[0]):,} B): " +
                      ", ".join(f"{v} {w:.2f} s ({c:.2f} s CPU)" for v, (w, c) in t.items()) +
                      " (median of 3)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
