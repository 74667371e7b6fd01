"""tests/e2e/test_cli.py - end-to-end tests of `memline run`'s options and its
one-line errors (missing, not executable, static or setuid programs,
unwritable output)."""

from harness import *


@test
def depth_option():
	r = Run("recursive", opts=["--depth", "2"])
	doc = report(r.file("recursive"), "leaks")  # nothing leaks, but it must load
	ops = ops_rows(report(r.file("recursive"), "ops"))
	eq(ops["rec"]["self_bytes"], 320, "rec self bytes at depth 2")
	check("main" not in ops or ops["main"]["incl_bytes"] == 0,
	      "main seen at depth 2: %r" % ops.get("main"))
	# Stacks cut at the depth say so; whole ones do not.
	for opts, want in ((["--depth", "1"], True), ((), False)):
		recs = report(Run("leak", opts=opts).file("leak"), "leaks")["leaks"]["records"]
		check(recs, "no leak records")
		eq(sorted({r["truncated"] for r in recs}), [want], "truncated, with %r" % (opts,))


@test
def run_keeps_the_programs_underscore():
	"""A shell sets "_" to the command it runs (memline): the program sees
	its own path there, as when the shell runs it alone; a "_" the shell
	did not set is left as it is."""
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	p = run(["bash", "-c", '"$0" run -o "$1" -- /usr/bin/printenv _', memline(), d], cwd=d)
	eq(p.returncode, 0, "exit status under bash")
	eq(text(p.stdout).strip(), "/usr/bin/printenv", "_ under bash")
	p = run([memline(), "run", "-o", d, "--", "/usr/bin/printenv", "_"], cwd=d,
		env=dict(os.environ, _="/not/memline"))
	eq(text(p.stdout).strip(), "/not/memline", "_ set by someone else")


# ---------------------------------------------------------------- errors

def run_error(prog, *keywords, rc=126, opts=()):
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	p = run([memline(), "run", "-o", d] + list(opts) + ["--", prog], cwd=d)
	one_line_error(p, "run " + os.path.basename(prog), *keywords)
	eq(p.returncode, rc, "exit status of run " + os.path.basename(prog))
	eq(glob.glob(os.path.join(d, "*.mlp")), [], "profiles written")


@test
def error_missing_program():
	run_error(os.path.join(OPTS.tmp, "no-such-program"), "not found", "no such", rc=127)
	run_error("memline-no-such-program-in-path", "not found", rc=127)


@test
def error_usage():
	prof = Run("leak").file("leak")
	for argv, rc, words in ((["run"], 2, ("no program",)),
				(["run", "--depth", "0", "--", fixture("leak")], 2, ("depth",)),
				(["bogus"], 2, ("unknown command",)),
				(["report", prof], 2, ("view",)),
				(["report", prof, "ops", "--sort", "bogus"], 2, ("sort key",)),
				(["report", prof, "lines"], 1, ("--function", "@profile")),
				(["report", prof, "lines", "--function", "no_such_fn"], 1, ("no_such_fn",)),
				(["report", os.path.join(OPTS.tmp, "none.mlp"), "leaks"], 1, ("none.mlp",))):
		p = run([memline()] + argv, cwd=OPTS.tmp)
		one_line_error(p, " ".join(argv[:3]), *words)
		eq(p.returncode, rc, "exit status of memline %s" % " ".join(os.path.basename(a) for a in argv))


@test
def error_not_executable():
	p = os.path.join(OPTS.tmp, "not-executable")
	shutil.copy(fixture("exit_status"), p)
	os.chmod(p, 0o644)
	run_error(p, "not executable", "permission", "executable")


@test
def error_static_binary():
	run_error(fixture("static_prog"), "static")


@test
def error_setuid_binary():
	p = os.path.join(OPTS.tmp, "setuid-copy")
	shutil.copy(fixture("exit_status"), p)
	os.chmod(p, 0o755 | stat.S_ISUID)
	run_error(p, "setuid", "set-user-id", "setgid")


@test
def error_unwritable_output_dir():
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	for bad in (os.path.join(d, "missing", "dir"), os.path.join(d, "file")):
		if bad.endswith("file"):
			open(bad, "w").close()
		p = run([memline(), "run", "-o", bad, "--", fixture("exit_status")], cwd=d)
		one_line_error(p, "run -o " + bad, "-o", "output", "director", "writable")
		eq(p.returncode, 126, "exit status of run -o " + bad)
	if os.geteuid() != 0:  # root writes anywhere
		ro = os.path.join(d, "ro")
		os.mkdir(ro, 0o555)
		p = run([memline(), "run", "-o", ro, "--", fixture("exit_status")], cwd=d)
		one_line_error(p, "run -o read-only", "writable", "permission")


@test
def run_script_without_shebang():
	"""An executable script without #! is refused by exec (ENOEXEC); execvp
	and shells then run it with /bin/sh, and so does memline run: the same
	output and exit status, and /bin/sh's profile."""
	d = tempfile.mkdtemp(prefix="ml-e2e-", dir=OPTS.tmp)
	script = os.path.join(d, "noshebang")
	with open(script, "w") as f:
		f.write('echo "args: $0 $1 $2"\nexit 7\n')
	os.chmod(script, 0o755)
	plain = run(["/usr/bin/env", "sh", "-c", 'exec "$@"', "sh", script, "a b", "c"])
	eq((plain.returncode, text(plain.stdout)), (7, "args: %s a b c\n" % script), "run by a shell")
	r = Run(script, args=["a b", "c"], expect_rc=7)
	eq(text(r.proc.stdout), text(plain.stdout), "stdout under memline")
	eq(len(r.files()), 1, "profiles (/bin/sh's)")
	empty = os.path.join(d, "empty")
	open(empty, "w").close()
	os.chmod(empty, 0o755)
	Run(empty, expect_rc=0)
