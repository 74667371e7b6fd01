/* core/track.c - the recording core's entry points (ml_track_*, core.h):
 * ties stack capture, the stack table, the live table and the counters
 * together.  Called by hook rooms with the guard held; also callable
 * directly (unit tests) after ml_core_init(). */
#include <errno.h>
#include "core/internal.h"

volatile int ml_core_active;
volatile uint32_t ml_pass_stop = ML_PASS_OFF | ML_PASS_UNREADY | ML_PASS_NO_CXX;

void ml_core_set_active(bool on)
{
	ml_core_active = on;
	if (on && ml_config.sample_bytes)
		__atomic_and_fetch(&ml_pass_stop, ~ML_PASS_OFF, __ATOMIC_SEQ_CST);
	else
		__atomic_or_fetch(&ml_pass_stop, ML_PASS_OFF, __ATOMIC_SEQ_CST);
}
volatile uint32_t ml_core_flags;

int ml_core_init(uint64_t self_addr)
{
	static int done;
	if (done)
		return 0;
	ml_config_load();
	ml_thread_mode_init();
	if (ml_config.sample_bytes)
		ml_sampling_init();
	ml_warn_init();
	ml_procinfo_init();
	ml_ownstack_init();
	ml_clock_start();
	ml_timeline_reset(ml_clock_coarse_ns());
	int rc = ml_stacktab_init();
	if (rc < 0)
		return rc;
	if (self_addr) {
		uint64_t lo, hi;
		ml_modules_range_of(self_addr, &lo, &hi);
		ml_stacktab_set_skip(lo, hi);
		ml_modules_set_runtime(self_addr);
	}
	ml_dump_init();
	done = 1;
	ml_core_set_active(true);
	return 0;
}

/* ---- the hot paths ----
 *
 * One allocation or free of the common case (exact mode, a thread state,
 * a counter, room in the live table) runs straight through inline code
 * with no call but the stack walk and the real allocator's; everything
 * else (no memory, a missed free, sampling, a second kind) is apart, out
 * of line, so that the hot functions stay small enough to keep their
 * values in registers. */
#define COLD __attribute__((noinline, cold))
#define INLINE static inline __attribute__((always_inline))

/* The core's entry points leave errno as they found it: the hooks call
 * them between the real call and their return.  errno's address is asked
 * of libc once per thread (a call each time otherwise). */
INLINE int *errno_at(void)
{
	int *e = ml_tl.errno_at;
	if (__builtin_expect(e == NULL, 0))
		ml_tl.errno_at = e = &errno;
	return e;
}

static COLD void no_room(void)
{
	ml_degrade("out of memory for the live table; allocations are no longer recorded");
}

/* A free of size under (stack, kind), counted on thread t, out of line. */
static COLD void count_free_on(struct ml_thread *t, uint32_t stack, uint32_t kind,
			       uint64_t size)
{
	struct ml_counter *c = t ? ml_thread_counter(t, stack, kind) : NULL;
	if (c)
		ml_counters_free(c, size);
	else
		no_room();
}

/* Adds (ptr, kind) -> (size, stack) to the live table and counts it under
 * counter c (stack's and kind's on t).  The allocator gave ptr, so an
 * entry still there for it is a block whose free we missed (an untracked
 * path): it ends now, counted before the new one. */
INLINE void add_block_in(struct ml_thread *t, struct ml_counter *c, uint64_t ptr,
			 uint64_t size, uint32_t stack, uint32_t kind, bool plain)
{
	struct ml_live_block old;
	if (__builtin_expect(ml_livetab_insert_in(ptr, kind, size, stack, &old, plain) < 0, 0)) {
		no_room();
		return;
	}
	if (__builtin_expect(old.addr != 0, 0))
		count_free_on(t, old.stack, old.kind, old.size);
	ml_counters_alloc_in(c, kind, size, plain);
}
/* The same in the event's mode, read once (the table and the total use
 * it). */
