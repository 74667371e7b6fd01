#!/usr/bin/python3
"""tests/torture/run.py - the torture suite: every program tests/torture/*.c
runs twice, alone and under `memline run`, and must behave the same (the
same stdout, the same stderr but for memline's "wrote" lines, the same files
written in its working directory, the same exit status or terminating
signal), and its profiles must hold exactly the numbers declared in the
program's own header comment.  Standard library only.

    tests/torture/run.py [--build DIR] [-k SUBSTR] [-v] [--slow]

Prints `ok NAME`, `skip NAME: why` or `FAIL NAME: reason` per program, then
`torture: N passed, M failed, K skipped`; exits 1 if any failed.

Declarations, one per line anywhere in the program's source (usually its
header comment), each starting with @:

  @args A B ...          arguments for the program (split on spaces)
  @run OPT ...           options for `memline run` (--lines, --clock wall, ...)
  @slow                  run only with --slow
  @timeout SECONDS       per run (default 60)
  @profiles PROG=N ...   profiles expected per program name (default: the
                         program's own name, once; any other name: none)
  @expect PROG[SEL] FUNC FIELD=VALUE ...
                         in every profile of PROG matching SEL (at least
                         one must), the `memline report ops --json` row of
                         function FUNC has these amounts.  FIELD is an
                         amount of docs/json.md (allocs, alloc_bytes,
                         frees, freed_bytes, leaked_blocks, leaked_bytes,
                         peak_blocks, peak_bytes), self by default,
                         total.FIELD for the inclusive amount.  A function
                         absent from the profile has every amount 0.
  @warns TEXT            under memline, stderr has exactly one "memline: "
                         line holding TEXT (a warning memline must give),
                         which the comparison of stderr leaves out
  @end PROG[SEL] REASON STATUS
                         the profiles' end_reason (exit, _exit, exec,
                         signal, thread_exit) and end_status.
SEL is optional: [key=value,...] over the profile's JSON object (forked,
end_reason, end_status) and argc (the number of arguments in argv).

A new torture case is a new .c file here with its declarations: the
Makefile builds every tests/torture/*.c (-g -O0 -pthread -ldl); NAME.lib.c
is NAME's companion library, built as libNAME.so beside the program."""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AMOUNTS = {"allocs", "alloc_bytes", "frees", "freed_bytes", "leaked_blocks", "leaked_bytes",
	   "peak_blocks", "peak_bytes"}
DIRECTIVE = re.compile(r"^\s*(?:/?\*+)?\s*@(\w+)\b[ \t]*(.*?)\s*(?:\*/)?\s*$")
SELECTED = re.compile(r"^([A-Za-z0-9_.+-]+)(?:\[([^\]]*)\])?$")


class Fail(Exception):
	pass


def check(cond, msg):
	if not cond:
		raise Fail(msg)


# ------------------------------------------------------------ declarations

class Case:
	def __init__(self, src):
		self.src = src
		self.name = os.path.splitext(os.path.basename(src))[0]
		self.args, self.run_opts, self.slow, self.timeout = [], [], False, 60
		self.profiles = {self.name: 1}
		self.expects, self.ends, self.warns = [], [], []
		with open(src) as f:
			for n, line in enumerate(f, 1):
				m = DIRECTIVE.match(line)
				if m:
					self.declare(m.group(1), m.group(2), n)

	def declare(self, key, value, n):
		where = "%s:%d" % (os.path.basename(self.src), n)
		words = value.split()
		if key == "args":
			self.args = words
		elif key == "run":
			self.run_opts = words
		elif key == "slow":
			self.slow = True
		elif key == "timeout":
			self.timeout = int(value)
		elif key == "profiles":
			self.profiles = {}
			for w in words:
				prog, _, count = w.partition("=")
				self.profiles[prog] = int(count)
		elif key == "expect":
			check(len(words) >= 3, "%s: @expect PROG[SEL] FUNC FIELD=VALUE ..." % where)
			fields = {}
			for w in words[2:]:
				field, _, v = w.partition("=")
				check(field.split(".")[-1] in AMOUNTS and field.count(".") <= 1 and
				      (field.count(".") == 0 or field.startswith("total.")),
				      "%s: unknown amount %r" % (where, field))
				fields[field] = int(v)
			self.expects.append((selector(words[0], where), words[1], fields, where))
		elif key == "warns":
			check(value, "%s: @warns TEXT" % where)
			self.warns.append(value)
		elif key == "end":
			check(len(words) == 3, "%s: @end PROG[SEL] REASON STATUS" % where)
			self.ends.append((selector(words[0], where), words[1], int(words[2]), where))
		else:
			raise Fail("%s: unknown declaration @%s" % (where, key))


