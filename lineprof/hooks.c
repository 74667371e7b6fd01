/* lineprof/hooks.c - every symbol lineprof exports: the region API of
 * memline.h, NVTX's injection entry point, pthread_create (a timer for each
 * new thread), setitimer (a program that arms ITIMER_PROF wants SIGPROF, so
 * the sampler steps aside; sigaction and signal reach the room through the
 * core, room.c), the calls a signal would cut short (sleeps, poll, select,
 * epoll, sigsuspend, System V IPC: made quiet, sampler.c) and the calls
 * that wait for or report signals (SIGPROF taken out while it is ours). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/signalfd.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include "core/core.h"	/* ML_EXPORT, ML_NEXT, ml_arena_alloc */
#include "lineprof/internal.h"
#include "lineprof/nvtx.h"

/* ---- memline.h ---- */

ML_EXPORT void memline_region_push(const char *name)
{
	ml_lp_region_push(name, 0);
}

ML_EXPORT void memline_region_pop(void)
{
	ml_lp_region_pop();
}

/* ---- NVTX v3 ---- */

ML_EXPORT int InitializeInjectionNvtx2(const void *get_export_table)
{
	return ml_lp_nvtx_init(get_export_table);
}

/* ---- threads ---- */

struct start {
	void *(*fn)(void *);
	void *arg;
};

static void *thread_start(void *p)
{
	struct start s = *(struct start *)p;
	ml_lp_sampler_thread_begin();
	return s.fn(s.arg);
}

ML_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
			     void *arg)
{
	typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	create_fn real = ML_NEXT(create_fn, "pthread_create");
	if (!real)
		return EAGAIN;
	if (!ml_lp_sampling())
		return real(t, attr, fn, arg);
	/* The arena never frees: 16 bytes per thread created. */
	struct start *s = ml_arena_alloc(sizeof(*s));
	if (!s)
		return real(t, attr, fn, arg);
	s->fn = fn;
	s->arg = arg;
	return real(t, attr, thread_start, s);
}

/* ---- SIGPROF belongs to the program if it asks ---- */

ML_EXPORT int setitimer(__itimer_which_t which, const struct itimerval *v, struct itimerval *old)
{
	typedef int (*setitimer_fn)(__itimer_which_t, const struct itimerval *, struct itimerval *);
	if (which == ITIMER_PROF && v)
		ml_lp_step_aside();
	return ML_NEXT(setitimer_fn, "setitimer")(which, v, old);
}

/* ---- quiet calls: SIGPROF blocked while the program waits, so that only
 * its own signals cut a wait short (lineprof/sampler.c) ---- */

/* The result of call, an expression of fn_ (the real name), made quietly.
 * A libc without name (a program that found our symbol with dlsym) gets
 * -1 and ENOSYS. */
#define QUIET(type, name, call) ({ \
	type fn_ = ML_NEXT(type, name); \
	__typeof__(call) r_ = (__typeof__(call))-1; \
	if (!fn_) { \
		errno = ENOSYS; \
	} else { \
		struct ml_lp_quiet q_; \
		ml_lp_quiet_begin(&q_); \
		r_ = call; \
		ml_lp_quiet_end(&q_, (const void *)fn_); \
	} \
	r_; \
})

static bool zero_ts(const struct timespec *ts)
{
	return ts && ts->tv_sec == 0 && ts->tv_nsec == 0;
}

/* mask with SIGPROF added, in *copy (NULL stays NULL). */
static const sigset_t *with_prof(const sigset_t *mask, sigset_t *copy)
{
	if (!mask || !ml_lp_sampling())
		return mask;
	*copy = *mask;
	sigaddset(copy, SIGPROF);
	return copy;
}

ML_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
	typedef int (*fn_t)(const struct timespec *, struct timespec *);
	return QUIET(fn_t, "nanosleep", fn_(req, rem));
}

ML_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req,
			      struct timespec *rem)
{
	typedef int (*fn_t)(clockid_t, int, const struct timespec *, struct timespec *);
	return QUIET(fn_t, "clock_nanosleep", fn_(clk, flags, req, rem));
}

