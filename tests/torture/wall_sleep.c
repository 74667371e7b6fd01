/* tests/torture/wall_sleep.c - sleeps under the wall-clock line timer at 20
 * kHz: nanosleep, usleep, clock_nanosleep and sleep must last what the
 * program asked (a timer signal must neither cut them short nor, retried,
 * stretch them: 0.3 s used to take 0.9 s at this rate).  Each is checked
 * against the monotonic clock, within 0.1 s for scheduling.
 *
 * @run --lines --clock wall --rate 20000
 * @expect wall_sleep main allocs=1 alloc_bytes=16 leaked_bytes=16
 * @end wall_sleep exit 0
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void *kept;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void report(const char *what, double took, double want)
{
	printf("%s: %s\n", what, took >= want && took < want + 0.1 ? "as asked" : "wrong");
	if (took < want || took >= want + 0.1)
		fprintf(stderr, "%s took %.3f s for %.3f s\n", what, took, want);
}

int main(void)
{
	kept = malloc(16);
	struct timespec ts = { 0, 300000000 };
	double t = now();
	int rc = nanosleep(&ts, NULL);
	report("nanosleep", now() - t, 0.3);
	t = now();
	rc |= usleep(300000);
	report("usleep", now() - t, 0.3);
	t = now();
	rc |= clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	report("clock_nanosleep", now() - t, 0.3);
	t = now();
	rc |= (int)sleep(1);
	report("sleep", now() - t, 1.0);
	return rc;
}
