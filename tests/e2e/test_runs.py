"""tests/e2e/test_runs.py - a run's processes: one directory per run, one
summary line, the main program reported by default, a process picked or
several summed, ranks of distributed jobs, and the runtime's warnings kept
for `memline run` when the program's stderr is not stderr any more."""

import json
import os
import subprocess
import tempfile
import time

from harness import *


def report_json(args, expect_rc=0):
	"""`memline report ARGS --json`: the parsed document(s), and stderr."""
	p = run([rcli(), "report"] + list(args) + ["--json"])
	check(p.returncode == expect_rc, "report %s: exit %d: %s"
	      % (" ".join(args), p.returncode, text(p.stderr).strip()[-400:]))
	return (json.loads(text(p.stdout)) if expect_rc == 0 else None), text(p.stderr)


def leak_total(doc):
	return doc["leaks"]["summary"]["in_use_bytes"]


def torture(name):
	return build_path("torture", name)


@test
def run_directory_per_run():
	"""Two runs in one output directory at the same time: each has its own
	directory, and its summary line counts only its own profiles."""
	out = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	cmd = [memline(), "run", "-o", out, "--", fixture("fork_prog")]
	first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
	second = run(cmd)
	err1 = first.communicate(timeout=60)[1]
	eq((first.returncode, second.returncode), (0, 0), "exit statuses")
	dirs = sorted(os.listdir(out))
	eq(len(dirs), 2, "run directories")
	said = []
	for err in (err1, second.stderr):
		m = re.findall(r"^memline: wrote (\S+)/ \((\d+) profiles: fork_prog, pid (\d+), and 1 "
			       r"other process\)$", text(err), re.M)
		eq(len(m), 1, "summary lines in %r" % text(err))
		eq(len(text(err).strip().splitlines()), 1, "lines memline printed: %r" % text(err))
		said.append(os.path.basename(m[0][0]))
		eq(m[0][1], "2", "profiles counted")
		d = os.path.join(out, said[-1])
		eq(os.path.basename(d), "memline.fork_prog.%s" % m[0][2], "directory named after the pid")
		procs, _ = report_json([d, "processes"])
		eq(sorted(p["pid"] for p in procs["processes"] if p["main"]), [int(m[0][2])],
		   "main program of %s" % said[-1])
	eq(sorted(said), dirs, "each run names its own directory")
	# The output directory itself stands for its newest run.
	newest = max(dirs, key=lambda x: (os.stat(os.path.join(out, x)).st_mtime_ns, x))
	whole, _ = report_json([out, "processes"])
	one, _ = report_json([os.path.join(out, newest), "processes"])
	eq(whole, one, "report OUT_DIR: the newest run in it")


