/* core/timeline.c - total live bytes per kind over time, at bounded
 * resolution: ML_TIMELINE_POINTS buckets per kind, each holding the highest
 * total seen in it.  When time runs past the last bucket, pairs of buckets
 * merge and each bucket covers twice as long: memory stays constant
 * whatever the run length.
 *
 * Reading a clock costs 8-20 ns here (the coarse clock, the TSC): more
 * than the rest of an event's bookkeeping.  So a thread reads the coarse
 * clock only on an event that may raise the maximum of the bucket it last
 * saw (its value above what the thread knows the bucket holds: the peak's
 * event always is one), and on every ML_TIMELINE_EVERY-th event; any
 * other event changes nothing in that bucket and is skipped.  An event
 * that would have been the first of a new bucket can so be missed, by at
 * most ML_TIMELINE_EVERY - 1 events of its thread; every maximum a thread
 * sees is placed at its time. */
#include <string.h>
#include "core/internal.h"

/* First bucket width: 2^22 ns (4.2 ms, the coarse clock's resolution);
 * 2048 buckets cover 8.6 s before the first merge. */
#define START_SHIFT 22u

struct kind_line {
	uint64_t bucket[ML_TIMELINE_POINTS];	/* max live + 1; 0 = no event */
	volatile uint32_t shift;
	ml_spin_t lock;		/* held only while merging */
};

static struct kind_line lines[ML_KIND_COUNT];
static uint64_t start_ns;
static volatile uint32_t reset_gen = 1;
static bool started;	/* a reset ran: buckets may be set since */

/* Per thread and kind (ml_tl_timeline, a field of the TLS block: core.h):
 * what the thread knows of the bucket it last wrote, so that most events
 * cost no clock read and no shared access (ml_timeline_event). */

void ml_timeline_reset(uint64_t now_ns)
{
	/* The start's reset finds them zero (static storage): clearing them
	 * anyway would touch every page of them (the page faults were a
	 * visible part of a short run's cost). */
	for (uint32_t k = 0; k < ML_KIND_COUNT; k++) {
		if (started)
			memset(lines[k].bucket, 0, sizeof(lines[k].bucket));
		lines[k].shift = START_SHIFT;
		lines[k].lock = (ml_spin_t){ 0 };
	}
	started = true;
	start_ns = now_ns;
	__atomic_add_fetch(&reset_gen, 1, __ATOMIC_RELEASE);
	/* The calling thread's view (a fork child's only thread) starts over. */
	memset(ml_tl_timeline, 0, sizeof(ml_tl_timeline));
}

/* Halves the resolution until index idx of the old width fits. */
static void widen(struct kind_line *l, uint32_t seen_shift)
{
	ml_spin_lock(&l->lock);
	if (l->shift == seen_shift) {
		for (uint32_t i = 0; i < ML_TIMELINE_POINTS / 2; i++) {
			uint64_t a = l->bucket[2 * i], b = l->bucket[2 * i + 1];
			l->bucket[i] = a > b ? a : b;
		}
		memset(&l->bucket[ML_TIMELINE_POINTS / 2], 0,
		       sizeof(uint64_t) * (ML_TIMELINE_POINTS / 2));
		__atomic_store_n(&l->shift, seen_shift + 1, __ATOMIC_RELEASE);
	}
	ml_spin_unlock(&l->lock);
}

/* Raises the bucket of now_ns to at least value; returns what the bucket
 * holds afterwards, or 0 if the timeline is not started. */
static uint64_t raise_bucket(uint32_t kind, uint64_t now_ns, uint64_t value)
{
	struct kind_line *l = &lines[kind];
	uint64_t t = now_ns > start_ns ? now_ns - start_ns : 0;
	for (;;) {
		uint32_t shift = __atomic_load_n(&l->shift, __ATOMIC_ACQUIRE);
		if (shift == 0)
			return 0;	/* not started (reset not called) */
		uint64_t idx = t >> shift;
		if (idx >= ML_TIMELINE_POINTS) {
			widen(l, shift);
			continue;
		}
		uint64_t cur = __atomic_load_n(&l->bucket[idx], __ATOMIC_RELAXED);
		while (cur < value &&
		       !__atomic_compare_exchange_n(&l->bucket[idx], &cur, value, true,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		/* A merge that raced with us may have moved the buckets: redo
		 * (a max is idempotent). */
		if (__atomic_load_n(&l->shift, __ATOMIC_ACQUIRE) == shift)
			return cur > value ? cur : value;
	}
}

void ml_timeline_note(uint32_t kind, uint64_t now_ns, uint64_t live_bytes)
{
	raise_bucket(kind, now_ns, live_bytes + 1);
}

void ml_timeline_slow(uint32_t kind, uint64_t live_bytes)
{
	struct ml_timeline_thread *t = &ml_tl_timeline[kind];
	uint64_t value = live_bytes + 1;
	uint32_t gen = __atomic_load_n(&reset_gen, __ATOMIC_ACQUIRE);
	uint64_t now = ml_clock_coarse_ns();
	uint32_t shift = __atomic_load_n(&lines[kind].shift, __ATOMIC_ACQUIRE);
	uint64_t idx = (now > start_ns ? now - start_ns : 0) >> (shift ? shift : 1);
	if (t->gen != gen || idx != t->idx || shift != t->shift)
		t->known = 0;
	t->gen = gen;
	t->idx = idx;
	t->shift = shift;
	t->now_ns = now;
	t->countdown = ML_TIMELINE_EVERY;
	if (value > t->known)
		t->known = raise_bucket(kind, now, value);
}

void ml_timeline_foreach(void (*fn)(uint32_t kind, uint64_t ns, uint64_t live, void *arg),
			 void *arg)
{
	for (uint32_t k = 0; k < ML_KIND_COUNT; k++) {
		struct kind_line *l = &lines[k];
		for (uint32_t i = 0; i < ML_TIMELINE_POINTS; i++) {
			uint64_t v = __atomic_load_n(&l->bucket[i], __ATOMIC_RELAXED);
			if (v)
				fn(k, (uint64_t)i << l->shift, v - 1, arg);
		}
	}
}
