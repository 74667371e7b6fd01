/* tests/torture/sig_query.c - a program reads SIGPROF's action before
 * deciding (as profilers and runtimes do): it must read the default, not
 * memline's handler.  Then it takes SIGPROF itself: the action it gets back
 * as the old one is the default too, and its own handler runs.
 *
 * @run --lines
 * @expect sig_query main allocs=1 alloc_bytes=32 leaked_bytes=32
 * @end sig_query exit 0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static volatile sig_atomic_t ticks;
static volatile unsigned long sink;
void *kept;

static void on_prof(int sig)
{
	(void)sig;
	ticks++;
}

static const char *name(const struct sigaction *sa)
{
	if (sa->sa_flags & SA_SIGINFO)
		return "a siginfo handler";
	return sa->sa_handler == SIG_DFL ? "default" : sa->sa_handler == SIG_IGN ? "ignored" :
		"a handler";
}

int main(void)
{
	struct sigaction old, sa;
	sigaction(SIGPROF, NULL, &old);
	printf("SIGPROF at start: %s, flags %#x\n", name(&old), (unsigned)old.sa_flags);
	kept = malloc(32);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sigaction(SIGPROF, &sa, &old);
	printf("replaced: %s\n", name(&old));
	struct itimerval it = { { 0, 10000 }, { 0, 10000 } };
	setitimer(ITIMER_PROF, &it, NULL);
	while (ticks < 5)
		sink++;
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_PROF, &it, NULL);
	sigaction(SIGPROF, NULL, &old);
	printf("own handler ran: %s; now %s\n", ticks >= 5 ? "yes" : "no", name(&old));
	return 0;
}
