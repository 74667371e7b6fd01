/* core/stacktab.c - captures call stacks (unwind.c, libunwind.c) and deduplicates them
 * into stack ids in a lock-free open-addressing hash table.  Entries live in
 * the private arena and are never removed. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "core/internal.h"

#define TABLE_BITS 20u			/* 1M slots, 8 MiB of address space */
#define TABLE_SLOTS (1u << TABLE_BITS)
#define TABLE_LIMIT (TABLE_SLOTS / 4u * 3u)	/* keep probes short */

static struct ml_stack_entry *volatile *slots;
static struct ml_stack_entry *all;	/* every published entry, newest first */
static uint32_t next_id = 1;
static uint32_t n_entries;
static uint64_t skip_lo, skip_hi;

int ml_stacktab_init(void)
{
	if (slots)
		return 0;
	void *p = mmap(NULL, TABLE_SLOTS * sizeof(*slots), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	slots = p;
	if (ml_unwind_init() < 0)
		ml_config.fast_unwind = false;
	ml_libunwind_init();
	return 0;
}

void ml_stacktab_set_skip(uint64_t lo, uint64_t hi)
{
	skip_lo = lo;
	skip_hi = hi;
}

/* Inlined into both entry points so that, whichever is used, frame 0 is a
 * return address inside that entry point and frame 1 in its caller. */
static inline __attribute__((always_inline)) uint32_t
capture(uint64_t *buf, uint32_t max_depth, uint32_t *flags, uint32_t *skip)
{
	/* void * and uint64_t are the same on the 64-bit targets we build for;
	 * unwinding straight into buf saves a copy on every allocation. */
	_Static_assert(sizeof(void *) == sizeof(uint64_t), "64-bit only");
	*flags = 0;
	*skip = 0;
	int want = (int)(max_depth + CAPTURE_SLACK + 1);
	int n = -1;
	if (ml_config.fast_unwind)
		n = ml_unwind_fast(buf, (uint32_t)want);	/* cached; -1: declined */
	if (n < 0)
		n = (int)ml_libunwind_capture(buf, (uint32_t)want);
	uint32_t s = 0;
	if (n <= 0) {
		/* Keep counting (totals stay exact) with an empty stack. */
		ml_warn_once("cannot unwind the stack; some allocations have no call stack");
		return 0;
	}
	while (s < (uint32_t)n && buf[s] >= skip_lo && buf[s] < skip_hi)
		s++;
	uint32_t depth = (uint32_t)n - s;
	if (depth > max_depth) {
		depth = max_depth;
		*flags |= ML_STACK_TRUNCATED;
	}
	*skip = s;
	return depth;
}

uint32_t ml_stacktab_capture_raw(uint64_t *buf, uint32_t max_depth, uint32_t *flags,
				 uint32_t *skip)
{
	return capture(buf, max_depth, flags, skip);
}

uint32_t ml_stacktab_capture(uint64_t *frames, uint32_t max_depth, uint32_t *flags)
{
	uint64_t buf[ML_CAPTURE_BUF];
	uint32_t skip;
	uint32_t depth = capture(buf, max_depth, flags, &skip);
	memcpy(frames, buf + skip, depth * sizeof(uint64_t));
	return depth;
}

uint32_t ml_stack_capture(uint64_t *frames, uint32_t max, uint32_t *flags)
{
	uint64_t buf[ML_CAPTURE_BUF];
	uint32_t skip;
	if (max > ML_DEPTH_MAX)
		max = ML_DEPTH_MAX;
	uint32_t depth = capture(buf, max, flags, &skip);
	memcpy(frames, buf + skip, depth * sizeof(uint64_t));
	return depth;
}

/* Four independent lanes so the multiplies overlap (the hash is on the
 * hot path of every allocation); mixed together at the end. */
static uint64_t hash_frames(const uint64_t *frames, uint32_t depth)
{
	const uint64_t k = 0xff51afd7ed558ccdull;
	uint64_t a = 0x9e3779b97f4a7c15ull ^ depth, b = 0xbf58476d1ce4e5b9ull;
	uint64_t c = 0x94d049bb133111ebull, d = 0x2545f4914f6cdd1dull;
	uint32_t i = 0;
	for (; i + 4 <= depth; i += 4) {
		a = (a ^ frames[i]) * k;
		b = (b ^ frames[i + 1]) * k;
		c = (c ^ frames[i + 2]) * k;
		d = (d ^ frames[i + 3]) * k;
	}
	for (; i < depth; i++)
		a = (a ^ frames[i]) * k;
	uint64_t x = a ^ (b >> 17) ^ (b << 47) ^ (c >> 29) ^ (c << 35) ^ (d >> 41) ^ (d << 23);
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 32;
	x *= k;
	x ^= x >> 29;
	return x;
}

static bool same(const struct ml_stack_entry *e, uint64_t h, const uint64_t *frames,
		 uint32_t depth, uint32_t flags)
{
	return e->hash == h && e->depth == depth && e->flags == flags &&
		memcmp(e->frames, frames, depth * sizeof(uint64_t)) == 0;
}

static struct ml_stack_entry *make(uint64_t h, const uint64_t *frames, uint32_t depth,
				   uint32_t flags)
{
	if (__atomic_load_n(&n_entries, __ATOMIC_RELAXED) >= TABLE_LIMIT) {
		ml_degrade("too many distinct stacks; new stacks are no longer recorded");
		return NULL;
	}
	struct ml_stack_entry *e = ml_arena_alloc(sizeof(*e) + depth * sizeof(uint64_t));
	if (!e)
		return NULL;
	e->hash = h;
	e->depth = (uint16_t)depth;
	e->flags = (uint16_t)flags;
	memcpy(e->frames, frames, depth * sizeof(uint64_t));
	return e;
}

struct ml_stack_entry *ml_stacktab_intern(const uint64_t *frames, uint32_t depth,
					  uint32_t flags)
{
	uint64_t h = hash_frames(frames, depth);
	struct ml_stack_entry *fresh = NULL;
	if (!slots)
		return NULL;
	for (uint32_t i = (uint32_t)h & (TABLE_SLOTS - 1);; i = (i + 1) & (TABLE_SLOTS - 1)) {
		struct ml_stack_entry *e = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
		if (!e) {
			if (!fresh && !(fresh = make(h, frames, depth, flags)))
				return NULL;
			/* The id is taken before publication; a lost race leaves a gap
			 * in the ids, which is allowed. */
			if (!fresh->id)
				fresh->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
			if (__atomic_compare_exchange_n(&slots[i], &e, fresh, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				__atomic_fetch_add(&n_entries, 1, __ATOMIC_RELAXED);
				/* Also on the list the dump walks (no table scan). */
				struct ml_stack_entry *head = __atomic_load_n(&all, __ATOMIC_RELAXED);
				do
					fresh->next = head;
				while (!__atomic_compare_exchange_n(&all, &head, fresh, true,
								    __ATOMIC_RELEASE, __ATOMIC_RELAXED));
				return fresh;
			}
			/* Someone filled this slot first: e is now theirs. */
		}
		if (same(e, h, frames, depth, flags)) {
			ML_ASSERT(e->id > 0 && e->id < __atomic_load_n(&next_id, __ATOMIC_RELAXED));
			return e;	/* fresh, if made, stays unused in the arena */
		}
	}
}

struct ml_counter *ml_stacktab_counter(struct ml_stack_entry *e, uint32_t kind)
{
	struct ml_counter *c = __atomic_load_n(&e->counter[kind], __ATOMIC_ACQUIRE);
	if (c)
		return c;
	struct ml_counter *fresh = ml_arena_alloc(sizeof(*fresh));
	if (!fresh)
		return NULL;
	fresh->stack_id = e->id;
	fresh->kind = kind;
	if (__atomic_compare_exchange_n(&e->counter[kind], &c, fresh, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return fresh;
	return c;
}

void ml_stacktab_foreach(void (*fn)(struct ml_stack_entry *e, void *arg), void *arg)
{
	/* An entry joins the list just after its slot: one that is being
	 * published now may be missed, as with a scan. */
	for (struct ml_stack_entry *e = __atomic_load_n(&all, __ATOMIC_ACQUIRE); e; e = e->next)
		fn(e, arg);
}

uint32_t ml_stacktab_count(void)
{
	return __atomic_load_n(&n_entries, __ATOMIC_RELAXED);
}

void ml_stacktab_check_ids(void)
{
	if (!ML_DEBUG)
		return;
	/* One bit per id handed out: every entry's id is set exactly once. */
	uint32_t limit = __atomic_load_n(&next_id, __ATOMIC_ACQUIRE);
	uint8_t *seen = ml_arena_alloc(limit / 8 + 1);
	if (!seen)
		return;
	for (struct ml_stack_entry *e = __atomic_load_n(&all, __ATOMIC_ACQUIRE); e; e = e->next) {
		ML_ASSERT(e->id > 0 && e->id < limit);
		ML_ASSERT(!(seen[e->id / 8] & (1u << (e->id % 8))));	/* ids unique */
		seen[e->id / 8] |= (uint8_t)(1u << (e->id % 8));
	}
}
