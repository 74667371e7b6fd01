/* bench/alloc_bench.c - a malloc-heavy workload for the overhead benchmark.
 *
 * Usage: alloc_bench ALLOCS_PER_THREAD THREADS
 *        alloc_bench ALLOCS main      (one worker: the main thread itself)
 *
 * Each thread performs exactly ALLOCS_PER_THREAD allocations (malloc, calloc
 * and growing realloc of a NULL or live block each count as one) and frees
 * every block it allocated, so the program ends with nothing live.  Every
 * allocation happens about 20 frames deep: the thread entry, a driver, a
 * chain of RECURSION_DEPTH non-tail calls that alternates between two
 * functions according to a random path (so the program has many distinct
 * stacks, as real programs do), then one of five call sites with its own
 * mix of sizes.  Blocks are kept in a ring of LIVE_SLOTS and freed in an
 * order that is not the allocation order (a random slot is replaced), so
 * the allocator and the profiler's live table see a realistic live set.
 * Choices come from a seeded pseudo-random stream: repeatable, not periodic.
 *
 * On exit it prints one line: "allocs=N threads=T work_ns=W", W being the
 * wall time of the allocation phase (all threads), measured with
 * clock_gettime(CLOCK_MONOTONIC).  run.sh times the whole process as well.
 * Build with -O2 -g; see descend_a for how the recursion is kept real. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RECURSION_DEPTH 16	/* + thread entry, driver, leaf, site, malloc ~ 20 */
#define BATCH 8			/* allocations per visit of a leaf */
#define LIVE_SLOTS 4096		/* power of two */

struct worker {
	long allocs_wanted;
	long allocs_done;
	void *slots[LIVE_SLOTS];
	uint64_t rng;		/* xorshift64 state, seeded per thread */
	uint64_t checksum;
	pthread_t thread;
};

/* A deterministic pseudo-random stream, so runs are repeatable but the
 * event sequence is not periodic (a periodic trace would flatter a
 * compressing trace format). */
static unsigned next_random(struct worker *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return (unsigned)(w->rng >> 32);
}

/* Stores p in a random slot of the ring and frees the block it displaces,
 * so blocks die in an order unrelated to their allocation order and live
 * for a varying time. */
static void keep(struct worker *w, void *p)
{
	unsigned slot = next_random(w) & (LIVE_SLOTS - 1);

	free(w->slots[slot]);
	w->slots[slot] = p;
}

static void touch(struct worker *w, void *p, size_t n)
{
	if (!p) {
		fprintf(stderr, "alloc_bench: out of memory\n");
		exit(1);
	}
	((unsigned char *)p)[0] = (unsigned char)n;
	((unsigned char *)p)[n - 1] = (unsigned char)n;
	w->checksum += n;
	w->allocs_done++;
}

/* Five distinct call sites, each with its own size mix. */
__attribute__((noinline)) static void site_small(struct worker *w, unsigned r)
{
	size_t n = 16 + (r % 4) * 8;		/* 16..40 */
	void *p = malloc(n);

	touch(w, p, n);
	keep(w, p);
}

__attribute__((noinline)) static void site_medium(struct worker *w, unsigned r)
{
	size_t n = 64 + (r % 16) * 12;		/* 64..244 */
	void *p = malloc(n);

	touch(w, p, n);
	keep(w, p);
}

__attribute__((noinline)) static void site_zeroed(struct worker *w, unsigned r)
{
	size_t count = 1 + r % 8;
	void *p = calloc(count, 48);		/* 48..384 */

	touch(w, p, count * 48);
	keep(w, p);
}

__attribute__((noinline)) static void site_large(struct worker *w, unsigned r)
{
	size_t n = 1024 + (r % 4) * 1024;	/* 1..4 KiB */
	void *p = malloc(n);

	touch(w, p, n);
	keep(w, p);
}

/* A growing buffer: realloc(NULL) then one growth, two allocations. */
__attribute__((noinline)) static void site_grow(struct worker *w, unsigned r)
{
	size_t n = 32 + r % 32;
	void *p = realloc(NULL, n);

	touch(w, p, n);
	n *= 3;
	p = realloc(p, n);
	touch(w, p, n);
	keep(w, p);
}

