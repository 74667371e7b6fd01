/* core/lifecycle.c - the runtime's life: start-up (the constructor), the
 * profile written at exit, _exit and exec, fork children, and what
 * dlclose changes in the module map.  The exported entry points that
 * report these events are process/hooks.c; fatal signals are signals.c. */
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/internal.h"

static volatile uint32_t end_reason;	/* set by main's return or exit() */
static volatile int32_t end_status;
static volatile int main_thread_exited;
static volatile int final_written;	/* the exit-time profile is out */
static volatile int no_write;		/* a fork child with MEMLINE_FOLLOW=0 */
/* The process whose profile this memory holds.  A vfork or raw clone child
 * (no atfork handler ran) shares or copies it, and must not write it. */
static volatile pid_t profiled_pid;

bool ml_lifecycle_is_profiled_process(void)
{
	/* A vfork child, or a clone(CLONE_VM) child, runs in this memory with
	 * a pid of its own: nothing it does may touch this process's state. */
	return getpid() == profiled_pid;
}

int ml_lifecycle_write(uint32_t reason, int32_t status)
{
	if (no_write || !ml_core_active || !ml_lifecycle_is_profiled_process())
		return 0;
	return ml_dump_write(reason, status);
}

bool ml_lifecycle_final_written(void)
{
	return final_written;
}

/* ---- fork ---- */

static void after_fork_child(void)
{
	if (!ml_config.follow) {
		no_write = 1;
		ml_core_set_active(false);
	} else {
		final_written = 0;
		profiled_pid = getpid();
		ml_core_after_fork();
	}
	ml_rooms_fork_child();
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
	if (!environ)
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

/* After the rooms registered (constructor 101: ML_ROOM, and alloc/'s look-up
 * of the real allocator), before cuda_hooks' own (103). */
__attribute__((constructor(102))) static void ml_lifecycle_init(void)
{
	/* Usually already started by the first allocation (libraries'
	 * constructors run before ours: libstdc++ allocates its emergency
	 * exception pool there). */
	ml_lifecycle_start();
	bool guarded = ml_guard_enter_always();
	if (!ml_core_active)
		goto out;
	if (!ml_config.follow)
		ml_config_unpreload();
	/* Where the first allocation came during a dlopen, not loaded yet. */
	ml_libunwind_init(true);
	ml_modules_refresh();
	pthread_atfork(NULL, NULL, after_fork_child);
	ml_signals_install();
	ml_rooms_start();
out:
	if (guarded)
		ml_guard_exit();
}

__attribute__((destructor)) static void ml_lifecycle_fini(void)
{
	if (final_written || !ml_lifecycle_is_profiled_process())
		return;
	uint32_t reason = end_reason;
	if (!reason)
		reason = main_thread_exited ? ML_END_THREAD_EXIT : ML_END_EXIT;
	ml_lifecycle_write(reason, end_status);
	final_written = 1;
	ml_core_set_active(false);	/* later frees change nothing that is written */
}

/* ---- events reported by process/hooks.c ---- */

void ml_lifecycle_main_returned(int status)
{
	if (!ml_lifecycle_is_profiled_process())
		return;
	end_status = status;
	end_reason = ML_END_EXIT;
}

void ml_lifecycle_exit_called(int status)
{
	if (!end_reason && ml_lifecycle_is_profiled_process()) {
		end_status = status;
		end_reason = ML_END_EXIT;
	}
}

void ml_lifecycle_underscore_exit(int status)
{
	if (!final_written && ml_lifecycle_is_profiled_process()) {
		ml_lifecycle_write(ML_END_UNDERSCORE_EXIT, status);
		final_written = 1;
	}
}

static volatile int quick_exit_status;
static volatile int quick_exit_called;

void ml_lifecycle_quick_exit(int status)
{
	quick_exit_status = status;
	quick_exit_called = 1;
}

void ml_lifecycle_quick_exit_handlers_done(void)
{
	/* quick_exit ends like _Exit once its handlers have run. */
	if (quick_exit_called)
		ml_lifecycle_underscore_exit(quick_exit_status);
}

void ml_lifecycle_thread_exit(void)
{
	if (syscall(SYS_gettid) != getpid() || !ml_lifecycle_is_profiled_process())
		return;	/* glibc's thread-exit destructors see it (threads.c) */
	main_thread_exited = 1;
	ml_thread_end_now();
}

void ml_lifecycle_before_exec(void)
{
	ml_lifecycle_write(ML_END_EXEC, 0);
}

/* dlopen is not wrapped: libc resolves the caller's RUNPATH and namespace
 * from its return address, which a wrapper would change; modules it loads
 * are picked up when the profile is written. */
uint64_t ml_lifecycle_dlclose_begin(void)
{
	if (ml_core_active)
		ml_modules_refresh();	/* catch it while it is still mapped */
	uint64_t adds, subs;
	ml_modules_load_counts(&adds, &subs);
	return subs;
}

/* Most dlcloses unload nothing (a reference given back, as after
 * dlopen(RTLD_NOLOAD)): only one that did flushes the unwind rules, which
 * costs every thread its cached walks. */
void ml_lifecycle_dlclose_end(uint64_t begin)
{
	uint64_t adds, subs;
	ml_modules_load_counts(&adds, &subs);
	if (subs == begin && subs != UINT64_MAX)
		return;
	ml_unwind_flush();	/* its code addresses may now hold other code */
	if (ml_core_active)
		ml_modules_refresh();	/* and flag it unloaded if it went away */
}