def selector(text, where):
	"""(program name, {key: value}) from PROG[key=value,...]."""
	m = SELECTED.match(text)
	check(m, "%s: bad program selector %r" % (where, text))
	sel = {}
	for item in filter(None, (m.group(2) or "").split(",")):
		k, _, v = item.partition("=")
		sel[k.strip()] = v.strip()
	return m.group(1), sel


# ------------------------------------------------------------ running

def snapshot(d):
	"""{relative path: contents} of every file under d."""
	out = {}
	for base, _, files in os.walk(d):
		for f in files:
			p = os.path.join(base, f)
			with open(p, "rb") as fh:
				out[os.path.relpath(p, d)] = fh.read()
	return out


def status(rc):
	"""An exit status as a shell reports it: 128 + N for death by signal N."""
	return 128 - rc if rc < 0 else rc


def run(argv, cwd, timeout):
	"""Runs argv in a session of its own, so that a run that hangs is killed
	with everything it started (under memline: the program too)."""
	with subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
			      stdin=subprocess.DEVNULL, start_new_session=True) as p:
		try:
			out, err = p.communicate(timeout=timeout)
		except subprocess.TimeoutExpired:
			os.killpg(p.pid, signal.SIGKILL)
			p.communicate()
			raise Fail("timed out after %d s: %s" % (timeout, " ".join(argv)))
	return subprocess.CompletedProcess(argv, p.returncode, out, err)


def without_memline_lines(stderr):
	"""stderr without memline's own lines: `memline run`'s summary and the
	runtime's warnings, which are not the program's output."""
	return b"".join(l for l in stderr.splitlines(True) if not l.startswith(b"memline: "))


def without_warnings(case, stderr):
	"""stderr less the memline lines @warns declares, each of which must be
	there exactly once."""
	lines = stderr.splitlines(True)
	said = set()
	for w in case.warns:
		hits = [i for i, l in enumerate(lines) if l.startswith(b"memline: ") and w.encode() in l]
		check(len(hits) == 1, "memline's stderr has %d lines with %r (want 1): %r"
		      % (len(hits), w, stderr[-300:]))
		said.add(hits[0])
	return b"".join(l for i, l in enumerate(lines) if i not in said)


def compare_runs(case, prog, tmp):
	"""Runs the program alone and under memline; returns the profiles."""
	alone, under, out = (os.path.join(tmp, d) for d in ("alone", "under", "profiles"))
	for d in (alone, under, out):
		os.mkdir(d)
	p = run([prog] + case.args, alone, case.timeout)
	q = run([os.path.join(OPTS.build, "memline"), "run", "-o", out] + case.run_opts +
		["--", prog] + case.args, under, case.timeout)
	check(p.stdout == q.stdout, "stdout differs: alone %r, under memline %r"
	      % (p.stdout[-300:], q.stdout[-300:]))
	check(without_memline_lines(p.stderr) ==
	      without_memline_lines(without_warnings(case, q.stderr)),
	      "stderr differs: alone %r, under memline %r" % (p.stderr[-300:], q.stderr[-300:]))
	check(status(p.returncode) == q.returncode, "exit status: alone %d, under memline %d"
	      % (status(p.returncode), q.returncode))
	fa, fu = snapshot(alone), snapshot(under)
	check(sorted(fa) == sorted(fu), "files written: alone %s, under memline %s"
	      % (sorted(fa), sorted(fu)))
	for f in fa:
		check(fa[f] == fu[f], "file %s differs" % f)
	runs = os.listdir(out)
	check(len(runs) <= 1 and all(r.startswith("memline.") for r in runs),
	      "want one run directory in the output folder, got %s" % runs)
	run_dir = os.path.join(out, runs[0]) if runs else out
	return sorted(glob.glob(os.path.join(run_dir, "*.mlp"))), run_dir


# ------------------------------------------------------------ profiles

class Profile:
	def __init__(self, path):
		self.path = path
		self.prog = re.match(r"^memline\.(.+?)\.\d+(?:\.\d+)?\.mlp$", os.path.basename(path)).group(1)
		self.ops = report(path, "ops")
		self.meta = self.ops["profile"]
		self.rows, self.twice = {}, set()
		for r in self.ops["ops"]["functions"]:
			# Two rows may share a name (a libc function inlined from two
			# files, seen only by the line timer's samples): an error
			# only for a function a declaration asks about.
			if r["name"] in self.rows:
				self.twice.add(r["name"])
			self.rows[r["name"]] = r

	def matches(self, sel):
		for k, v in sel.items():
			got = len(self.meta["argv"]) - 1 if k == "argc" else self.meta.get(k)
			if str(got).lower() != v.lower():
				return False
		return True

	def amount(self, func, field):
		check(func not in self.twice, "%s: two functions named %s" % (self.path, func))
		row = self.rows.get(func)
		if row is None:
			return 0
		which, _, name = field.rpartition(".")
		return row[which or "self"][name]


