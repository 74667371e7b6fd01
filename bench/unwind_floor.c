/* bench/unwind_floor.c - the floor under any full-stack allocation profiler:
 * what one stack capture of a ~20-frame stack costs on this machine.
 *
 * Usage: unwind_floor [CALLS]
 *
 * From 18 non-tail recursive calls deep (about 20 frames with main and libc's
 * start code), it times CALLS repetitions of: libunwind's unw_backtrace
 * (memline's capture), glibc's backtrace(), a frame-pointer walk (this file
 * is built with -fno-omit-frame-pointer so the walk is valid here; libc's
 * start code has no frame pointers so it stops there), and a plain
 * malloc+free pair for scale.  Prints one line per method with ns per call
 * (median of 5 timed passes) and the number of frames it found.  Then
 * unw_backtrace in two threads at once, with libunwind's default (global)
 * cache and with UNW_CACHE_PER_THREAD: ns per call of the slower thread. */
#define UNW_LOCAL_ONLY
#include <execinfo.h>
#include <libunwind.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define DEPTH 18
#define MAX_FRAMES 128
#define PASSES 5

typedef int (*capture_fn)(void **frames, int max);

static _Thread_local int last_frames;	/* frames found by the last timed capture */

static int capture_unw(void **frames, int max)
{
	return unw_backtrace(frames, max);
}

static int capture_glibc(void **frames, int max)
{
	return backtrace(frames, max);
}

/* Walks saved frame pointers: [fp] = caller's fp, [fp+8] = return address.
 * Stops at a null or non-increasing fp. */
__attribute__((noinline)) static int capture_fp(void **frames, int max)
{
	void **fp = __builtin_frame_address(0);
	int n = 0;

	while (fp && n < max) {
		void **next = (void **)fp[0];

		frames[n++] = fp[1];
		if (next <= fp)
			break;
		fp = next;
	}
	return n;
}

static int capture_malloc(void **frames, int max)
{
	(void)max;
	void *p = malloc(64);

	frames[0] = p;
	free(p);
	return 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Times `calls` captures PASSES times; stores the median ns per call. */
__attribute__((noinline)) static int timed(capture_fn fn, long calls, double *ns_per_call)
{
	void *frames[MAX_FRAMES];
	uint64_t pass_ns[PASSES];
	int depth = 0;

	for (int p = 0; p < PASSES; p++) {
		uint64_t t0 = now_ns();

		for (long i = 0; i < calls; i++)
			depth = fn(frames, MAX_FRAMES);
		pass_ns[p] = now_ns() - t0;
	}
	qsort(pass_ns, PASSES, sizeof(pass_ns[0]), cmp_u64);
	*ns_per_call = (double)pass_ns[PASSES / 2] / (double)calls;
	return depth;
}

__attribute__((noinline)) static int descend(int depth, capture_fn fn, long calls,
					     double *ns_per_call)
{
	volatile int r;	/* stored after the call: not a tail call */

	if (depth == 0) {
		last_frames = timed(fn, calls, ns_per_call);
		return 0;
	}
	r = descend(depth - 1, fn, calls, ns_per_call);
	return r;
}

struct concurrent {
	long calls;
	double ns;
	pthread_t thread;
};

static void *concurrent_main(void *arg)
{
	struct concurrent *c = arg;

	descend(DEPTH, capture_unw, c->calls, &c->ns);
	return NULL;
}

/* unw_backtrace in two threads at once: the median ns per call of the
 * slower thread.  Shows whether libunwind's cache policy serialises. */
static double concurrent_unw(long calls)
{
	struct concurrent c[2] = { { .calls = calls }, { .calls = calls } };

	for (int i = 0; i < 2; i++)
		if (pthread_create(&c[i].thread, NULL, concurrent_main, &c[i]))
			return -1.0;
	for (int i = 0; i < 2; i++)
		pthread_join(c[i].thread, NULL);
	return c[0].ns > c[1].ns ? c[0].ns : c[1].ns;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200000;
	static const struct {
		const char *name;
		capture_fn fn;
	} methods[] = {
		{ "unw_backtrace (libunwind)", capture_unw },
		{ "backtrace (glibc)", capture_glibc },
		{ "frame-pointer walk", capture_fp },
		{ "malloc(64)+free, no capture", capture_malloc },
	};

	if (calls <= 0) {
		fprintf(stderr, "usage: unwind_floor [CALLS]\n");
		return 2;
	}
	/* Warm the caches libunwind and glibc fill on first use. */
	for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
		double ns;

		descend(DEPTH, methods[m].fn, 1000, &ns);
	}
	printf("%-36s %10s %7s\n", "method", "ns/call", "frames");
	for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
		double ns;
		descend(DEPTH, methods[m].fn, calls, &ns);
		printf("%-36s %10.1f %7d\n", methods[m].name, ns,
		       methods[m].fn == capture_malloc ? 0 : last_frames);
	}
	printf("%-36s %10.1f\n", "unw_backtrace, 2 threads, global", concurrent_unw(calls));
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	printf("%-36s %10.1f\n", "unw_backtrace, 2 threads, per-thread", concurrent_unw(calls));
	return 0;
}
