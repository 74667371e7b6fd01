/* lineprof/sampletab.c - samples counted per (thread, stack) in a lock-free
 * open-addressing table, filled from the SIGPROF handler.  Entries live in a
 * private mapping and are never freed, so the profile stays bounded by the
 * number of distinct stacks, not by the run's length. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "lineprof/internal.h"

#define SLOT_BITS 16u
#define SLOTS (1u << SLOT_BITS)
#define SLOT_LIMIT (SLOTS / 4u * 3u)
#define POOL_BYTES (64ull << 20)	/* address space only (MAP_NORESERVE) */

static struct ml_lp_entry *volatile *slots;
static unsigned char *pool;
static uint64_t pool_used;
static uint32_t n_entries;
static uint64_t n_samples, n_dropped;

int ml_lp_sampletab_init(void)
{
	if (slots)
		return 0;
	void *s = mmap(NULL, SLOTS * sizeof(*slots), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s == MAP_FAILED)
		return -ENOMEM;
	void *p = mmap(NULL, POOL_BYTES, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		munmap(s, SLOTS * sizeof(*slots));
		return -ENOMEM;
	}
	pool = p;
	slots = s;
	return 0;
}

static uint64_t hash_stack(uint32_t tid, const uint64_t *frames, uint32_t depth, uint32_t flags)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)tid << 32 | depth << 8 | flags);
	for (uint32_t i = 0; i < depth; i++) {
		h ^= frames[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 32);
}

/* A new entry from the pool; NULL when the pool or the table is full. */
static struct ml_lp_entry *make(uint64_t h, uint32_t tid, const uint64_t *frames,
				uint32_t depth, uint32_t flags)
{
	uint64_t size = (sizeof(struct ml_lp_entry) + depth * sizeof(uint64_t) + 15) & ~15ull;
	if (__atomic_load_n(&n_entries, __ATOMIC_RELAXED) >= SLOT_LIMIT)
		return NULL;
	uint64_t at = __atomic_fetch_add(&pool_used, size, __ATOMIC_RELAXED);
	if (at + size > POOL_BYTES)
		return NULL;
	struct ml_lp_entry *e = (struct ml_lp_entry *)(void *)(pool + at);
	e->hash = h;
	e->tid = tid;
	e->depth = (uint16_t)depth;
	e->flags = (uint16_t)flags;
	e->count = 0;
	memcpy(e->frames, frames, depth * sizeof(uint64_t));
	return e;
}

static bool same(const struct ml_lp_entry *e, uint64_t h, uint32_t tid, const uint64_t *frames,
		 uint32_t depth, uint32_t flags)
{
	return e->hash == h && e->tid == tid && e->depth == depth && e->flags == flags &&
	       memcmp(e->frames, frames, depth * sizeof(uint64_t)) == 0;
}

void ml_lp_sampletab_drop(uint64_t weight)
{
	__atomic_fetch_add(&n_dropped, weight, __ATOMIC_RELAXED);
}

void ml_lp_sampletab_add(uint32_t tid, const uint64_t *frames, uint32_t depth,
			 uint32_t flags, uint64_t weight)
{
	if (!slots || depth > ML_LP_DEPTH_MAX) {
		ml_lp_sampletab_drop(weight);
		return;
	}
	uint64_t h = hash_stack(tid, frames, depth, flags);
	struct ml_lp_entry *fresh = NULL;
	for (uint32_t i = (uint32_t)h & (SLOTS - 1), probes = 0; probes < SLOTS;
	     i = (i + 1) & (SLOTS - 1), probes++) {
		struct ml_lp_entry *e = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
		if (!e) {
			if (!fresh && !(fresh = make(h, tid, frames, depth, flags)))
				break;
			if (__atomic_compare_exchange_n(&slots[i], &e, fresh, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				__atomic_fetch_add(&n_entries, 1, __ATOMIC_RELAXED);
				e = fresh;
			}
			/* else: e is whoever won the slot; compare with it */
		}
		if (e == fresh || same(e, h, tid, frames, depth, flags)) {
			__atomic_fetch_add(&e->count, weight, __ATOMIC_RELAXED);
			__atomic_fetch_add(&n_samples, weight, __ATOMIC_RELAXED);
			return;
		}
	}
	ml_lp_sampletab_drop(weight);
}

void ml_lp_sampletab_foreach(void (*fn)(const struct ml_lp_entry *e, void *arg), void *arg)
{
	if (!slots)
		return;
	for (uint32_t i = 0; i < SLOTS; i++) {
		struct ml_lp_entry *e = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
		if (e && __atomic_load_n(&e->count, __ATOMIC_RELAXED))
			fn(e, arg);
	}
}

uint64_t ml_lp_sampletab_samples(void)
{
	return __atomic_load_n(&n_samples, __ATOMIC_RELAXED);
}

uint64_t ml_lp_sampletab_dropped(void)
{
	return __atomic_load_n(&n_dropped, __ATOMIC_RELAXED);
}

uint32_t ml_lp_sampletab_entries(void)
{
	return __atomic_load_n(&n_entries, __ATOMIC_RELAXED);
}

void ml_lp_sampletab_reset(void)
{
	if (slots)
		memset((void *)slots, 0, SLOTS * sizeof(*slots));
	pool_used = 0;
	n_entries = 0;
	n_samples = 0;
	n_dropped = 0;
}