INLINE void add_block(struct ml_thread *t, struct ml_counter *c, uint64_t ptr, uint64_t size,
		      uint32_t stack, uint32_t kind)
{
	add_block_in(t, c, ptr, size, stack, kind, ml_tl_plain);
}

/* add_block without a counter for (stack, kind) (no memory for a new
 * one): under the lost stack's, counted without a stack as the report
 * says. */
static COLD void add_block_lost(struct ml_thread *t, uint64_t ptr, uint64_t size, uint32_t kind)
{
	struct ml_counter *c = ml_thread_counter(t, ML_NODE_LOST, kind);
	if (c)
		add_block(t, c, ptr, size, ML_NODE_LOST, kind);
	else
		no_room();
}

/* One exact-mode allocation on t under stack, in mode plain when known (a
 * constant), else in the event's mode. */
INLINE void record_stack_mode(struct ml_thread *t, uint64_t ptr, uint64_t size, uint32_t stack,
			      uint32_t kind, bool known, bool plain)
{
	struct ml_counter *c = ml_thread_counter(t, stack, kind);
	if (__builtin_expect(c != NULL, 1))
		add_block_in(t, c, ptr, size, stack, kind, known ? plain : ml_tl_plain);
	else
		add_block_lost(t, ptr, size, kind);
}
/* The same with the calling thread's stack, in the event's mode, read
 * after the capture. */
INLINE void record_block(struct ml_thread *t, uint64_t ptr, uint64_t size, uint32_t kind)
{
	uint32_t stack = ml_stacktab_here(&t->intern);
	record_stack_mode(t, ptr, size, stack, kind, false, false);
}

/* Counts the end of a block (stack, kind, size) on the calling thread:
 * its size, or, sampling, the weight it was counted with. */
static void count_free(uint32_t stack, uint32_t kind, uint64_t size)
{
	struct ml_thread *t = ml_thread_self();
	if (ml_config.sample_bytes) {
		struct ml_counter *c = t ? ml_thread_counter(t, stack, kind) : NULL;
		struct ml_counter *v = t ? ml_thread_counter(t, stack, kind + ML_VAR_KIND) : NULL;
		struct ml_sample_weight w = ml_sampling_weight(size);
		if (c && v)
			ml_counters_free_sampled(c, v, &w);
		else
			no_room();
		return;
	}
	count_free_on(t, stack, kind, size);
}

/* A sampled block: in the live table (its own size), counted with its
 * weight, its variance beside. */
static void add_sampled(struct ml_thread *t, uint64_t ptr, uint64_t size, uint32_t stack,
			uint32_t kind)
{
	struct ml_live_block old;
	struct ml_counter *c = ml_thread_counter(t, stack, kind);
	struct ml_counter *v = ml_thread_counter(t, stack, kind + ML_VAR_KIND);
	if (!c || !v || ml_livetab_insert(ptr, kind, size, stack, &old) < 0) {
		no_room();
		return;
	}
	ml_sampling_filter_add(ptr);
	if (__builtin_expect(old.addr != 0, 0)) {
		ml_sampling_filter_remove(ptr);	/* that one's entry went */
		count_free(old.stack, old.kind, old.size);
	}
	struct ml_sample_weight w = ml_sampling_weight(size);
	ml_counters_alloc_sampled(c, v, &w);
}

/* What the side stack runs: one allocation event. */
struct event {
	uint64_t ptr, size;
	uint32_t kind, also;		/* also: a second kind, or ML_KIND_COUNT */
	const struct ml_track_held *held;	/* a move (ml_track_moved) */
};

/* The common event on the side stack (ml_track_alloc). */
static long record_alloc(void *arg)
{
	const struct event *e = arg;
	record_block(ml_tl_thread, e->ptr, e->size, e->kind);
	return 0;
}

/* The same for the heap, its kind's look-ups folded, the arguments in
 * registers (ml_side_call3). */
static long record_heap(uint64_t ptr, uint64_t size, void *t)
{
	record_block(t, ptr, size, ML_KIND_HEAP);
	return 0;
}

