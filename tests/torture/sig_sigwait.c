/* tests/torture/sig_sigwait.c - the server pattern: SIGPROF and SIGUSR1
 * blocked, CPU work (the line timer's CPU clock runs), then the signals are
 * waited for with sigwaitinfo, sigtimedwait, a signalfd and sigwait, and
 * sigpending is asked.  Only the program's own SIGUSR1 may ever come: the
 * line timer's SIGPROF is memline's.
 *
 * @run --lines --rate 4999
 * @expect sig_sigwait main allocs=1 alloc_bytes=64 leaked_bytes=64
 * @end sig_sigwait exit 0
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
void *kept;

/* Spins until the thread has used s seconds of CPU. */
static void burn(double s)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			sink += (unsigned long)i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < s);
}

int main(void)
{
	sigset_t set, pending;
	siginfo_t si;
	struct timespec zero = { 0, 0 };
	sigemptyset(&set);
	sigaddset(&set, SIGPROF);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	kept = malloc(64);
	burn(0.1);
	sigpending(&pending);
	printf("SIGPROF pending: %d\n", sigismember(&pending, SIGPROF));
	kill(getpid(), SIGUSR1);
	printf("sigwaitinfo: %d\n", sigwaitinfo(&set, &si));
	burn(0.05);
	printf("sigtimedwait: %d\n", sigtimedwait(&set, &si, &zero));
	burn(0.05);
	int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	struct signalfd_siginfo fsi;
	printf("signalfd read: %zd\n", read(fd, &fsi, sizeof(fsi)));
	kill(getpid(), SIGUSR1);
	int sig = 0;
	sigwait(&set, &sig);
	printf("sigwait: %d\n", sig);
	return 0;
}
