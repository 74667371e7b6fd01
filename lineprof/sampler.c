/* lineprof/sampler.c - samples every thread: one POSIX timer per thread
 * (SIGEV_THREAD_ID) on the thread's CPU clock or on CLOCK_MONOTONIC, whose
 * SIGPROF handler unwinds the interrupted stack (core.h) and counts it
 * in the sample table.  The handler takes no lock, never allocates and
 * keeps errno; SA_RESTART restarts interrupted system calls.
 *
 * The timer is one-shot, armed again at the end of each handler: whatever
 * the rate and whatever a sample costs, the thread runs a whole period of
 * its clock between two samples (an interval timer at 100 kHz would keep a
 * thread in its handler for ever).  Each sample weighs the periods of the
 * thread's clock that passed since the timer was armed, read from the
 * clock itself, so the estimate of time stays exact when the kernel
 * delivers late (a CPU-clock timer fires on the scheduler's tick) or the
 * thread had SIGPROF blocked (quiet calls, below). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include "core/core.h"	/* the guard, ml_warn, ml_config.max_depth */
#include "lineprof/internal.h"

#define MAX_THREADS 8192u

struct thread_slot {
	int used;		/* atomic: 0 free, 1 taken, 2 being deleted */
	timer_t timer;
};

static struct thread_slot slots[MAX_THREADS];
static volatile int started;		/* the handler is installed */
static volatile int stepped_aside;
static volatile int paused;
static uint32_t n_threads;

static __thread int tl_slot __attribute__((tls_model("initial-exec")));	/* index + 1 */
static __thread uint32_t tl_tid __attribute__((tls_model("initial-exec")));
static __thread uint32_t tl_signals __attribute__((tls_model("initial-exec")));
/* The thread's clock when its timer was last armed, and the part of a
 * period not yet counted in a sample. */
static __thread uint64_t tl_armed_ns __attribute__((tls_model("initial-exec")));
static __thread uint64_t tl_carry_ns __attribute__((tls_model("initial-exec")));

static uint32_t gettid_cached(void)
{
	if (!tl_tid)
		tl_tid = (uint32_t)syscall(SYS_gettid);
	return tl_tid;
}

