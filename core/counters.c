/* core/counters.c - counters per (stack, kind), kept per thread, and each
 * kind's exact total and peak.
 *
 * Each kind keeps one 16-byte word {live, peak} updated with cmpxchg16b:
 * the one write all threads share.  Its peak VALUE is the epoch of
 * DESIGN.md's lazy snapshot: it strictly increases each time it moves.
 * Counters are per thread (struct ml_thread's table): only their thread
 * writes them, so no lock is needed, and a thread's events on a counter
 * happen in the order of their updates of the total, which is all the
 * snapshot needs to be exact under any interleaving.  A block freed by
 * another thread than the one that allocated it is counted down in the
 * freeing thread's counter for that stack (live values may be negative per
 * thread; their sums are not).  When a thread ends, its counters are
 * folded into the process's (ml_counters_fold); the profile sums them all.
 * No global lock.  A kind that shares another's peak (common/kinds.h:
 * python shares the heap's) uses that kind's word: one total, one peak,
 * and every counter of both snapshots at it. */
#include <string.h>
#include "core/internal.h"

struct ml_kind_state ml_kinds[ML_KIND_COUNT];

/* The kind's total reached a new peak: keep its time (the coarse clock
 * the timeline read for this very event: a new peak always makes it
 * read).  {peak, time} moves only up. */
void ml_counters_note_peak_time(uint32_t kind, uint64_t peak)
{
	union ml_kind_word t, nt;
	nt.live = peak;
	nt.peak = ml_timeline_last_ns(kind);
	if (__builtin_expect(ml_tl_plain, 1)) {
		ml_kinds[kind].peak_time.word = nt.word;
		return;
	}
	t.word = ml_kinds[kind].peak_time.word;
	while (t.live < peak) {
		unsigned __int128 seen = __sync_val_compare_and_swap(&ml_kinds[kind].peak_time.word,
								      t.word, nt.word);
		if (seen == t.word)
			break;
		t.word = seen;
	}
}

void ml_counters_move(struct ml_counter *from, uint64_t old_size,
		      struct ml_counter *to, uint64_t new_size)
{
	ml_counters_move_k(from, old_size, to, to->kind, new_size);
}

void ml_counters_alloc_sampled(struct ml_counter *c, struct ml_counter *v,
			       const struct ml_sample_weight *w)
{
	uint64_t before, after = ml_counters_apply(c->kind, (int64_t)w->bytes, &before);
	ml_counters_before(c, before);
	ml_counters_before(v, before);
	c->allocs += w->blocks;
	c->alloc_bytes += w->bytes;
	c->live_blocks += (int64_t)w->blocks;
	c->live_bytes += (int64_t)w->bytes;
	v->allocs++;			/* samples */
	v->alloc_bytes += w->var;
	v->live_blocks++;
	v->live_bytes += (int64_t)w->var;
	ml_counters_after(c, before, after);
	ml_counters_after(v, before, after);
}

void ml_counters_free_sampled(struct ml_counter *c, struct ml_counter *v,
			      const struct ml_sample_weight *w)
{
	uint64_t before, after = ml_counters_apply(c->kind, -(int64_t)w->bytes, &before);
	ml_counters_before(c, before);
	ml_counters_before(v, before);
	c->live_blocks -= (int64_t)w->blocks;
	c->live_bytes -= (int64_t)w->bytes;
	v->live_blocks--;
	v->live_bytes -= (int64_t)w->var;
	ml_counters_after(c, before, after);
	ml_counters_after(v, before, after);
}

/* The counter's values at its kind's final peak (read at the end). */
static void at_peak(const struct ml_counter *c, uint64_t final_peak, int64_t *bytes,
		    int64_t *blocks)
{
	if (c->epoch <= final_peak) {
		*bytes = c->live_bytes;
		*blocks = c->live_blocks;
	} else {
		*bytes = c->at_peak_bytes;
		*blocks = c->at_peak_blocks;
	}
}

uint64_t ml_counters_peak(uint32_t kind)
{
	union ml_kind_word t;
	kind = ml_kind_peak_of((enum ml_kind)kind);
	t.word = __sync_val_compare_and_swap(&ml_kinds[kind].total.word, 0, 0);
	return t.peak;
}

void ml_counters_add(struct ml_counter_sum *sum, const struct ml_counter *c,
		     uint64_t final_peak)
{
	int64_t bytes, blocks;
	ML_ASSERT(c->kind % ML_VAR_KIND < ML_KIND_COUNT);
	at_peak(c, final_peak, &bytes, &blocks);
	sum->allocs += c->allocs;
	sum->alloc_bytes += c->alloc_bytes;
	sum->live_blocks += c->live_blocks;
	sum->live_bytes += c->live_bytes;
	sum->peak_blocks += blocks;
	sum->peak_bytes += bytes;
}

void ml_counters_fold(struct ml_counter *into, struct ml_counter *c)
{
	/* Both as of now: a peak after their last change holds their live
	 * values (c's thread has ended; into changes only here, locked). */
	ML_ASSERT(into->stack == c->stack && into->kind == c->kind);
	uint64_t now = ml_counters_peak(c->kind % ML_VAR_KIND);	/* a variance: its kind's */
	ml_counters_before(into, now);
	ml_counters_before(c, now);
	into->allocs += c->allocs;
	into->alloc_bytes += c->alloc_bytes;
	into->live_blocks += c->live_blocks;
	into->live_bytes += c->live_bytes;
	into->at_peak_blocks += c->at_peak_blocks;
	into->at_peak_bytes += c->at_peak_bytes;
}

void ml_counters_totals(uint32_t kind, struct ml_kind_totals *out)
{
	union ml_kind_word t, pt;
	kind = ml_kind_peak_of((enum ml_kind)kind);
	t.word = __sync_val_compare_and_swap(&ml_kinds[kind].total.word, 0, 0);
	pt.word = __sync_val_compare_and_swap(&ml_kinds[kind].peak_time.word, 0, 0);
	ML_ASSERT(t.peak >= t.live);
	out->live_bytes = t.live;
	out->peak_bytes = t.peak;
	out->peak_ns = pt.live == t.peak ? pt.peak : 0;
}

void ml_counters_reset_totals(void)
{
	memset(ml_kinds, 0, sizeof(ml_kinds));
}

uint64_t ml_core_live_bytes(enum ml_kind kind)
{
	if ((unsigned)kind >= ML_KIND_COUNT)
		return 0;
	kind = ml_kind_peak_of(kind);	/* python: the heap's total */
	/* The 8-byte half of the word is read whole (aligned), never torn. */
	return __atomic_load_n(&ml_kinds[kind].total.live, __ATOMIC_RELAXED);
}
