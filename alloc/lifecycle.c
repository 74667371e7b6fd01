/* alloc/lifecycle.c - the runtime's life: start-up, the profile written at
 * exit / _exit / exec / fatal signals, fork children, dlopen and dlclose for
 * the module map.  Allocation hooks live in hooks.c. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "alloc/track.h"
#include "alloc/internal.h"
#include "alloc/real.h"
#include "lineprof/lineprof.h"
#include "python/python.h"

#define ML_EXPORT __attribute__((visibility("default")))

static volatile uint32_t end_reason;	/* set by main's return or exit() */
static volatile int32_t end_status;
static volatile int main_thread_exited;
static volatile int final_written;	/* the exit-time profile is out */
static volatile int no_write;		/* a fork child with MEMLINE_FOLLOW=0 */
/* The process whose profile this memory holds.  A vfork or raw clone child
 * (no atfork handler ran) shares or copies it, and must not write it. */
static volatile pid_t profiled_pid;
static const char *self_path;	/* libmemline's path, for exec'd programs' LD_PRELOAD */
static void save_settings(void);

/* Faults and abort, and the signals whose default action ends the process
 * quietly (kill, Ctrl-C, a closed terminal, `prog | head`).  Only where
 * the program left the default action. */
static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
				     SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT };

/* The next definition of sym, looked up on first use. */
static void *next(const char *sym, void **cache)
{
	if (!*cache)
		*cache = dlsym(RTLD_NEXT, sym);
	return *cache;
}
#define NEXT(type, sym) ({ static void *cache_; (type)next(sym, &cache_); })

/* Writes the profile unless this process must not. */
static int write_profile(uint32_t reason, int32_t status)
{
	if (no_write || !ml_core_active || getpid() != profiled_pid)
		return 0;
	return ml_dump_write(reason, status);
}

/* ---- fatal signals ----
 * Our handler is installed for each signal of fatal_signals whose action
 * the program leaves (or sets back) at SIG_DFL, and is invisible to it:
 * its sigaction and signal calls see and get back exactly the action it
 * set (CPython, for one, installs its SIGINT handler, KeyboardInterrupt,
 * only over SIG_DFL; bash sets SIG_DFL at start and later reinstalls the
 * handler it found).  SIG_IGN or a handler of the program's replaces ours
 * until it sets SIG_DFL again. */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction_ptr;	/* resolved before any handler runs */
/* Signals of fatal_signals, once start-up has looked at them. */
static volatile sig_atomic_t managed[NSIG];
/* Signals whose action is our handler. */
static volatile sig_atomic_t ours[NSIG];
/* Where ours is set: the SIG_DFL action the program sees. */
static struct sigaction view[NSIG];
static volatile int fatal_taken;	/* a fatal signal's handler writes the profile */

static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigaction_fn real = __atomic_load_n(&real_sigaction_ptr, __ATOMIC_ACQUIRE);
	if (!real) {
		real = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
		__atomic_store_n(&real_sigaction_ptr, real, __ATOMIC_RELEASE);
	}
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(sig, act, old);
}

static void on_fatal(int sig, siginfo_t *info, void *uctx)
{
	(void)info;
	(void)uctx;
	int saved = errno;
	/* The default action from now on, whatever the program does next
	 * (not SA_RESETHAND: a program that reinstalled what it read back
	 * would bring us back, and the raise below would loop). */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	ours[sig] = 0;
	real_sigaction(sig, &dfl, NULL);
	/* One profile: the first fatal signal writes it, others wait for it. */
	if (__atomic_exchange_n(&fatal_taken, 1, __ATOMIC_ACQ_REL) || final_written ||
	    write_profile(ML_END_SIGNAL, sig) == -EBUSY)
		ml_dump_wait_other();	/* another thread is writing: let it finish */
	/* Delivered, with the default action, when we return (a fault would
	 * also repeat by itself). */
	raise(sig);
	errno = saved;
}

static bool is_ours(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fatal;
}

/* Installs our handler where the program left the default action. */
static void install_signal_handlers(void)
{
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
		int sig = fatal_signals[i];
		struct sigaction old, sa;
		if (real_sigaction(sig, NULL, &old) < 0)
			continue;
		managed[sig] = 1;
		if (old.sa_handler != SIG_DFL)
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_fatal;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		view[sig] = old;
		ours[sig] = 1;
		if (real_sigaction(sig, &sa, NULL) < 0)
			ours[sig] = 0;
	}
}

/* The program's sigaction(sig, act, old): SIG_DFL keeps (or brings back)
 * our handler and is what the program reads; any other action goes in as
 * asked.  A query reads the action the program set. */
int ml_lifecycle_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig <= 0 || sig >= NSIG || !managed[sig])
		return real_sigaction(sig, act, old);
	struct sigaction prev = view[sig], real_old, sa;
	sig_atomic_t was_ours = ours[sig];
	const struct sigaction *put = act;
	if (act && act->sa_handler == SIG_DFL) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_fatal;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		view[sig] = *act;
		ours[sig] = 1;
		put = &sa;
	} else if (act) {
		ours[sig] = 0;
	}
	int rc = real_sigaction(sig, put, &real_old);
	if (rc < 0) {
		int e = errno;
		view[sig] = prev;
		ours[sig] = was_ours;
		errno = e;
		return rc;
	}
	if (old)	/* the real action decides (a vfork child shares our flags) */
		*old = is_ours(&real_old) ? prev : real_old;
	return 0;
}