/* The leaf: a batch of BATCH allocations spread over the sites. */
__attribute__((noinline)) static int leaf(struct worker *w, unsigned path)
{
	for (unsigned i = 0; i < BATCH && w->allocs_done < w->allocs_wanted; i++) {
		unsigned r = next_random(w);

		switch ((r >> 8) % 9) {
		case 0: case 1: case 2: site_small(w, r); break;
		case 3: case 4: site_medium(w, r); break;
		case 5: site_zeroed(w, r); break;
		case 6: site_large(w, r); break;
		default:
			if (w->allocs_done + 1 < w->allocs_wanted)
				site_grow(w, r);
			else
				site_small(w, r);
		}
	}
	return (int)(path & 1);
}

static int descend_a(struct worker *w, unsigned path, int depth);
static int descend_b(struct worker *w, unsigned path, int depth);

/* Two mutually recursive steps; bit (depth % 6) of the round's random path
 * picks which one comes next, so rounds differ in their stacks (64 chains,
 * times the call sites: a few hundred distinct stacks).  The
 * result goes through a volatile local after the call, which keeps the
 * calls out of tail position (gcc would otherwise turn `return f() + 1`
 * into a loop). */
__attribute__((noinline)) static int descend_a(struct worker *w, unsigned path, int depth)
{
	volatile int r;	/* stored after the call: never a tail call or a loop */

	if (depth == 0)
		return leaf(w, path);
	r = ((path >> (depth % 6)) & 1) ? descend_b(w, path, depth - 1)
					  : descend_a(w, path, depth - 1);
	return r + 1;
}

__attribute__((noinline)) static int descend_b(struct worker *w, unsigned path, int depth)
{
	volatile int r;	/* stored after the call: never a tail call or a loop */

	if (depth == 0)
		return leaf(w, path);
	r = ((path >> (depth % 6)) & 1) ? descend_a(w, path, depth - 1)
					  : descend_b(w, path, depth - 1);
	return r + 2;
}

__attribute__((noinline)) static void drive(struct worker *w)
{
	volatile int sink = 0;

	while (w->allocs_done < w->allocs_wanted)
		sink += descend_a(w, next_random(w), RECURSION_DEPTH);
	for (unsigned i = 0; i < LIVE_SLOTS; i++) {
		free(w->slots[i]);
		w->slots[i] = NULL;
	}
	(void)sink;
}

static void *thread_main(void *arg)
{
	drive(arg);
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long allocs, threads;
	struct worker *workers;
	uint64_t start, elapsed, checksum = 0;
	/* "main": the main thread's stacks (below libc's start code) */
	int on_main = argc == 3 && strcmp(argv[2], "main") == 0;

	if (argc != 3 || (allocs = atol(argv[1])) <= 0 ||
	    (threads = on_main ? 1 : atol(argv[2])) <= 0 || threads > 64) {
		fprintf(stderr, "usage: alloc_bench ALLOCS_PER_THREAD THREADS(1-64)|main\n");
		return 2;
	}
	/* Bookkeeping is allocated before the timed phase. */
	workers = calloc((size_t)threads, sizeof(*workers));
	if (!workers)
		return 1;
	start = now_ns();
	for (long t = 0; t < threads; t++) {
		workers[t].allocs_wanted = allocs;
		workers[t].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
		if (on_main) {
			drive(&workers[t]);
			continue;
		}
		if (pthread_create(&workers[t].thread, NULL, thread_main, &workers[t])) {
			fprintf(stderr, "alloc_bench: pthread_create failed\n");
			return 1;
		}
	}
	for (long t = 0; t < threads; t++) {
		if (!on_main)
			pthread_join(workers[t].thread, NULL);
		checksum += workers[t].checksum;
		if (workers[t].allocs_done != allocs) {
			fprintf(stderr, "alloc_bench: thread %ld did %ld allocations, not %ld\n",
				t, workers[t].allocs_done, allocs);
			return 1;
		}
	}
	elapsed = now_ns() - start;
	printf("allocs=%ld threads=%ld work_ns=%llu checksum=%llu\n", allocs * threads,
	       threads, (unsigned long long)elapsed, (unsigned long long)checksum);
	free(workers);
	return 0;
}
