/* cli/run.c - `memline run`: preloads libmemline.so into a program, runs it
 * with a directory of its own for the run's profiles (rundir.c), forwards
 * signals, returns its exit status and says what was written. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cli/cli.h"

struct run_opts {
	const char *out_dir;	/* -o DIR, NULL for the current directory */
	const char *depth;	/* --depth N, validated */
	bool no_follow;
	bool no_torch_cache;	/* --no-torch-cache: PYTORCH_NO_CUDA_MEMORY_CACHING=1 */
	bool no_pymem;		/* --no-pymem: MEMLINE_PYMEM=0 */
	bool native;		/* --native: MEMLINE_PY_NATIVE=1 */
	bool lines;		/* --lines: the line timer */
	const char *clock;	/* --clock cpu|wall, validated */
	const char *rate;	/* --rate HZ, validated */
	const char *sample;	/* --sample BYTES, validated */
	char **prog_argv;	/* PROG ARGS, NULL-terminated */
};

static volatile sig_atomic_t child_pid;

/* Forwards a signal sent to memline (kill, a supervisor) to the program.
 * Terminal signals (si_code SI_KERNEL) already reach the whole foreground
 * process group, so they are not sent twice. */
static void forward_signal(int sig, siginfo_t *info, void *uctx)
{
	(void)uctx;
	if (child_pid > 0 && (!info || info->si_code != SI_KERNEL))
		kill((pid_t)child_pid, sig);
}

static int parse_opts(int argc, char **argv, struct run_opts *o)
{
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break;
		if (strcmp(a, "-o") == 0 || strcmp(a, "--depth") == 0) {
			if (i + 1 >= argc)
				return ml_cli_usage_error("run: %s needs a value", a);
			const char *v = argv[++i];
			if (a[1] == 'o') {
				o->out_dir = v;
				continue;
			}
			char *end;
			errno = 0;
			long n = strtol(v, &end, 10);
			if (errno || *end || end == v || n < 1 || n > 256)
				return ml_cli_usage_error("run: --depth takes a number of frames "
							  "from 1 to 256, not '%s'", v);
			o->depth = v;
		} else if (strcmp(a, "--sample") == 0) {
			if (i + 1 >= argc)
				return ml_cli_usage_error("run: --sample needs a value");
			const char *v = argv[++i];
			char *end;
			errno = 0;
			unsigned long long n = strtoull(v, &end, 10);
			if (errno || *end || end == v || v[0] == '-' || n < 1 || n > (1ull << 40))
				return ml_cli_usage_error("run: --sample takes the mean bytes between "
							  "samples, from 1 to 2^40, not '%s'", v);
			o->sample = v;
		} else if (strcmp(a, "--no-follow") == 0) {
			o->no_follow = true;
		} else if (strcmp(a, "--no-pymem") == 0) {
			o->no_pymem = true;
		} else if (strcmp(a, "--native") == 0) {
			o->native = true;
		} else if (strcmp(a, "--no-torch-cache") == 0) {
			o->no_torch_cache = true;
		} else if (strcmp(a, "--lines") == 0) {
			o->lines = true;
		} else if (strcmp(a, "--clock") == 0 || strcmp(a, "--rate") == 0) {
			if (i + 1 >= argc)
				return ml_cli_usage_error("run: %s needs a value", a);
			const char *v = argv[++i];
			o->lines = true;	/* --clock and --rate imply --lines */
			if (a[2] == 'c') {
				if (strcmp(v, "cpu") != 0 && strcmp(v, "wall") != 0)
					return ml_cli_usage_error("run: --clock takes cpu or wall, "
								  "not '%s'", v);
				o->clock = v;
				continue;
			}
			char *end;
			errno = 0;
			long n = strtol(v, &end, 10);
			if (errno || *end || end == v || n < 1 || n > 100000)
				return ml_cli_usage_error("run: --rate takes samples per second "
							  "from 1 to 100000, not '%s'", v);
			o->rate = v;
		} else {
			return ml_cli_usage_error("run: unknown option '%s'", a);
		}
	}
	if (i >= argc)
		return ml_cli_usage_error("run: no program given (memline run [-o DIR] -- PROG ARGS)");
	o->prog_argv = argv + i;
	return 0;
}