/* ml_track_heap_stack's other cases: not the owner of the plain mode (no
 * event begun yet); the owner (its plain event begun, nothing done)
 * without the counter at hand or the common insert; the end of an
 * owner's allocation whose timeline note (due) or peak time is to be
 * kept (the heap's total now live, its peak before and after). */
static __attribute__((noinline)) long heap_stack_any(uint64_t ptr, uint64_t size,
						     struct ml_thread *t, uint32_t stack,
						     int saved_errno)
{
	ml_event_begin();
	record_stack_mode(t, ptr, size, stack, ML_KIND_HEAP, false, false);
	ml_event_end();
	*t->errno_at = saved_errno;
	return 0;
}
static __attribute__((noinline)) long heap_stack_rest(uint64_t ptr, uint64_t size,
						      struct ml_thread *t, uint32_t stack,
						      int saved_errno)
{
	/* record_stack_mode, less the inline insert that just failed (or
	 * was not tried: no counter at hand) */
	struct ml_counter *c = ml_thread_counter(t, stack, ML_KIND_HEAP);
	struct ml_live_block old;
	if (__builtin_expect(c == NULL, 0))
		add_block_lost(t, ptr, size, ML_KIND_HEAP);
	else if (__builtin_expect(ml_livetab_insert_slow(ptr, ML_KIND_HEAP, size, stack, &old) < 0, 0))
		no_room();
	else {
		if (__builtin_expect(old.addr != 0, 0))
			count_free_on(t, old.stack, old.kind, old.size);
		ml_counters_alloc_in(c, ML_KIND_HEAP, size, true);
	}
	ml_event_end_plain(t);
	*t->errno_at = saved_errno;
	return 0;
}
static __attribute__((noinline)) long heap_stack_end(struct ml_thread *t, uint64_t live,
						     uint64_t before, uint64_t after, bool due,
						     int saved_errno)
{
	uint32_t kind = ml_kind_peak_of(ML_KIND_HEAP);
	if (due)
		ml_timeline_slow(kind, live);
	if (after > before)
		ml_counters_note_peak_time(kind, after);	/* after the timeline's clock */
	ml_event_end_plain(t);
	*t->errno_at = saved_errno;
	return 0;
}

/* The common allocation's bookkeeping, on the side stack, its stack id
 * found (ml_unwind_heap_event, which kept errno: saved_errno): the event
 * around it, errno restored.  The common case (the plain mode's owner,
 * the counter in the cache, the common insert, no timeline note or peak
 * time due) makes no call: the other cases are tail calls that take over
 * where it stopped, so it needs no frame. */
long ml_track_heap_stack(uint64_t ptr, uint64_t size, struct ml_thread *t, uint32_t stack,
			 int saved_errno)
{
	if (__builtin_expect(!ml_event_begin_plain(t), 0))
		return heap_stack_any(ptr, size, t, stack, saved_errno);
	struct ml_counter *c = ml_thread_counter_cached(t, stack, ML_KIND_HEAP);
	if (__builtin_expect(c == NULL, 0) ||
	    __builtin_expect(!ml_livetab_insert_quick(ptr, ML_KIND_HEAP, size, stack, true), 0))
		return heap_stack_rest(ptr, size, t, stack, saved_errno);
	/* ml_counters_alloc_in in plain mode, the timeline's note and the
	 * peak's time last */
	uint32_t kind = ml_kind_peak_of(ML_KIND_HEAP);
	uint64_t before = ml_kinds[kind].total.peak, live = ml_kinds[kind].total.live + size;
	uint64_t after = live > before ? live : before;
	ml_kinds[kind].total.live = live;
	ml_kinds[kind].total.peak = after;
	ml_counter_add(c, size, before, after);
	bool due = ml_timeline_due(kind, live);
	if (__builtin_expect(due || after > before, 0))
		return heap_stack_end(t, live, before, after, due, saved_errno);
	ml_event_end_plain(t);
	*t->errno_at = saved_errno;
	return 0;
}

