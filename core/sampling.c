/* core/sampling.c - `memline run --sample BYTES`: byte-based Poisson
 * sampling of allocations, as tcmalloc and jemalloc's prof do.
 *
 * Sample points fall on the stream of allocated bytes as a Poisson process
 * of rate 1/R (R = MEMLINE_SAMPLE bytes): each thread counts down an
 * exponential gap of mean R; an allocation that reaches zero is sampled
 * and a fresh gap is drawn (the process has no memory).  A block of s
 * bytes is so sampled with probability p = 1 - exp(-s/R), and counted as
 * s/p bytes and 1/p blocks: unbiased estimates of every sum of blocks
 * (bytes per stack, per line, live at exit, live at the peak).  Their
 * variance is estimated by adding w(w - s) per sample of weight w: zero for
 * blocks much larger than R (always sampled), about R^2 for small ones.
 * Unsampled allocations cost a subtraction; unsampled frees a look at a
 * small table of counters (the filter), never the live table. */
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/internal.h"

/* Per hash of an address (two slots each): how many sampled blocks live
 * there now.  A zero in either means "certainly not sampled": most frees
 * stop there (core.h's ml_sampling_maybe, inline in the hooks' paths). */
uint32_t ml_sampling_filter[1u << ML_SAMPLING_FILTER_BITS];
static uint64_t seed_used;

void ml_sampling_init(void)
{
	seed_used = ml_config.sample_seed;
	if (!seed_used) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed_used = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32 ^
			(uint64_t)ts.tv_sec;
	}
	memset(ml_sampling_filter, 0, sizeof(ml_sampling_filter));
}

uint64_t ml_sampling_seed(void)
{
	return seed_used;
}

/* A uniform double in (0, 1] from t's xorshift64* stream. */
static double uniform(struct ml_thread *t)
{
	uint64_t x = t->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	return (double)(((x * 0x2545f4914f6cdd1dull) >> 11) + 1) * 0x1.0p-53;
}

void ml_sampling_thread_start(struct ml_thread *t, uint64_t index)
{
	/* Each thread its own stream: the seed and the thread's index mixed
	 * (splitmix64), never 0. */
	uint64_t z = seed_used + (index + 1) * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	t->rng = (z ^ (z >> 31)) | 1;
	t->sample.left = ml_sampling_gap(t);
}

int64_t ml_sampling_gap(struct ml_thread *t)
{
	double gap = -log(uniform(t)) * (double)ml_config.sample_bytes;
	return gap >= 0x1.0p62 ? INT64_MAX / 2 : (int64_t)gap + 1;
}

struct ml_sample_weight ml_sampling_weight(uint64_t size)
{
	struct ml_sample_weight w;
	double r = (double)ml_config.sample_bytes, s = size ? (double)size : 1.0;
	double p = -expm1(-s / r);	/* 1 - exp(-s/R), exact for small s/R */
	double bytes = (double)size / p;
	w.bytes = (uint64_t)(bytes + 0.5);
	w.blocks = (uint64_t)((double)ML_SAMPLE_UNIT / p + 0.5);
	/* w(w - s): the sample's share of the estimate's variance. */
	w.var = (uint64_t)(bytes * (bytes - (double)size) + 0.5);
	return w;
}

void ml_sampling_filter_add(uint64_t addr)
{
	uint64_t h = ml_sampling_hash(addr);
	__atomic_add_fetch(&ml_sampling_filter[ml_sampling_slot(h, 0)], 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&ml_sampling_filter[ml_sampling_slot(h, 1)], 1, __ATOMIC_RELEASE);
}

void ml_sampling_filter_remove(uint64_t addr)
{
	uint64_t h = ml_sampling_hash(addr);
	__atomic_sub_fetch(&ml_sampling_filter[ml_sampling_slot(h, 0)], 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&ml_sampling_filter[ml_sampling_slot(h, 1)], 1, __ATOMIC_RELAXED);
}

void ml_sampling_after_fork(void)
{
	memset(ml_sampling_filter, 0, sizeof(ml_sampling_filter));	/* the live table was emptied too */
}
