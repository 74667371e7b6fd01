"""tests/e2e/test_lineprof.py - end-to-end tests of the line timer (`memline
run --lines`): sampled time per line compared with truths measured in the
same run, exact hits from gcov and llvm-cov, threads, clocks, SIGPROF taken
by the program."""

from harness import *


# ------------------------------------------------ the line timer (lineprof/)

def timed_lines(prof, function):
	"""(function object, {line: row}) of `lines --function` on a --lines profile."""
	doc = report(prof, "lines", "--function", function)
	fns = [f for f in doc["lines"]["functions"] if f["name"] == function]
	check(len(fns) == 1, "lines %s: want one function, got %d" % (function, len(fns)))
	return doc, fns[0], {r["line"]: r for r in fns[0]["lines"]}


def pct_of(fn, rows, line):
	check(fn["samples"] > 0, "%s has no samples" % fn["name"])
	return 100.0 * rows[line]["samples"] / fn["samples"]


def cpu_shares(out):
	"""{marker: % of the three lines' CPU time} from lp_split's own
	measurement (its thread's CPU clock around each line)."""
	m = re.search(r"^cpu_ns sixty (\d+) thirty (\d+) ten (\d+)$", out, re.M)
	check(m, "lp_split printed no CPU times: %r" % out)
	ns = dict(zip(("sixty", "thirty", "ten"), map(int, m.groups())))
	total = sum(ns.values())
	return {k: 100.0 * v / total for k, v in ns.items()}


