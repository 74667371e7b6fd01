#!/usr/bin/python3
"""tests/peers/compare.py - memline against valgrind on programs modelled on
the test programs of valgrind's memcheck (vg_*), LLVM's LeakSanitizer
(ls_*), heaptrack (ht_*) and bytehound (bh_*), written for memline.

Each program runs three times from BUILD/peers: plainly, under `memline run`
and under `valgrind --leak-check=full --show-leak-kinds=all
--run-libc-freeres=no --run-cxx-freeres=no` (valgrind would otherwise free
glibc's and libstdc++'s own buffers at exit, which neither the program nor
memline does).  The three runs must print the same stdout and end the same
way; memline's heap summary (allocations, frees, bytes allocated, bytes and
blocks in use at exit) must equal valgrind's, and so must the blocks in use
at exit grouped by the line that allocated them.  Where the two differ for a
reason docs/comparison.md explains, KNOWN below says by exactly how much.

    tests/peers/compare.py [--build DIR] [-k SUBSTR] [-v] [-j N]

Prints `ok NAME`, `skip NAME: why` or `FAIL NAME: reason` per program, then
`peers: N passed, M failed, K skipped`; exits 1 if any failed."""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OPTS = None

# Differences explained in docs/comparison.md ("The peers' test programs"):
# program -> {field: memline minus valgrind}, and records that exist on one
# side only.  Each entry names its reason.
DTV = 32  # bytes per thread: the two TLS modules memline adds to every DTV
KNOWN = {
	# Threads: each new thread's DTV (a calloc in pthread_create) is 16
	# bytes larger per module with thread-local storage, and memline adds
	# two (libmemline, libunwind).  N DTVs allocated, K of them cached with
	# their thread's stack and in use at exit.
	"vg_threads": {"alloc_bytes": 6 * DTV, "in_use_bytes": 4 * DTV},
	"ls_tsd_destructor": {"alloc_bytes": 1 * DTV, "in_use_bytes": 1 * DTV},
	"ls_reachability": {"alloc_bytes": 1 * DTV, "in_use_bytes": 1 * DTV},
	"ls_threads_leak": {"alloc_bytes": 8 * DTV, "in_use_bytes": 4 * DTV},
	"bh_alloc_in_tls": {"alloc_bytes": 1 * DTV, "in_use_bytes": 1 * DTV},
	"vg_exit_in_thread": {"alloc_bytes": 1 * DTV, "in_use_bytes": 1 * DTV},
	# A block allocated by a library that was dlclose'd before exit:
	# memline keeps the module in its map and names the line (give, in
	# the library); valgrind shows the frame as ??? (same bytes, blocks).
	# And memline's runtime dlopens libunwind at start-up, which makes
	# the loader's _dl_find_object table grow once (by memline, not
	# recorded): the program's dlopens need one segment (2,304 bytes,
	# kept to exit) fewer.
	"ls_dlopen_cycle": {"allocs": -1, "alloc_bytes": -2304, "in_use_bytes": -2304,
			    "in_use_blocks": -1,
			    "records": ["give", "?", "dlfo_mappings_segment_allocate"]},
	"ht_async": {"alloc_bytes": 1 * DTV, "in_use_bytes": 1 * DTV},
	# pthread_exit in the main thread loads libgcc_s.so.1 (to unwind) on
	# first use; memline's runtime has it loaded already, so the loader's
	# allocations for it (6 blocks, 4,046 bytes, one freed) are not made.
	"vg_thread_exit_main": {"allocs": -6, "frees": -1, "alloc_bytes": -4046,
				"in_use_bytes": -4038, "in_use_blocks": -5,
				"records": ["dl_check_map_versions", "dl_new_object",
					    "dlfo_mappings_segment_allocate", "strdup"]},
	# valgrind 3.19 counts a realloc that fails (too large) as an allocation
	# of the size asked for and a free; nothing was allocated or freed.
	"vg_malloc_family": {"allocs": -1, "frees": -1, "alloc_bytes": -(2 ** 63 - 1)},
}


class Fail(Exception):
	pass


class Skip(Exception):
	pass