/* libmemline.so in the directory of the running memline binary. */
static int find_runtime(char *out, size_t len)
{
	char self[PATH_MAX - 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -errno;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(out, len, "%s/libmemline.so", self);
	return access(out, R_OK) == 0 ? 0 : -errno;
}

static int check_out_dir(const char *dir, char *abs, size_t len)
{
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "memline: output directory %s does not exist; create it or "
			"choose another with -o\n", dir);
		return -1;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		fprintf(stderr, "memline: output directory %s is not writable; choose another "
			"with -o\n", dir);
		return -1;
	}
	char buf[PATH_MAX];
	if (!realpath(dir, buf)) {
		fprintf(stderr, "memline: cannot resolve output directory %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	snprintf(abs, len, "%s", buf);
	return 0;
}

/* Runs the file exec refused (a script without #!) with /bin/sh, as
 * execvp(3) does: /bin/sh PATH ARGS.  Returns only if that exec fails. */
static void exec_with_shell(const char *path, char *const argv[])
{
	size_t argc = 0;
	while (argv[argc])
		argc++;
	char **sh_argv = calloc(argc + 2, sizeof(*sh_argv));
	if (!sh_argv)
		return;
	sh_argv[0] = ML_SCRIPT_SHELL;
	sh_argv[1] = (char *)path;
	for (size_t i = 1; i < argc; i++)
		sh_argv[i + 1] = argv[i];
	execv(ML_SCRIPT_SHELL, sh_argv);
	free(sh_argv);
}

/* The profiles' permission bits: what this shell's umask gives a new file
 * (the program may change its own umask; its profiles keep this). */
static void set_file_mode(void)
{
	mode_t mask = umask(0);
	umask(mask);
	char mode[8];
	snprintf(mode, sizeof(mode), "%o", 0666u & ~(unsigned)mask);
	setenv("MEMLINE_FILE_MODE", mode, 1);
}

/* In the child: waits for the run's directory (its name comes through
 * sync, empty when it could not be made), sets the environment and execs.
 * Never returns. */
static void exec_child(const char *path, const struct run_opts *o, const char *runtime,
		       int sync)
{
	char out_abs[PATH_MAX];
	size_t got = 0;
	for (;;) {
		ssize_t n = read(sync, out_abs + got, sizeof(out_abs) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(sync);
	out_abs[got] = '\0';
	if (!got)
		_exit(ML_EXIT_CANNOT_RUN);
	char pid[24];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("MEMLINE_RUN_PID", pid, 1);
	set_file_mode();
	const char *old = getenv("LD_PRELOAD");
	size_t need = strlen(runtime) + (old ? strlen(old) : 0) + 2;
	char *preload = malloc(need);
	if (preload) {
		snprintf(preload, need, "%s%s%s", runtime, old && *old ? ":" : "", old ? old : "");
		setenv("LD_PRELOAD", preload, 1);
	}
	setenv("MEMLINE_OUTPUT_DIR", out_abs, 1);	/* the run's directory */
	if (o->depth)
		setenv("MEMLINE_DEPTH", o->depth, 1);
	if (o->sample)
		setenv("MEMLINE_SAMPLE", o->sample, 1);
	if (o->no_follow)
		setenv("MEMLINE_FOLLOW", "0", 1);
	/* PyTorch then asks the driver for every tensor (slower): memline sees
	 * each one instead of the caching allocator's segments. */
	if (o->no_torch_cache)
		setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 1);
	if (o->no_pymem)
		setenv("MEMLINE_PYMEM", "0", 1);
	if (o->native)
		setenv("MEMLINE_PY_NATIVE", "1", 1);
	if (o->lines) {
		setenv("MEMLINE_LINES", "1", 1);
		setenv("MEMLINE_CLOCK", o->clock ? o->clock : "cpu", 1);
		if (o->rate)
			setenv("MEMLINE_RATE", o->rate, 1);
	}
	/* NVTX v3 loads its tool from here: libmemline records the ranges.  Not
	 * with --no-follow: programs exec'd without the preload would load
	 * libmemline through it. */
	if (!o->no_follow && !getenv("NVTX_INJECTION64_PATH"))
		setenv("NVTX_INJECTION64_PATH", runtime, 1);
	/* A shell that started us set "_" to memline's path: the program sees
	 * its own, as it would run alone (any other value is left as is). */
	const char *underscore = getenv("_");
	char self[PATH_MAX], named[PATH_MAX];
	if (underscore && realpath("/proc/self/exe", self) && realpath(underscore, named) &&
	    strcmp(self, named) == 0)
		setenv("_", path, 1);
	execv(path, o->prog_argv);
	int err = errno;
	if (err == ENOEXEC)
		exec_with_shell(path, o->prog_argv);	/* returns only on failure */
	fprintf(stderr, "memline: cannot run %s: %s\n", o->prog_argv[0], strerror(err));
	_exit(err == ENOENT ? ML_EXIT_NOT_FOUND : ML_EXIT_CANNOT_RUN);
}

static int wait_child(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return ML_EXIT_CANNOT_RUN;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return ML_EXIT_CANNOT_RUN;
}

/* A signal memline was started with ignored (nohup, a shell's background
 * job) stays ignored, here and in the program: exec keeps SIG_IGN, while a
 * handler of ours would become SIG_DFL there. */
static void install_forwarding(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGQUIT, SIGHUP };
	struct sigaction sa, was;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], NULL, &was) == 0 && was.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
}

