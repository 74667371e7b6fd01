"""tests/e2e/harness.py - what every end-to-end test area shares: the
registry (@test), Fail and Skip, assertions, running a fixture under
`memline run` in a fresh directory (Run), `memline report --json` (report)
and the JSON schema read into plain rows.  Standard library only.

An area file (tests/e2e/test_<area>.py) does `from harness import *` and
defines its tests with @test; run.py imports the areas and runs them."""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXSRC = os.path.join(ROOT, "tests", "fixtures")
# The one registry of tests: @test appends, in the order the area files
# are imported (run.py's AREAS) and, within a file, in source order.
TESTS = []
# The command line (run.py fills it in): build, cli, filter, verbose, tmp.
OPTS = argparse.Namespace(build=None, cli=None, filter="", verbose=False, tmp=None)


class Fail(Exception):
	pass


class Skip(Exception):
	"""A test that cannot run here (an optional tool or device is absent):
	reported as `skip NAME: why` and counted apart from passes."""
	pass


def test(fn):
	"""Registers fn as a test named by its function name (-k matches it)."""
	TESTS.append(fn)
	return fn


def check(cond, msg):
	if not cond:
		raise Fail(msg)


def eq(got, want, what):
	if got != want:
		raise Fail("%s: got %r, want %r" % (what, got, want))


# ---------------------------------------------------------------- helpers

def build_path(*parts):
	return os.path.join(OPTS.build, *parts)


def memline():
	return build_path("memline")


def rcli():
	"""The memline that reads profiles: --cli (an ASan build) or the build's."""
	return OPTS.cli or memline()


def fixture(name):
	return build_path("fixtures", name)


def fixture_source(name):
	for ext in (".c", ".cc"):
		p = os.path.join(FIXSRC, name + ext)
		if os.path.exists(p):
			return p
	raise Fail("no source for fixture " + name)


def line_of(name, marker):
	"""The line number of the `L:marker` comment in fixture name's source."""
	pat = re.compile(r"L:%s \*/" % re.escape(marker))
	with open(fixture_source(name)) as f:
		hits = [i for i, text in enumerate(f, 1) if pat.search(text)]
	if len(hits) != 1:
		raise Fail("marker L:%s found %d times in %s" % (marker, len(hits), name))
	return hits[0]


def line_of_file(base, marker):
	"""The line of the `L:marker` comment in tests/fixtures/BASE (a fixture
	source that is not a program)."""
	pat = re.compile(r"L:%s \*/" % re.escape(marker))
	with open(os.path.join(FIXSRC, base)) as f:
		hits = [i for i, text in enumerate(f, 1) if pat.search(text)]
	if len(hits) != 1:
		raise Fail("marker L:%s found %d times in %s" % (marker, len(hits), base))
	return hits[0]


def no_core():
	import resource
	resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(argv, cwd=None, env=None, timeout=60):
	try:
		return subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
				      stderr=subprocess.PIPE, timeout=timeout,
				      preexec_fn=no_core)
	except subprocess.TimeoutExpired:
		raise Fail("timed out: " + " ".join(argv))


def text(b):
	return b.decode("utf-8", "replace")


def verified(r, what):
	"""(stacks checked, stacks that differ) of a MEMLINE_VERIFY_UNWIND=1 Run."""
	m = re.findall(r"MEMLINE_VERIFY_UNWIND: (\d+) stacks checked against libunwind, (\d+) differ",
		       text(r.proc.stderr))
	check(m, "%s: no verification line in %r" % (what, text(r.proc.stderr)[-300:]))
	return sum(int(a) for a, _ in m), sum(int(b) for _, b in m)


def one_line_error(p, what, *keywords):
	"""Asserts p failed with exactly one line on stderr holding a keyword."""
	err = text(p.stderr).strip()
	check(p.returncode != 0, "%s: exit status 0, want non-zero" % what)
	check(p.returncode > 0, "%s: killed by signal %d" % (what, -p.returncode))
	lines = err.splitlines()
	check(len(lines) == 1, "%s: want one error line, got %d: %r" % (what, len(lines), err))
	low = err.lower()
	check(any(k in low for k in keywords),
	      "%s: error %r mentions none of %s" % (what, err, keywords))
	return err


