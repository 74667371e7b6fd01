/* lineprof/hooks.c - every symbol lineprof exports: the region API of
 * memline.h, NVTX's injection entry point, pthread_create (a timer for each
 * new thread), setitimer (a program that arms ITIMER_PROF wants SIGPROF, so
 * the sampler steps aside; sigaction and signal reach the room through the
 * core, room.c) and, under --clock wall, the sleep calls (retried when only
 * our timer interrupted them). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
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

/* ---- sleeps under --clock wall: POSIX never restarts them, even with
 * SA_RESTART, so a wall-clock sample would cut them short ---- */

static bool retry_sleeps(void)
{
	return ml_lp_config.clock == ML_CLOCK_WALL && ml_lp_sampling();
}

ML_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req,
			      struct timespec *rem)
{
	typedef int (*fn_t)(clockid_t, int, const struct timespec *, struct timespec *);
	fn_t real = ML_NEXT(fn_t, "clock_nanosleep");
	if (!retry_sleeps() || !req)
		return real(clk, flags, req, rem);
	struct timespec left = *req, r;
	for (;;) {
		uint32_t before = ml_lp_signals_here();
		int rc = real(clk, flags, &left, &r);
		if (rc != EINTR || ml_lp_signals_here() == before) {
			if (rc == EINTR && rem && !(flags & TIMER_ABSTIME))
				*rem = r;
			return rc;
		}
		if (!(flags & TIMER_ABSTIME))
			left = r;
	}
}

ML_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
	typedef int (*fn_t)(const struct timespec *, struct timespec *);
	fn_t real = ML_NEXT(fn_t, "nanosleep");
	if (!retry_sleeps() || !req)
		return real(req, rem);
	struct timespec left = *req, r;
	for (;;) {
		uint32_t before = ml_lp_signals_here();
		int rc = real(&left, &r);
		if (rc == 0 || errno != EINTR || ml_lp_signals_here() == before) {
			if (rc < 0 && errno == EINTR && rem)
				*rem = r;
			return rc;
		}
		left = r;
	}
}

ML_EXPORT int usleep(useconds_t us)
{
	typedef int (*fn_t)(useconds_t);
	if (!retry_sleeps())
		return ML_NEXT(fn_t, "usleep")(us);
	struct timespec ts = { (time_t)(us / 1000000u), (long)(us % 1000000u) * 1000 };
	return nanosleep(&ts, NULL);
}

ML_EXPORT unsigned int sleep(unsigned int s)
{
	typedef unsigned int (*fn_t)(unsigned int);
	if (!retry_sleeps())
		return ML_NEXT(fn_t, "sleep")(s);
	struct timespec ts = { (time_t)s, 0 }, rem = { 0, 0 };
	if (nanosleep(&ts, &rem) == 0)
		return 0;
	return (unsigned int)rem.tv_sec + (rem.tv_nsec > 0);
}
