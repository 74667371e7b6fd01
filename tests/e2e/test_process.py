"""tests/e2e/test_process.py - end-to-end tests of the process's life: fork
children, exec, vfork, posix_spawn, _exit, pthread_exit, fatal and
terminating signals, the environment exec'd programs get, exit statuses."""

from harness import *


def leaked_lines(prof, name):
	return sorted((f[0][2], b, n) for b, n, f in user_leaks(report(prof, "leaks"), name))


@test
def fork_child_separate():
	r = Run("fork_prog")
	fs = r.files("fork_prog")
	eq(len(fs), 2, "profiles of fork_prog")
	L = lambda m: line_of("fork_prog", m)
	by_lines = {tuple(leaked_lines(f, "fork_prog")): f for f in fs}
	parent = [(L("f_before"), 111, 1), (L("f_parent"), 333, 1)]
	check(tuple(parent) in by_lines, "no parent profile with leaks %s: %s" % (parent, list(by_lines)))
	child = [k for k in by_lines if k != tuple(parent)]
	eq(len(child), 1, "child profiles")
	child_rows = lines_of(by_lines[child[0]], "main")
	expect_line(child_rows, L("f_child"), "child", self_bytes=222, allocs=1, leaked_bytes=222)
	if L("f_before") in child_rows:
		expect_line(child_rows, L("f_before"), "parent's malloc in child", allocs=0, self_bytes=0)
	# Both files in one report: one document each, in order, the child's
	# marked as a fork child.
	docs = report(fs, "lines", "--function", "main")
	forked = {os.path.basename(d["profile"]["path"]): d["profile"]["forked"] for d in docs}
	eq(forked[os.path.basename(by_lines[tuple(parent)])], False, "parent forked flag")
	eq(forked[os.path.basename(by_lines[child[0]])], True, "child forked flag")


@test
def fork_no_follow():
	r = Run("fork_prog", opts=["--no-follow"])
	eq([os.path.basename(f).split(".")[1] for f in r.files()], ["fork_prog"], "profiles")
	L = lambda m: line_of("fork_prog", m)
	eq(leaked_lines(r.files()[0], "fork_prog"), [(L("f_before"), 111, 1), (L("f_parent"), 333, 1)],
	   "parent leaks")


@test
def exec_follows():
	r = Run("exec_prog", args=[fixture("exec_target")])
	L = lambda m: line_of("exec_prog", m)
	eq(leaked_lines(r.file("exec_prog"), "exec_prog"),
	   [(L("x_before"), 123, 1), (L("x_after_fail"), 456, 1)],
	   "exec_prog leaks (a failed exec keeps profiling)")
	eq(leaked_lines(r.file("exec_target"), "exec_target"),
	   [(line_of("exec_target", "x_target"), 789, 1)], "exec_target leaks")
	pid = lambda f: os.path.basename(f).split(".")[2]
	eq(pid(r.file("exec_prog")), pid(r.file("exec_target")), "pid across exec")


@test
def exec_no_follow():
	r = Run("exec_prog", args=[fixture("exec_target")], opts=["--no-follow"])
	eq(r.files("exec_target"), [], "exec_target profiled despite --no-follow")
	L = lambda m: line_of("exec_prog", m)
	eq(leaked_lines(r.file("exec_prog"), "exec_prog"),
	   [(L("x_before"), 123, 1), (L("x_after_fail"), 456, 1)], "exec_prog leaks")


@test
def vfork_exec_no_repeat():
	r = Run("vfork_exec", args=[fixture("exec_target")])
	L = lambda m: line_of("vfork_exec", m)
	pid = lambda f: int(os.path.basename(f).split(".")[2])
	target = r.file("exec_target")
	parent = [f for f in r.files("vfork_exec") if pid(f) != pid(target)]
	eq(len(parent), 1, "parent profiles")
	eq(leaked_lines(parent[0], "vfork_exec"), [(L("v_before"), 100, 1), (L("v_after"), 200, 1)],
	   "parent leaks")
	eq(leaked_lines(target, "exec_target"), [(line_of("exec_target", "x_target"), 789, 1)],
	   "exec_target leaks")
	# The vfork child ran in the parent's memory until its exec: a profile
	# of it must not repeat the parent's allocations.
	for f in r.files("vfork_exec"):
		if pid(f) == pid(target):
			eq(leaked_lines(f, "vfork_exec"), [], "the vfork child's profile repeats the parent's leaks")