def run(argv, cwd, timeout=120, env=None):
	try:
		p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
				     stderr=subprocess.PIPE)
		out, err = p.communicate(timeout=timeout)
	except subprocess.TimeoutExpired:
		p.kill()
		p.communicate()
		raise Fail("timed out: " + " ".join(argv))
	return p.pid, p.returncode, out, err


# ------------------------------------------------------------- building

def directive(src, name):
	m = re.search(r"peers-%s: ([^)\n*]*)" % name, open(src).read())
	return m.group(1).split() if m else []


def build(src):
	"""Compiles src (and its X.lib.c companion) into BUILD/peers; returns the
	program's path."""
	out_dir = os.path.join(OPTS.build, "peers")
	os.makedirs(out_dir, exist_ok=True)
	base = os.path.basename(src)
	name, ext = os.path.splitext(base)
	exe = os.path.join(out_dir, name)
	cxx = ext == ".cc"
	flags = ["-g", "-O0", "-fno-omit-frame-pointer"] + directive(src, "flags")
	lib_src = os.path.join(HERE, name + ".lib.c")
	if os.path.exists(lib_src):
		lib = os.path.join(out_dir, "lib%s.so" % name)
		compile_if_stale(["cc", "-g", "-O0", "-shared", "-fPIC", "-o", lib, lib_src], lib, lib_src)
	compile_if_stale(["c++" if cxx else "cc"] + [f for f in flags if f.startswith("-O") or f.startswith("-g")
						      or f.startswith("-f")]
			 + ["-o", exe, src, "-lpthread"] + [f for f in flags if f.startswith("-l") or f.startswith("-Wl")],
			 exe, src)
	return exe


def compile_if_stale(argv, out, src):
	if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src) \
	   and os.path.getmtime(out) >= os.path.getmtime(__file__):
		return
	p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
	if p.returncode != 0:
		raise Fail("build: %s" % p.stderr.decode(errors="replace")[-600:])


# ------------------------------------------------------------- valgrind

SUMMARY_RE = {
	"in_use": re.compile(r"in use at exit: ([\d,]+) bytes in ([\d,]+) blocks"),
	"total": re.compile(r"total heap usage: ([\d,]+) allocs, ([\d,]+) frees, ([\d,]+) bytes allocated"),
}
# "N bytes in M blocks", or "N (D direct, I indirect) bytes in M blocks":
# the M blocks hold D bytes, the I bytes are other records' blocks.
RECORD_RE = re.compile(r"^==\d+== ([\d,]+)(?: \(([\d,]+) direct, [\d,]+ indirect\))? bytes in "
		       r"([\d,]+) blocks are .* in loss record")
FRAME_RE = re.compile(r"^==\d+==    (?:at|by) 0x[0-9A-F]+: (.*?)(?: \((.*)\))?$")


def num(s):
	return int(s.replace(",", ""))


def frame_key(function, where):
	"""(function, file base name, line); for a frame without a line,
	(symbol or "?", the module's real path, 0)."""
	m = re.match(r"(.*):(\d+)$", where)
	if m:
		# glibc's functions have aliases: valgrind names strdup what
		# glibc's DWARF calls __strdup (same code, same line).
		# (and adds symbol versions: pthread_setspecific@@GLIBC_2.34).
		function = re.sub(r"@.*$", "", function).lstrip("_")
		return (function, os.path.basename(m.group(1)), int(m.group(2)))
	function = re.sub(r"\+0x[0-9a-f]+$", "", function)
	if function == "???" or re.match(r"^0x[0-9a-f]+$", function):
		function = "?"
	module = where[3:] if where.startswith("in ") else where
	return (function, os.path.realpath(module) if module.startswith("/") else module, 0)


