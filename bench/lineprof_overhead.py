#!/usr/bin/python3
"""bench/lineprof_overhead.py - the line timer's overhead at the default rate
(997 Hz) on a CPU-bound program: the same program unprofiled, under
`memline run` (memory only) and under `memline run --lines`, interleaved,
N runs each; prints the medians of the CPU time (user + sys of the child
tree) and of the wall time, and the overhead of --lines against unprofiled.

    bench/lineprof_overhead.py [--build DIR] [-n RUNS] [--rounds R]
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(argv, cwd):
	before = resource.getrusage(resource.RUSAGE_CHILDREN)
	t0 = time.monotonic()
	p = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
	wall = time.monotonic() - t0
	after = resource.getrusage(resource.RUSAGE_CHILDREN)
	if p.returncode != 0:
		sys.exit("%s failed: %s" % (" ".join(argv), p.stderr.decode()[-300:]))
	cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
	return cpu, wall


def main():
	ap = argparse.ArgumentParser()
	ap.add_argument("--build", default=os.path.join(ROOT, "build"))
	ap.add_argument("-n", type=int, default=9)
	ap.add_argument("--rounds", default="300")
	o = ap.parse_args()
	build = os.path.abspath(o.build)
	prog = os.path.join(build, "bench", "cpu_bound")
	os.makedirs(os.path.dirname(prog), exist_ok=True)
	subprocess.run(["cc", "-O2", "-g", "-o", prog, os.path.join(ROOT, "bench", "cpu_bound.c")],
		       check=True)
	memline = os.path.join(build, "memline")
	tmp = tempfile.mkdtemp(prefix="ml-lpbench-")
	modes = {
		"unprofiled": [prog, o.rounds],
		"memline run": [memline, "run", "-o", tmp, "--", prog, o.rounds],
		"memline run --lines": [memline, "run", "-o", tmp, "--lines", "--", prog, o.rounds],
	}
	res = {m: [] for m in modes}
	for _ in range(o.n):
		for m, argv in modes.items():	# interleaved: load drifts hit all alike
			res[m].append(measure(argv, tmp))
	shutil.rmtree(tmp, ignore_errors=True)
	base_cpu = statistics.median(c for c, _ in res["unprofiled"])
	base_wall = statistics.median(w for _, w in res["unprofiled"])
	print("%d runs each, %s rounds, medians" % (o.n, o.rounds))
	print("%-22s %10s %10s %10s %10s" % ("mode", "CPU s", "CPU +%", "wall s", "wall +%"))
	for m in modes:
		c = statistics.median(x for x, _ in res[m])
		w = statistics.median(x for _, x in res[m])
		print("%-22s %10.3f %+10.2f %10.3f %+10.2f" % (m, c, 100 * (c / base_cpu - 1), w,
							    100 * (w / base_wall - 1)))


if __name__ == "__main__":
	main()