def spawn_pid(f):
	return int(os.path.basename(f).split(".")[2])


@test
def posix_spawn_follows():
	r = Run("spawn_prog", args=["inherit", fixture("exec_target")])
	eq(leaked_lines(r.file("spawn_prog"), "spawn_prog"),
	   [(line_of("spawn_prog", "s_parent"), 321, 1)], "spawn_prog leaks")
	target = r.file("exec_target")
	eq(leaked_lines(target, "exec_target"), [(line_of("exec_target", "x_target"), 789, 1)],
	   "spawned exec_target leaks")
	check(spawn_pid(target) != spawn_pid(r.file("spawn_prog")), "the child has its own pid")


@test
def posix_spawn_no_follow():
	r = Run("spawn_prog", args=["inherit", fixture("exec_target")], opts=["--no-follow"])
	eq(r.files("exec_target"), [], "exec_target profiled despite --no-follow")
	eq(leaked_lines(r.file("spawn_prog"), "spawn_prog"),
	   [(line_of("spawn_prog", "s_parent"), 321, 1)], "spawn_prog leaks")


@test
def posix_spawn_env_replaces_preload():
	"""posix_spawn with an environment whose LD_PRELOAD names another
	library only: the child is still profiled (libmemline goes first)."""
	check(os.path.exists(JEMALLOC_SO), "libjemalloc2 is not installed")
	r = Run("spawn_prog", args=["replace", fixture("exec_target"), JEMALLOC_SO])
	eq(leaked_lines(r.file("exec_target"), "exec_target"),
	   [(line_of("exec_target", "x_target"), 789, 1)], "spawned exec_target leaks")
	r = Run("spawn_prog", args=["replace", fixture("exec_target"), JEMALLOC_SO],
		opts=["--no-follow"])
	eq(r.files("exec_target"), [], "exec_target profiled despite --no-follow")


@test
def underscore_exit():
	r = Run("underscore_exit", expect_rc=3)
	eq(leaked_lines(r.file("underscore_exit"), "underscore_exit"),
	   [(line_of("underscore_exit", "u_leak"), 555, 1)], "leaks")


@test
def pthread_exit_main():
	r = Run("thread_exit")
	L = lambda m: line_of("thread_exit", m)
	eq(leaked_lines(r.file("thread_exit"), "thread_exit"),
	   [(L("te_thread"), 666, 1), (L("te_main"), 777, 1)], "leaks")


def check_fatal(arg, sig):
	r = Run("fatal_signal", args=[arg], expect_rc=128 + sig)
	eq(leaked_lines(r.file("fatal_signal"), "fatal_signal"),
	   [(line_of("fatal_signal", "s_leak"), 888, 1)], "leaks at " + arg)
	left = [f for f in os.listdir(r.dir) if ".tmp" in f]
	eq(left, [], "temporary files left")


@test
def fatal_sigsegv():
	check_fatal("segv", signal.SIGSEGV)


@test
def fatal_sigsegv_dlopened_module():
	"""A module dlopen'd after start-up is in a profile written from a
	fatal signal handler (where the loader's module list cannot be
	walked): its leak symbolizes to its function and line."""
	r = Run("dlopen_crash", args=[fixture("libdlmod.so")], expect_rc=128 + signal.SIGSEGV)
	doc = report(r.file("dlopen_crash"), "leaks")
	eq(doc["profile"]["end_reason"], "signal", "end of the profile")
	mine = [s for s in doc["leaks"]["records"] if s["bytes"] == 555]
	eq(len(mine), 1, "the 555-byte leak records")
	fr = mine[0]["frames"][0]
	eq((fr["function"], os.path.basename(fr.get("file") or ""), fr.get("line"),
	    os.path.basename(fr.get("module") or "")),
	   ("dlmod_leak", "dlmod.inc", line_of_file("dlmod.inc", "m_leak"), "libdlmod.so"),
	   "innermost frame of the leak")


