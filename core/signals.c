/* core/signals.c - the profile written on fatal signals: memline's handler
 * for the signals that end a process, and the program-facing view of
 * sigaction and signal that keeps it invisible (the exported wrappers are
 * in process/hooks.c).
 *
 * Our handler is installed for each signal whose default action ends the
 * process (ends_process) where the program leaves (or sets back) SIG_DFL, and is invisible to it:
 * its sigaction and signal calls see and get back exactly the action it
 * set (CPython, for one, installs its SIGINT handler, KeyboardInterrupt,
 * only over SIG_DFL; bash sets SIG_DFL at start and later reinstalls the
 * handler it found).  SIG_IGN or a handler of the program's replaces ours
 * until it sets SIG_DFL again. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include "core/internal.h"

/* Signals that end the process, once start-up has looked at them. */
static volatile sig_atomic_t managed[NSIG];
/* Signals whose action is our handler. */
static volatile sig_atomic_t ours[NSIG];
/* Where ours is set: the SIG_DFL action the program sees. */
static struct sigaction view[NSIG];
static volatile int fatal_taken;	/* a fatal signal's handler writes the profile */

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
	ml_real_sigaction(sig, &dfl, NULL);
	if (!ml_lifecycle_is_profiled_process()) {
		/* A vfork child shares our memory (not our actions): it dies
		 * of the signal and changes nothing of ours. */
		raise(sig);
		errno = saved;
		return;
	}
	ours[sig] = 0;
	/* One profile: the first fatal signal writes it, others wait for it. */
	if (__atomic_exchange_n(&fatal_taken, 1, __ATOMIC_ACQ_REL) ||
	    ml_lifecycle_final_written() || ml_lifecycle_write(ML_END_SIGNAL, sig) == -EBUSY)
		ml_dump_wait_other();	/* another thread is writing: let it finish */
	/* Delivered, with the default action, when we return (a fault would
	 * also repeat by itself). */
	raise(sig);
	errno = saved;
}

void ml_signals_before_abort(void)
{
	if (!ours[SIGABRT] || !ml_lifecycle_is_profiled_process())
		return;
	/* The profile now, and SIGABRT back to its default action: abort's
	 * signal then needs no handler frame, which a stack-overflow catcher
	 * calling abort on a small alternate stack has no room for. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	ours[SIGABRT] = 0;
	ml_real_sigaction(SIGABRT, &dfl, NULL);
	if (!__atomic_exchange_n(&fatal_taken, 1, __ATOMIC_ACQ_REL) &&
	    !ml_lifecycle_final_written())
		ml_lifecycle_write(ML_END_SIGNAL, SIGABRT);
}

static bool is_ours(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fatal;
}

/* Our handler's action. */
static void our_action(struct sigaction *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sa_sigaction = on_fatal;
	sa->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa->sa_mask);
}

void ml_signals_install(void)
{
	bool line_timer = ml_signals_line_timer();
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction old, sa;
		if (!ml_signals_end_process(sig, line_timer) || ml_real_sigaction(sig, NULL, &old) < 0)
			continue;
		managed[sig] = 1;
		if (old.sa_handler != SIG_DFL)
			continue;
		our_action(&sa);
		view[sig] = old;
		ours[sig] = 1;
		if (ml_real_sigaction(sig, &sa, NULL) < 0)
			ours[sig] = 0;
	}
}

/* sigaction(sig, act, old) as the program sees it: SIG_DFL keeps (or
 * brings back) our handler and is what the program reads; any other
 * action goes in as asked.  A query reads the action the program set. */
static int program_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig <= 0 || sig >= NSIG || !managed[sig])
		return ml_real_sigaction(sig, act, old);
	struct sigaction prev = view[sig], real_old, sa;
	sig_atomic_t was_ours = ours[sig];
	const struct sigaction *put = act;
	if (act && act->sa_handler == SIG_DFL) {
		our_action(&sa);
		view[sig] = *act;
		ours[sig] = 1;
		put = &sa;
	} else if (act) {
		ours[sig] = 0;
	}
	int rc = ml_real_sigaction(sig, put, &real_old);
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

int ml_signals_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction seen;
	if (ml_signals_claimed(sig, &seen)) {
		int rc = 0;
		if (act) {
			ml_rooms_signal_taken(sig);	/* the room lets go */
			rc = program_sigaction(sig, act, NULL);
		}
		if (rc == 0 && old)
			*old = seen;
		return rc;
	}
	if (act)
		ml_rooms_signal_taken(sig);
	return program_sigaction(sig, act, old);
}

ml_sighandler_t ml_signals_signal(int sig, ml_sighandler_t handler)
{
	typedef ml_sighandler_t (*signal_fn)(int, ml_sighandler_t);
	struct sigaction seen;
	if (ml_signals_claimed(sig, &seen)) {
		ml_rooms_signal_taken(sig);	/* the room lets go */
		ml_sighandler_t got = ML_NEXT(signal_fn, "signal")(sig, handler);
		return got == SIG_ERR ? got : seen.sa_handler;
	}
	ml_rooms_signal_taken(sig);
	if (sig <= 0 || sig >= NSIG || !managed[sig] || handler != SIG_DFL) {
		signal_fn real = ML_NEXT(signal_fn, "signal");
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
	if (program_sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}