@test
def run_default_is_main_program():
	"""`memline report DIR VIEW` shows the main program; --children its
	fork child; --all both, one document each; --merge --all one document
	summing both; --pid picks one."""
	r = Run("fork_prog")
	L = lambda m: line_of("fork_prog", m)
	procs, _ = report_json([r.run_dir, "processes"])
	ps = procs["processes"]
	eq(len(ps), 2, "processes")
	main = [p for p in ps if p["main"]]
	eq(len(main), 1, "main programs")
	child = [p for p in ps if not p["main"]][0]
	eq((child["started_by"], child["parent"], child["parent_pid"]),
	   ("fork", ps.index(main[0]), main[0]["pid"]), "the child's start")
	eq((main[0]["heap"]["leaked_bytes"], child["heap"]["leaked_bytes"]), (444, 222), "leaks")
	doc, err = report_json([r.run_dir, "leaks"])
	eq(doc["profile"]["pid"], main[0]["pid"], "default process")
	eq(leak_total(doc), 444, "main program's leaks")
	check("2 processes" in err and "processes" in err, "note on stderr: %r" % err)
	doc, _ = report_json([r.run_dir, "leaks", "--children"])
	eq((doc["profile"]["pid"], leak_total(doc)), (child["pid"], 222), "--children")
	doc, _ = report_json([r.run_dir, "leaks", "--pid", str(child["pid"])])
	eq(doc["profile"]["pid"], child["pid"], "--pid")
	docs, _ = report_json([r.run_dir, "leaks", "--all"])
	eq(sorted(leak_total(d) for d in docs), [222, 444], "--all: one document each")
	doc, _ = report_json([r.run_dir, "leaks", "--all", "--merge"])
	eq(leak_total(doc), 666, "--merge: leaks summed")
	eq(sorted(m["pid"] for m in doc["profile"]["merged"]), sorted(p["pid"] for p in ps),
	   "--merge: processes summed")
	stacks = {frame_key(s["frames"][0]): s["bytes"] for s in doc["leaks"]["records"]}
	eq(stacks.get(("main", "fork_prog.c", L("f_before"))), 111, "parent's leak once")
	eq(stacks.get(("main", "fork_prog.c", L("f_child"))), 222, "child's leak")
	doc, _ = report_json([r.run_dir, "ops", "--all", "--merge"])
	row = [f for f in doc["ops"]["functions"] if f["name"] == "main"][0]
	eq((row["self"]["allocs"], row["self"]["alloc_bytes"]), (3, 666), "--merge: ops")
	# Views and files: a bad selection is one line and exit 1.
	_, err = report_json([r.run_dir, "leaks", "--pid", "1"], expect_rc=1)
	check("no process with pid 1" in err, "unknown pid: %r" % err)
	p = run([rcli(), "report", r.run_dir, "processes", "--all"])
	eq(p.returncode, 2, "processes takes no selection")


@test
def run_launcher_one_line():
	"""A launcher script (like a pyenv shim: a shell that runs helpers, then
	execs env, which execs the program) writes a profile per process, but
	`memline run` prints one line, and reports show the program."""
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	shim = os.path.join(d, "shim")
	with open(shim, "w") as f:
		f.write("#!/bin/sh\nv=$(echo 3.11)\nls / >/dev/null\nexec env SHIM=$v \"$@\"\n")
	os.chmod(shim, 0o755)
	out = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	p = run([memline(), "run", "-o", out, "--", shim, fixture("fork_prog")])
	eq(p.returncode, 0, "exit status: %s" % text(p.stderr))
	lines = text(p.stderr).strip().splitlines()
	eq(len(lines), 1, "memline's lines: %r" % lines)
	rd = run_dir_of(out, p.stderr)
	check(re.search(r"\(\d+ profiles: fork_prog, pid \d+, and \d+ other processes\)", lines[0]),
	      "summary names the program: %r" % lines[0])
	procs, _ = report_json([rd, "processes"])
	names = [pr["program"] for pr in procs["processes"]]
	check(len(names) >= 4 and "env" in names and "ls" in names, "processes: %s" % names)
	main = [pr for pr in procs["processes"] if pr["main"]]
	eq([(m["program"], m["started_by"]) for m in main], [("fork_prog", "exec")], "main program")
	doc, _ = report_json([rd, "leaks"])
	eq(leak_total(doc), 444, "the program's leaks, by default")


