/* core/sigclaim.c - signals a hook room takes for itself (lineprof's SIGPROF):
 * the room's handler is installed, and the program still reads back the
 * action the signal had before (core/signals.c asks here).  When the
 * program sets an action of its own, the room lets go first. */
#include <errno.h>
#include <signal.h>
#include "core/internal.h"

static volatile sig_atomic_t claimed[NSIG];
static struct sigaction claim_view[NSIG];

int ml_signals_claim(int sig, const struct sigaction *act)
{
	struct sigaction before;
	if (sig <= 0 || sig >= NSIG)
		return -EINVAL;
	if (ml_real_sigaction(sig, NULL, &before) < 0)
		return -errno;
	claim_view[sig] = before;
	claimed[sig] = 1;
	if (ml_real_sigaction(sig, act, NULL) < 0) {
		int e = errno;
		claimed[sig] = 0;
		return -e;
	}
	return 0;
}

void ml_signals_release(int sig)
{
	if (sig > 0 && sig < NSIG)
		claimed[sig] = 0;
}

bool ml_signals_claimed(int sig, struct sigaction *view)
{
	if (sig <= 0 || sig >= NSIG || !claimed[sig])
		return false;
	*view = claim_view[sig];
	return true;
}