@test
def dlclose_unload_then_other_module():
	"""A dlclose that gives a reference back unloads nothing (and keeps the
	cached unwind rules); one that unloads flushes them: the module loaded
	next, likely where the first was, unwinds by its own rules (every fast
	stack equal to libunwind's) and its leaks have its own frames; frames
	the first left where the second now sits are named after the second,
	with one warning."""
	r = Run("dlclose_swap", args=[fixture("libdlmod.so"), fixture("libdlmod2.so")],
		env=dict(os.environ, MEMLINE_VERIFY_UNWIND="1"))
	err = text(r.proc.stderr)
	m = re.search(r"MEMLINE_VERIFY_UNWIND: (\d+) stacks checked against libunwind, (\d+) differ",
		      err)
	check(m, "no MEMLINE_VERIFY_UNWIND summary in stderr: " + err[-400:])
	eq(int(m.group(2)), 0, "fast stacks that differ from libunwind's")
	doc = report(r.file("dlclose_swap"), "leaks")
	mine = [s for s in doc["leaks"]["records"] if s["bytes"] == 3 * 777]
	eq(len(mine), 1, "the records of the three 777-byte leaks")
	got = [(f["function"], os.path.basename(f.get("file") or ""), f.get("line"))
	       for f in mine[0]["frames"][:4]]
	eq(got, [("dlmod2_inner", "dlmod2.inc", line_of_file("dlmod2.inc", "m2_leak")),
		 ("dlmod2_leak", "dlmod2.inc", got[1][2]),
		 ("call", "dlclose_swap.c", got[2][2]),
		 ("main", "dlclose_swap.c", line_of_file("dlclose_swap.c", "s_second"))],
	   "the second module's leak, innermost frames")
	# The first module's leak (555 bytes) has return addresses where the
	# second now sits: it is named after the second, and the report says
	# so, once, when the two were loaded at the same addresses.
	p = run([rcli(), "report", r.file("dlclose_swap"), "leaks"])
	err = text(p.stderr)
	warned = [l for l in err.splitlines() if "had been unloaded" in l]
	if any(s["bytes"] == 555 and "dlmod2" in (s["frames"][0].get("function") or "")
	       for s in doc["leaks"]["records"]):
		eq(len(warned), 1, "warnings of the reused addresses: " + err[-600:])
		check("libdlmod2.so was loaded where" in warned[0] and "libdlmod.so had been" in
		      warned[0], "the warning names both modules: " + warned[0])
	else:
		eq(warned, [], "warnings without a reused address range")


@test
def fatal_abort():
	check_fatal("abort", signal.SIGABRT)


# Signals whose default action ends the process without a core: Ctrl-C,
# kill, a closed terminal, `prog | head -1`.  The profile must be written,
# like for SIGSEGV (found profiling Debian programs: python's
# multiprocessing.Pool workers, `yes | head`, Ctrl-C lost their profiles).
def check_term_signal(arg, sig):
	r = Run("term_signal", args=[arg], expect_rc=128 + sig)
	prof = r.file("term_signal")
	doc = report(prof, "leaks")
	eq((doc["profile"]["end_reason"], doc["profile"]["end_status"]), ("signal", int(sig)),
	   "end of the profile")
	eq(leaked_lines(prof, "term_signal"), [(line_of("term_signal", "t_leak"), 444, 1)],
	   "leaks at " + arg)


@test
def term_sigterm():
	check_term_signal("term", signal.SIGTERM)


@test
def term_sigint():
	check_term_signal("int", signal.SIGINT)


@test
def term_sighup():
	check_term_signal("hup", signal.SIGHUP)


@test
def term_sigpipe():
	check_term_signal("pipe", signal.SIGPIPE)


