#!/usr/bin/python3
"""bench/python_bench.py - Python workloads plain, under memline (Python and
native frames, Python objects through the PyMem wrappers), memline without
the wrappers (--no-pymem), memline without Python frames, Scalene,
`python3 -X tracemalloc=25` and heaptrack, side by side in one run; prints a
table of median wall times, ratios to the plain run, and memline's cost per
allocation of reading the Python frames.  Debian's python3 (numpy and
Scalene import only there).  A benchmark: nothing fails on a miss.

    bench/python_bench.py [--build DIR] [--reps N] [--only NAME]"""

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
PY = "/usr/bin/python3"

WORKLOADS = [
	("json build/dumps/loads", os.path.join(HERE, "python", "json_work.py"), ["3"]),
	("numpy CPU", os.path.join(HERE, "python", "numpy_work.py"), ["60"]),
	("bytes(1000) 20 Python frames deep", os.path.join(HERE, "python", "deep_alloc.py"), ["1000000"]),
]


def configs(build, tmp):
	"""(name, the command line before the script, extra environment)."""
	ml = os.path.join(build, "memline")
	run = [ml, "run", "-o", tmp, "--", PY]
	out = [
		("plain", [PY], {}),
		("memline", run, {}),
		("memline --no-pymem", [ml, "run", "--no-pymem", "-o", tmp, "--", PY], {}),
		("memline --no-pymem, no Python frames", [ml, "run", "--no-pymem", "-o", tmp, "--", PY],
		 {"MEMLINE_PY_FRAMES": "0"}),
	]
	if subprocess.run([PY, "-c", "import scalene"], capture_output=True).returncode == 0:
		out.append(("scalene", [PY, "-m", "scalene", "--cli", "--outfile",
					os.path.join(tmp, "scalene.txt")], {}))
	out.append(("tracemalloc=25", [PY, "-X", "tracemalloc=25"], {}))
	if shutil.which("heaptrack"):
		out.append(("heaptrack", ["heaptrack", "-o", os.path.join(tmp, "ht"), PY], {}))
	return out


def timed(argv, env):
	t0 = time.monotonic()
	p = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
	took = time.monotonic() - t0
	if p.returncode != 0:
		raise SystemExit("failed (%d): %s\n%s" % (p.returncode, " ".join(argv),
							  p.stderr.decode()[-600:]))
	return took


def allocations(build, tmp, kinds):
	"""Allocations of these kinds the last memline run recorded."""
	# memline run -o DIR: one run directory per run, its profiles inside.
	profs = sorted(glob.glob(os.path.join(tmp, "memline.python*", "*.mlp")) +
		       glob.glob(os.path.join(tmp, "memline.python*.mlp")))
	n = 0
	for kind in kinds:
		p = subprocess.run([os.path.join(build, "memline"), "report", profs[-1], "leaks",
				    "--kind", kind, "--json", "--limit", "0"], capture_output=True)
		n += json.loads(p.stdout)["leaks"]["summary"]["allocs"]
	return n


def clean(tmp):
	for f in os.listdir(tmp):
		path = os.path.join(tmp, f)
		if os.path.isdir(path):
			shutil.rmtree(path)
		else:
			os.remove(path)


def main():
	ap = argparse.ArgumentParser()
	ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
	ap.add_argument("--reps", type=int, default=3)
	ap.add_argument("--only", default="")
	args = ap.parse_args()
	build = os.path.abspath(args.build)
	tmp = tempfile.mkdtemp(prefix="ml-pybench-")
	print("machine: %d cores; load average %s; %s" % (os.cpu_count(), open("/proc/loadavg").read().split()[:3],
							    subprocess.run([PY, "-V"], capture_output=True, text=True).stdout.strip()))
	try:
		for title, script, wargs in WORKLOADS:
			if args.only and args.only not in title:
				continue
			if "numpy" in script and subprocess.run([PY, "-c", "import numpy"]).returncode:
				print("\n%s: numpy does not import; skipped" % title)
				continue
			cfgs = configs(build, tmp)
			times = {name: [] for name, _, _ in cfgs}
			allocs = heap_allocs = None
			# Interleaved repetitions: a slow moment of the machine hits
			# every configuration alike.
			for rep in range(args.reps):
				for name, prefix, extra in cfgs:
					env = dict(os.environ, **extra)
					times[name].append(timed(prefix + [script] + wargs, env))
					if name == "memline" and allocs is None:
						allocs = allocations(build, tmp, ("python", "heap"))
					if name == "memline --no-pymem" and heap_allocs is None:
						heap_allocs = allocations(build, tmp, ("heap",))
					clean(tmp)
			plain = statistics.median(times["plain"])
			print("\n## %s (%s %s), median of %d" % (title, os.path.basename(script),
							     " ".join(wargs), args.reps))
			print("| configuration | median s | x plain |")
			print("|---|---:|---:|")
			for name, _, _ in cfgs:
				m = statistics.median(times[name])
				print("| %s | %.2f | %.2f |" % (name, m, m / plain))
			med = {name: statistics.median(t) for name, t in times.items()}
			# Per allocation only where allocations dominate (else it is noise).
			if allocs and allocs >= 100000:
				print("\nmemline: %d allocations (Python objects and heap), %.0f ns added "
				      "per allocation" % (allocs, 1e9 * (med["memline"] - plain) / allocs))
			if heap_allocs and heap_allocs >= 100000:
				walk = med["memline --no-pymem"] - med["memline --no-pymem, no Python frames"]
				print("memline --no-pymem: %d heap allocations, %.0f ns added per allocation, "
				      "of which reading the Python frames %.0f ns" %
				      (heap_allocs, 1e9 * (med["memline --no-pymem"] - plain) / heap_allocs,
				       1e9 * walk / heap_allocs))
	finally:
		shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
	main()