def run_dir_of(out, stderr):
	"""The one run directory `memline run -o out` made, checked against its
	summary line: `memline: wrote DIR/ (N profiles: PROG, pid P...)`."""
	runs = os.listdir(out)
	check(len(runs) == 1 and runs[0].startswith("memline."),
	      "want one run directory in %s, got %s" % (out, runs))
	d = os.path.join(out, runs[0])
	said = re.findall(r"^memline: wrote (\S+)/ \((\d+) profiles?[:;]", text(stderr), re.M)
	check(len(said) == 1, "want one 'memline: wrote DIR/' line: %r" % text(stderr)[-400:])
	eq(os.path.basename(said[0][0]), runs[0], "run directory named by 'memline: wrote'")
	n = len([f for f in os.listdir(d) if f.endswith(".mlp")])
	eq(int(said[0][1]), n, "profiles counted by 'memline: wrote'")
	return d


class Run:
	"""One `memline run` of a fixture in a fresh directory."""

	def __init__(self, prog, args=(), opts=(), env=None, expect_rc=0, rc_ok=None):
		self.dir = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
		path = prog if os.path.isabs(prog) else fixture(prog)
		cmd = [memline(), "run", "-o", self.dir] + list(opts) + ["--", path] + list(args)
		self.proc = run(cmd, cwd=self.dir, env=env)
		rc = self.proc.returncode
		if rc_ok is None:
			rc_ok = (expect_rc,)
		check(rc in rc_ok, "memline run %s: exit %d, want %s; stderr: %s"
		      % (os.path.basename(path), rc, " or ".join(map(str, rc_ok)),
			 text(self.proc.stderr).strip()[-400:]))
		self.run_dir = run_dir_of(self.dir, self.proc.stderr)
		left = [f for f in os.listdir(self.run_dir) if not f.endswith(".mlp")]
		eq(left, [], "files other than profiles (half-written?)")

	def files(self, prog=None):
		pat = "memline.%s.*.mlp" % (prog or "*")
		return sorted(glob.glob(os.path.join(self.run_dir, pat)))

	def file(self, prog):
		fs = self.files(prog)
		check(len(fs) == 1, "want 1 profile of %s, got %d: %s"
		      % (prog, len(fs), [os.path.basename(f) for f in os.listdir(self.dir)]))
		return fs[0]


def profile_plain(data):
	"""A profile's bytes with its sections as they are when decompressed
	(format v3 and later store them as one zstd frame after the 64-byte header), so
	that section offsets read as docs/format.md describes them."""
	hs, flags = struct.unpack_from("<I", data, 12)[0], struct.unpack_from("<I", data, 36)[0]
	if not flags & 1:
		return data
	p = subprocess.run(["zstd", "-d", "-c", "-q"], input=data[hs:], stdout=subprocess.PIPE,
			   stderr=subprocess.PIPE)
	check(p.returncode == 0, "zstd -d: " + text(p.stderr))
	return data[:hs] + p.stdout


def report(files, view, *extra):
	"""Runs `memline report FILES VIEW --json EXTRA` and returns the document."""
	if isinstance(files, str):
		files = [files]
	cmd = [rcli(), "report"] + list(files) + [view, "--json"] + list(extra)
	p = run(cmd)
	check(p.returncode == 0, "report %s: exit %d: %s"
	      % (view, p.returncode, text(p.stderr).strip()[-400:]))
	try:
		doc = json.loads(text(p.stdout))
	except ValueError as e:
		raise Fail("report %s: invalid JSON: %s" % (view, e))
	docs = doc if len(files) > 1 else [doc]
	check(isinstance(doc, list) == (len(files) > 1) and len(docs) == len(files),
	      "report of %d files: want %s" % (len(files), "an array" if len(files) > 1 else "one document"))
	for d, f in zip(docs, files):
		eq(d.get("schema"), "memline.report", "schema")
		eq(d.get("version"), 1, "schema version")
		eq(d.get("view"), view, "view")
		check(view in d, "no %r object in the document" % view)
		eq(os.path.basename(d["profile"]["path"]), os.path.basename(f), "document order")
	return doc


