/* alloc/lifecycle.c - the runtime's life: start-up, the profile written at
 * exit / _exit / exec / fatal signals, fork children, dlopen and dlclose for
 * the module map.  Allocation hooks live in hooks.c. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "alloc/track.h"
#include "alloc/internal.h"
#include "alloc/real.h"

#define ML_EXPORT __attribute__((visibility("default")))

static volatile uint32_t end_reason;	/* set by main's return or exit() */
static volatile int32_t end_status;
static volatile int main_thread_exited;
static volatile int final_written;	/* the exit-time profile is out */
static volatile int no_write;		/* a fork child with MEMLINE_FOLLOW=0 */
/* The process whose profile this memory holds.  A vfork or raw clone child
 * (no atfork handler ran) shares or copies it, and must not write it. */
static volatile pid_t profiled_pid;

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

/* The next definition of sym, looked up on first use. */
static void *next(const char *sym, void **cache)
{
	if (!*cache)
		*cache = dlsym(RTLD_NEXT, sym);
	return *cache;
}
#define NEXT(type, sym) ({ static void *cache_; (type)next(sym, &cache_); })

/* Writes the profile unless this process must not. */
static void write_profile(uint32_t reason, int32_t status)
{
	if (no_write || !ml_core_active || getpid() != profiled_pid)
		return;
	ml_dump_write(reason, status);
}

/* ---- fatal signals ---- */

static void on_fatal(int sig, siginfo_t *info, void *uctx)
{
	int saved = errno;
	if (!final_written)
		write_profile(ML_END_SIGNAL, sig);
	/* SA_RESETHAND restored the default action; the raised signal is
	 * delivered when we return (a fault would also repeat by itself). */
	raise(sig);
	errno = saved;
}

/* Installs our handler only where the program left the default action. */
static void install_signal_handlers(void)
{
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
		struct sigaction old, sa;
		if (sigaction(fatal_signals[i], NULL, &old) < 0 || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_fatal;
		sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(fatal_signals[i], &sa, NULL);
	}
}

/* ---- fork ---- */

static void after_fork_child(void)
{
	if (!ml_config.follow) {
		no_write = 1;
		ml_core_active = 0;
		return;
	}
	final_written = 0;
	profiled_pid = getpid();
	ml_core_after_fork();
}

/* ---- start-up and exit ---- */

__attribute__((constructor(101))) static void ml_lifecycle_init(void)
{
	ml_real_resolve();
	bool guarded = ml_guard_enter_always();
	if (ml_core_init((uint64_t)(uintptr_t)&ml_lifecycle_init) < 0) {
		ml_warn("cannot start; the program runs unprofiled");
		goto out;
	}
	profiled_pid = getpid();
	if (!ml_config.follow)
		ml_config_unpreload();
	ml_modules_refresh();
	pthread_atfork(NULL, NULL, after_fork_child);
	install_signal_handlers();
out:
	if (guarded)
		ml_guard_exit();
}

__attribute__((destructor)) static void ml_lifecycle_fini(void)
{
	if (final_written)
		return;
	uint32_t reason = end_reason;
	if (!reason)
		reason = main_thread_exited ? ML_END_THREAD_EXIT : ML_END_EXIT;
	write_profile(reason, end_status);
	final_written = 1;
	ml_core_active = 0;	/* later frees change nothing that is written */
}

typedef int (*main_fn)(int, char **, char **);
static main_fn real_main;

static int main_wrapper(int argc, char **argv, char **envp)
{
	int status = real_main(argc, argv, envp);
	end_status = status;
	end_reason = ML_END_EXIT;
	return status;
}

/* Wraps main to learn its return value (exit status). */
ML_EXPORT int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void),
				void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
	typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void),
				void (*)(void), void *);
	start_fn real = NEXT(start_fn, "__libc_start_main");
	real_main = main;
	return real(main_wrapper, argc, argv, init, fini, rtld_fini, stack_end);
}

ML_EXPORT void exit(int status)
{
	typedef void (*exit_fn)(int) __attribute__((noreturn));
	if (!end_reason) {
		end_status = status;
		end_reason = ML_END_EXIT;
	}
	NEXT(exit_fn, "exit")(status);
	__builtin_unreachable();
}