def report(path, view):
	p = subprocess.run([os.path.join(OPTS.build, "memline"), "report", path, view, "--json"],
			   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
	check(p.returncode == 0, "report %s %s: %s" % (os.path.basename(path), view,
						     p.stderr.decode(errors="replace").strip()[-300:]))
	return json.loads(p.stdout)


def select(profiles, sel, where):
	prog, keys = sel
	got = [p for p in profiles if p.prog == prog and p.matches(keys)]
	check(got, "%s: no profile of %s matches %s (have %s)" % (where, prog, keys,
		[(p.prog, p.meta["forked"], p.meta["end_reason"], len(p.meta["argv"]) - 1)
		 for p in profiles]))
	return got


def check_profiles(case, paths):
	profiles = [Profile(p) for p in paths]
	counts = {}
	for p in profiles:
		counts[p.prog] = counts.get(p.prog, 0) + 1
	want = {k: v for k, v in case.profiles.items() if v}
	check(counts == want, "profiles per program: %s, want %s" % (counts, want))
	for sel, func, fields, where in case.expects:
		for p in select(profiles, sel, where):
			got = {f: p.amount(func, f) for f in fields}
			check(got == fields, "%s: %s in %s: got %s" % (where, func, os.path.basename(p.path),
								  {f: v for f, v in got.items() if v != fields[f]}))
	for sel, reason, st, where in case.ends:
		for p in select(profiles, sel, where):
			got = (p.meta["end_reason"], p.meta["end_status"])
			check(got == (reason, st), "%s: %s ended %s, want %s"
			      % (where, os.path.basename(p.path), got, (reason, st)))


# ------------------------------------------------------------ the runner

def run_case(case):
	prog = os.path.join(OPTS.build, "torture", case.name)
	check(os.access(prog, os.X_OK), "%s is not built (make torture)" % prog)
	tmp = tempfile.mkdtemp(prefix="ml-torture-%s-" % case.name, dir=OPTS.tmp)
	paths, out = compare_runs(case, prog, tmp)
	left = [f for f in os.listdir(out) if not f.endswith(".mlp")]
	check(not left, "files other than profiles in the run's directory: %s" % left)
	# Profiles get the permission bits of memline run's umask, whatever the
	# program did to its own.
	mode = 0o666 & ~OPTS.umask
	for p in paths:
		check(os.stat(p).st_mode & 0o7777 == mode, "%s: mode %o, want %o"
		      % (os.path.basename(p), os.stat(p).st_mode & 0o7777, mode))
	check_profiles(case, paths)


def main():
	global OPTS
	ap = argparse.ArgumentParser(description="memline torture suite")
	ap.add_argument("--build", default="build")
	ap.add_argument("-k", dest="filter", default="")
	ap.add_argument("-v", dest="verbose", action="store_true")
	ap.add_argument("--slow", action="store_true", help="also run the programs marked @slow")
	OPTS = ap.parse_args()
	OPTS.build = os.path.abspath(OPTS.build)
	OPTS.umask = os.umask(0)
	os.umask(OPTS.umask)
	OPTS.tmp = tempfile.mkdtemp(prefix="memline-torture-")
	passed = failed = skipped = 0
	try:
		for src in sorted(s for s in glob.glob(os.path.join(HERE, "*.c"))
				  if not s.endswith(".lib.c")):	# companion libraries
			name = os.path.splitext(os.path.basename(src))[0]
			if OPTS.filter not in name:
				continue
			try:
				case = Case(src)
				if case.slow and not OPTS.slow:
					print("skip %s: slow (run with --slow)" % name)
					skipped += 1
					continue
				run_case(case)
				print("ok %s" % name)
				passed += 1
			except Fail as e:
				print("FAIL %s: %s" % (name, str(e).replace("\n", " ")[:800]))
				failed += 1
			except Exception as e:  # a harness bug or an unexpected document
				print("FAIL %s: %s: %s" % (name, type(e).__name__, str(e)[:300]))
				failed += 1
			sys.stdout.flush()
	finally:
		if not OPTS.verbose:
			shutil.rmtree(OPTS.tmp, ignore_errors=True)
		else:
			print("kept %s" % OPTS.tmp)
	print("torture: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
	return 1 if failed else 0


OPTS = None

if __name__ == "__main__":
	sys.exit(main())