ML_EXPORT int usleep(useconds_t us)
{
	typedef int (*fn_t)(useconds_t);
	return QUIET(fn_t, "usleep", fn_(us));
}

ML_EXPORT unsigned int sleep(unsigned int s)
{
	typedef unsigned int (*fn_t)(unsigned int);
	return QUIET(fn_t, "sleep", fn_(s));
}

ML_EXPORT int pause(void)
{
	typedef int (*fn_t)(void);
	return QUIET(fn_t, "pause", fn_());
}

ML_EXPORT int sigsuspend(const sigset_t *mask)
{
	typedef int (*fn_t)(const sigset_t *);
	sigset_t copy;
	const sigset_t *m = with_prof(mask, &copy);
	return QUIET(fn_t, "sigsuspend", fn_(m));
}

ML_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	typedef int (*fn_t)(struct pollfd *, nfds_t, int);
	if (timeout == 0)
		return ML_NEXT(fn_t, "poll")(fds, n, timeout);
	return QUIET(fn_t, "poll", fn_(fds, n, timeout));
}

/* _FORTIFY_SOURCE's poll. */
ML_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	typedef int (*fn_t)(struct pollfd *, nfds_t, int, size_t);
	if (timeout == 0)
		return ML_NEXT(fn_t, "__poll_chk")(fds, n, timeout, fdslen);
	return QUIET(fn_t, "__poll_chk", fn_(fds, n, timeout, fdslen));
}

ML_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		    const sigset_t *mask)
{
	typedef int (*fn_t)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	if (zero_ts(timeout))
		return ML_NEXT(fn_t, "ppoll")(fds, n, timeout, mask);
	sigset_t copy;
	const sigset_t *m = with_prof(mask, &copy);
	return QUIET(fn_t, "ppoll", fn_(fds, n, timeout, m));
}

ML_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
			  const sigset_t *mask, size_t fdslen)
{
	typedef int (*fn_t)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *,
			    size_t);
	if (zero_ts(timeout))
		return ML_NEXT(fn_t, "__ppoll_chk")(fds, n, timeout, mask, fdslen);
	sigset_t copy;
	const sigset_t *m = with_prof(mask, &copy);
	return QUIET(fn_t, "__ppoll_chk", fn_(fds, n, timeout, m, fdslen));
}

ML_EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout)
{
	typedef int (*fn_t)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	if (timeout && timeout->tv_sec == 0 && timeout->tv_usec == 0)
		return ML_NEXT(fn_t, "select")(n, r, w, e, timeout);
	return QUIET(fn_t, "select", fn_(n, r, w, e, timeout));
}

ML_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *timeout,
		      const sigset_t *mask)
{
	typedef int (*fn_t)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
			    const sigset_t *);
	if (zero_ts(timeout))
		return ML_NEXT(fn_t, "pselect")(n, r, w, e, timeout, mask);
	sigset_t copy;
	const sigset_t *m = with_prof(mask, &copy);
	return QUIET(fn_t, "pselect", fn_(n, r, w, e, timeout, m));
}

ML_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	typedef int (*fn_t)(int, struct epoll_event *, int, int);
	if (timeout == 0)
		return ML_NEXT(fn_t, "epoll_wait")(epfd, ev, max, timeout);
	return QUIET(fn_t, "epoll_wait", fn_(epfd, ev, max, timeout));
}

ML_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
			  const sigset_t *mask)
{
	typedef int (*fn_t)(int, struct epoll_event *, int, int, const sigset_t *);
	if (timeout == 0)
		return ML_NEXT(fn_t, "epoll_pwait")(epfd, ev, max, timeout, mask);
	sigset_t copy;
	const sigset_t *m = with_prof(mask, &copy);
	return QUIET(fn_t, "epoll_pwait", fn_(epfd, ev, max, timeout, m));
}