__attribute__((noreturn)) static void underscore_exit(int status, const char *sym)
{
	typedef void (*exit_fn)(int) __attribute__((noreturn));
	if (!final_written) {
		write_profile(ML_END_UNDERSCORE_EXIT, status);
		final_written = 1;
	}
	static void *cache_exit, *cache_Exit;
	exit_fn real = (exit_fn)next(sym, sym[1] == 'e' ? &cache_exit : &cache_Exit);
	if (real)
		real(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

ML_EXPORT void _exit(int status)
{
	underscore_exit(status, "_exit");
}

ML_EXPORT void _Exit(int status)
{
	underscore_exit(status, "_Exit");
}

ML_EXPORT void pthread_exit(void *ret)
{
	typedef void (*exit_fn)(void *) __attribute__((noreturn));
	if (syscall(SYS_gettid) == getpid())
		main_thread_exited = 1;
	NEXT(exit_fn, "pthread_exit")(ret);
	__builtin_unreachable();
}

/* ---- dlclose: keep unloaded modules in the map ----
 * (dlopen is not wrapped: libc resolves the caller's RUNPATH and namespace
 * from its return address, which a wrapper would change; modules it loads
 * are picked up when the profile is written.) */

ML_EXPORT int dlclose(void *handle)
{
	typedef int (*dlclose_fn)(void *);
	if (ml_core_active)
		ml_modules_refresh();	/* catch it while it is still mapped */
	int rc = NEXT(dlclose_fn, "dlclose")(handle);
	if (ml_core_active)
		ml_modules_refresh();	/* and flag it unloaded if it went away */
	return rc;
}

/* ---- exec: write the profile first; if exec fails, keep profiling (the
 * next write replaces the same file) ---- */

static char preload_filtered[8192];

/* With MEMLINE_FOLLOW=0, envp without libmemline in LD_PRELOAD; the copy
 * lives in out (n_env + 1 slots). */
static char *const *exec_env(char *const *envp, char **out, size_t cap)
{
	if (ml_config.follow || !envp)
		return envp;
	size_t n = 0;
	for (; envp[n] && n + 1 < cap; n++) {
		out[n] = envp[n];
		if (strncmp(envp[n], "LD_PRELOAD=", 11) == 0 &&
		    strlen(envp[n]) < sizeof(preload_filtered)) {
			strcpy(preload_filtered, envp[n]);
			ml_config_filter_preload(preload_filtered + 11);
			out[n] = preload_filtered;
		}
	}
	out[n] = NULL;
	return out;
}

static size_t env_count(char *const *envp)
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	return n + 1;
}

static void before_exec(void)
{
	write_profile(ML_END_EXEC, 0);
}

ML_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	typedef int (*fn)(const char *, char *const[], char *const[]);
	char *env[env_count(envp)];
	before_exec();
	return NEXT(fn, "execve")(path, argv, exec_env(envp, env, env_count(envp)));
}

ML_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	typedef int (*fn)(const char *, char *const[], char *const[]);
	char *env[env_count(envp)];
	before_exec();
	return NEXT(fn, "execvpe")(file, argv, exec_env(envp, env, env_count(envp)));
}

ML_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	typedef int (*fn)(int, char *const[], char *const[]);
	char *env[env_count(envp)];
	before_exec();
	return NEXT(fn, "fexecve")(fd, argv, exec_env(envp, env, env_count(envp)));
}

ML_EXPORT int execv(const char *path, char *const argv[])
{
	typedef int (*fn)(const char *, char *const[]);
	before_exec();
	return NEXT(fn, "execv")(path, argv);
}

ML_EXPORT int execvp(const char *file, char *const argv[])
{
	typedef int (*fn)(const char *, char *const[]);
	before_exec();
	return NEXT(fn, "execvp")(file, argv);
}

/* Collects execl's variadic arguments into argv (on the stack). */
#define COLLECT_ARGS(arg0, ap, argv, extra) \
	size_t argc_ = 1; \
	va_start(ap, arg0); \
	while (va_arg(ap, char *)) \
		argc_++; \
	va_end(ap); \
	char *argv[argc_ + 1]; \
	va_start(ap, arg0); \
	argv[0] = (char *)arg0; \
	for (size_t i_ = 1; i_ <= argc_; i_++) \
		argv[i_] = va_arg(ap, char *); \
	extra; \
	va_end(ap)

ML_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	COLLECT_ARGS(arg, ap, argv, (void)0);
	return execv(path, argv);
}

ML_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	COLLECT_ARGS(arg, ap, argv, (void)0);
	return execvp(file, argv);
}

ML_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char *const *envp;
	COLLECT_ARGS(arg, ap, argv, envp = va_arg(ap, char *const *));
	return execve(path, argv, envp);
}
