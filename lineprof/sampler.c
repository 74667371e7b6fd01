/* lineprof/sampler.c - samples every thread: one POSIX timer per thread
 * (SIGEV_THREAD_ID) on the thread's CPU clock or on CLOCK_MONOTONIC, whose
 * SIGPROF handler unwinds the interrupted stack with libunwind and counts it
 * in the sample table.  The handler takes no lock, never allocates and
 * keeps errno; SA_RESTART restarts interrupted system calls. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include "core/core.h"	/* the guard, ml_warn, ml_config.max_depth */
#include "lineprof/internal.h"

#define MAX_THREADS 8192u

struct thread_slot {
	int used;		/* atomic: 0 free, 1 taken */
	timer_t timer;
};

static struct thread_slot slots[MAX_THREADS];
static volatile int started;		/* the handler is installed */
static volatile int stepped_aside;
static volatile int paused;
static uint32_t n_threads;
static pthread_key_t thread_key;

static __thread int tl_slot __attribute__((tls_model("initial-exec")));	/* index + 1 */
static __thread uint32_t tl_tid __attribute__((tls_model("initial-exec")));
static __thread uint32_t tl_signals __attribute__((tls_model("initial-exec")));

static uint32_t gettid_cached(void)
{
	if (!tl_tid)
		tl_tid = (uint32_t)syscall(SYS_gettid);
	return tl_tid;
}

/* Unwinds from the interrupted context: frame 0 is the exact IP. */
static uint32_t unwind_from(ucontext_t *uc, uint64_t *frames, uint32_t max, uint32_t *flags)
{
	unw_cursor_t c;
	uint32_t n = 0;
	if (unw_init_local2(&c, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) < 0)
		return 0;
	do {
		unw_word_t ip;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		if (n == max) {
			*flags |= ML_STACK_TRUNCATED;
			break;
		}
		frames[n++] = (uint64_t)ip;
	} while (unw_step(&c) > 0);
	return n;
}

static void on_sigprof(int sig, siginfo_t *si, void *ctx)
{
	int saved = errno;
	ucontext_t *uc = ctx;
	if (!started || stepped_aside || paused || !si || si->si_code != SI_TIMER)
		goto out;
	tl_signals++;
	uint64_t weight = 1 + (si->si_overrun > 0 ? (uint64_t)si->si_overrun : 0);
	uint64_t frames[ML_LP_DEPTH_MAX];
	uint32_t flags = ML_STACK_EXACT_IP, depth;
	uint32_t max = ml_config.max_depth ? ml_config.max_depth : 64;
	if (max > ML_LP_DEPTH_MAX)
		max = ML_LP_DEPTH_MAX;
	if (!ml_guard_enter_always()) {
		/* Interrupted inside memline (its hooks, maybe inside libunwind,
		 * or writing the profile): not safe to unwind again.  The time is
		 * still the program's (memline works for the line that allocates):
		 * what the rooms can add (Python frames) is kept, else dropped. */
		flags |= ML_STACK_NESTED;
		depth = ml_core_decorate_stack(frames, 0, ML_LP_DEPTH_MAX, &flags);
		flags &= ~ML_STACK_NESTED;
		if (depth == 0)
			ml_lp_sampletab_drop(weight);
		else
			ml_lp_sampletab_add(gettid_cached(), frames, depth, flags, weight);
		goto out;
	}
	depth = unwind_from(uc, frames, max, &flags);
	depth = ml_core_decorate_stack(frames, depth, ML_LP_DEPTH_MAX, &flags);
	ml_guard_exit();
	if (depth == 0)
		ml_lp_sampletab_drop(weight);
	else
		ml_lp_sampletab_add(gettid_cached(), frames, depth, flags, weight);
out:
	errno = saved;
}

static void thread_key_destructor(void *v)
{
	(void)v;
	ml_lp_sampler_thread_end();
}

void ml_lp_sampler_thread_begin(void)
{
	if (!started || stepped_aside || tl_slot)
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
		clockid_t clk = ml_lp_config.clock == ML_CLOCK_WALL ? CLOCK_MONOTONIC :
			CLOCK_THREAD_CPUTIME_ID;
		if (timer_create(clk, &sev, &slots[i].timer) < 0) {
			__atomic_store_n(&slots[i].used, 0, __ATOMIC_RELEASE);
			ml_warn_once("cannot create a sampling timer; some threads are not timed");
			return;
		}
		tl_slot = (int)i + 1;
		struct itimerspec its;
		its.it_interval.tv_sec = (time_t)(ml_lp_config.period_ns / 1000000000ull);
		its.it_interval.tv_nsec = (long)(ml_lp_config.period_ns % 1000000000ull);
		its.it_value = its.it_interval;
		timer_settime(slots[i].timer, 0, &its, NULL);
		__atomic_fetch_add(&n_threads, 1, __ATOMIC_RELAXED);
		pthread_setspecific(thread_key, (void *)1);
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
	if (pthread_key_create(&thread_key, thread_key_destructor) != 0)
		return -EAGAIN;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigprof;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (ml_real_sigaction(SIGPROF, &sa, NULL) < 0)
		return -errno;
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
	/* SIG_IGN discards a signal of ours still pending; then the default. */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = SIG_IGN;
	ml_real_sigaction(SIGPROF, &sa, NULL);
	sa.sa_handler = SIG_DFL;
	ml_real_sigaction(SIGPROF, &sa, NULL);
}

uint32_t ml_lp_signals_here(void)
{
	return tl_signals;
}

uint32_t ml_lp_sampler_threads(void)
{
	return __atomic_load_n(&n_threads, __ATOMIC_RELAXED);
}

void ml_lp_sampler_pause(bool p)
{
	paused = p;
}