@test
def run_ranks_recorded():
	"""The rank of a distributed job's process (torchrun's RANK, Open MPI's,
	MPICH's PMI_RANK, SLURM_PROCID) is in its profile; --rank picks it; the
	run's directory is named with it."""
	env = dict(os.environ)
	for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
		  "PMIX_RANK", "SLURM_PROCID"):
		env.pop(k, None)
	cases = [({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "SLURM_PROCID": "1"},
		  (3, 1, 8, "torch")),
		 ({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
		   "OMPI_COMM_WORLD_SIZE": "6"}, (5, 0, 6, "openmpi")),
		 ({"PMI_RANK": "2", "PMI_SIZE": "4"}, (2, -1, 4, "pmi")),
		 ({"SLURM_PROCID": "7", "SLURM_LOCALID": "3", "SLURM_NTASKS": "16"}, (7, 3, 16, "slurm"))]
	out = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	for extra, want in cases:
		e = dict(env)
		e.update(extra)
		p = run([memline(), "run", "-o", out, "--", fixture("fork_prog")], env=e)
		eq(p.returncode, 0, "exit status")
		m = re.search(r"^memline: wrote (\S+)/", text(p.stderr), re.M)
		d = os.path.join(out, os.path.basename(m.group(1)))
		check(os.path.basename(d).startswith("memline.fork_prog.rank%d." % want[0]),
		      "directory name %s" % os.path.basename(d))
		procs, _ = report_json([d, "processes"])
		for pr in procs["processes"]:	# the fork child has its parent's rank
			eq((pr["rank"], pr["local_rank"], pr["world_size"], pr["rank_from"]), want,
			   "rank of %s" % pr["path"])
		doc, _ = report_json([d, "leaks", "--rank", str(want[0])])
		eq((doc["profile"]["rank"], leak_total(doc)), (want[0], 444), "--rank: the rank's top process")
	# All ranks' runs at once: the processes view compares them; --rank picks
	# across runs.
	runs = sorted(os.path.join(out, x) for x in os.listdir(out))
	procs, _ = report_json(runs + ["processes"])
	eq(len(procs["runs"]), 4, "runs")
	docs, _ = report_json(runs + ["leaks"])
	eq(sorted(d["profile"]["rank"] for d in docs), [2, 3, 5, 7], "each run's main program")
	doc, _ = report_json(runs + ["leaks", "--rank", "5"])
	eq(doc["profile"]["rank"], 5, "--rank across runs")
	p = run([rcli(), "report"] + runs + ["processes"])
	eq(p.returncode, 0, "processes as text")
	check(" Rank " in text(p.stdout), "a Rank column: %r" % text(p.stdout)[:400])


@test
def run_warning_kept_when_stderr_is_a_file():
	"""The program closed stderr and opened a data file on descriptor 2: the
	runtime's warning stays out of the file, is kept in the profile, and
	`memline run` prints it."""
	prog = torture("fd_stderr_reopened")
	check(os.path.exists(prog), "%s is not built" % prog)
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	out = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	p = run([memline(), "run", "--lines", "-o", out, "--", prog], cwd=d)
	eq(p.returncode, 0, "exit status")
	with open(os.path.join(d, "data.txt")) as f:
		eq(f.read(), "data\nmore\n", "the program's data file")
	check(re.search(r"^memline: fd_stderr_reopened \(pid \d+\): the program uses SIGPROF; "
			r"line timing is off$", text(p.stderr), re.M),
	      "the warning, from memline run: %r" % text(p.stderr))
	procs, _ = report_json([run_dir_of(out, p.stderr), "processes"])
	eq(procs["processes"][0]["warnings"],
	   [{"text": "the program uses SIGPROF; line timing is off", "shown": False}], "kept warnings")


@test
def run_file_size_limit_one_line():
	"""RLIMIT_FSIZE below the profile's size: the program is not killed, and
	memline says in one line why there is no profile."""
	prog = torture("sig_fsize")
	check(os.path.exists(prog), "%s is not built" % prog)
	out = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	p = run([memline(), "run", "-o", out, "--", prog])
	eq((p.returncode, text(p.stdout)), (0, "a buffered line\n"), "exit status and stdout")
	lines = text(p.stderr).strip().splitlines()
	eq(len([l for l in lines if "cannot write the profile" in l]), 1, "lines: %r" % lines)
	check("RLIMIT_FSIZE" in lines[0] and "File too large" in lines[0], "reason: %r" % lines[0])
	eq(os.listdir(out), [], "no empty run directory left")


@test
def report_directories_of_runs():
	"""Two directories named, each holding runs (memline run -o DIR): each
	stands for its own newest run."""
	dirs = [tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp) for _ in range(2)]
	for d, prog in zip(dirs, ("fork_prog", "leak")):
		eq(run([memline(), "run", "-o", d, "--", fixture(prog)]).returncode, 0, "run " + prog)
	doc, _ = report_json(dirs + ["processes"])
	docs = doc if isinstance(doc, list) else [doc]
	progs = sorted(p["program"] for x in docs for p in x["processes"] if p["main"])
	eq(progs, ["fork_prog", "leak"], "main programs of the two directories' runs")