/* Any allocation event: sampled, or of two kinds. */
static long record_alloc_any(void *arg)
{
	const struct event *e = arg;
	struct ml_thread *t = ml_thread_self();
	if (!t) {
		no_room();
		return 0;
	}
	uint32_t stack = ml_stacktab_here(&t->intern);
	if (ml_config.sample_bytes) {
		add_sampled(t, e->ptr, e->size, stack, e->kind);
		if (e->also != ML_KIND_COUNT)
			add_sampled(t, e->ptr, e->size, stack, e->also);
		return 0;
	}
	for (uint32_t k = 0; k < 2; k++) {
		uint32_t kind = k ? e->also : e->kind;
		if (kind == ML_KIND_COUNT)
			break;
		struct ml_counter *c = ml_thread_counter(t, stack, kind);
		if (c)
			add_block(t, c, e->ptr, e->size, stack, kind);
		else
			add_block_lost(t, e->ptr, e->size, kind);
	}
	return 0;
}

/* The kinds that the exact totals of a sampled run count: CPU memory the
 * program asked for (the report's cpu kind), as an exact run's totals.
 * Arenas hold Python objects already counted, GPU memory has totals of
 * its own, PyTorch's free events are no allocations. */
static inline bool totalled(enum ml_kind kind)
{
	return kind == ML_KIND_HEAP || kind == ML_KIND_PYTHON;
}

/* Sampling: whether this allocation is a sample point.  Every allocation
 * of the totalled kinds is counted (exact totals); the rest costs a
 * subtraction. */
static bool sampled(size_t size, enum ml_kind kind)
{
	struct ml_thread *t = ml_thread_self();
	if (!t)
		return false;
	if (totalled(kind)) {
		t->sample.allocs++;
		t->sample.bytes += size;
	}
	if ((int64_t)size < t->sample.left) {
		t->sample.left -= (int64_t)size;
		return false;
	}
	t->sample.left = ml_sampling_gap(t);	/* a Poisson process: no memory */
	return true;
}

/* ml_track_alloc and _also for all but the common case: sampling, or a second
 * kind. */
static COLD void track_alloc_any(void *ptr, size_t size, enum ml_kind kind, enum ml_kind also)
{
	if (ml_config.sample_bytes && !sampled(size, kind))
		return;
	struct event e = { (uint64_t)ptr, size, kind, also, NULL };
	ml_event_begin();
	ml_thread_on_side_stack(record_alloc_any, &e);
	ml_event_end();
}

/* ml_track_alloc's other cases: sampling, another kind, no state yet, no
 * mark of the hook, no side stack or on it already. */
static __attribute__((noinline)) void track_alloc_rest(void *ptr, size_t size, enum ml_kind kind)
{
	int *e = errno_at(), saved = *e;
	if (__builtin_expect(ml_config.sample_bytes != 0, 0)) {
		track_alloc_any(ptr, size, kind, ML_KIND_COUNT);
		*e = saved;
		return;
	}
	ml_event_begin();
	struct ml_thread *t = ml_tl_thread;
	if (__builtin_expect(t == NULL, 0)) {
		no_room();
	} else if (__builtin_expect(kind == ML_KIND_HEAP, 1)) {
		ml_thread_side_run3(t, record_heap, (uint64_t)ptr, size, t);
	} else {
		struct event ev = { (uint64_t)ptr, size, kind, ML_KIND_COUNT, NULL };
		ml_thread_side_run(t, record_alloc, &ev);
	}
	ml_event_end();
	*e = saved;
}

/* ml_track_alloc for a ptr that is not NULL; kind a constant where it can
 * be; marked: the caller set the hook's mark (ML_UNWIND_MARK) for sure. */