/* The program's signal(sig, handler), the same way. */
ml_sighandler_t ml_lifecycle_signal(int sig, ml_sighandler_t handler)
{
	typedef ml_sighandler_t (*signal_fn)(int, ml_sighandler_t);
	if (sig <= 0 || sig >= NSIG || !managed[sig] || handler != SIG_DFL) {
		signal_fn real = NEXT(signal_fn, "signal");
		if (!real) {
			errno = ENOSYS;
			return SIG_ERR;
		}
		if (sig <= 0 || sig >= NSIG || !managed[sig])
			return real(sig, handler);
		sig_atomic_t was_ours = ours[sig];
		struct sigaction prev = view[sig];
		ours[sig] = 0;
		ml_sighandler_t got = real(sig, handler);
		if (got == SIG_ERR) {
			ours[sig] = was_ours;
			return got;
		}
		return got == (ml_sighandler_t)(void (*)(void))on_fatal ? prev.sa_handler : got;
	}
	/* SIG_DFL: the action glibc's signal sets (BSD semantics). */
	struct sigaction act, old;
	memset(&act, 0, sizeof(act));
	act.sa_handler = SIG_DFL;
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	act.sa_flags = SA_RESTART;
	if (ml_lifecycle_sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
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
	ml_py_room_fork_child();
}

/* ---- start-up and exit ---- */

/* 0: recording not started; 1: a thread is starting it; 2: started (or
 * failed to).  Never goes back: after exit, or in a fork child that must
 * not record, nothing restarts it. */
static volatile int start_state;

void ml_lifecycle_start(void)
{
	extern char **environ;
	if (__atomic_load_n(&start_state, __ATOMIC_ACQUIRE))
		return;
	/* Before libc's own start-up (the dynamic loader's early mallocs)
	 * getenv sees nothing: wait for a later call, or the constructor. */
	if (!environ || !ml_real.ready || ml_real_resolving())
		return;
	/* Whoever loses the race passes its call through unrecorded. */
	if (__atomic_exchange_n(&start_state, 1, __ATOMIC_ACQ_REL))
		return;
	bool guarded = ml_guard_enter_always();
	/* Only what is safe inside any allocation: environment, clocks, mmap'd
	 * tables, /proc reads.  Locks the caller may hold (atfork, signal
	 * set-up, the loader's module list) wait for the constructor. */
	if (ml_core_init((uint64_t)(uintptr_t)&ml_lifecycle_start) < 0)
		ml_warn("cannot start; the program runs unprofiled");
	else
		profiled_pid = getpid();
	__atomic_store_n(&start_state, 2, __ATOMIC_RELEASE);
	if (guarded)
		ml_guard_exit();
}

__attribute__((constructor(101))) static void ml_lifecycle_init(void)
{
	ml_real_resolve();
	/* Usually already started by the first allocation (libraries'
	 * constructors run before ours: libstdc++ allocates its emergency
	 * exception pool there). */
	ml_lifecycle_start();
	bool guarded = ml_guard_enter_always();
	if (!ml_core_active)
		goto out;
	save_settings();
	if (!ml_config.follow)
		ml_config_unpreload();
	Dl_info self;
	if (dladdr((void *)&ml_lifecycle_start, &self) && self.dli_fname && self.dli_fname[0] == '/')
		self_path = self.dli_fname;
	ml_modules_refresh();
	pthread_atfork(NULL, NULL, after_fork_child);
	install_signal_handlers();
	ml_lineprof_init();
	ml_py_room_start();
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
	ml_unwind_flush();	/* its code addresses may now hold other code */
	if (ml_core_active)
		ml_modules_refresh();	/* and flag it unloaded if it went away */
	return rc;
}

/* ---- exec: write the profile first; if exec fails, keep profiling (the
 * next write replaces the same file) ---- */

#define PRELOAD_MAX 8192u

/* The LD_PRELOAD entry an exec'd program gets, into buf: without
 * libmemline when not following; when following, with libmemline first
 * (a program such as `env LD_PRELOAD=x prog` replaces ours, and the next
 * program must still be profiled, as valgrind --trace-children does).
 * value is the current entry's value (NULL if none).  False: keep as is. */
static bool preload_entry(const char *value, char *buf, size_t cap)
{
	if (!value) {	/* none at all (env -i): ours alone when following */
		if (!ml_config.follow || !self_path || 11 + strlen(self_path) + 1 > cap)
			return false;
		memcpy(buf, "LD_PRELOAD=", 11);
		strcpy(buf + 11, self_path);
		return true;
	}
	if (strlen(value) + 12 > cap)
		return false;
	memcpy(buf, "LD_PRELOAD=", 11);
	strcpy(buf + 11, value);
	ml_config_filter_preload(buf + 11);
	if (!ml_config.follow)
		return true;
	if (strcmp(buf + 11, value) != 0 || !self_path)
		return false;	/* libmemline is there already: leave it as it was */
	size_t self_len = strlen(self_path), rest = strlen(value);
	if (11 + self_len + 1 + rest + 1 > cap)
		return false;
	memmove(buf + 11 + self_len + (rest ? 1 : 0), buf + 11, rest + 1);
	memcpy(buf + 11, self_path, self_len);
	if (rest)
		buf[11 + self_len] = ':';
	return true;
}

/* The MEMLINE_* settings this process started with, for exec'd programs
 * whose environment lost them (env -i): profiles still go where asked. */
#define SAVED_ENV_MAX 32u
static char saved_env_buf[8192];
static char *saved_env[SAVED_ENV_MAX];
static uint32_t n_saved_env;

static void save_settings(void)
{
	extern char **environ;
	size_t used = 0;
	for (char **e = environ; e && *e && n_saved_env < SAVED_ENV_MAX; e++) {
		if (strncmp(*e, "MEMLINE_", 8) != 0 || !strchr(*e, '='))
			continue;
		size_t len = strlen(*e) + 1;
		if (used + len > sizeof(saved_env_buf))
			break;
		memcpy(saved_env_buf + used, *e, len);
		saved_env[n_saved_env++] = saved_env_buf + used;
		used += len;
	}
}

/* True if envp[0..n) sets the variable of entry "NAME=...". */
static bool env_has(char *const *envp, size_t n, const char *entry)
{
	size_t len = (size_t)(strchr(entry, '=') - entry) + 1;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], entry, len) == 0)
			return true;
	return false;
}

