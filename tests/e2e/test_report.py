"""tests/e2e/test_report.py - end-to-end tests of `memline report` on good,
truncated, corrupt and fuzzed profiles, text views, the newest profile,
build-id mismatches (the `report_` tests also run with the ASan+UBSan build
of the CLI)."""

from harness import *


def fnv1a(data, h=0xcbf29ce484222325):
	for b in data:
		h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
	return h


def reseal(data):
	"""Recomputes the header checksum so only deeper validation can reject."""
	hs = struct.unpack_from("<I", data, 12)[0]
	data = bytearray(data)
	struct.pack_into("<Q", data, 24, fnv1a(bytes(data[hs:])))
	return bytes(data)


_GOOD = []


def good_profile():
	if not _GOOD:
		r = Run("leak")
		with open(r.file("leak"), "rb") as f:
			_GOOD.append(f.read())
	return _GOOD[0]


def bad_profiles():
	"""(name, bytes, keywords of the expected error)."""
	g = good_profile()
	out = [("empty", b"", ("truncated", "empty", "not a memline")),
	       ("not-a-profile", b"hello, this is not a profile\n" * 10, ("not a memline",)),
	       ("header-only", g[:64], ("truncated",)),
	       ("truncated", g[:len(g) // 2], ("truncated",)),
	       ("truncated-1", g[:-1], ("truncated",))]
	v = bytearray(g)
	struct.pack_into("<I", v, 8, 99)
	out.append(("version-99", bytes(v), ("version",)))
	c = bytearray(g)
	c[len(c) // 2] ^= 0x5a
	out.append(("bit-flip", bytes(c), ("corrupt", "checksum")))
	# A section length far past the end, with a valid checksum.
	s = bytearray(g)
	struct.pack_into("<Q", s, 64 + 8, 1 << 40)
	out.append(("section-size", reseal(s), ("corrupt", "truncated", "invalid")))
	return out


def check_bad_profiles(cli):
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	for name, data, keywords in bad_profiles():
		path = os.path.join(d, "memline.bad.%s.mlp" % name)
		with open(path, "wb") as f:
			f.write(data)
		for view in ("leaks", "ops"):
			p = run([cli, "report", path, view])
			err = one_line_error(p, "report %s %s" % (name, view), *keywords)
			eq(p.returncode, 1, "exit status of report %s %s" % (name, view))
			check(os.path.basename(path) in err, "error %r does not name the file" % err)
			check("sanitizer" not in err.lower(), "sanitizer report: " + err)


@test
def report_bad_profiles():
	check_bad_profiles(rcli())


@test
def report_fuzz_no_crash():
	import random
	rnd = random.Random(1234)
	g = good_profile()
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	path = os.path.join(d, "memline.fuzz.1.mlp")
	for i in range(60):
		b = bytearray(g)
		for _ in range(rnd.randint(1, 4)):
			pos = rnd.randrange(64, len(b))
			b[pos] = rnd.randrange(256)
		with open(path, "wb") as f:
			f.write(reseal(b))
		p = run([rcli(), "report", path, "leaks", "--json"])
		check(p.returncode >= 0 and p.returncode < 128,
		      "fuzz case %d: exit %d: %s" % (i, p.returncode, text(p.stderr)[-300:]))


@test
def report_default_limit():
	"""leaks and peak list the 100 largest records, ops the 100 largest
	rows, unless --limit says otherwise (a PyTorch process has hundreds of
	thousands: gigabytes of JSON), say how many more there are, and --limit
	all lists every one."""
	prof = Run("many_leaks").file("many_leaks")
	for view, key in (("leaks", "records"), ("peak", "stacks")):
		d = report(prof, view)[view]
		eq(d["total_records"], 150, "%s: records counted" % view)
		eq([r["bytes"] for r in d[key]], list(range(150, 50, -1)),
		   "%s: the 100 largest records, largest first" % view)
		full = report(prof, view, "--limit", "all")[view]
		eq(len(full[key]), 150, "%s --limit all: every record" % view)
		eq(len(report(prof, view, "--limit", "7")[view][key]), 7, "%s --limit 7" % view)
		p = run([rcli(), "report", prof, view])
		eq(p.returncode, 0, "%s text: exit status" % view)
		check("50 more records not shown (--limit 100; --limit all lists every one)"
		      in text(p.stdout), "%s text: what the default left out" % view)
		check("more records" not in text(run([rcli(), "report", prof, view, "--limit", "all"]).stdout),
		      "%s text --limit all: nothing left out" % view)
	ops = report(prof, "ops")["ops"]
	eq([f["name"] for f in ops["functions"]], ["leak_%d" % i for i in range(149, 49, -1)],
	   "ops: the 100 functions with the most self memory, most first")
	eq(ops["total_functions"], len(report(prof, "ops", "--limit", "all")["ops"]["functions"]),
	   "ops --limit all: every function")
	check("%d more functions not shown (--limit 100; --limit all lists every one)"
	      % (ops["total_functions"] - 100) in text(run([rcli(), "report", prof, "ops"]).stdout),
	      "ops text: what the default left out")
	p = run([rcli(), "report", prof, "leaks", "--limit", "some"])
	eq(p.returncode, 2, "--limit some: a usage error")
	check("--limit takes a number of rows (0 or more) or 'all'" in text(p.stderr),
	      "--limit some: " + text(p.stderr))


@test
def report_missing_source():
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	src = os.path.join(d, "gone.c")
	shutil.copy(fixture_source("leak"), src)
	exe = os.path.join(d, "gone")
	p = run(["cc", "-g", "-O0", "-o", exe, src])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	os.unlink(src)
	r = Run(exe)
	prof = r.file("gone")
	doc = report(prof, "lines", "--function", "make_name")
	eq(doc["lines"]["functions"][0]["source_found"], False, "source_found")
	expect_line(line_rows(doc), line_of("leak", "make_name"), "make_name", self_bytes=99,
		    allocs=3, leaked_bytes=99, text=None)
	p = run([rcli(), "report", prof, "lines", "--function", "make_name"])
	eq(p.returncode, 0, "text report exit status")
	check(str(line_of("leak", "make_name")) in text(p.stdout), "text report lacks the line")


@test
def report_newest_in_cwd():
	r = Run("exit_status", expect_rc=42)
	time.sleep(0.02)
	Run("leak").file("leak")  # another directory: not picked
	p = run([rcli(), "report", "leaks", "--json"], cwd=r.dir)
	eq(p.returncode, 0, "report without a file: exit; stderr %s" % text(p.stderr).strip())
	doc = json.loads(text(p.stdout))
	eq(doc.get("schema"), "memline.report", "schema")


@test
def report_text_views():
	prof = Run("leak").file("leak")
	L = lambda m: line_of("leak", m)
	want = {"leaks": ["99 bytes in 3 blocks were never freed (record 2 of 2)",
			  "   at make_name (leak.c:%d)" % L("make_name"),
			  "   by leak_some (leak.c:%d)" % L("leak_some"),
			  "   by main (leak.c:%d)" % L("main_leak_some"),
			  "    in use at exit: 1099 bytes (1.07 KiB) in 4 blocks",
			  "  total heap usage: 5 allocs, 1 frees, 5195 bytes (5.07 KiB) allocated"],
		"peak": ["peak heap: 5.07 KiB (5195 bytes)"],
		"ops": ["Self CPU Mem", "# of Allocs", "make_name"],
		"lines": ["Line #", "Line Contents", "leak_some(); /* L:main_leak_some */"]}
	for view in (["leaks"], ["peak"], ["ops"], ["lines", "--function", "main"]):
		p = run([rcli(), "report", prof] + view)
		eq(p.returncode, 0, "report %s exit" % view)
		out = text(p.stdout)
		for w in want[view[0]]:
			check(w in out, "report %s: no %r in:\n%s" % (view[0], w, out[:1500]))
	# lines: the row of the call to leak_some, columns in order.
	p = run([rcli(), "report", prof, "lines", "--function", "main"])
	row_re = r"^\s*%d\s+0 B\s+99 B\s+99 B\s+99 B\s+3\s+leak_some\(\);" % L("main_leak_some")
	check(re.search(row_re, text(p.stdout), re.M), "lines: no row %r" % row_re)


@test
def example_leaky():
	"""The demo program: its leak, its peak and its hot function."""
	exe = build_path("examples", "leaky")
	prof = Run(exe, args=["100"]).file("leaky")
	src = os.path.join(ROOT, "examples", "leaky.c")
	leaks = [(b, n, f[0][:2]) for b, n, f in leak_stacks(report(prof, "leaks"))]
	eq(leaks, [(150, 10, ("copy_string", "leaky.c"))], "leaky's leaks")
	peak = report(prof, "peak")["peak"]
	top = peak["stacks"][0]
	eq((top["bytes"], top["blocks"], top["frames"][0]["function"]), (1048576, 256, "build_index"),
	   "largest at the peak")
	ops = ops_rows(report(prof, "ops"))
	eq((ops["tokenize"]["self_allocs"], ops["tokenize"]["self_bytes"], ops["tokenize"]["peak_bytes"]),
	   (900, 900 * 32, 0), "tokenize: allocations, bytes, at peak")
	if shutil.which("valgrind"):
		eq(leak_summary(report(prof, "leaks")), valgrind_numbers(exe), "leaky vs valgrind")
	check(os.path.exists(src), "no examples/leaky.c")


@test
def report_build_id_mismatch():
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	src, exe = os.path.join(d, "rebuilt.c"), os.path.join(d, "rebuilt")
	shutil.copy(fixture_source("leak"), src)
	p = run(["cc", "-g", "-O0", "-o", exe, src])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	prof = Run(exe).file("rebuilt")
	with open(src, "a") as f:
		f.write("int rebuilt_marker(void) { return 7; }\n")
	p = run(["cc", "-g", "-O0", "-o", exe, src])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	p = run([rcli(), "report", prof, "leaks"])
	eq(p.returncode, 0, "report exit")
	err = text(p.stderr)
	check("build-id" in err and "rebuilt" in err, "no build-id warning: %r" % err)


@test
def report_all_views():
	"""Every view, text and JSON, on C, C++ and multi-process profiles."""
	profs = [[Run("cxx_new").file("cxx_new")], Run("fork_prog").files("fork_prog"),
		 [Run("threads16").file("threads16")]]
	views = (["leaks"], ["peak"], ["ops"], ["ops", "--sort", "cpu_memory_usage", "--limit", "3"],
		 ["lines", "--function", "main"], ["leaks", "--limit", "1"])
	for files in profs:
		for v in views:
			for js in ([], ["--json"]):
				p = run([rcli(), "report"] + files + v + js)
				eq(p.returncode, 0, "report %s %s exit (stderr %s)"
				   % (os.path.basename(files[0]), v, text(p.stderr).strip()[-300:]))
				check(p.stdout.strip(), "report %s printed nothing" % v)
	doc = report(profs[0], "ops", "--limit", "3")
	eq(len(doc["ops"]["functions"]), 3, "ops --limit 3 rows")
	keys = {"self_cpu_memory_usage": lambda r: r["self"]["alloc_bytes"],
		"cpu_memory_usage": lambda r: r["total"]["alloc_bytes"],
		"count": lambda r: r["self"]["allocs"],
		"peak_cpu_memory": lambda r: r["total"]["peak_bytes"],
		"leaked_cpu_memory": lambda r: r["total"]["leaked_bytes"],
		"self_peak_cpu_memory": lambda r: r["self"]["peak_bytes"],
		"allocs": lambda r: r["total"]["allocs"]}
	for key, value in keys.items():
		rows = report(profs[2], "ops", "--sort", key)["ops"]["functions"]
		vals = [value(r) for r in rows]
		eq(vals, sorted(vals, reverse=True), "ops --sort %s order" % key)
		check(key == "leaked_cpu_memory" or (vals and vals[0] > 0), "ops --sort %s: top row is 0" % key)


# ------------------------------------------------ bad input files: devices,
# FIFOs, files that are not what they claim (issue 8, item 10)

def tmpdir():
	return tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)


def cc(src_text, name, *flags, lang="c"):
	"""Builds src_text into DIR/name (-g -O0); returns (dir, exe, src)."""
	d = tmpdir()
	src = os.path.join(d, name + (".c" if lang == "c" else ".cc"))
	with open(src, "w") as f:
		f.write(src_text)
	exe = os.path.join(d, name)
	p = run(["cc" if lang == "c" else "c++", "-g", "-O0", "-o", exe, src] + list(flags))
	check(p.returncode == 0, "cc %s: %s" % (name, text(p.stderr)))
	return d, exe, src


def report_text(args, timeout=30):
	"""memline report ARGS: (exit status, stdout, stderr); fails on a hang."""
	p = run([rcli(), "report"] + args, timeout=timeout)
	return p.returncode, text(p.stdout), text(p.stderr)


LEAKY = r"""#include <stdio.h>
#include <stdlib.h>
int main(void)
{
	char *p = malloc(123);	/* L:leak */
	printf("%d\n", p != NULL);
	return 0;
}
"""


# ------------------------------------------------------- bad input files

@test
def report_device_profile():
	"""/dev/zero is refused at once, not read until memory runs out."""
	t0 = time.time()
	rc, out, err = report_text(["/dev/zero", "leaks"], timeout=20)
	eq(rc, 1, "exit status")
	eq(err.strip().splitlines(), ["memline: /dev/zero: is a character device; memline reads "
				      "profiles from regular files only"], "error")
	check(time.time() - t0 < 10, "took %.1f s" % (time.time() - t0))


@test
def report_fifo_profile():
	"""A FIFO named as the profile: one line, no wait for a writer."""
	d = tmpdir()
	fifo = os.path.join(d, "memline.x.1.mlp")
	os.mkfifo(fifo)
	rc, out, err = report_text([fifo, "leaks"], timeout=20)
	eq(rc, 1, "exit status")
	check(err.count("\n") == 1 and "is a FIFO" in err and fifo in err, "error: %r" % err)
	# The newest-profile search in the directory skips it too.
	p = run([rcli(), "report", "leaks"], cwd=d, timeout=20)
	eq(p.returncode, 1, "report in a directory with only a FIFO")
	check("no memline.* run or profile" in text(p.stderr), "error: %r" % text(p.stderr))


@test
def report_header_first():
	"""A big file that is not a profile is rejected from its first bytes,
	and a header that disagrees with the file's size is caught before the
	rest is read."""
	d = tmpdir()
	big = os.path.join(d, "big.mlp")
	with open(big, "wb") as f:
		f.truncate(8 << 30)  # sparse: 8 GiB of zeros
	rc, out, err = report_text([big, "leaks"], timeout=20)
	eq((rc, err.strip()), (1, "memline: %s: not a memline profile" % big), "8 GiB of zeros")
	g = good_profile()
	with open(big, "wb") as f:
		f.write(g)
		f.truncate(8 << 30)
	rc, out, err = report_text([big, "leaks"], timeout=20)
	eq((rc, err.strip()), (1, "memline: %s: corrupt: %d bytes, the header says %d"
			       % (big, 8 << 30, len(g))), "a profile followed by 8 GiB")


def profiled_copy(name="victim"):
	"""A program built in a fresh directory and profiled: (dir, exe, src, profile)."""
	d, exe, src = cc(LEAKY, name)
	prof = Run(exe).file(name)
	return d, exe, src, prof


@test
def report_module_not_regular():
	"""The profiled binary replaced by a FIFO, a directory, a text file:
	the report says what it found (never 'not found' for a file that is
	there), does not wait, and still prints the leak without symbols."""
	d, exe, src, prof = profiled_copy()
	os.unlink(exe)
	cases = [("fifo", lambda: os.mkfifo(exe), "is a FIFO, not a regular file"),
		 ("dir", lambda: os.mkdir(exe), "is a directory, not a regular file"),
		 ("text", lambda: open(exe, "w").write("#!/bin/sh\necho hi\n"), "not an ELF file"),
		 ("empty", lambda: open(exe, "w").close(), "not an ELF file"),
		 ("gone", lambda: None, "not found")]
	for what, make, want in cases:
		make()
		rc, out, err = report_text([prof, "leaks"], timeout=20)
		eq(rc, 0, "%s: exit status" % what)
		warn = [l for l in err.splitlines() if exe in l]
		eq(warn, ["memline: warning: %s: %s; its frames stay unresolved" % (exe, want)],
		   "%s: warning" % what)
		check("123 bytes in 1 blocks" in out, "%s: no leak record in %r" % (what, out[:300]))
		if os.path.isdir(exe):
			os.rmdir(exe)
		elif os.path.lexists(exe):
			os.unlink(exe)


@test
def report_debug_file_fifo():
	"""Separate debug files at a FIFO are skipped, by build-id and by
	debuglink: the report neither waits nor loses the other modules."""
	d, exe, src, prof = profiled_copy()
	# By debuglink: the stripped binary names a debug file that is a FIFO.
	dbg = exe + ".debug"
	eq(run(["objcopy", "--only-keep-debug", exe, dbg]).returncode, 0, "objcopy")
	eq(run(["objcopy", "--strip-debug", "--add-gnu-debuglink=" + dbg, exe]).returncode, 0,
	   "objcopy debuglink")
	rc, out, err = report_text([prof, "leaks", "--json"], timeout=20)
	eq(rc, 0, "exit status with the debug file")
	check('"line": 5' in out, "the debug file is used: %r" % out[:600])
	os.unlink(dbg)
	os.mkfifo(dbg)
	rc, out, err = report_text([prof, "leaks"], timeout=20)
	eq(rc, 0, "exit status with a FIFO as debuglink")
	# By build-id: the binary gone, its build-id path in the debug directory a FIFO.
	os.unlink(exe)
	ddir = os.path.join(d, "debug")
	os.makedirs(os.path.join(ddir, ".build-id"))
	ids = build_ids(prof)
	check(ids, "no build-id recorded for the program")
	sub = os.path.join(ddir, ".build-id", ids[0][:2])
	os.makedirs(sub)
	os.mkfifo(os.path.join(sub, ids[0][2:] + ".debug"))
	env = dict(os.environ, MEMLINE_DEBUG_DIR=ddir)
	p = run([rcli(), "report", prof, "leaks"], env=env, timeout=20)
	eq(p.returncode, 0, "exit status with a FIFO by build-id")
	check("not found" in text(p.stderr), "warning: %r" % text(p.stderr))


def build_ids(prof):
	"""The build-ids of the program's module in a profile, as hex."""
	import struct
	data = profile_plain(open(prof, "rb").read())
	off, nsec = 64, struct.unpack_from("<I", data, 32)[0]
	out = []
	for _ in range(nsec):
		stype, count, size = struct.unpack_from("<IIQ", data, off)
		if stype == 2:
			at = off + 16
			for _ in range(count):
				lo, hi = struct.unpack_from("<QQ", data, at + 8)
				plen, blen, flags = struct.unpack_from("<III", data, at + 24)
				if flags & 2 and blen:
					out.append(data[at + 40 + plen:at + 40 + plen + blen].hex())
				at += (40 + plen + blen + 7) & ~7
		off += 16 + size
	return out


@test
def report_source_checks():
	"""lines: a source file modified after the run is shown with a warning
	(and source_modified in JSON); one replaced by a FIFO is not waited on."""
	d, exe, src, prof = profiled_copy()
	doc = report(prof, "lines", "--function", "main")
	fn = doc["lines"]["functions"][0]
	eq((fn["source_found"], fn["source_modified"]), (True, False), "untouched source")
	rc, out, err = report_text([prof, "lines", "--function", "main"])
	eq((rc, err), (0, ""), "untouched source: no warning")
	future = time.time() + 5
	os.utime(src, (future, future))
	rc, out, err = report_text([prof, "lines", "--function", "main"])
	eq(rc, 0, "exit status")
	eq(err.strip(), "memline: warning: source file %s was modified after the profiled run "
	   "started; its Line Contents may not be the lines that ran" % src, "modified source")
	doc = report(prof, "lines", "--function", "main")
	eq(doc["lines"]["functions"][0]["source_modified"], True, "source_modified")
	os.unlink(src)
	os.mkfifo(src)
	rc, out, err = report_text([prof, "lines", "--function", "main"], timeout=20)
	eq(rc, 0, "exit status, FIFO source")
	check("is not a regular file" in err and "without Line Contents" in err,
	      "FIFO source warning: %r" % err)


# ------------------------------------------- what the profile says about itself

OWN_MALLOC = r"""#include <stddef.h>
#include <stdio.h>
static _Alignas(16) char arena[1 << 16];
static size_t used;
void *malloc(size_t n) { n = (n + 15) & ~(size_t)15; used += n; return arena + used - n; }
void free(void *p) { (void)p; }
int main(void) { puts(malloc(10) ? "ok" : "none"); return 0; }
"""


@test
def report_allocator_shadowed():
	"""A program with its own malloc: the runtime says so once when it
	starts, and every report of the profile says so again (text: a warning
	on stderr; JSON: allocator_shadowed and the note)."""
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	src, exe = os.path.join(d, "own.c"), os.path.join(d, "own")
	with open(src, "w") as f:
		f.write(OWN_MALLOC)
	p = run(["cc", "-g", "-O0", "-o", exe, src])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	r = Run(exe)
	note = "malloc and free are defined by %s ahead of memline: only the calls that reach " \
	       "memline (passed on with dlsym(RTLD_NEXT), or from its C++ operator new) are " \
	       "recorded" % exe
	said = [l for l in text(r.proc.stderr).splitlines() if not l.startswith("memline: wrote")]
	eq(said, ["memline: " + note], "memline run's stderr")
	prof = r.file("own")
	doc = report(prof, "leaks")
	eq((doc["profile"]["allocator_shadowed"], doc["profile"]["notes"]), (True, [note]), "JSON")
	eq(leak_summary(doc), (0, 0, 0, 0, 0), "nothing recorded")
	p = run([rcli(), "report", prof, "leaks"])
	eq((p.returncode, text(p.stderr)), (0, "memline: warning: %s: %s\n" % (prof, note)),
	   "text report's warning")


@test
def report_argv_cut():
	"""A command line longer than the profile keeps is cut at a whole
	argument, and the profile says so (argv_cut, a warning, [...])."""
	long_args = ["%05d" % i + "x" * 994 for i in range(80)]	# 80 KB of arguments
	r = Run("leak", args=long_args)
	prof = r.file("leak")
	doc = report(prof, "leaks")
	argv = doc["profile"]["argv"]
	check(doc["profile"]["argv_cut"] and 1 < len(argv) < 81 and argv[1:] == long_args[:len(argv) - 1],
	      "argv_cut %r, %d arguments" % (doc["profile"]["argv_cut"], len(argv)))
	p = run([rcli(), "report", prof, r.file("leak"), "leaks"])
	check("only its first %d arguments are shown" % len(argv) in text(p.stderr), "warning: %r"
	      % text(p.stderr)[-300:])
	check(" [...] <==" in text(p.stdout), "header without the mark")
	short = report(Run("leak").file("leak"), "leaks")["profile"]
	eq((short["argv_cut"], short["allocator_shadowed"], short["notes"]), (False, False, []),
	   "an ordinary profile")
