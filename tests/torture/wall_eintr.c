/* tests/torture/wall_eintr.c - the program's own SIGALRM (no SA_RESTART)
 * cuts its waits short, and only it: under the wall-clock line timer at
 * 10 kHz, each of nanosleep, poll, select, epoll_wait, pause and
 * sigsuspend must return EINTR when (and only when) the program's 20 ms
 * alarm fires, every time (memline used to swallow it, or cut a wait short
 * itself); a wait that times out first must time out.
 *
 * @run --lines --clock wall --rate 10000
 * @expect wall_eintr main allocs=1 alloc_bytes=8 leaked_bytes=8
 * @end wall_eintr exit 0
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms;
void *kept;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void arm(long us)
{
	struct itimerval it = { { 0, 0 }, { 0, us } };
	setitimer(ITIMER_REAL, &it, NULL);
}

/* Runs one kind of wait 10 times, each cut by an alarm; prints how many
 * returned EINTR with the alarm counted. */
static void cut(const char *what, int (*wait)(void))
{
	int ok = 0;
	for (int i = 0; i < 10; i++) {
		int before = alarms;
		arm(20000);
		int rc = wait();
		ok += rc < 0 && errno == EINTR && alarms == before + 1;
	}
	printf("%s: %d of 10 cut by the alarm\n", what, ok);
}

static int do_nanosleep(void)
{
	struct timespec ts = { 2, 0 };
	return nanosleep(&ts, NULL);
}

static int do_poll(void)
{
	return poll(NULL, 0, 2000);
}

static int do_select(void)
{
	struct timeval tv = { 2, 0 };
	return select(0, NULL, NULL, NULL, &tv);
}

static int epfd;
static int do_epoll(void)
{
	struct epoll_event ev;
	return epoll_wait(epfd, &ev, 1, 2000);
}

static int do_pause(void)
{
	return pause();
}

static int do_sigsuspend(void)
{
	sigset_t none;
	sigemptyset(&none);
	return sigsuspend(&none);
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	kept = malloc(8);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	cut("nanosleep", do_nanosleep);
	cut("poll", do_poll);
	cut("select", do_select);
	cut("epoll_wait", do_epoll);
	cut("pause", do_pause);
	cut("sigsuspend", do_sigsuspend);
	/* Waits that end by their timeout, no alarm: 0, not EINTR. */
	int timed_out = 0;
	for (int i = 0; i < 5; i++) {
		timed_out += poll(NULL, 0, 30) == 0;
		struct timeval tv = { 0, 30000 };
		timed_out += select(0, NULL, NULL, NULL, &tv) == 0;
		struct epoll_event ev;
		timed_out += epoll_wait(epfd, &ev, 1, 30) == 0;
	}
	printf("timed out: %d of 15\n", timed_out);
	return 0;
}
