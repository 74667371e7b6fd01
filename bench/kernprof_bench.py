#!/usr/bin/python3
"""bench/kernprof_bench.py - what @profile costs: bench/python/kp_work.py (a
decorated hot loop, the same loop undecorated, a decorated loop calling an
undecorated function) plain, under kernprof -l (Debian's line_profiler
4.0.2), under memline with its line tracer and under memline with the
tracer off (MEMLINE_PYTRACE=0: the decorator does nothing), interleaved,
REPS times each; prints the medians of each part's thread CPU time, the
cost per line event of each tracer (against the run without it) and the
undecorated code's slowdown (from medians, and from minima: the run least
disturbed by a loaded machine).
Then memline alone on every other CPython found.  A benchmark: nothing
fails on a miss.

    bench/kernprof_bench.py [--build DIR] [--reps N] [--items N]"""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "python", "kp_work.py")
DEBIAN = "/usr/bin/python3"
PARTS = ("hot_ns", "caller_ns", "cold_ns", "cold_after_ns")


def hits(items):
	"""Line events of one call: hot has 3 per item (for, two lines), caller
	2 (for, one line), and 3 more around the loop."""
	return {"hot_ns": 3 * items + 3, "caller_ns": 2 * items + 3}


def configs(py, build, tmp, with_kernprof):
	ml = os.path.join(build, "memline")
	out = [("plain", [py], {})]
	if with_kernprof:
		out.append(("kernprof -l", [py, shutil.which("kernprof") or "kernprof", "-l", "-o",
					   os.path.join(tmp, "kp.lprof")], {}))
	out.append(("memline", [ml, "run", "-o", tmp, "--", py], {}))
	out.append(("memline, tracer off", [ml, "run", "-o", tmp, "--", py],
		    {"MEMLINE_PYTRACE": "0"}))
	return out


def run_once(cmd, env, items):
	p = subprocess.run(cmd + [WORK, str(items)], env=dict(os.environ, **env),
			   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=600)
	lines = [l for l in p.stdout.decode().splitlines() if l.startswith("{")]
	return json.loads(lines[-1])


def measure(py, build, reps, items, with_kernprof):
	tmp = tempfile.mkdtemp(prefix="ml-kpbench-")
	cfgs = configs(py, build, tmp, with_kernprof)
	got = {name: {k: [] for k in PARTS} for name, _, _ in cfgs}
	try:
		for _ in range(reps):
			for name, cmd, env in cfgs:
				r = run_once(cmd, env, items)
				for k in PARTS:
					got[name][k].append(r[k])
				for f in glob.glob(os.path.join(tmp, "*")):	# run directories, kernprof's file
					if os.path.isdir(f):
						shutil.rmtree(f)
					else:
						os.unlink(f)
	finally:
		shutil.rmtree(tmp, ignore_errors=True)
	med = {name: {k: statistics.median(v) for k, v in parts.items()}
	       for name, parts in got.items()}
	low = {name: {k: min(v) for k, v in parts.items()} for name, parts in got.items()}
	return med, low


def per_hit(med, name, base, items):
	h = hits(items)
	return {k: (med[name][k] - med[base][k]) / h[k] for k in h}


def table(py, med, low, items, with_kernprof):
	print("%s, %d items, medians (ms):" % (py, items))
	print("| run | hot | caller | undecorated | undecorated, after |")
	print("|---|---:|---:|---:|---:|")
	for name, parts in med.items():
		print("| %s | %s |" % (name, " | ".join("%.1f" % (parts[k] / 1e6) for k in PARTS)))
	print()
	print("| tracer | per line event, hot | per line event, caller | undecorated slowdown, "
	      "medians | the same, minima |")
	print("|---|---:|---:|---:|---:|")
	rows = [("memline", "memline, tracer off")]
	if with_kernprof:
		rows.insert(0, ("kernprof -l", "plain"))
	for name, base in rows:
		ph = per_hit(med, name, base, items)
		slow = [100 * statistics.mean([m[name][k] / m[base][k] - 1
					       for k in ("cold_ns", "cold_after_ns")]) for m in (med, low)]
		print("| %s (vs %s) | %.0f ns | %.0f ns | %+.1f%% | %+.1f%% |" % (
			name, base, ph["hot_ns"], ph["caller_ns"], slow[0], slow[1]))
	print()


def main():
	ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
	ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
	ap.add_argument("--reps", type=int, default=7)
	ap.add_argument("--items", type=int, default=1000000)
	args = ap.parse_args()
	build = os.path.abspath(args.build)
	with open("/proc/loadavg") as f:
		print("load average: %s" % " ".join(f.read().split()[:3]))
	kp = shutil.which("kernprof") is not None and subprocess.run(
		[DEBIAN, "-c", "import line_profiler"], stderr=subprocess.DEVNULL).returncode == 0
	if not kp:
		print("(kernprof not found: install python3-line-profiler for the comparison)")
	pys = [DEBIAN] + sorted(glob.glob("/root/.pyenv/versions/3.1[0-3].*/bin/python3"))
	for i, py in enumerate(p for p in pys if os.path.exists(p)):
		med, low = measure(py, build, args.reps if i == 0 else max(3, args.reps // 2),
				   args.items, kp and i == 0)
		table(py, med, low, args.items, kp and i == 0)


if __name__ == "__main__":
	main()