def valgrind_log(text):
	"""The summary and {innermost program frame: [bytes, blocks]}."""
	s = {}
	m = SUMMARY_RE["in_use"].search(text)
	if m:
		s["in_use_bytes"], s["in_use_blocks"] = num(m.group(1)), num(m.group(2))
	m = SUMMARY_RE["total"].search(text)
	if not m:
		raise Fail("no HEAP SUMMARY in valgrind's log")
	s["allocs"], s["frees"], s["alloc_bytes"] = map(num, m.groups())
	s.setdefault("in_use_bytes", 0)
	s.setdefault("in_use_blocks", 0)
	records = {}
	lines = text.splitlines()
	for i, line in enumerate(lines):
		m = RECORD_RE.match(line)
		if not m:
			continue
		key = None
		for fl in lines[i + 1:]:
			f = FRAME_RE.match(fl)
			if not f:
				break
			where = f.group(2) or ""
			if "vg_replace_malloc.c" in where or "/vgpreload_" in where:
				continue	# valgrind's own malloc
			if where.startswith("rtld-malloc.h:"):
				continue	# the loader's inline malloc wrapper: memline drops it
			key = frame_key(f.group(1), where)
			break
		r = records.setdefault(key, [0, 0])
		r[0] += num(m.group(2) or m.group(1))
		r[1] += num(m.group(3))
	return s, records


def run_valgrind(exe, args, tmp):
	if not shutil.which("valgrind"):
		raise Skip("valgrind is not installed")
	log = os.path.join(tmp, "vg.%p")
	argv = ["valgrind", "--leak-check=full", "--show-leak-kinds=all", "--run-libc-freeres=no",
		"--run-cxx-freeres=no", "--log-file=" + log, exe] + args
	# valgrind adds 4 variables to the program's environment, memline 5:
	# one more here makes the environments the same size (programs that copy
	# or grow their environment allocate per variable; docs/comparison.md).
	env = dict(os.environ, MEMLINE_PEERS_PAD="1")
	pid, rc, out, err = run(argv, os.path.dirname(exe), timeout=300, env=env)
	logs = glob.glob(os.path.join(tmp, "vg.*"))
	mine = [l for l in logs if re.search(r"Parent PID: %d\b" % os.getpid(), open(l).read())]
	if len(mine) != 1:
		raise Fail("valgrind: %d logs of the program itself" % len(mine))
	return rc, out, valgrind_log(open(mine[0]).read())


# -------------------------------------------------------------- memline

def run_memline(exe, args, tmp):
	memline = os.path.join(OPTS.build, "memline")
	pid, rc, out, err = run([memline, "run", "-o", tmp, "--", exe] + args, os.path.dirname(exe))
	if rc > 128:	# memline run exits 128 + N for a program killed by signal N
		rc = -(rc - 128)
	docs = []
	# memline run writes a run's profiles into one directory (memline.PROG.PID/).
	for prof in glob.glob(os.path.join(tmp, "memline.*", "*.mlp")):
		p = subprocess.run([memline, "report", prof, "leaks", "--json"], stdout=subprocess.PIPE,
				   stderr=subprocess.PIPE, cwd=tmp)
		if p.returncode != 0:
			raise Fail("report %s: %s" % (prof, p.stderr.decode(errors="replace")[-300:]))
		docs.append((json.loads(p.stdout), p.stderr.decode(errors="replace")))
	mine = [d for d in docs if d[0]["profile"]["ppid"] == pid and not d[0]["profile"]["forked"]]
	if len(mine) != 1:
		raise Fail("memline: %d profiles of the program itself (stderr %s)"
			   % (len(mine), err.decode(errors="replace")[-300:]))
	doc, report_err = mine[0]
	sm = doc["leaks"]["summary"]
	s = {"in_use_bytes": sm["in_use_bytes"], "in_use_blocks": sm["in_use_blocks"],
	     "allocs": sm["allocs"], "frees": sm["frees"], "alloc_bytes": sm["alloc_bytes"]}
	records = {}
	for r in doc["leaks"]["records"]:
		key = None
		if r["frames"]:
			f = r["frames"][0]
			where = "%s:%d" % (f["file"], f["line"]) if f["file"] and f["line"] else \
				"in " + (f["module"] or "?")
			key = frame_key(f["function"], where)
		x = records.setdefault(key, [0, 0])
		x[0] += r["bytes"]
		x[1] += r["blocks"]
	return rc, out, (s, records), err.decode(errors="replace") + report_err


# ---------------------------------------------------------------- a test