@test
def lines_split_60_30_10():
	"""Each line's share of main's samples is its share of main's CPU time,
	as the program measured it in the same run (about 60/30/10 of the work,
	but an SMT sibling can make equal work take unequal time)."""
	r = Run("lp_split", opts=["--lines"])
	prof = r.file("lp_split")
	want = cpu_shares(text(r.proc.stdout))
	doc, fn, rows = timed_lines(prof, "main")
	t = doc["lines"]["timer"]
	eq((t["estimated"], t["clock"], t["period_ns"]), (True, "cpu", 1000000000 // 997), "timer")
	check(fn["samples"] >= 500, "only %d samples in main" % fn["samples"])
	for marker in ("sixty", "thirty", "ten"):
		got = pct_of(fn, rows, line_of("lp_split", marker))
		check(abs(got - want[marker]) <= 1.5, "%s: %.1f%% of main's samples, %.1f%% of its CPU "
		      "time (+- 1.5)" % (marker, got, want[marker]))
		eq(rows[line_of("lp_split", marker)]["self_samples"], 0, marker + " self samples (all in burn)")
	# Inclusive: main's three lines hold all of burn's time; burn's own lines hold it as self.
	_, bfn, brows = timed_lines(prof, "burn")
	eq(bfn["self_samples"], bfn["samples"], "burn self == total")
	self_sum = sum(x["self_samples"] for x in brows.values())
	eq(self_sum, bfn["samples"], "burn's lines' self samples")
	three = sum(rows[line_of("lp_split", m)]["samples"] for m in ("sixty", "thirty", "ten"))
	check(abs(bfn["samples"] - three) <= 2, "burn %d vs main's three lines %d samples"
	      % (bfn["samples"], three))
	# The text: line_profiler's layout.
	p = run([rcli(), "report", prof, "lines", "--function", "main"])
	out = text(p.stdout).splitlines()
	eq(out[0], "Timer unit: 1e-06 s", "first line")
	check(out[1].startswith("Time is estimated from "), "estimate note: %r" % out[1])
	check(re.match(r"^Total time: [0-9.e+-]+ s$", out[3]), "total line: %r" % out[3])
	check(out[4].startswith("File: ") and out[4].endswith("lp_split.c"), "file line: %r" % out[4])
	eq(out[5], "Function: main at line %d" % line_of("lp_split", "main"), "function line")
	check(out[7].startswith("Line #   Samples         Time  Per Hit   % Time"), "header: %r" % out[7])
	check(out[7].endswith("  Line Contents"), "header end: %r" % out[7])
	eq(out[8], "=" * len(out[7]), "rule")
	row = [l for l in out if l.endswith("/* L:sixty */")][0]
	check(re.match(r"^ {4}\d\d {6}[ \d]{3}\d +\d+\.\d +\d+\.\d +\d+\.\d ", row), "row: %r" % row)
	# -u: the unit scales Time.
	p = run([rcli(), "report", prof, "lines", "--function", "main", "-u", "1e-3"])
	eq(text(p.stdout).splitlines()[0], "Timer unit: 0.001 s", "-u 1e-3")
	# --top 2: burn and main (the most time, with source).
	p = run([rcli(), "report", prof, "lines", "--top", "2"])
	funcs = re.findall(r"^Function: (\S+) at line", text(p.stdout), re.M)
	eq(sorted(funcs), ["burn", "main"], "lines --top 2")
	# ops: time columns and the footer.
	ops = report(prof, "ops", "--sort", "self_cpu_time_total")["ops"]
	eq(ops["functions"][0]["name"], "burn", "top of ops by self_cpu_time_total")
	p = run([rcli(), "report", prof, "ops", "--sort", "cpu_time_total"])
	o = text(p.stdout)
	check("Self CPU %" in o and "CPU total %" in o and "CPU time avg" in o, "ops time headers")
	check(re.search(r"^Self CPU time total: [0-9.]+m?s", o, re.M), "ops footer")


@test
def lines_gcov_exact_hits():
	gcda = fixture("lp_gcov.gcda")
	if os.path.exists(gcda):
		os.unlink(gcda)
	r = Run("lp_gcov", opts=["--lines"])
	prof = r.file("lp_gcov")
	check(os.path.exists(gcda), "no %s after the run" % gcda)
	p = run(["gcov", "--json-format", "--stdout", gcda])
	check(p.returncode == 0, "gcov failed: %s" % text(p.stderr))
	want = {}
	for f in json.loads(text(p.stdout))["files"]:
		if os.path.basename(f["file"]) == "lp_gcov.c":
			for l in f["lines"]:
				want[l["line_number"]] = want.get(l["line_number"], 0) + l["count"]
	_, fn, rows = timed_lines(prof, "main")
	eq(fn["hits_exact"], True, "hits_exact")
	got = {n: x["hits"] for n, x in rows.items() if x["hits"] is not None}
	eq(got, {n: c for n, c in want.items() if fn["first_line"] <= n <= fn["last_line"]},
	   "hits vs gcov's line counts")
	for marker, count in (("inner_body", 3000000), ("call", 1000), ("seventh", 143), ("init", 1)):
		eq(rows[line_of("lp_gcov", marker)]["hits"], count, marker + " hits")
	p = run([rcli(), "report", prof, "lines", "--function", "main"])
	check(re.search(r"^Line #      Hits         Time", text(p.stdout), re.M), "Hits header")
	calls = {f["name"]: f.get("calls") for f in report(prof, "ops")["ops"]["functions"]}
	eq(calls.get("main"), 1, "main's calls from gcov")
	check(calls.get("step") in (None, 1000), "step's calls: %r" % calls.get("step"))


@test
def lines_llvm_cov_exact_hits():
	if not os.path.exists(fixture("lp_llvmcov")) or not shutil.which("llvm-cov") \
	   or not shutil.which("llvm-profdata"):
		raise Skip("clang, llvm-cov or llvm-profdata not installed")
	rawdir = tempfile.mkdtemp(prefix="ml-llvmcov-", dir=OPTS.tmp)
	env = dict(os.environ, LLVM_PROFILE_FILE=os.path.join(rawdir, "lp.profraw"))
	r = Run("lp_llvmcov", opts=["--lines"], env=env)
	prof = r.file("lp_llvmcov")
	merged = os.path.join(rawdir, "lp.profdata")
	p = run(["llvm-profdata", "merge", "-sparse", "-o", merged, env["LLVM_PROFILE_FILE"]])
	eq(p.returncode, 0, "llvm-profdata merge")
	p = run(["llvm-cov", "export", "-format=lcov", "-instr-profile", merged, fixture("lp_llvmcov")])
	want, cur = {}, None
	for l in text(p.stdout).splitlines():
		if l.startswith("SF:"):
			cur = os.path.basename(l[3:])
		elif l.startswith("DA:") and cur == "lp_gcov.c":
			n, c = l[3:].split(",")[:2]
			want[int(n)] = want.get(int(n), 0) + int(c)
	cmd = [rcli(), "report", prof, "lines", "--function", "main", "--json"]
	p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
	eq(p.returncode, 0, "report: %s" % text(p.stderr))
	fn = json.loads(text(p.stdout))["lines"]["functions"][0]
	eq(fn["hits_exact"], True, "hits_exact")
	got = {x["line"]: x["hits"] for x in fn["lines"] if x["hits"] is not None}
	eq(got, {n: c for n, c in want.items() if fn["first_line"] <= n <= fn["last_line"]},
	   "hits vs llvm-cov's line counts")
	for marker, count in (("inner_body", 3000000), ("call", 1000), ("seventh", 143)):
		eq(got.get(line_of("lp_gcov", marker)), count, marker + " hits")


def thread_cpu(out):
	"""{function: (tid, CPU ns)} as lp_threads measured each thread's own
	CPU clock in the run."""
	got = {m[0]: (int(m[1]), int(m[2])) for m in
	       re.findall(r"^cpu (spin_a|spin_b) (\d+) (\d+)$", out, re.M)}
	check(sorted(got) == ["spin_a", "spin_b"], "lp_threads printed %r" % out)
	return got


@test
def lines_threads():
	"""Each thread's samples match its own CPU clock, measured in the same
	run (never an assumed ratio: on SMT siblings equal work is not equal
	CPU time), and land in its own function; main, which only waits, gets
	none."""
	r = Run("lp_threads", opts=["--lines"])
	prof = r.file("lp_threads")
	cpu = thread_cpu(text(r.proc.stdout))
	ops = {f["name"]: f for f in report(prof, "ops")["ops"]["functions"]}
	doc, fn, rows = timed_lines(prof, "main")
	timer = doc["lines"]["timer"]
	period = timer["period_ns"]
	per = {t["tid"]: t["samples"] for t in timer["per_thread"]}
	pid = doc["profile"]["pid"]
	check(rows[line_of("lp_threads", "join")]["samples"] <= 3,
	      "main's join line has %d CPU samples" % rows[line_of("lp_threads", "join")]["samples"])
	check(per.get(pid, 0) <= 3, "main thread (tid %d) has %d CPU samples" % (pid, per.get(pid, 0)))
	eq(sorted(t for t in per if t != pid), sorted(tid for tid, _ in cpu.values()),
	   "sampled threads besides main")
	eq(timer["threads"], 3, "threads with a timer")
	# The clock's samples: CPU time / period, give or take a few periods at
	# the edges (start-up, the last partial period, exit) and 5%.
	slack = lambda n: max(3, n // 20)
	for name, (tid, ns) in cpu.items():
		want = ns / period
		check(want >= 40, "%s ran only %.1f periods" % (name, want))
		check(abs(per[tid] - want) <= slack(want),
		      "%s's thread: %d samples, its CPU clock says %.1f" % (name, per[tid], want))
		# A thread's own samples are its function's plus the few taken in
		# its start-up and exit code.
		got = ops[name]["samples"]
		check(abs(per[tid] - got) <= slack(got),
		      "%s: %d samples in the function, %d in its thread" % (name, got, per[tid]))
	_, fa, ra = timed_lines(prof, "spin_a")
	check(ra[line_of("lp_threads", "a_loop")]["samples"] + ra[line_of("lp_threads", "a_loop") + 1]["samples"]
	      >= 0.9 * fa["samples"], "spin_a's time on its loop")


@test
def lines_wall_vs_cpu():
	read_line = line_of("lp_block", "read")
	r = Run("lp_block", opts=["--lines", "--clock", "wall"])
	doc, fn, rows = timed_lines(r.file("lp_block"), "main")
	eq(doc["lines"]["timer"]["clock"], "wall", "clock")
	# The truth, measured in the same run: the read's share of the wall time
	# of read and burn (on a loaded machine the burn takes longer).
	m = re.match(r"^read_ns (\d+) burn_ns (\d+)$", text(r.proc.stdout).strip())
	check(m, "lp_block's times: %r" % text(r.proc.stdout))
	want = 100.0 * int(m.group(1)) / (int(m.group(1)) + int(m.group(2)))
	got = pct_of(fn, rows, read_line)
	check(abs(got - want) <= 5, "wall: read line has %.1f%%, measured %.1f%%" % (got, want))
	r = Run("lp_block", opts=["--lines"])
	doc, fn, rows = timed_lines(r.file("lp_block"), "main")
	check(rows[read_line]["samples"] <= 2, "cpu: read line has %d samples" % rows[read_line]["samples"])
	check(rows[line_of("lp_block", "burn")]["samples"] >= 10, "cpu: burn line has samples")


@test
def lines_program_sigprof():
	plain = run([fixture("lp_sigprof")])
	eq(plain.returncode, 0, "lp_sigprof alone")
	r = Run("lp_sigprof", opts=["--lines"])
	err = text(r.proc.stderr)
	eq(err.count("memline: the program uses SIGPROF; line timing is off"), 1, "warning lines in %r" % err)
	check(re.match(r"^ticks [1-9]\d*$", text(r.proc.stdout).strip()), "program's own ticks: %r" % text(r.proc.stdout))
	t = report(r.file("lp_sigprof"), "lines", "--function", "main")["lines"]["timer"]
	eq(t["stepped_aside"], True, "stepped_aside")


@test
def lines_run_options():
	for opts, what in ((["--clock", "gpu"], "--clock"), (["--rate", "0"], "--rate"),
			   (["--rate", "x"], "--rate")):
		p = run([memline(), "run"] + opts + ["--", fixture("lp_split"), "1"])
		eq(p.returncode, 2, "run %s exit status" % " ".join(opts))
		check(what in text(p.stderr), "error names %s: %r" % (what, text(p.stderr)))
	r = Run("lp_split", args=["2000000"], opts=["--rate", "211"])
	t = report(r.file("lp_split"), "lines", "--function", "main")["lines"]["timer"]
	eq(t["period_ns"], 1000000000 // 211, "period at --rate 211")
	r = Run("lp_split", args=["2000000"])
	p = run([rcli(), "report", r.file("lp_split"), "lines", "--top", "1"])
	check(p.returncode == 1 and "--lines" in text(p.stderr), "--top without samples: %r" % text(p.stderr))

@test
def report_timed_views():
	"""The report side of the line timer and regions (run under ASan too)."""
	r = Run("lp_split", args=["3000000"], opts=["--lines", "--rate", "4999"])
	prof = r.file("lp_split")
	for args in (["lines", "--function", "main"], ["lines", "--function", "burn", "-u", "1"],
		     ["lines", "--top", "3"], ["ops"], ["ops", "--sort", "self_cpu_time_total"],
		     ["regions"]):
		for j in ([], ["--json"]):
			p = run([rcli(), "report", prof] + args + j)
			eq(p.returncode, 0, "report %s: %s" % (" ".join(args + j), text(p.stderr)[-300:]))
	r = Run("lp_regions")
	for j in ([], ["--json"]):
		p = run([rcli(), "report", r.file("lp_regions"), "regions"] + j)
		eq(p.returncode, 0, "report regions %s: %s" % (j, text(p.stderr)[-300:]))
	for bad in (["lines", "--top", "0"], ["lines", "--top", "2", "--function", "main"],
		    ["ops", "--top", "2"], ["lines", "--function", "main", "-u", "x"]):
		p = run([rcli(), "report", prof] + bad)
		eq(p.returncode, 2, "report %s exit status" % " ".join(bad))