/* The sampled clock of this thread, in ns (async-signal-safe). */
static uint64_t clock_now_ns(void)
{
	struct timespec ts;
	clockid_t clk = ml_lp_config.clock == ML_CLOCK_WALL ? CLOCK_MONOTONIC :
		CLOCK_THREAD_CPUTIME_ID;
	if (clock_gettime(clk, &ts) < 0)
		return tl_armed_ns;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Arms this thread's timer for one period of its clock from now. */
static void arm(void)
{
	int s = tl_slot;
	if (!s || __atomic_load_n(&slots[s - 1].used, __ATOMIC_ACQUIRE) != 1)
		return;
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(ml_lp_config.period_ns / 1000000000ull);
	its.it_value.tv_nsec = (long)(ml_lp_config.period_ns % 1000000000ull);
	tl_armed_ns = clock_now_ns();
	timer_settime(slots[s - 1].timer, 0, &its, NULL);
}

/* The whole periods of the thread's clock since the timer was armed (the
 * rest is carried to the next sample). */
static uint64_t periods_elapsed(void)
{
	uint64_t now = clock_now_ns(), period = ml_lp_config.period_ns;
	uint64_t span = (now > tl_armed_ns ? now - tl_armed_ns : 0) + tl_carry_ns;
	tl_carry_ns = span % period;
	return span / period;
}

/* True for a signal of this thread's own timer. */
static bool is_ours(const siginfo_t *si)
{
	return si && si->si_code == SI_TIMER && tl_slot && si->si_value.sival_int == tl_slot;
}

/* Counts weight samples of the stack in frames[0..depth) (guard held). */
static void record(uint64_t *frames, uint32_t depth, uint32_t max, uint32_t flags,
		   uint64_t weight)
{
	/* The whole buffer: a room may add frames past the native ones (the
	 * Python room's). */
	depth = ml_core_decorate_stack(frames, depth, ML_LP_DEPTH_MAX, &flags);
	flags &= ~ML_STACK_NESTED;
	if (depth == 0)
		ml_lp_sampletab_drop(weight);
	else
		ml_lp_sampletab_add(gettid_cached(), frames, depth, flags, weight);
}

static uint32_t max_depth(void)
{
	uint32_t max = ml_config.max_depth ? ml_config.max_depth : 64;
	return max > ML_LP_DEPTH_MAX ? ML_LP_DEPTH_MAX : max;
}

/* One sample of the interrupted context; on the thread's side stack (the
 * frames and libunwind's cursor take kilobytes: the program's stack may be
 * a coroutine's few). */
struct sample_job {
	void *uc;
	uint64_t weight;
};

static long take_sample(void *arg)
{
	const struct sample_job *job = arg;
	uint64_t frames[ML_LP_DEPTH_MAX];
	uint32_t flags = ML_STACK_EXACT_IP, max = max_depth();
	uint32_t depth = ml_stack_capture_context(job->uc, frames, max, &flags);
	record(frames, depth, max, flags, job->weight);
	return 0;
}

static void on_sigprof(int sig, siginfo_t *si, void *ctx)
{
	int saved = errno;
	if (!started || stepped_aside || !is_ours(si))
		goto out;	/* not our timer's: nothing to do */
	tl_signals++;
	uint64_t weight = periods_elapsed();
	if (!weight || paused)
		goto rearm;
	if (!ml_guard_enter_always()) {
		/* Interrupted inside memline (its hooks, maybe inside libunwind,
		 * or writing the profile): not safe to unwind again.  The time is
		 * still the program's (memline works for the line that allocates):
		 * what the rooms can add (Python frames) is kept, else dropped. */
		uint64_t frames[ML_LP_DEPTH_MAX];
		record(frames, 0, ML_LP_DEPTH_MAX, ML_STACK_EXACT_IP | ML_STACK_NESTED, weight);
		goto rearm;
	}
	struct sample_job job = { ctx, weight };
	ml_core_on_side_stack(take_sample, &job);
	ml_guard_exit();
rearm:
	arm();
out:
	errno = saved;
}

/* ---- quiet calls ----
 * POSIX never restarts sleeps, poll, select, epoll_wait, sigsuspend, ...
 * after a signal handler ran, even with SA_RESTART: a sample taken during
 * one would cut it short (EINTR), or, retried, stretch it.  So SIGPROF is
 * blocked on the thread for the call; a sample our timer took meanwhile
 * stays pending and is taken when the call returns, with the stack of the
 * call: the real function (exact) under its caller. */

void ml_lp_quiet_begin(struct ml_lp_quiet *q)
{
	q->on = false;
	if (!ml_lp_sampling() || !tl_slot)
		return;
	sigset_t prof;
	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	if (pthread_sigmask(SIG_BLOCK, &prof, &q->old) == 0)
		q->on = !sigismember(&q->old, SIGPROF);	/* else: the program's block */
}

/* Takes the sample our timer left pending during a quiet call to fn. */
static void take_pending(const void *fn)
{
	sigset_t prof;
	siginfo_t si;
	struct timespec zero = { 0, 0 };
	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	if (syscall(SYS_rt_sigtimedwait, &prof, &si, &zero, sizeof(uint64_t)) != SIGPROF ||
	    !is_ours(&si))
		return;
	tl_signals++;
	uint64_t weight = periods_elapsed();
	if (weight && !paused && ml_guard_enter_always()) {
		uint64_t frames[ML_LP_DEPTH_MAX];
		uint32_t flags = 0, max = max_depth();
		frames[0] = (uint64_t)(uintptr_t)fn;
		uint32_t depth = 1 + ml_stack_capture(frames + 1, max - 1, &flags);
		record(frames, depth, max, flags | ML_STACK_EXACT_IP, weight);
		ml_guard_exit();
	}
	arm();
}

void ml_lp_quiet_end(struct ml_lp_quiet *q, const void *fn)
{
	if (!q->on)
		return;
	int saved = errno;
	/* Our timer fired during the call only if a period has passed. */
	if (!stepped_aside && clock_now_ns() - tl_armed_ns >= ml_lp_config.period_ns)
		take_pending(fn);
	pthread_sigmask(SIG_SETMASK, &q->old, NULL);
	errno = saved;
}

void ml_lp_sampler_thread_begin(void)
{
	if (!started || stepped_aside || tl_slot || !ml_thread_watch())
		return;
	tl_tid = (uint32_t)syscall(SYS_gettid);
	for (uint32_t i = 0; i < MAX_THREADS; i++) {
		int expect = 0;
		if (__atomic_load_n(&slots[i].used, __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&slots[i].used, &expect, 1, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		struct sigevent sev;
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGPROF;
		sev._sigev_un._tid = (pid_t)tl_tid;
		sev.sigev_value.sival_int = (int)i + 1;	/* is_ours() */
		clockid_t clk = ml_lp_config.clock == ML_CLOCK_WALL ? CLOCK_MONOTONIC :
			CLOCK_THREAD_CPUTIME_ID;
		if (timer_create(clk, &sev, &slots[i].timer) < 0) {
			__atomic_store_n(&slots[i].used, 0, __ATOMIC_RELEASE);
			ml_warn_once("cannot create a sampling timer; some threads are not timed");
			return;
		}
		tl_slot = (int)i + 1;
		tl_carry_ns = 0;
		arm();
		__atomic_fetch_add(&n_threads, 1, __ATOMIC_RELAXED);
		if (stepped_aside)	/* raced with a step-aside: undo */
			ml_lp_sampler_thread_end();
		return;
	}
	ml_warn_once("more than 8192 threads at once; some threads are not timed");
}

void ml_lp_sampler_thread_end(void)
{
	int s = tl_slot;
	if (!s)
		return;
	tl_slot = 0;
	int one = 1;
	/* The step-aside may have deleted it already: whoever clears used deletes. */
	if (__atomic_compare_exchange_n(&slots[s - 1].used, &one, 2, false, __ATOMIC_ACQ_REL,
					__ATOMIC_RELAXED)) {
		timer_delete(slots[s - 1].timer);
		__atomic_store_n(&slots[s - 1].used, 0, __ATOMIC_RELEASE);
	}
}

void ml_lp_sampler_after_fork(void)
{
	/* POSIX timers are not inherited: only this thread lives on. */
	memset(slots, 0, sizeof(slots));
	n_threads = 0;
	tl_slot = 0;
	tl_tid = 0;
	ml_lp_sampletab_reset();
	if (started && ml_config.follow)
		ml_lp_sampler_thread_begin();
}

int ml_lp_sampler_start(void)
{
	int rc = ml_lp_sampletab_init();
	if (rc < 0)
		return rc;
	struct sigaction old, sa;
	if (ml_real_sigaction(SIGPROF, NULL, &old) == 0 &&
	    (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))) {
		/* Someone (a preloaded profiler) already took SIGPROF. */
		stepped_aside = 1;
		ml_warn("the program uses SIGPROF; line timing is off");
		return -EBUSY;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigprof;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	rc = ml_signals_claim(SIGPROF, &sa);	/* the program reads back SIG_DFL */
	if (rc < 0)
		return rc;
	started = 1;
	ml_lp_sampler_thread_begin();
	return 0;
}

bool ml_lp_sampling(void)
{
	return started && !stepped_aside;
}

bool ml_lp_stepped_aside(void)
{
	return stepped_aside;
}

void ml_lp_step_aside(void)
{
	if (!started || __atomic_exchange_n(&stepped_aside, 1, __ATOMIC_ACQ_REL))
		return;
	ml_warn("the program uses SIGPROF; line timing is off");
	for (uint32_t i = 0; i < MAX_THREADS; i++) {
		int one = 1;
		if (__atomic_compare_exchange_n(&slots[i].used, &one, 2, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			timer_delete(slots[i].timer);
			__atomic_store_n(&slots[i].used, 0, __ATOMIC_RELEASE);
		}
	}
	ml_signals_release(SIGPROF);
	/* SIG_IGN discards a signal of ours still pending; then the default. */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = SIG_IGN;
	ml_real_sigaction(SIGPROF, &sa, NULL);
	sa.sa_handler = SIG_DFL;
	ml_real_sigaction(SIGPROF, &sa, NULL);
}

uint32_t ml_lp_sampler_threads(void)
{
	return __atomic_load_n(&n_threads, __ATOMIC_RELAXED);
}

void ml_lp_sampler_pause(bool p)
{
	paused = p;
}
