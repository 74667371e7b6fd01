/* core/threads.c - the end of a thread, seen without a pthread key: the
 * program has 1024 keys and they are all its own.  A thread that needs to
 * release something of memline's when it ends (core/thread.c's state,
 * a room's per-thread state) calls ml_thread_watch once; its end
 * then runs the core's and every room's thread_end, through glibc's
 * thread-exit destructor list (the one C++ thread_local destructors use),
 * and, for the main thread, through pthread_exit (see lifecycle.c). */
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/internal.h"

/* glibc's registration of a thread-exit destructor (since 2.18). */
extern int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso_symbol);
extern void *__dso_handle;

static __thread uint8_t tl_state __attribute__((tls_model("initial-exec")));
enum { WATCH_NONE, WATCH_ON, WATCH_ENDED };

static void thread_ended(void *arg)
{
	(void)arg;
	if (tl_state == WATCH_ENDED)
		return;
	tl_state = WATCH_ENDED;
	bool guarded = ml_guard_enter_always();
	ml_thread_state_ending();
	ml_rooms_thread_end();
	if (guarded)
		ml_guard_exit();
}

bool ml_thread_watch(void)
{
	if (tl_state != WATCH_NONE)
		return tl_state == WATCH_ON;
	/* The main thread ends with the process, or through pthread_exit
	 * (lifecycle.c): nothing to register, and its exit-time work (atexit
	 * handlers, static destructors) stays recorded and sampled as usual. */
	if (syscall(SYS_gettid) == getpid()) {
		tl_state = WATCH_ON;
		return true;
	}
	/* glibc allocates the list entry: not the program's allocation. */
	bool guarded = ml_guard_enter_always();
	int rc = __cxa_thread_atexit_impl(thread_ended, NULL, &__dso_handle);
	if (guarded)
		ml_guard_exit();
	tl_state = rc == 0 ? WATCH_ON : WATCH_ENDED;
	return rc == 0;
}

bool ml_thread_ended(void)
{
	return tl_state == WATCH_ENDED;
}

void ml_thread_end_now(void)
{
	thread_ended(NULL);
}