INLINE void track_alloc(void *ptr, size_t size, enum ml_kind kind, bool marked)
{
	ML_ASSERT(ml_guard_held() && ptr);
	if (ml_degraded)
		return;
	struct ml_thread *t = ml_tl_thread;
	if (__builtin_expect(ml_config.sample_bytes != 0, 0)) {
		/* Sampling: most allocations are not a sample point; they
		 * cost the countdown (sampled() for the rest, and for the
		 * kinds the totals leave out). */
		if (__builtin_expect(totalled(kind), 1) &&
		    __builtin_expect(ml_track_sample_skip(size), 1))
			return;
		ml_track_count_thread(size);
	} else {
		ml_track_count_thread(size);
		if (__builtin_expect(kind == ML_KIND_HEAP && t != NULL &&
				     (marked || ml_tl_mark.sp != 0) && !ml_thread_side_here(t), 1)) {
			/* The common case: exact mode, the heap, a hook's
			 * mark, a state with a side stack, not on it: straight
			 * onto it (a tail call). */
			ml_side_call3(ml_unwind_heap_event, (uint64_t)ptr, size, t, t->side_hi);
			return;
		}
	}
	track_alloc_rest(ptr, size, kind);
}

void ml_track_alloc(void *ptr, size_t size, enum ml_kind kind)
{
	if (ptr)
		track_alloc(ptr, size, kind, false);
}

void ml_track_alloc_heap(void *ptr, size_t size)
{
	ML_ASSERT(ml_tl_mark.sp != 0);
	track_alloc(ptr, size, ML_KIND_HEAP, true);
}

void ml_track_alloc_also(void *ptr, size_t size, enum ml_kind kind, enum ml_kind also)
{
	ML_ASSERT(ml_guard_held() && kind != also);
	if (!ptr || ml_degraded)
		return;
	ml_track_count_thread(size);
	int *e = errno_at(), saved = *e;
	track_alloc_any(ptr, size, kind, also);
	*e = saved;
}

/* Takes (ptr, kind) out of the live table into *b; false if unknown.
 * Sampling: most blocks are not in it, and the filter says so at once. */
INLINE bool take_block(void *ptr, uint32_t kind, struct ml_live_block *b)
{
	if (__builtin_expect(!ml_config.sample_bytes, 1))
		return ptr && ml_livetab_remove((uint64_t)ptr, kind, b);
	if (!ptr || !ml_sampling_maybe((uint64_t)ptr) || !ml_livetab_remove((uint64_t)ptr, kind, b))
		return false;
	ml_sampling_filter_remove((uint64_t)ptr);
	return true;
}

/* ml_track_free for all but exact mode's common case (sampling, no ptr). */
static COLD size_t track_free_any(void *ptr, enum ml_kind kind)
{
	struct ml_live_block b;
	ml_event_begin();
	bool known = take_block(ptr, kind, &b);
	if (known)
		count_free(b.stack, b.kind, b.size);
	ml_event_end();
	return known ? b.size : 0;
}

/* Exact mode's free of a known block: the live table, then this thread's
 * counter of the block's stack.  kind is a constant where it can be. */
INLINE size_t free_block(struct ml_thread *t, void *ptr, uint32_t kind)
{
	size_t size = 0;
	/* t: the state as read by the caller, kept in a register
	 * (ml_event_begin's read is this one: nothing comes between; it makes
	 * a missing one, so t is read again only then). */
	ml_event_begin();
	if (__builtin_expect(t == NULL, 0))
		t = ml_tl_thread;
	bool plain = ml_tl_plain;	/* the event's mode, read once */
	struct ml_live_val v = ml_livetab_take_in((uint64_t)ptr, kind, plain);
	if (__builtin_expect(v.found != 0, 1)) {
		struct ml_counter *c;
		if (__builtin_expect(t != NULL, 1) &&
		    __builtin_expect((c = ml_thread_counter(t, v.stack, kind)) != NULL, 1))
			ml_counters_free_in(c, kind, v.size, plain);
		else
			no_room();
		size = v.size;
	}
	ml_event_end();
	return size;
}

