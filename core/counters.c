/* core/counters.c - per (stack, kind) counters and the exact peak.
 *
 * Each kind keeps one 16-byte word {live, peak} updated with cmpxchg16b.
 * The peak VALUE is the epoch of DESIGN.md's lazy snapshot: it strictly
 * increases each time it moves.  Every event on a counter runs under that
 * counter's spinlock with the kind's CAS inside the lock, so a counter's
 * events are totally ordered and its at-peak snapshot is exact under any
 * interleaving of threads.  No global lock. */
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

/* Adds delta to the kind's live total; returns the peak before and after. */
static uint64_t apply_total(uint32_t kind, int64_t delta, uint64_t *peak_before)
{
	union kind_word old, new;
	old.word = kinds[kind].total.word;	/* may tear; the CAS corrects it */
	for (;;) {
		new.live = old.live + (uint64_t)delta;
		new.peak = new.live > old.peak ? new.live : old.peak;
		unsigned __int128 seen = __sync_val_compare_and_swap(&kinds[kind].total.word,
								      old.word, new.word);
		if (seen == old.word)
			break;
		old.word = seen;
	}
	*peak_before = old.peak;
	/* old is what the CAS replaced: the kind's total never goes below 0. */
	ML_ASSERT(delta >= 0 || old.live >= (uint64_t)-delta);
	ML_ASSERT(new.peak >= new.live && new.peak >= old.peak);
	/* The timeline samples the clock per thread (timeline.c); the peak's
	 * own time is taken precisely, and only when it moves. */
	ml_timeline_event(kind, new.live);
	if (new.peak > old.peak) {
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

/* Before c changes: if the kind reached a peak since c last looked, c's
 * live bytes now are its bytes at that peak. */
static void snapshot_before(struct ml_counter *c, uint64_t peak_before)
{
	if (!c->touched || c->touched_peak < peak_before) {
		c->at_peak_bytes = c->live_bytes;
		c->at_peak_blocks = c->live_blocks;
		c->touched_peak = peak_before;
		c->touched = true;
	}
}

/* After c changed: if this very event set a new peak, c's live is at it. */
static void snapshot_after(struct ml_counter *c, uint64_t peak_before, uint64_t peak_after)
{
	if (peak_after > peak_before) {
		c->at_peak_bytes = c->live_bytes;
		c->at_peak_blocks = c->live_blocks;
		c->touched_peak = peak_after;
	}
}

void ml_counters_alloc(struct ml_counter *c, uint64_t size)
{
	uint64_t before, after;
	ml_spin_lock(&c->lock);
	after = apply_total(c->kind, (int64_t)size, &before);
	snapshot_before(c, before);
	c->allocs++;
	c->alloc_bytes += size;
	c->live_blocks++;
	c->live_bytes += size;
	snapshot_after(c, before, after);
	ml_spin_unlock(&c->lock);
}

void ml_counters_free(struct ml_counter *c, uint64_t size)
{
	uint64_t before, after;
	ml_spin_lock(&c->lock);
	ML_ASSERT(c->live_blocks > 0 && c->live_bytes >= size);	/* no underflow */
	after = apply_total(c->kind, -(int64_t)size, &before);
	snapshot_before(c, before);
	c->frees++;
	c->freed_bytes += size;
	c->live_blocks--;
	c->live_bytes -= size;
	snapshot_after(c, before, after);
	ml_spin_unlock(&c->lock);
}

void ml_counters_move(struct ml_counter *from, uint64_t old_size,
		      struct ml_counter *to, uint64_t new_size)
{
	uint64_t before, after;
	/* Lock in address order so two moves in opposite directions cannot
	 * deadlock. */
	struct ml_counter *first = from < to ? from : to;
	struct ml_counter *second = from < to ? to : from;
	ml_spin_lock(&first->lock);
	if (second != first)
		ml_spin_lock(&second->lock);
	ML_ASSERT(from->kind == to->kind);
	ML_ASSERT(from->live_blocks > 0 && from->live_bytes >= old_size);
	after = apply_total(to->kind, (int64_t)new_size - (int64_t)old_size, &before);
	snapshot_before(from, before);
	if (to != from)
		snapshot_before(to, before);
	from->frees++;
	from->freed_bytes += old_size;
	from->live_blocks--;
	from->live_bytes -= old_size;
	to->allocs++;
	to->alloc_bytes += new_size;
	to->live_blocks++;
	to->live_bytes += new_size;
	snapshot_after(from, before, after);
	if (to != from)
		snapshot_after(to, before, after);
	if (second != first)
		ml_spin_unlock(&second->lock);
	ml_spin_unlock(&first->lock);
}

void ml_counters_at_peak(const struct ml_counter *c, uint64_t *bytes, uint64_t *blocks)
{
	union kind_word t;
	t.word = __sync_val_compare_and_swap(&kinds[c->kind].total.word, 0, 0);
	if (!c->touched || c->touched_peak < t.peak) {
		*bytes = c->live_bytes;
		*blocks = c->live_blocks;
	} else {
		*bytes = c->at_peak_bytes;
		*blocks = c->at_peak_blocks;
	}
	ML_ASSERT(*bytes <= t.peak);	/* a stack holds at most the kind's peak */
}

void ml_counters_totals(uint32_t kind, struct ml_kind_totals *out)
{
	union kind_word t, pt;
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

void ml_counter_reset(struct ml_counter *c)
{
	uint32_t stack_id = c->stack_id, kind = c->kind;
	memset(c, 0, sizeof(*c));
	c->stack_id = stack_id;
	c->kind = kind;
}

uint64_t ml_core_live_bytes(enum ml_kind kind)
{
	if ((unsigned)kind >= ML_KIND_COUNT)
		return 0;
	/* The 8-byte half of the word is read whole (aligned), never torn. */
	return __atomic_load_n(&kinds[kind].total.live, __ATOMIC_RELAXED);
}