ML_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max,
			   const struct timespec *timeout, const sigset_t *mask)
{
	typedef int (*fn_t)(int, struct epoll_event *, int, const struct timespec *,
			    const sigset_t *);
	sigset_t copy;
	const sigset_t *m = with_prof(mask, &copy);
	return QUIET(fn_t, "epoll_pwait2", fn_(epfd, ev, max, timeout, m));
}

ML_EXPORT int semop(int id, struct sembuf *ops, size_t n)
{
	typedef int (*fn_t)(int, struct sembuf *, size_t);
	return QUIET(fn_t, "semop", fn_(id, ops, n));
}

ML_EXPORT int semtimedop(int id, struct sembuf *ops, size_t n, const struct timespec *timeout)
{
	typedef int (*fn_t)(int, struct sembuf *, size_t, const struct timespec *);
	return QUIET(fn_t, "semtimedop", fn_(id, ops, n, timeout));
}

ML_EXPORT ssize_t msgrcv(int id, void *msg, size_t size, long type, int flags)
{
	typedef ssize_t (*fn_t)(int, void *, size_t, long, int);
	if (flags & IPC_NOWAIT)
		return ML_NEXT(fn_t, "msgrcv")(id, msg, size, type, flags);
	return QUIET(fn_t, "msgrcv", fn_(id, msg, size, type, flags));
}

ML_EXPORT int msgsnd(int id, const void *msg, size_t size, int flags)
{
	typedef int (*fn_t)(int, const void *, size_t, int);
	if (flags & IPC_NOWAIT)
		return ML_NEXT(fn_t, "msgsnd")(id, msg, size, flags);
	return QUIET(fn_t, "msgsnd", fn_(id, msg, size, flags));
}

/* ---- waiting for signals: memline's SIGPROF is never the program's ----
 * While the line timer owns SIGPROF, it is taken out of the sets the
 * program waits on (a thread that blocks SIGPROF keeps our timer's signal
 * pending), out of what sigpending reports and out of signalfd masks.  A
 * program that waits for SIGPROF alone is using SIGPROF itself: the line
 * timer steps aside. */

/* set without SIGPROF, in *copy, when the line timer owns SIGPROF. */
static const sigset_t *without_prof(const sigset_t *set, sigset_t *copy)
{
	if (!set || !ml_lp_sampling() || sigismember(set, SIGPROF) != 1)
		return set;
	*copy = *set;
	sigdelset(copy, SIGPROF);
	if (sigisemptyset(copy)) {
		ml_lp_step_aside();	/* SIGPROF is what it waits for */
		return set;
	}
	return copy;
}

ML_EXPORT int sigwait(const sigset_t *set, int *sig)
{
	typedef int (*fn_t)(const sigset_t *, int *);
	sigset_t copy;
	const sigset_t *s = without_prof(set, &copy);
	return QUIET(fn_t, "sigwait", fn_(s, sig));
}

ML_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	typedef int (*fn_t)(const sigset_t *, siginfo_t *);
	sigset_t copy;
	const sigset_t *s = without_prof(set, &copy);
	return QUIET(fn_t, "sigwaitinfo", fn_(s, info));
}

ML_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *timeout)
{
	typedef int (*fn_t)(const sigset_t *, siginfo_t *, const struct timespec *);
	sigset_t copy;
	const sigset_t *s = without_prof(set, &copy);
	if (zero_ts(timeout))
		return ML_NEXT(fn_t, "sigtimedwait")(s, info, timeout);
	return QUIET(fn_t, "sigtimedwait", fn_(s, info, timeout));
}

ML_EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
	typedef int (*fn_t)(int, const sigset_t *, int);
	sigset_t copy;
	return ML_NEXT(fn_t, "signalfd")(fd, without_prof(mask, &copy), flags);
}

ML_EXPORT int sigpending(sigset_t *set)
{
	typedef int (*fn_t)(sigset_t *);
	int rc = ML_NEXT(fn_t, "sigpending")(set);
	if (rc == 0 && ml_lp_sampling())
		sigdelset(set, SIGPROF);
	return rc;
}