/* ml_track_free_heap's whole path: any case, from the start. */
static __attribute__((noinline)) size_t free_heap_any(void *ptr)
{
	struct ml_thread *t = ml_tl_thread;
	int *e = __builtin_expect(t != NULL, 1) ? t->errno_at : errno_at(), saved = *e;
	size_t size;
	if (__builtin_expect(ml_config.sample_bytes != 0, 0))
		size = track_free_any(ptr, ML_KIND_HEAP);
	else
		size = free_block(t, ptr, ML_KIND_HEAP);
	*e = saved;
	return size;
}

/* The rest of an owner's free (in its plain event, t the caller's state)
 * where the quick path stopped: taken, the block (size, stack) it took out
 * of the table, its counter not at hand; else nothing taken yet. */
static __attribute__((noinline)) size_t free_heap_rest(struct ml_thread *t, void *ptr,
						       uint64_t size, uint32_t stack, bool taken)
{
	int *e = t->errno_at, saved = *e;
	if (!taken) {
		struct ml_live_val v = ml_livetab_take_slow((uint64_t)ptr, ML_KIND_HEAP);
		taken = v.found != 0;	/* a block of 0 bytes is a block too */
		size = v.size;
		stack = v.stack;
	}
	if (taken) {
		struct ml_counter *c = ml_thread_counter(t, stack, ML_KIND_HEAP);
		if (c)
			ml_counters_free_in(c, ML_KIND_HEAP, size, true);
		else
			no_room();
	}
	ml_event_end();
	*e = saved;
	return size;
}

/* The end of an owner's free whose timeline note is due (the heap's total
 * now live). */
static __attribute__((noinline)) size_t free_heap_timeline(struct ml_thread *t, uint64_t size,
							   uint64_t live)
{
	int *e = t->errno_at, saved = *e;
	ml_timeline_slow(ml_kind_peak_of(ML_KIND_HEAP), live);
	ml_event_end();
	*e = saved;
	return size;
}

/* The common free: exact mode, the calling thread owns the plain mode, the
 * block in its first bucket and its counter in the cache.  No call (the
 * other cases are tail calls that take over where it stopped), so errno
 * stays as it is without being kept, and the function needs no frame. */
size_t ml_track_free_heap(void *ptr)
{
	ML_ASSERT(ml_guard_held() && ptr);
	struct ml_thread *t = ml_tl_thread;
	if (__builtin_expect(ml_config.sample_bytes != 0, 0)) {
		/* Sampling: the filter says at once that most blocks are not
		 * in the live table (no event, errno untouched). */
		if (__builtin_expect(!ml_sampling_maybe((uint64_t)ptr), 1))
			return 0;
		return free_heap_any(ptr);
	}
	if (__builtin_expect(t == NULL, 0) || __builtin_expect(!ml_event_begin_plain(t), 0))
		return free_heap_any(ptr);
	struct ml_live_val v;
	if (__builtin_expect(!ml_livetab_take_quick((uint64_t)ptr, ML_KIND_HEAP, true, &v), 0))
		return free_heap_rest(t, ptr, 0, 0, false);
	struct ml_counter *c = ml_thread_counter_cached(t, v.stack, ML_KIND_HEAP);
	if (__builtin_expect(c == NULL, 0))
		return free_heap_rest(t, ptr, v.size, v.stack, true);
	/* ml_counters_free_in, with the timeline's note last */
	uint64_t live, peak = ml_counters_total_down(ML_KIND_HEAP, v.size, true, &live);
	ml_counters_before(c, peak);
	c->live_blocks--;
	c->live_bytes -= (int64_t)v.size;
	if (__builtin_expect(ml_timeline_due(ml_kind_peak_of(ML_KIND_HEAP), live), 0))
		return free_heap_timeline(t, v.size, live);
	ml_event_end_plain(t);
	return v.size;
}