@test
def term_handlers_invisible():
	"""memline's handlers for SIGINT, SIGTERM, ... must not show: a program
	that finds them not SIG_DFL changes course (exit 10..20 here), and the
	SIGTERM it then takes must still leave the profile."""
	r = Run("sig_query", expect_rc=128 + signal.SIGTERM)
	prof = r.file("sig_query")
	eq(leaked_lines(prof, "sig_query"), [(line_of("sig_query", "sq_leak"), 333, 1)], "leaks")


@test
def term_handler_reinstalled():
	"""bash takes the SIGINT handler it found at start and reinstalls it
	with signal() (SA_RESTART, no SA_RESETHAND): `memline run -- bash -c
	'kill -INT $$'` then looped forever, rewriting its profile.  The
	fixture does the same; it must die of SIGINT, with its profile."""
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	p = run([memline(), "run", "-o", d, "--", fixture("sig_reinstall")], cwd=d, timeout=10)
	eq(p.returncode, 128 + signal.SIGINT, "exit status")
	rd = run_dir_of(d, p.stderr)
	eq([f for f in os.listdir(rd) if not f.endswith(".mlp")], [], "files other than profiles")
	prof = glob.glob(os.path.join(rd, "memline.sig_reinstall.*.mlp"))
	eq(len(prof), 1, "profiles of sig_reinstall")
	eq(leaked_lines(prof[0], "sig_reinstall"), [(line_of("sig_reinstall", "sr_leak"), 111, 1)],
	   "leaks")
	sh = shutil.which("bash")
	if sh:
		p = run([memline(), "run", "-o", d, "--", sh, "-c", "kill -INT $$; echo not reached"],
			cwd=d, timeout=10)
		eq((p.returncode, text(p.stdout)), (128 + signal.SIGINT, ""), "bash -c 'kill -INT $$'")


@test
def python_keyboard_interrupt():
	"""python installs its KeyboardInterrupt handler only where SIGINT is
	SIG_DFL at start: under memline, Ctrl-C must still raise it."""
	py = "/usr/bin/python3"
	check(os.path.exists(py), "no /usr/bin/python3")
	script = ("import os, signal, time\n"
		  "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,"
		  " signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)\n"
		  "try:\n"
		  "    os.kill(os.getpid(), signal.SIGINT)\n"
		  "    time.sleep(5)\n"
		  "except KeyboardInterrupt:\n"
		  "    print('KeyboardInterrupt')\n")
	plain = run([py, "-c", script])
	r = Run(py, args=["-c", script], rc_ok=(0, 128 + signal.SIGINT))
	eq(text(r.proc.stdout), text(plain.stdout), "python's output")
	eq(r.proc.returncode, plain.returncode, "python's exit status")


@test
def ignored_signals_stay_ignored():
	"""Signals memline was started with ignored (nohup, a background job of
	a shell) are ignored in the program too, as they would be without it:
	python's SIGINT then raises no KeyboardInterrupt."""
	py = "/usr/bin/python3"
	check(os.path.exists(py), "no /usr/bin/python3")
	script = ("import os, signal, time\n"
		  "print([signal.getsignal(s) == signal.SIG_IGN for s in"
		  " (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT)])\n"
		  "os.kill(os.getpid(), signal.SIGINT)\n"
		  "os.kill(os.getpid(), signal.SIGHUP)\n"
		  "time.sleep(0.2)\n"
		  "print('still here')\n")

	def ignoring():
		no_core()
		signal.signal(signal.SIGINT, signal.SIG_IGN)
		signal.signal(signal.SIGHUP, signal.SIG_IGN)
		signal.signal(signal.SIGTERM, signal.SIG_DFL)
		signal.signal(signal.SIGQUIT, signal.SIG_DFL)
	out = []
	for cmd in ([py, "-c", script],
		    [memline(), "run", "-o", tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp),
		     "--", py, "-c", script]):
		p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
				   timeout=60, preexec_fn=ignoring)
		out.append((p.returncode, text(p.stdout)))
	eq(out[0], (0, "[True, True, False, False]\nstill here\n"), "python alone")
	eq(out[1], out[0], "python under memline (exit status, output)")


