/* core/fatalsigs.c - which signals end a process by default (and so get
 * memline's handler, core/signals.c), and which of those arrive from outside
 * the thread (and so wait while the profile is written, core/dump.c). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

bool ml_signals_line_timer(void)
{
	const char *lines = getenv("MEMLINE_LINES");
	return lines && strcmp(lines, "1") == 0;
}

/* Every signal but SIGKILL (which cannot be caught), the signals that are
 * ignored or stop by default, and the two real-time signals glibc keeps for
 * itself (below SIGRTMIN).  SIGPROF too, unless the line timer runs: then
 * it is lineprof's. */
bool ml_signals_end_process(int sig, bool line_timer)
{
	switch (sig) {
	case SIGKILL: case SIGSTOP: case SIGTSTP: case SIGTTIN: case SIGTTOU:
	case SIGCHLD: case SIGCONT: case SIGURG: case SIGWINCH:
		return false;
	case SIGPROF:
		return !line_timer;
	default:
		return (sig > 0 && sig < 32) || (sig >= SIGRTMIN && sig <= SIGRTMAX);
	}
}

/* Not the signals a thread brings on itself: faults, abort, SIGXFSZ (a
 * write past RLIMIT_FSIZE). */
void ml_signals_add_async(sigset_t *set, bool line_timer)
{
	for (int sig = 1; sig < NSIG; sig++) {
		switch (sig) {
		case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP: case SIGSYS:
		case SIGABRT: case SIGXFSZ:
			continue;
		default:
			if (ml_signals_end_process(sig, line_timer))
				sigaddset(set, sig);
		}
	}
}