def compare(src):
	name = os.path.splitext(os.path.basename(src))[0]
	exe = build(src)
	args = directive(src, "args")
	tmp = tempfile.mkdtemp(prefix="ml-peer-%s-" % name, dir=OPTS.tmp)
	_, plain_rc, plain_out, _ = run([exe] + args, os.path.dirname(exe))
	ml_rc, ml_out, (ml, ml_rec), ml_err = run_memline(exe, args, os.path.join(tmp))
	vg_dir = os.path.join(tmp, "vg")
	os.mkdir(vg_dir)
	vg_rc, vg_out, (vg, vg_rec) = run_valgrind(exe, args, vg_dir)
	if (ml_rc, ml_out) != (plain_rc, plain_out):
		raise Fail("under memline: exit %d, stdout %r; plainly: exit %d, %r"
			   % (ml_rc, ml_out[:200], plain_rc, plain_out[:200]))
	if (vg_rc, vg_out) != (plain_rc, plain_out):
		raise Fail("under valgrind: exit %d, stdout %r; plainly: exit %d, %r"
			   % (vg_rc, vg_out[:200], plain_rc, plain_out[:200]))
	known = KNOWN.get(name, {})
	diffs = []
	for field in ("allocs", "frees", "alloc_bytes", "in_use_bytes", "in_use_blocks"):
		want = vg[field] + known.get(field, 0)
		if ml[field] != want:
			diffs.append("%s %d, valgrind %d%s" % (field, ml[field], vg[field],
				     " + %d known" % known[field] if field in known else ""))
	if diffs:
		raise Fail("; ".join(diffs))
	rec_diff = record_differences(ml_rec, vg_rec, known)
	if rec_diff:
		raise Fail("blocks in use at exit by line: " + "; ".join(rec_diff))
	return ml_err


def record_differences(ml, vg, known):
	out = []
	for key in sorted(set(ml) | set(vg), key=str):
		a, b = ml.get(key, [0, 0]), vg.get(key, [0, 0])
		if a == b:
			continue
		if key and key[0] in ("allocate_dtv", "dl_allocate_tls") and "in_use_bytes" in known:
			continue	# the DTV difference, counted in the summary
		if key and key[0] in known.get("records", ()):
			continue	# explained with the summary's difference
		out.append("%s: memline %d bytes in %d blocks, valgrind %d in %d" % (fmt(key), a[0], a[1],
										 b[0], b[1]))
	return out


def fmt(key):
	if not key:
		return "(no frame)"
	return "%s (%s:%d)" % key if key[2] else "%s (%s)" % key[:2]


def main():
	global OPTS
	ap = argparse.ArgumentParser(description="memline against valgrind on the peers' programs")
	ap.add_argument("--build", default="build")
	ap.add_argument("-k", dest="filter", default="")
	ap.add_argument("-v", dest="verbose", action="store_true")
	ap.add_argument("-j", dest="jobs", type=int, default=2)
	OPTS = ap.parse_args()
	OPTS.build = os.path.abspath(OPTS.build)
	OPTS.tmp = tempfile.mkdtemp(prefix="memline-peers-")
	srcs = sorted(s for s in glob.glob(os.path.join(HERE, "*.c")) + glob.glob(os.path.join(HERE, "*.cc"))
		      if not s.endswith(".lib.c") and OPTS.filter in os.path.basename(s))
	counts = {"ok": 0, "FAIL": 0, "skip": 0}
	if not shutil.which("valgrind"):
		print("skip peers: valgrind is not installed")
		print("peers: 0 passed, 0 failed, %d skipped" % len(srcs))
		return 0
	try:
		with concurrent.futures.ThreadPoolExecutor(OPTS.jobs) as pool:
			futures = [(s, pool.submit(compare, s)) for s in srcs]
			for src, fut in futures:
				name = os.path.splitext(os.path.basename(src))[0]
				try:
					err = fut.result()
					print("ok %s" % name + ("\n" + err if OPTS.verbose and err.strip() else ""))
					counts["ok"] += 1
				except Skip as e:
					print("skip %s: %s" % (name, e))
					counts["skip"] += 1
				except Fail as e:
					print("FAIL %s: %s" % (name, str(e)[:1500]))
					counts["FAIL"] += 1
				sys.stdout.flush()
	finally:
		shutil.rmtree(OPTS.tmp, ignore_errors=True)
	print("peers: %d passed, %d failed, %d skipped" % (counts["ok"], counts["FAIL"], counts["skip"]))
	return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
	sys.exit(main())