@test
def term_during_exit_write():
	"""SIGTERM while a process writes its exit profile (Pool.terminate on
	python's workers) must neither lose the profile nor leave a temporary:
	the Run checks that only profiles are left."""
	kids = 40
	r = Run("term_in_exit", args=[str(kids)])
	fs = r.files("term_in_exit")
	eq(len(fs), kids + 1, "profiles of term_in_exit (the parent and its children)")
	# Reading all 41 takes seconds: the count and the Run's check carry the
	# test; a few children are read to see that they are complete.
	docs = report(fs[:4], "leaks")
	want = [(line_of("term_in_exit", "ti_child"), 222, 1)]
	children = 0
	for d in docs:
		if not d["profile"]["forked"]:
			continue
		children += 1
		got = sorted((f[0][2], b, n) for b, n, f in user_leaks(d, "term_in_exit"))
		eq(got, want, "leaks of child %d" % d["profile"]["pid"])
	check(children >= 3, "fork children among the first 4 profiles: %d" % children)


@test
def exec_env_replaces_preload():
	"""`memline run -- env LD_PRELOAD=libjemalloc.so.2 PROG`: env replaces
	memline's LD_PRELOAD before its exec; following execs must still profile
	PROG (valgrind --trace-children does)."""
	check(os.path.exists(JEMALLOC_SO), "libjemalloc2 is not installed")
	env_prog = shutil.which("env")
	check(env_prog is not None, "no env program")
	r = Run(env_prog, args=["LD_PRELOAD=" + JEMALLOC_SO, fixture("exec_target")])
	eq(leaked_lines(r.file("exec_target"), "exec_target"),
	   [(line_of("exec_target", "x_target"), 789, 1)], "exec_target leaks")


@test
def exec_env_cleared():
	"""`memline run -o DIR -- env -i PROG`: PROG gets an empty environment;
	its profile must still go to the run's directory in DIR (not PROG's
	working directory), counted by the `memline: wrote` line."""
	env_prog = shutil.which("env")
	check(env_prog is not None, "no env program")
	out = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	cwd = tempfile.mkdtemp(prefix="ml-e2e-cwd-", dir=OPTS.tmp)
	p = run([memline(), "run", "-o", out, "--", env_prog, "-i", fixture("exec_target")], cwd=cwd)
	eq(p.returncode, 0, "exit status; stderr: %s" % text(p.stderr).strip()[-300:])
	eq(sorted(os.listdir(cwd)), [], "files written in the program's working directory")
	rd = run_dir_of(out, p.stderr)
	prof = glob.glob(os.path.join(rd, "memline.exec_target.*.mlp"))
	eq(len(prof), 1, "profiles of exec_target in the run's directory")
	eq(leaked_lines(prof[0], "exec_target"), [(line_of("exec_target", "x_target"), 789, 1)],
	   "exec_target leaks")


@test
def exit_status_passed_on():
	r = Run("exit_status", expect_rc=42)
	rows = lines_of(r.file("exit_status"), "main")
	expect_line(rows, line_of("exit_status", "es_alloc"), "malloc(42)", self_bytes=42, allocs=1)


RELATIVE_DLOPEN = r"""#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	if (argc < 2 || chdir(argv[1]) != 0)
		return 2;
	void *lib = dlopen("./librel.so", RTLD_NOW);
	if (!lib || chdir("/") != 0)
		return 3;
	void *(*make)(void) = (void *(*)(void))dlsym(lib, "make");
	printf("%d\n", make() != NULL);
	return 0;
}
"""

RELATIVE_LIB = r"""#include <stdlib.h>
void *make(void)
{
	return malloc(4321);	/* L:rel_make */
}
"""


