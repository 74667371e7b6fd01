/* core/track.c - the recording core's entry points (ml_track_*, core.h):
 * ties stack capture, the stack table, the live table and the counters
 * together.  Called by hook rooms with the guard held; also callable
 * directly (unit tests) after ml_core_init(). */
#include "core/internal.h"

volatile int ml_core_active;
volatile uint32_t ml_core_flags;
__thread uint64_t ml_tl_alloc_bytes __attribute__((tls_model("initial-exec")));
__thread uint64_t ml_tl_allocs __attribute__((tls_model("initial-exec")));

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
	ml_core_active = 1;
	return 0;
}

static void no_room(void)
{
	ml_degrade("out of memory for the live table; allocations are no longer recorded");
}

/* The thread's counter for (*stack, kind); without room for a new one,
 * the lost stack's (counted without a stack, as the report says). */
static struct ml_counter *counter_or_lost(struct ml_thread *t, uint32_t *stack, uint32_t kind)
{
	struct ml_counter *c = ml_thread_counter(t, *stack, kind);
	if (__builtin_expect(c != NULL, 1) || *stack == ML_NODE_LOST)
		return c;
	*stack = ML_NODE_LOST;
	return ml_thread_counter(t, ML_NODE_LOST, kind);
}

/* Adds (ptr, kind) -> (size, stack) to the live table and counts it. */
static inline __attribute__((always_inline)) void add_block(struct ml_thread *t, uint64_t ptr, uint64_t size, uint32_t stack,
		      uint32_t kind)
{
	struct ml_live_block old;
	struct ml_counter *c = counter_or_lost(t, &stack, kind);
	if (!c || ml_livetab_insert(ptr, kind, size, stack, &old) < 0) {
		no_room();
		return;
	}
	if (__builtin_expect(old.addr != 0, 0)) {
		/* We missed its free (an untracked path): close it now. */
		struct ml_counter *oc = ml_thread_counter(t, old.stack, old.kind);
		if (oc)
			ml_counters_free(oc, old.size);
	}
	ml_counters_alloc(c, size);
}

/* Counts the end of a block (stack, kind, size) on the calling thread:
 * its size, or, sampling, the weight it was counted with. */
