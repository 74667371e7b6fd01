/* process/hooks.c - the exported entry points of the process's life, and
 * nothing else: main's return (__libc_start_main), exit, _exit, _Exit,
 * quick_exit, abort, pthread_exit, thrd_exit, dlopen, dlclose, the exec
 * family (execveat too), posix_spawn, and the program's sigaction and signal.  Each tells the core (core/core.h) and calls the
 * real function. */
#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/core.h"
#include "process/internal.h"

typedef void (*exit_fn)(int) __attribute__((noreturn));

/* ---- main, exit, _exit, pthread_exit ---- */

typedef int (*main_fn)(int, char **, char **);
static main_fn real_main;

static int main_wrapper(int argc, char **argv, char **envp)
{
	int status = real_main(argc, argv, envp);
	ml_lifecycle_main_returned(status);
	return status;
}

/* Wraps main to learn its return value (exit status). */
ML_EXPORT int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void),
				void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
	typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void),
				void (*)(void), void *);
	start_fn real = ML_NEXT(start_fn, "__libc_start_main");
	real_main = main;
	return real(main_wrapper, argc, argv, init, fini, rtld_fini, stack_end);
}

ML_EXPORT void exit(int status)
{
	ml_lifecycle_exit_called(status);
	ML_NEXT(exit_fn, "exit")(status);
	__builtin_unreachable();
}

/* _exit and _Exit: the profile first (no atexit handler will run). */
__attribute__((noreturn)) static void underscore_exit(int status, exit_fn real)
{
	ml_lifecycle_underscore_exit(status);
	if (real)
		real(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

ML_EXPORT void _exit(int status)
{
	underscore_exit(status, ML_NEXT(exit_fn, "_exit"));
}

ML_EXPORT void _Exit(int status)
{
	underscore_exit(status, ML_NEXT(exit_fn, "_Exit"));
}

/* quick_exit: the profile is written by the last at_quick_exit handler
 * (registered at start-up, room.c), after the program's own. */
ML_EXPORT void quick_exit(int status)
{
	ml_lifecycle_quick_exit(status);
	ML_NEXT(exit_fn, "quick_exit")(status);
	__builtin_unreachable();
}

/* C11 threads: glibc's thrd_exit does not go through pthread_exit. */
ML_EXPORT void thrd_exit(int res)
{
	ml_lifecycle_thread_exit();
	ML_NEXT(exit_fn, "thrd_exit")(res);
	__builtin_unreachable();
}

/* abort: the profile is written before SIGABRT, with no handler frame. */
ML_EXPORT void abort(void)
{
	typedef void (*abort_fn)(void) __attribute__((noreturn));
	ml_signals_before_abort();
	ML_NEXT(abort_fn, "abort")();
	__builtin_unreachable();
}

ML_EXPORT void pthread_exit(void *ret)
{
	typedef void (*pthread_exit_fn)(void *) __attribute__((noreturn));
	ml_lifecycle_thread_exit();
	ML_NEXT(pthread_exit_fn, "pthread_exit")(ret);
	__builtin_unreachable();
}

/* ---- dlopen: libc takes the caller's search path (RUNPATH) and namespace
 * from dlopen's return address, so dlopen jumps straight to the real one
 * and the caller stays the caller; only RTLD_DEEPBIND takes the long way
 * (deepbind.c), which looks the file up as the caller would. ---- */
__asm__(".text\n"
	".globl dlopen\n"
	".type dlopen, @function\n"
	"dlopen:\n"
	"	.cfi_startproc\n"
	"	testl $8, %esi\n"			/* RTLD_DEEPBIND */
	"	jnz 1f\n"
	"	movq ml_proc_real_dlopen(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"				/* before start-up */
	"	jmp *%rax\n"
	"1:	movq (%rsp), %rdx\n"			/* the caller, third argument */
	"	jmp ml_proc_dlopen_slow\n"
	"	.cfi_endproc\n"
	".size dlopen, .-dlopen\n");
_Static_assert(RTLD_DEEPBIND == 8, "the jump above tests RTLD_DEEPBIND as 8");

/* ---- dlclose: keep unloaded modules in the map ---- */

ML_EXPORT int dlclose(void *handle)
{
	typedef int (*dlclose_fn)(void *);
	uint64_t begin = ml_lifecycle_dlclose_begin();
	int rc = ML_NEXT(dlclose_fn, "dlclose")(handle);
	ml_lifecycle_dlclose_end(begin);
	return rc;
}

/* ---- exec: the profile first; if exec fails, profiling goes on (the next
 * write replaces the same file) ---- */

ML_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	typedef int (*fn)(const char *, char *const[], char *const[]);
	ml_lifecycle_before_exec();
	ML_PROC_EXEC_ENV(envp, env);
	return ML_NEXT(fn, "execve")(path, argv, env);
}

ML_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	typedef int (*fn)(const char *, char *const[], char *const[]);
	ml_lifecycle_before_exec();
	ML_PROC_EXEC_ENV(envp, env);
	return ML_NEXT(fn, "execvpe")(file, argv, env);
}

ML_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	typedef int (*fn)(int, char *const[], char *const[]);
	ml_lifecycle_before_exec();
	ML_PROC_EXEC_ENV(envp, env);
	return ML_NEXT(fn, "fexecve")(fd, argv, env);
}

ML_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
			int flags)
{
	typedef int (*fn)(int, const char *, char *const[], char *const[], int);
	ml_lifecycle_before_exec();
	ML_PROC_EXEC_ENV(envp, env);
	return ML_NEXT(fn, "execveat")(dirfd, path, argv, env, flags);
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
	ML_PROC_EXEC_ENV(envp, env);
	return ML_NEXT(fn, "posix_spawn")(pid, path, fa, attr, argv, env);
}

ML_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	typedef int (*fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			  const posix_spawnattr_t *, char *const[], char *const[]);
	ML_PROC_EXEC_ENV(envp, env);
	return ML_NEXT(fn, "posix_spawnp")(pid, file, fa, attr, argv, env);
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

/* ---- signals: memline's fatal-signal handler stays invisible, and rooms
 * learn which signals the program takes (core/signals.c) ---- */

ML_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return ml_signals_sigaction(sig, act, old);
}

ML_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	return ml_signals_signal(sig, handler);
}