@test
def dlopen_relative_path():
	"""A library dlopen'ed by a relative path is recorded by its absolute
	path: the report names its function and line from any directory (the
	program changed directory since, too)."""
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	for name, src in (("rel.c", RELATIVE_DLOPEN), ("librel.c", RELATIVE_LIB)):
		with open(os.path.join(d, name), "w") as f:
			f.write(src)
	exe, lib = os.path.join(d, "rel"), os.path.join(d, "librel.so")
	p = run(["cc", "-g", "-O0", "-shared", "-fPIC", "-o", lib, os.path.join(d, "librel.c")])
	check(p.returncode == 0, "cc lib: " + text(p.stderr))
	p = run(["cc", "-g", "-O0", "-o", exe, os.path.join(d, "rel.c"), "-ldl"])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	prof = Run(exe, args=[d]).file("rel")
	doc = report(prof, "leaks")
	mods = [f["module"] for s in doc["leaks"]["records"] for f in s["frames"]]
	check(lib in mods and not any(m and m.startswith("./") for m in mods),
	      "modules named in the leaks: %s" % sorted(set(m for m in mods if m)))
	got = [(b, f[0]) for b, n, f in leak_stacks(doc) if f and f[0][1] == "librel.c"]
	eq(got, [(4321, ("make", "librel.c", 4))], "the library's leak, symbolized")


RUNPATH_PROG = r"""#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
	/* Found only through this program's RUNPATH ($ORIGIN/plug): dlopen must
	 * search as called from here, with and without RTLD_DEEPBIND. */
	void *a = dlopen("libplug.so", RTLD_NOW);
	void *b = dlopen("libplugdeep.so", RTLD_NOW | RTLD_DEEPBIND);
	if (!a || !b) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	void (*drop)(void *) = (void (*)(void *))dlsym(b, "drop");
	drop(malloc(777));
	printf("loaded both\n");
	return 0;
}
"""

PLUG_LIB = r"""#include <stdlib.h>
void drop(void *p)
{
	free(p);
}
"""


@test
def dlopen_keeps_caller_search_path():
	"""memline wraps dlopen (for RTLD_DEEPBIND) without changing where it
	looks: a library found only through the calling program's RUNPATH
	loads, both plainly and with RTLD_DEEPBIND; the deep-bound library's
	free of the program's block is seen (no leak)."""
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	os.mkdir(os.path.join(d, "plug"))
	with open(os.path.join(d, "prog.c"), "w") as f:
		f.write(RUNPATH_PROG)
	with open(os.path.join(d, "plug.c"), "w") as f:
		f.write(PLUG_LIB)
	for lib in ("libplug.so", "libplugdeep.so"):
		p = run(["cc", "-g", "-shared", "-fPIC", "-o", os.path.join(d, "plug", lib),
			 os.path.join(d, "plug.c")])
		check(p.returncode == 0, "cc lib: " + text(p.stderr))
	exe = os.path.join(d, "prog")
	p = run(["cc", "-g", "-O0", "-o", exe, os.path.join(d, "prog.c"), "-ldl",
		 "-Wl,--enable-new-dtags,-rpath,$ORIGIN/plug"])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	plain = run([exe])
	eq((plain.returncode, text(plain.stdout)), (0, "loaded both\n"), "plain run")
	r = Run(exe)
	eq(text(r.proc.stdout), "loaded both\n", "stdout under memline")
	prof = r.file("prog")
	main = ops_rows(report(prof, "ops"))["main"]
	eq((main["self_allocs"], main["self_bytes"]), (1, 777), "main's block")
	left = [(b, f[0]) for b, n, f in leak_stacks(report(prof, "leaks")) if f and f[0][1] == "prog.c"]
	eq(left, [], "leaks allocated in prog.c (its block was freed by the RTLD_DEEPBIND library)")


# ---------------------------------------------- the runtime's own libraries

def elf_dynamic(path):
	"""(DT_NEEDED names, dynamic symbol names) of an ELF64 little-endian
	file, read from its section headers."""
	with open(path, "rb") as f:
		data = f.read()
	shoff = struct.unpack_from("<Q", data, 0x28)[0]
	shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
	# (name, type, flags, addr, offset, size, link, info, addralign, entsize)
	secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

	def name_at(strtab, off):
		base = secs[strtab][4]
		return data[base + off:data.index(b"\0", base + off)].decode()
	needed, syms = [], []
	for s in secs:
		if s[1] == 6:		# SHT_DYNAMIC: (tag, value) pairs
			for off in range(s[4], s[4] + s[5], 16):
				tag, val = struct.unpack_from("<qQ", data, off)
				if tag == 1:	# DT_NEEDED
					needed.append(name_at(s[6], val))
		elif s[1] == 11:	# SHT_DYNSYM: 24-byte entries, st_name first
			for off in range(s[4], s[4] + s[5], 24):
				st_name = struct.unpack_from("<I", data, off)[0]
				if st_name:
					syms.append(name_at(s[6], st_name))
	return needed, syms