static void count_free(uint32_t stack, uint32_t kind, uint64_t size)
{
	struct ml_thread *t = ml_thread_self();
	struct ml_counter *c = t ? ml_thread_counter(t, stack, kind) : NULL;
	if (ml_config.sample_bytes) {
		struct ml_counter *v = t ? ml_thread_counter(t, stack, kind + ML_VAR_KIND) : NULL;
		struct ml_sample_weight w = ml_sampling_weight(size);
		if (c && v)
			ml_counters_free_sampled(c, v, &w);
		else
			no_room();
		return;
	}
	if (c)
		ml_counters_free(c, size);
	else
		no_room();
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

static long record_alloc(void *arg)
{
	const struct event *e = arg;
	struct ml_thread *t = ml_thread_self();
	if (!t) {
		no_room();
		return 0;
	}
	uint32_t stack = ml_stacktab_here(&t->intern);
	if (__builtin_expect(ml_config.sample_bytes != 0, 0)) {
		add_sampled(t, e->ptr, e->size, stack, e->kind);
		if (e->also != ML_KIND_COUNT)
			add_sampled(t, e->ptr, e->size, stack, e->also);
		return 0;
	}
	add_block(t, e->ptr, e->size, stack, e->kind);	/* inline: the common case */
	if (e->also != ML_KIND_COUNT)
		add_block(t, e->ptr, e->size, stack, e->also);
	return 0;
}

/* Sampling: whether this allocation is a sample point.  Every allocation
 * is counted (exact totals); the rest costs a subtraction. */
static bool sampled(size_t size)
{
	struct ml_thread *t = ml_thread_self();
	if (!t)
		return false;
	t->all_allocs++;
	t->all_bytes += size;
	if ((int64_t)size < t->sample_left) {
		t->sample_left -= (int64_t)size;
		return false;
	}
	t->sample_left = ml_sampling_gap(t);	/* a Poisson process: no memory */
	return true;
}

void ml_track_alloc(void *ptr, size_t size, enum ml_kind kind)
{
	ML_ASSERT(ml_guard_held());
	if (!ptr || ml_degraded)
		return;
	ml_track_count_thread(size);
	if (ml_config.sample_bytes && !sampled(size))
		return;
	struct event e = { (uint64_t)ptr, size, kind, ML_KIND_COUNT, NULL };
	ml_event_begin();
	ml_thread_on_side_stack(record_alloc, &e);
	ml_event_end();
}

void ml_track_alloc_also(void *ptr, size_t size, enum ml_kind kind, enum ml_kind also)
{
	ML_ASSERT(ml_guard_held() && kind != also);
	if (!ptr || ml_degraded)
		return;
	ml_track_count_thread(size);
	if (ml_config.sample_bytes && !sampled(size))
		return;
	struct event e = { (uint64_t)ptr, size, kind, also, NULL };
	ml_event_begin();
	ml_thread_on_side_stack(record_alloc, &e);
	ml_event_end();
}

/* Takes (ptr, kind) out of the live table into *b; false if unknown.
 * Sampling: most blocks are not in it, and the filter says so at once. */
static bool take_block(void *ptr, uint32_t kind, struct ml_live_block *b)
{
	if (!ptr)
		return false;
	if (ml_config.sample_bytes) {
		if (!ml_sampling_maybe((uint64_t)ptr) ||
		    !ml_livetab_remove((uint64_t)ptr, kind, b))
			return false;
		ml_sampling_filter_remove((uint64_t)ptr);
		return true;
	}
	return ml_livetab_remove((uint64_t)ptr, kind, b);
}

size_t ml_track_free(void *ptr, enum ml_kind kind)
{
	ML_ASSERT(ml_guard_held());
	struct ml_live_block b;
	ml_event_begin();
	bool known;
	if (__builtin_expect(!ml_config.sample_bytes && ptr, 1)) {
		/* Exact mode, inline: the live table, then the counter. */
		known = ml_livetab_remove((uint64_t)ptr, kind, &b);
		if (known) {
			struct ml_thread *t = ml_thread_self();
			struct ml_counter *c = t ? ml_thread_counter(t, b.stack, b.kind) : NULL;
			if (__builtin_expect(c != NULL, 1))
				ml_counters_free(c, b.size);
			else
				no_room();
		}
	} else {
		known = take_block(ptr, kind, &b);
		if (known)
			count_free(b.stack, b.kind, b.size);
	}
	ml_event_end();
	return known ? b.size : 0;
}

bool ml_track_detach(void *ptr, enum ml_kind kind, struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	struct ml_live_block b;
	held->addr = 0;
	ml_event_begin();
	bool known = take_block(ptr, kind, &b);
	ml_event_end();
	if (!known)
		return false;
	held->addr = b.addr;
	held->size = b.size;
	held->stack = b.stack;
	held->kind = b.kind;
	return true;
}

void ml_track_reattach(const struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	struct ml_live_block old;
	if (!held->addr)
		return;
	/* Still counted as live: only the table entry comes back. */
	ml_event_begin();
	if (ml_livetab_insert(held->addr, held->kind, held->size, held->stack, &old) < 0)
		no_room();
	else if (ml_config.sample_bytes)
		ml_sampling_filter_add(held->addr);
	ml_event_end();
}

void ml_track_release(const struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	if (!held->addr)
		return;
	ml_event_begin();
	count_free(held->stack, held->kind, held->size);
	ml_event_end();
}

static long record_move(void *arg)
{
	const struct event *e = arg;
	const struct ml_track_held *held = e->held;
	struct ml_thread *t = ml_thread_self();
	struct ml_counter *from, *to;
	struct ml_live_block old;
	if (!t) {
		no_room();
		return 0;
	}
	uint32_t stack = ml_stacktab_here(&t->intern);
	if (ml_livetab_insert(e->ptr, e->kind, e->size, stack, &old) < 0) {
		no_room();
		count_free(held->stack, held->kind, held->size);
		return 0;
	}
	if (__builtin_expect(old.addr != 0, 0))
		count_free(old.stack, old.kind, old.size);
	/* Both counters of this thread, found before either changes (the
	 * second lookup may move "last", never a counter). */
	from = ml_thread_counter(t, held->stack, held->kind);
	to = ml_thread_counter(t, stack, e->kind);
	if (from && to)
		ml_counters_move(from, held->size, to, e->size);
	else
		no_room();
	return 0;
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
	struct event e = { (uint64_t)ptr, size, kind, ML_KIND_COUNT, held };
	ml_event_begin();
	ml_thread_on_side_stack(record_move, &e);
	ml_event_end();
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