# ------------------------------------------------- the JSON schema, read
# (docs/json.md), in one place: reports become plain tuples and flat rows.

def frame_key(fr):
	return (fr.get("function"), os.path.basename(fr.get("file") or ""), fr.get("line") or 0)


def leak_stacks(doc):
	"""[(bytes, blocks, [(function, file basename, line), ...innermost first])]"""
	return [(s["bytes"], s["blocks"], [frame_key(f) for f in s["frames"]])
		for s in doc["leaks"]["records"]]


def leak_summary(doc):
	s = doc["leaks"]["summary"]
	return (s["in_use_bytes"], s["in_use_blocks"], s["allocs"], s["frees"], s["alloc_bytes"])


def flat(r):
	"""A row with "self" and "total" amounts, flattened."""
	sf, tt = r["self"], r["total"]
	return {"self_bytes": sf["alloc_bytes"], "incl_bytes": tt["alloc_bytes"],
		"self_allocs": sf["allocs"], "allocs": tt["allocs"],
		"frees": tt["frees"], "freed_bytes": tt["freed_bytes"],
		"peak_bytes": tt["peak_bytes"], "self_peak_bytes": sf["peak_bytes"],
		"leaked_bytes": tt["leaked_bytes"], "leaked_blocks": tt["leaked_blocks"]}


def ops_rows(doc):
	"""{function name: flat row}"""
	return {r["name"]: flat(r) for r in doc["ops"]["functions"]}


def line_rows(doc):
	"""{line number: row} of the functions asked for; every line of a
	function has a row, zeros included."""
	out = {}
	for fn in doc["lines"]["functions"]:
		for r in fn["lines"]:
			out[r["line"]] = {"self_bytes": r["self_alloc_bytes"],
					  "incl_bytes": r["total_alloc_bytes"],
					  "peak_bytes": r["peak_bytes"],
					  "leaked_bytes": r["leaked_bytes"],
					  "allocs": r["allocs"], "text": r["text"]}
	return out


def in_file(frames, src):
	return [f for f in frames if f[1] == os.path.basename(src)]


def user_leaks(doc, name):
	"""Leak stacks whose innermost frame is in fixture name's source."""
	src = os.path.basename(fixture_source(name))
	return [s for s in leak_stacks(doc) if s[2] and s[2][0][1] == src]


def lines_of(prof, function):
	return line_rows(report(prof, "lines", "--function", function))


def row(rows, line, what):
	check(line in rows, "%s: no row for line %d (have %s)" % (what, line, sorted(rows)[:40]))
	return rows[line]


def expect_line(rows, line, what, **want):
	r = row(rows, line, what)
	for k, v in want.items():
		eq(r.get(k), v, "%s line %d %s" % (what, line, k))


# ------------------------------------------------- peers and libraries

JEMALLOC_SO = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def valgrind_numbers(prog):
	"""(in-use bytes, in-use blocks, allocs, frees, bytes allocated) by valgrind."""
	p = run(["valgrind", "--leak-check=full", prog], timeout=120)
	err = re.sub(r"(\d),(\d)", r"\1\2", text(p.stderr))
	m1 = re.search(r"in use at exit: (\d+) bytes in (\d+) blocks", err)
	m2 = re.search(r"total heap usage: (\d+) allocs, (\d+) frees, (\d+) bytes allocated", err)
	check(m1 and m2, "cannot read valgrind's summary")
	return tuple(int(x) for x in m1.groups() + m2.groups())
