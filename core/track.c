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

/* The stack entry of the calling thread's stack, or NULL when the table is
 * full. */
static struct ml_stack_entry *stack_here(void)
{
	uint64_t buf[ML_CAPTURE_BUF];
	uint32_t flags, skip;
	uint32_t depth = ml_stacktab_capture_raw(buf, ml_config.max_depth, &flags, &skip);
	if (__builtin_expect(ml_rooms_decorating, 0)) {
		uint32_t cap = ML_CAPTURE_BUF - skip;
		cap = cap < ml_config.max_depth ? cap : ml_config.max_depth;
		depth = ml_rooms_decorate(buf + skip, depth, cap, &flags);
	}
	if (flags & ML_STACK_TRUNCATED)
		__atomic_or_fetch(&ml_core_flags, ML_META_TRUNCATED_STACKS, __ATOMIC_RELAXED);
	return ml_stacktab_intern(buf + skip, depth, flags);
}

/* The counter for the calling thread's stack and kind, or NULL. */
static struct ml_counter *counter_here(uint32_t kind)
{
	struct ml_stack_entry *e = stack_here();
	return e ? ml_stacktab_counter(e, kind) : NULL;
}

/* Adds (ptr, size) to the live table under c and counts it. */
static void add_block(void *ptr, size_t size, struct ml_counter *c)
{
	struct ml_live_block old;
	if (ml_livetab_insert((uint64_t)ptr, size, c, &old) < 0) {
		ml_degrade("out of memory for the live table; allocations are no longer recorded");
		return;
	}
	if (old.addr)	/* we missed its free (untracked path): close it now */
		ml_counters_free(old.counter, old.size);
	ml_counters_alloc(c, size);
}

void ml_track_alloc(void *ptr, size_t size, enum ml_kind kind)
{
	ML_ASSERT(ml_guard_held());
	if (!ptr || ml_degraded)
		return;
	struct ml_counter *c = counter_here(kind);
	if (c)
		add_block(ptr, size, c);
	ml_track_count_thread(size);
}

void ml_track_alloc_also(void *ptr, size_t size, enum ml_kind kind, enum ml_kind also)
{
	ML_ASSERT(ml_guard_held() && kind != also);
	if (!ptr || ml_degraded)
		return;
	struct ml_stack_entry *e = stack_here();
	struct ml_counter *c = e ? ml_stacktab_counter(e, kind) : NULL;
	struct ml_counter *c2 = e ? ml_stacktab_counter(e, also) : NULL;
	if (c && c2) {
		add_block(ptr, size, c);
		add_block(ptr, size, c2);
	}
	ml_track_count_thread(size);
}

size_t ml_track_free(void *ptr, enum ml_kind kind)
{
	ML_ASSERT(ml_guard_held());
	struct ml_live_block b;
	if (!ptr || !ml_livetab_remove((uint64_t)ptr, kind, &b))
		return 0;
	ml_counters_free(b.counter, b.size);
	return b.size;
}

bool ml_track_detach(void *ptr, enum ml_kind kind, struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	struct ml_live_block b;
	held->addr = 0;
	if (!ptr || !ml_livetab_remove((uint64_t)ptr, kind, &b))
		return false;
	held->addr = b.addr;
	held->size = b.size;
	held->counter = b.counter;
	return true;
}

void ml_track_reattach(const struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	struct ml_live_block old;
	if (!held->addr)
		return;
	/* Still counted as live: only the table entry comes back. */
	if (ml_livetab_insert(held->addr, held->size, held->counter, &old) < 0)
		ml_degrade("out of memory for the live table; allocations are no longer recorded");
}

void ml_track_release(const struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	if (held->addr)
		ml_counters_free(held->counter, held->size);
}

void ml_track_moved(const struct ml_track_held *held, void *ptr, size_t size,
		    enum ml_kind kind)
{
	ML_ASSERT(ml_guard_held());
	ML_ASSERT(!held->addr || held->counter->kind == (uint32_t)kind);
	if (!held->addr) {
		ml_track_alloc(ptr, size, kind);
		return;
	}
	/* An allocation of size for the open regions, as for ml_track_alloc
	 * (the lines view counts it so too). */
	if (!ml_degraded)
		ml_track_count_thread(size);
	struct ml_counter *c = ml_degraded ? NULL : counter_here(kind);
	struct ml_live_block old;
	if (!c || ml_livetab_insert((uint64_t)ptr, size, c, &old) < 0) {
		ml_track_release(held);
		return;
	}
	if (old.addr)
		ml_counters_free(old.counter, old.size);
	ml_counters_move(held->counter, held->size, c, size);
}

/* Per stack: zero its counters (fork child). */
static void reset_stack(struct ml_stack_entry *e, void *arg)
{
	for (uint32_t k = 0; k < ML_KIND_COUNT; k++)
		if (e->counter[k])
			ml_counter_reset(e->counter[k]);
}

void ml_core_after_fork(void)
{
	/* Other threads vanished at the fork, maybe holding locks: reset them. */
	ml_arena_after_fork();
	ml_modules_after_fork();
	ml_unwind_after_fork();
	ml_dump_after_fork();
	ml_notes_after_fork();
	ml_livetab_reset();
	ml_counters_reset_totals();
	ml_stacktab_foreach(reset_stack, NULL);
	ml_clock_start();
	ml_timeline_reset(ml_clock_coarse_ns());
	ml_core_flags |= ML_META_FORKED;
}
