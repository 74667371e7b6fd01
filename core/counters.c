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

union kind_word {
	unsigned __int128 word;
	struct {
		uint64_t live;
		uint64_t peak;
	};
};

struct kind_state {
	union kind_word total __attribute__((aligned(16)));
	union kind_word peak_time __attribute__((aligned(16)));	/* .live = peak, .peak = its TSC */
} __attribute__((aligned(64)));

static struct kind_state kinds[ML_KIND_COUNT];

/* Adds delta to the kind's live total; returns the peak before it in
 * *before and after it. */
static inline uint64_t apply_total(uint32_t kind, int64_t delta, uint64_t *before)
{
	union kind_word old, new;
	kind = ml_kind_peak_of((enum ml_kind)kind);	/* python: the heap's total */
	old.word = kinds[kind].total.word;	/* may tear; the CAS corrects it */
	if (__builtin_expect(ml_tl_plain, 1)) {	/* the one recording thread */
		new.live = old.live + (uint64_t)delta;
		new.peak = new.live > old.peak ? new.live : old.peak;
		kinds[kind].total.word = new.word;
		goto done;
	}
	for (;;) {
		new.live = old.live + (uint64_t)delta;
		new.peak = new.live > old.peak ? new.live : old.peak;
		unsigned __int128 seen = __sync_val_compare_and_swap(&kinds[kind].total.word,
								      old.word, new.word);
		if (__builtin_expect(seen == old.word, 1))
			break;
		old.word = seen;
	}
done:
	ML_ASSERT(delta >= 0 || old.live >= (uint64_t)-delta);	/* never below 0 */
	ML_ASSERT(new.peak >= new.live && new.peak >= old.peak);
	*before = old.peak;
	ml_timeline_event(kind, new.live);
	if (__builtin_expect(new.peak > old.peak, 0)) {
		uint64_t tsc = ml_tsc();
		/* Keep the time of the highest peak: {peak, tsc} moves only up. */
		union kind_word t, nt;
		t.word = kinds[kind].peak_time.word;
		while (t.live < new.peak) {
			nt.live = new.peak;
			nt.peak = tsc;
			unsigned __int128 seen = __sync_val_compare_and_swap(
				&kinds[kind].peak_time.word, t.word, nt.word);
			if (seen == t.word)
				break;
			t.word = seen;
		}
	}
	return new.peak;
}

/* Before c changes: if the kind reached a peak since c last changed, c's
 * live values now are its values at that peak.  epoch is peak + 1 (0:
 * never taken; a peak of 0 bytes is a value too). */
static inline void snapshot_before(struct ml_counter *c, uint64_t peak_before)
{
	if (c->epoch <= peak_before) {
		c->at_peak_bytes = c->live_bytes;
		c->at_peak_blocks = c->live_blocks;
		c->epoch = peak_before + 1;
	}
}

/* After c changed: if this very event set a new peak, c's live is at it. */
static inline void snapshot_after(struct ml_counter *c, uint64_t peak_before,
				  uint64_t peak_after)
{
	if (peak_after > peak_before) {
		c->at_peak_bytes = c->live_bytes;
		c->at_peak_blocks = c->live_blocks;
		c->epoch = peak_after + 1;
	}
}

void ml_counters_alloc(struct ml_counter *c, uint64_t size)
{
	uint64_t before, after = apply_total(c->kind, (int64_t)size, &before);
	snapshot_before(c, before);
	c->allocs++;
	c->alloc_bytes += size;
	c->live_blocks++;
	c->live_bytes += (int64_t)size;
	snapshot_after(c, before, after);
}

void ml_counters_free(struct ml_counter *c, uint64_t size)
{
	uint64_t before, after = apply_total(c->kind, -(int64_t)size, &before);
	snapshot_before(c, before);
	c->live_blocks--;
	c->live_bytes -= (int64_t)size;
	snapshot_after(c, before, after);
}

void ml_counters_move(struct ml_counter *from, uint64_t old_size,
		      struct ml_counter *to, uint64_t new_size)
{
	uint64_t before, after = apply_total(to->kind, (int64_t)new_size - (int64_t)old_size,
					     &before);
	snapshot_before(from, before);
	snapshot_before(to, before);
	from->live_blocks--;
	from->live_bytes -= (int64_t)old_size;
	to->allocs++;
	to->alloc_bytes += new_size;
	to->live_blocks++;
	to->live_bytes += (int64_t)new_size;
	snapshot_after(from, before, after);
	snapshot_after(to, before, after);
}

void ml_counters_alloc_sampled(struct ml_counter *c, struct ml_counter *v,
			       const struct ml_sample_weight *w)
{
	uint64_t before, after = apply_total(c->kind, (int64_t)w->bytes, &before);
	snapshot_before(c, before);
	snapshot_before(v, before);
	c->allocs += w->blocks;
	c->alloc_bytes += w->bytes;
	c->live_blocks += (int64_t)w->blocks;
	c->live_bytes += (int64_t)w->bytes;
	v->allocs++;			/* samples */
	v->alloc_bytes += w->var;
	v->live_blocks++;
	v->live_bytes += (int64_t)w->var;
	snapshot_after(c, before, after);
	snapshot_after(v, before, after);
}

void ml_counters_free_sampled(struct ml_counter *c, struct ml_counter *v,
			      const struct ml_sample_weight *w)
{
	uint64_t before, after = apply_total(c->kind, -(int64_t)w->bytes, &before);
	snapshot_before(c, before);
	snapshot_before(v, before);
	c->live_blocks -= (int64_t)w->blocks;
	c->live_bytes -= (int64_t)w->bytes;
	v->live_blocks--;
	v->live_bytes -= (int64_t)w->var;
	snapshot_after(c, before, after);
	snapshot_after(v, before, after);
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
	union kind_word t;
	kind = ml_kind_peak_of((enum ml_kind)kind);
	t.word = __sync_val_compare_and_swap(&kinds[kind].total.word, 0, 0);
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
	snapshot_before(into, now);
	snapshot_before(c, now);
	into->allocs += c->allocs;
	into->alloc_bytes += c->alloc_bytes;
	into->live_blocks += c->live_blocks;
	into->live_bytes += c->live_bytes;
	into->at_peak_blocks += c->at_peak_blocks;
	into->at_peak_bytes += c->at_peak_bytes;
}

void ml_counters_totals(uint32_t kind, struct ml_kind_totals *out)
{
	union kind_word t, pt;
	kind = ml_kind_peak_of((enum ml_kind)kind);
	t.word = __sync_val_compare_and_swap(&kinds[kind].total.word, 0, 0);
	pt.word = __sync_val_compare_and_swap(&kinds[kind].peak_time.word, 0, 0);
	ML_ASSERT(t.peak >= t.live);
	out->live_bytes = t.live;
	out->peak_bytes = t.peak;
	out->peak_tsc = pt.live == t.peak ? pt.peak : 0;
}

void ml_counters_reset_totals(void)
{
	memset(kinds, 0, sizeof(kinds));
}