def zstd_archive():
	"""True when the compiler finds libzstd.a (the Makefile then links it
	into the runtime)."""
	p = run(["cc", "-print-file-name=libzstd.a"])
	return os.path.isabs(text(p.stdout).strip())


def probe_lines(r):
	"""{name: word} of scope_probe's stdout under memline."""
	return dict(line.split(" ", 1) for line in text(r.proc.stdout).splitlines())


def probe_leak(r):
	"""The innermost two frames of scope_probe's 4321-byte leak."""
	mine = [f for b, n, f in leak_stacks(report(r.file("scope_probe"), "leaks")) if b == 4321]
	eq(len(mine), 1, "records of the 4321-byte leak")
	return [(fn, line) for fn, _, line in mine[0][:2]]


@test
def runtime_libraries_not_global():
	"""libmemline.so needs neither libunwind (nor so liblzma) nor libzstd:
	each object in the program's global scope costs every symbol look-up
	of every library loaded later.  It loads libunwind itself, RTLD_LOCAL,
	and has libzstd inside, its symbols local.  Under memline the
	program's scope has none of their symbols, libunwind is loaded, and
	stacks are whole with the walker and with libunwind alone."""
	needed, syms = elf_dynamic(build_path("libmemline.so"))
	banned = ("libunwind", "liblzma") + (("libzstd",) if zstd_archive() else ())
	eq([n for n in needed if n.startswith(banned)], [], "libmemline.so's DT_NEEDED")
	prefixes = ("_UL", "_Ux86_64", "unw_") + (("ZSTD_", "HUF_", "FSE_") if zstd_archive() else ())
	eq([s for s in syms if s.startswith(prefixes)], [], "libunwind/libzstd symbols in its .dynsym")
	want = [("leak", line_of("scope_probe", "probe_leak")),
		("main", line_of("scope_probe", "probe_main"))]
	for env in ({}, {"MEMLINE_LIBUNWIND_ONLY": "1"}):
		r = Run("scope_probe", env=dict(os.environ, **env))
		got = probe_lines(r)
		eq(got.pop("libunwind"), "loaded", "libunwind loaded by the runtime %s" % env)
		eq(sorted(set(got.values())), ["absent"], "symbols in the global scope: %s" % got)
		eq(probe_leak(r), want, "the leak's innermost frames %s" % env)


@test
def runtime_without_libunwind():
	"""A libunwind.so.8 that lacks libunwind's calls (a stand-in found first
	on LD_LIBRARY_PATH): the runtime says so once and runs on, its own
	walker taking the stacks; MEMLINE_VERIFY_UNWIND then checks nothing."""
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	with open(os.path.join(d, "stand_in.c"), "w") as f:
		f.write("int not_libunwind;\n")
	p = run(["cc", "-shared", "-fPIC", "-o", os.path.join(d, "libunwind.so.8"),
		 os.path.join(d, "stand_in.c")])
	check(p.returncode == 0, "cc: " + text(p.stderr))
	env = dict(os.environ, LD_LIBRARY_PATH=d, MEMLINE_VERIFY_UNWIND="1")
	r = Run("scope_probe", env=env)
	err = text(r.proc.stderr)
	eq(err.count("cannot load libunwind.so.8 (a call is missing)"), 1,
	   "warnings about libunwind in %r" % err[-400:])
	eq(verified(r, "stand-in libunwind"), (0, 0), "stacks checked against libunwind")
	eq(probe_leak(r), [("leak", line_of("scope_probe", "probe_leak")),
			   ("main", line_of("scope_probe", "probe_main"))], "the leak's innermost frames")