/* envp as the exec'd program gets it: LD_PRELOAD per preload_entry and,
 * when following, the MEMLINE_* settings it lacks.  A copy in out
 * (env_count(envp) slots) with the LD_PRELOAD entry in pre, or envp
 * itself when nothing changes. */
static char *const *exec_env(char *const *envp, char **out, size_t cap, char *pre)
{
	if (!envp || (ml_config.follow && !ml_core_active))
		return envp;
	size_t n = 0, at = (size_t)-1;
	for (; envp[n]; n++)
		if (strncmp(envp[n], "LD_PRELOAD=", 11) == 0)
			at = n;
	if (n + 2 + SAVED_ENV_MAX > cap)
		return envp;
	bool changed = preload_entry(at == (size_t)-1 ? NULL : envp[at] + 11, pre, PRELOAD_MAX);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		out[k++] = i == at && changed ? pre : envp[i];
	if (changed && at == (size_t)-1)
		out[k++] = pre;
	if (ml_config.follow && (changed || at != (size_t)-1))
		for (uint32_t i = 0; i < n_saved_env; i++)
			if (!env_has(envp, n, saved_env[i])) {
				out[k++] = saved_env[i];
				changed = true;
			}
	if (!changed)
		return envp;
	out[k] = NULL;
	return out;
}

static size_t env_count(char *const *envp)
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	return n + 2 + SAVED_ENV_MAX;	/* LD_PRELOAD, settings, the NULL */
}

static void before_exec(void)
{
	write_profile(ML_END_EXEC, 0);
}

/* The environment of an exec'd program, on the caller's stack. */
#define EXEC_ENV(envp, name) \
	char pre_##name[PRELOAD_MAX]; \
	char *slots_##name[env_count(envp)]; \
	char *const *name = exec_env(envp, slots_##name, env_count(envp), pre_##name)

ML_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	typedef int (*fn)(const char *, char *const[], char *const[]);
	before_exec();
	EXEC_ENV(envp, env);
	return NEXT(fn, "execve")(path, argv, env);
}

ML_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	typedef int (*fn)(const char *, char *const[], char *const[]);
	before_exec();
	EXEC_ENV(envp, env);
	return NEXT(fn, "execvpe")(file, argv, env);
}

ML_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	typedef int (*fn)(int, char *const[], char *const[]);
	before_exec();
	EXEC_ENV(envp, env);
	return NEXT(fn, "fexecve")(fd, argv, env);
}

/* execv and execvp take the environment from environ: the same with it
 * (glibc's own execv/execvp call an internal execve we cannot see). */
ML_EXPORT int execv(const char *path, char *const argv[])
{
	extern char **environ;
	return execve(path, argv, environ);
}

ML_EXPORT int execvp(const char *file, char *const argv[])
{
	extern char **environ;
	return execvpe(file, argv, environ);
}

/* posix_spawn's child execs through libc internals: give it the same
 * environment an exec would get (the parent's profile goes on). */
ML_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			  const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	typedef int (*fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			  const posix_spawnattr_t *, char *const[], char *const[]);
	EXEC_ENV(envp, env);
	return NEXT(fn, "posix_spawn")(pid, path, fa, attr, argv, env);
}

ML_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	typedef int (*fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			  const posix_spawnattr_t *, char *const[], char *const[]);
	EXEC_ENV(envp, env);
	return NEXT(fn, "posix_spawnp")(pid, file, fa, attr, argv, env);
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