/* Checks everything that can be checked before forking.  Returns 0 with
 * path, runtime and out_abs filled, or an exit code after one line. */
static int prepare(const struct run_opts *o, char *path, char *runtime, char *out_abs)
{
	const char *prog = o->prog_argv[0];
	int err = ml_prog_resolve(prog, path, PATH_MAX);
	if (err == -ENOENT || err == -ENOTDIR) {
		fprintf(stderr, "memline: %s: program not found%s\n", prog,
			strchr(prog, '/') ? "" : " in PATH");
		return ML_EXIT_NOT_FOUND;
	}
	if (err < 0) {
		fprintf(stderr, "memline: %s: %s\n", prog, err == -EISDIR ?
			"is a directory, not a program" : "not executable (check its permissions)");
		return ML_EXIT_CANNOT_RUN;
	}
	char why[PATH_MAX + 128];
	if (ml_prog_check_preloadable(path, prog, why, sizeof(why)) < 0) {
		fprintf(stderr, "memline: %s\n", why);
		return ML_EXIT_CANNOT_RUN;
	}
	if (check_out_dir(o->out_dir ? o->out_dir : ".", out_abs, PATH_MAX) < 0)
		return ML_EXIT_CANNOT_RUN;
	if (find_runtime(runtime, PATH_MAX) < 0) {
		fprintf(stderr, "memline: cannot find libmemline.so next to the memline binary "
			"(%s); rebuild with make\n", runtime);
		return ML_EXIT_CANNOT_RUN;
	}
	return 0;
}

int ml_cli_run(int argc, char **argv)
{
	struct run_opts o = { 0 };
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc;
	char path[PATH_MAX], runtime[PATH_MAX], out_abs[PATH_MAX];
	rc = prepare(&o, path, runtime, out_abs);
	if (rc)
		return rc;
	int sync[2];
	if (pipe2(sync, O_CLOEXEC) < 0) {
		fprintf(stderr, "memline: cannot start %s: %s\n", o.prog_argv[0], strerror(errno));
		return ML_EXIT_CANNOT_RUN;
	}
	fflush(NULL);
	install_forwarding();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "memline: cannot start %s: %s\n", o.prog_argv[0], strerror(errno));
		return ML_EXIT_CANNOT_RUN;
	}
	if (pid == 0) {
		close(sync[1]);
		exec_child(path, &o, runtime, sync[0]);
	}
	close(sync[0]);
	child_pid = pid;
	/* The run's directory is named after the program's pid. */
	char dir[PATH_MAX], shown[PATH_MAX + 16];
	int err = ml_rundir_create(out_abs, o.prog_argv[0], pid, dir, sizeof(dir));
	if (err < 0) {
		fprintf(stderr, "memline: cannot make the run's directory in %s: %s\n", out_abs,
			strerror(-err));
		close(sync[1]);
		wait_child(pid);
		return ML_EXIT_CANNOT_RUN;
	}
	for (size_t off = 0, len = strlen(dir); off < len;) {
		ssize_t n = write(sync[1], dir + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(sync[1]);
	rc = wait_child(pid);
	const char *base = strrchr(dir, '/');
	const char *out = o.out_dir ? o.out_dir : ".";
	size_t ol = strlen(out);
	snprintf(shown, sizeof(shown), "%s%s%s", out, ol && out[ol - 1] == '/' ? "" : "/",
		 base ? base + 1 : dir);
	ml_rundir_summarize(dir, shown);
	return rc;
}
