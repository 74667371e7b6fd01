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

static void no_room(void)
{
	ml_degrade("out of memory for the live table; allocations are no longer recorded");
}

/* Adds (ptr, kind) -> (size, stack) to the live table and counts it. */
static void add_block(struct ml_thread *t, uint64_t ptr, uint64_t size, uint32_t stack,
		      uint32_t kind)
{
	struct ml_live_block old;
	struct ml_counter *c = ml_thread_counter(t, stack, kind);
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
	add_block(t, e->ptr, e->size, stack, e->kind);
	if (e->also != ML_KIND_COUNT)
		add_block(t, e->ptr, e->size, stack, e->also);
	return 0;
}

void ml_track_alloc(void *ptr, size_t size, enum ml_kind kind)
{
	ML_ASSERT(ml_guard_held());
	if (!ptr || ml_degraded)
		return;
	struct event e = { (uint64_t)ptr, size, kind, ML_KIND_COUNT, NULL };
	ml_thread_on_side_stack(record_alloc, &e);
	ml_track_count_thread(size);
}

void ml_track_alloc_also(void *ptr, size_t size, enum ml_kind kind, enum ml_kind also)
{
	ML_ASSERT(ml_guard_held() && kind != also);
	if (!ptr || ml_degraded)
		return;
	struct event e = { (uint64_t)ptr, size, kind, also, NULL };
	ml_thread_on_side_stack(record_alloc, &e);
	ml_track_count_thread(size);
}

/* Counts the end of block b on the calling thread. */
static void count_free(uint32_t stack, uint32_t kind, uint64_t size)
{
	struct ml_thread *t = ml_thread_self();
	struct ml_counter *c = t ? ml_thread_counter(t, stack, kind) : NULL;
	if (c)
		ml_counters_free(c, size);
	else
		no_room();
}

size_t ml_track_free(void *ptr, enum ml_kind kind)
{
	ML_ASSERT(ml_guard_held());
	struct ml_live_block b;
	if (!ptr || !ml_livetab_remove((uint64_t)ptr, kind, &b))
		return 0;
	count_free(b.stack, b.kind, b.size);
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
	if (ml_livetab_insert(held->addr, held->kind, held->size, held->stack, &old) < 0)
		no_room();
}

void ml_track_release(const struct ml_track_held *held)
{
	ML_ASSERT(ml_guard_held());
	if (held->addr)
		count_free(held->stack, held->kind, held->size);
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
	if (ml_degraded) {
		ml_track_release(held);
		return;
	}
	/* An allocation of size for the open regions, as for ml_track_alloc
	 * (the lines view counts it so too). */
	ml_track_count_thread(size);
	struct event e = { (uint64_t)ptr, size, kind, ML_KIND_COUNT, held };
	ml_thread_on_side_stack(record_move, &e);
}

void ml_core_after_fork(void)
{
	/* Other threads vanished at the fork, maybe holding locks: reset them. */
	ml_arena_after_fork();
	ml_modules_after_fork();
	ml_unwind_after_fork();
	ml_dump_after_fork();
	ml_stacktab_after_fork();
	ml_livetab_reset();
	ml_counters_reset_totals();
	ml_thread_after_fork();
	ml_clock_start();
	ml_timeline_reset(ml_clock_coarse_ns());
	ml_core_flags |= ML_META_FORKED;
}