size_t ml_track_free(void *ptr, enum ml_kind kind)
{
	ML_ASSERT(ml_guard_held());
	if (__builtin_expect(ml_config.sample_bytes != 0, 0) &&
	    (!ptr || !ml_sampling_maybe((uint64_t)ptr)))
		return 0;	/* not a sampled block (take_block's first test) */
	int *e = errno_at(), saved = *e;
	size_t size;
	if (__builtin_expect(ml_config.sample_bytes || !ptr, 0))
		size = track_free_any(ptr, kind);
	else if (__builtin_expect(kind == ML_KIND_HEAP, 1))
		size = free_block(ml_tl_thread, ptr, ML_KIND_HEAP);	/* its look-ups folded */
	else
		size = free_block(ml_tl_thread, ptr, kind);
	*e = saved;
	return size;
}

/* ml_track_detach's whole path: any case. */
static __attribute__((noinline)) bool detach_any(void *ptr, enum ml_kind kind,
						 struct ml_track_held *held)
{
	struct ml_live_block b;
	bool known;
	int *e = errno_at(), saved = *e;
	ml_event_begin();
	if (__builtin_expect(!ml_config.sample_bytes && ptr != NULL, 1)) {
		struct ml_live_val v = ml_livetab_take((uint64_t)ptr, kind);
		b = (struct ml_live_block){ (uint64_t)ptr, v.size, v.stack, kind };
		known = v.found;
	} else {
		known = take_block(ptr, kind, &b);
	}
	ml_event_end();
	*e = saved;
	if (!known) {
		held->addr = 0;
		return false;
	}
	held->addr = b.addr;
	held->size = b.size;
	held->stack = b.stack;
	held->kind = b.kind;
	return true;
}

/* The common case as in ml_track_free_heap (exact mode, the plain mode's
 * owner, the block in its first bucket): no call, errno untouched; else,
 * after an empty event if it began one, the whole path. */
bool ml_track_detach(void *ptr, enum ml_kind kind, struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	struct ml_thread *t = ml_tl_thread;
	struct ml_live_val v;
	if (__builtin_expect(ml_config.sample_bytes != 0, 0)) {
		if (!ptr || !ml_sampling_maybe((uint64_t)ptr)) {
			held->addr = 0;	/* not a sampled block */
			return false;
		}
		return detach_any(ptr, kind, held);
	}
	if (__builtin_expect(t != NULL && ptr != NULL, 1) &&
	    __builtin_expect(ml_event_begin_plain(t), 1)) {
		bool taken = ml_livetab_take_quick((uint64_t)ptr, kind, true, &v);
		ml_event_end_plain(t);
		if (__builtin_expect(taken, 1)) {
			*held = (struct ml_track_held){ (uint64_t)ptr, v.size, v.stack, kind };
			return true;
		}
	}
	return detach_any(ptr, kind, held);
}

void ml_track_reattach(const struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	struct ml_live_block old;
	if (!held->addr)
		return;
	/* Still counted as live: only the table entry comes back. */
	int *e = errno_at(), saved = *e;
	ml_event_begin();
	if (ml_livetab_insert(held->addr, held->kind, held->size, held->stack, &old) < 0)
		no_room();
	else if (ml_config.sample_bytes)
		ml_sampling_filter_add(held->addr);
	ml_event_end();
	*e = saved;
}

void ml_track_release(const struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	if (!held->addr)
		return;
	int *e = errno_at(), saved = *e;
	ml_event_begin();
	count_free(held->stack, held->kind, held->size);
	ml_event_end();
	*e = saved;
}

/* A move whose counters or table entry are not the common case. */
static COLD void move_rest(struct ml_thread *t, const struct event *e, uint32_t stack, int rc,
			   const struct ml_live_block *old)
{
	const struct ml_track_held *held = e->held;
	if (rc < 0) {
		no_room();
		count_free(held->stack, held->kind, held->size);
		return;
	}
	if (old->addr != 0)
		count_free(old->stack, old->kind, old->size);
	/* Both counters of this thread, found before either changes (the
	 * second lookup may move "last", never a counter). */
	struct ml_counter *from = ml_thread_counter(t, held->stack, held->kind);
	struct ml_counter *to = ml_thread_counter(t, stack, e->kind);
	if (from && to)
		ml_counters_move(from, held->size, to, e->size);
	else
		no_room();
}

/* A move of the heap (the other kinds: move_rest) on the side stack, in
 * mode plain when known (a constant), else the event's, read after the
 * capture. */
INLINE long record_move_mode(void *arg, bool known, bool plain)
{
	const struct event *e = arg;
	const struct ml_track_held *held = e->held;
	struct ml_thread *t = ml_tl_thread;
	struct ml_live_block old;
	uint32_t stack = ml_stacktab_here(&t->intern);
	if (!known)
		plain = ml_tl_plain;	/* the event's mode, read once */
	int rc = ml_livetab_insert_in(e->ptr, e->kind, e->size, stack, &old, plain);
	if (__builtin_expect(e->kind != ML_KIND_HEAP, 0)) {
		move_rest(t, e, stack, rc, &old);
		return 0;
	}
	struct ml_counter *from, *to;
	/* The common case: a new entry, both counters at hand (the cache
	 * holds a counter as long as it lives: looking one up never moves
	 * another). */
	if (__builtin_expect(rc == 0 && old.addr == 0, 1) &&
	    __builtin_expect((from = ml_thread_counter(t, held->stack, ML_KIND_HEAP)) != NULL, 1) &&
	    __builtin_expect((to = ml_thread_counter(t, stack, ML_KIND_HEAP)) != NULL, 1)) {
		ml_counters_move_in(from, held->size, to, ML_KIND_HEAP, e->size, plain);
		return 0;
	}
	move_rest(t, e, stack, rc, &old);
	return 0;
}
/* In the event's mode; the plain mode's owner's (a constant). */
static long record_move(void *arg)
{
	return record_move_mode(arg, false, false);
}
static long record_move_plain(void *arg)
{
	return record_move_mode(arg, true, true);
}

void ml_track_moved(const struct ml_track_held *held, void *ptr, size_t size,
		    enum ml_kind kind)
{
	ML_ASSERT(ml_guard_held());
	ML_ASSERT(!held->addr || held->kind == (uint32_t)kind);
	if (!held->addr) {
		ml_track_alloc(ptr, size, kind);
		return;
	}
	if (ml_degraded || ml_config.sample_bytes) {
		/* Sampling: the old block ends, the new one is an allocation
		 * that may or may not be a sample point. */
		ml_track_release(held);
		if (!ml_degraded)
			ml_track_alloc(ptr, size, kind);
		return;
	}
	/* An allocation of size for the open regions, as for ml_track_alloc
	 * (the lines view counts it so too). */
	ml_track_count_thread(size);
	struct event ev = { (uint64_t)ptr, size, kind, ML_KIND_COUNT, held };
	int *e = errno_at(), saved = *e;
	struct ml_thread *t = ml_tl_thread;
	if (__builtin_expect(t != NULL, 1) && __builtin_expect(ml_event_begin_plain(t), 1)) {
		ml_thread_side_run(t, record_move_plain, &ev);
		ml_event_end_plain(t);
		*e = saved;
		return;
	}
	ml_event_begin();
	if (__builtin_expect(ml_tl_thread != NULL, 1))
		ml_thread_side_run(ml_tl_thread, record_move, &ev);
	else
		no_room();
	ml_event_end();
	*e = saved;
}

void ml_core_after_fork(void)
{
	/* Other threads vanished at the fork, maybe holding locks: reset them. */
	ml_arena_after_fork();
	ml_modules_after_fork();
	ml_unwind_after_fork();
	ml_dump_after_fork();
	ml_stacktab_after_fork();
	ml_notes_after_fork();
	ml_warn_after_fork();
	ml_procinfo_after_fork();
	ml_livetab_reset();
	ml_sampling_after_fork();
	ml_counters_reset_totals();
	ml_thread_after_fork();
	ml_clock_start();
	ml_timeline_reset(ml_clock_coarse_ns());
	ml_core_flags |= ML_META_FORKED;
}
