/* core/livetab.c - the live blocks: (address, kind) -> (size, counter).
 * Sharded open-addressing hash tables (linear probing, backward-shift
 * deletion), one small spinlock per shard: no global lock.  Shard arrays
 * come from mmap, never from the hooked malloc. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "core/internal.h"

#define SHARD_BITS 10u
#define SHARDS (1u << SHARD_BITS)
#define SHARD_MIN_CAP 256u

struct slot {
	uint64_t addr;		/* 0 = empty */
	uint64_t size_kind;	/* size in the low 56 bits, kind in the top 8 */
	struct ml_counter *counter;
};

struct shard {
	ml_spin_t lock;
	uint32_t cap;		/* power of two, or 0 before first use */
	uint32_t count;
	struct slot *slots;
} __attribute__((aligned(64)));

static struct shard shards[SHARDS];

#define SIZE_MASK ((1ull << 56) - 1)

static uint64_t hash_key(uint64_t addr, uint32_t kind)
{
	uint64_t h = (addr ^ ((uint64_t)kind << 59)) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 31);
}

static struct slot *map_slots(uint32_t cap)
{
	void *p = mmap(NULL, (size_t)cap * sizeof(struct slot), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* Puts a slot known to be absent into s (which has room). */
static void place(struct shard *s, const struct slot *in)
{
	uint32_t mask = s->cap - 1;
	uint32_t i = (uint32_t)(hash_key(in->addr, (uint32_t)(in->size_kind >> 56)) >> SHARD_BITS) & mask;
	while (s->slots[i].addr)
		i = (i + 1) & mask;
	s->slots[i] = *in;
	s->count++;
}

/* Doubles s (or creates it).  Returns 0 or -ENOMEM. */
static int grow(struct shard *s)
{
	uint32_t old_cap = s->cap, new_cap = old_cap ? old_cap * 2 : SHARD_MIN_CAP;
	struct slot *old = s->slots, *fresh = map_slots(new_cap);
	if (!fresh)
		return -ENOMEM;
	s->slots = fresh;
	s->cap = new_cap;
	s->count = 0;
	for (uint32_t i = 0; i < old_cap; i++)
		if (old[i].addr)
			place(s, &old[i]);
	if (old)
		munmap(old, (size_t)old_cap * sizeof(struct slot));
	return 0;
}

/* The index of (addr, kind) in s, or -1. */
static int64_t find(const struct shard *s, uint64_t addr, uint32_t kind, uint64_t h)
{
	if (!s->cap)
		return -1;
	uint32_t mask = s->cap - 1;
	for (uint32_t i = (uint32_t)(h >> SHARD_BITS) & mask;; i = (i + 1) & mask) {
		const struct slot *sl = &s->slots[i];
		if (!sl->addr)
			return -1;
		if (sl->addr == addr && (uint32_t)(sl->size_kind >> 56) == kind)
			return i;
	}
}

/* Removes slot i, shifting back the run behind it (no tombstones). */
static void erase(struct shard *s, uint32_t i)
{
	uint32_t mask = s->cap - 1;
	for (uint32_t j = (i + 1) & mask; s->slots[j].addr; j = (j + 1) & mask) {
		uint32_t home = (uint32_t)(hash_key(s->slots[j].addr,
			(uint32_t)(s->slots[j].size_kind >> 56)) >> SHARD_BITS) & mask;
		/* Move j into the hole at i if its home is not in (i, j]. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			s->slots[i] = s->slots[j];
			i = j;
		}
	}
	s->slots[i].addr = 0;
	s->count--;
}

int ml_livetab_insert(uint64_t addr, uint64_t size, struct ml_counter *c,
		      struct ml_live_block *old)
{
	uint64_t h = hash_key(addr, c->kind);
	struct shard *s = &shards[h & (SHARDS - 1)];
	int rc = 0;
	old->addr = 0;
	ml_spin_lock(&s->lock);
	int64_t i = find(s, addr, c->kind, h);
	if (i >= 0) {
		/* The allocator reused an address we missed the free of. */
		old->addr = addr;
		old->size = s->slots[i].size_kind & SIZE_MASK;
		old->counter = s->slots[i].counter;
		s->slots[i].size_kind = (size & SIZE_MASK) | ((uint64_t)c->kind << 56);
		s->slots[i].counter = c;
		goto out;
	}
	if ((s->count + 1) * 4 > s->cap * 3 && (rc = grow(s)) < 0)
		goto out;
	struct slot in = { addr, (size & SIZE_MASK) | ((uint64_t)c->kind << 56), c };
	place(s, &in);
out:
	ml_spin_unlock(&s->lock);
	return rc;
}

bool ml_livetab_remove(uint64_t addr, uint32_t kind, struct ml_live_block *out)
{
	uint64_t h = hash_key(addr, kind);
	struct shard *s = &shards[h & (SHARDS - 1)];
	bool found = false;
	ml_spin_lock(&s->lock);
	int64_t i = find(s, addr, kind, h);
	if (i >= 0) {
		out->addr = addr;
		out->size = s->slots[i].size_kind & SIZE_MASK;
		out->counter = s->slots[i].counter;
		ML_ASSERT(out->counter && out->counter->kind == kind);
		erase(s, (uint32_t)i);
		found = true;
	}
	ml_spin_unlock(&s->lock);
	return found;
}

uint64_t ml_livetab_size(uint64_t addr, uint32_t kind)
{
	uint64_t h = hash_key(addr, kind), size = 0;
	struct shard *s = &shards[h & (SHARDS - 1)];
	ml_spin_lock(&s->lock);
	int64_t i = find(s, addr, kind, h);
	if (i >= 0)
		size = s->slots[i].size_kind & SIZE_MASK;
	ml_spin_unlock(&s->lock);
	return size;
}

uint64_t ml_core_live_block_size(const void *ptr, enum ml_kind kind)
{
	return ptr ? ml_livetab_size((uint64_t)(uintptr_t)ptr, kind) : 0;
}

/* Sums the shards (no global counter: it would be one more cache line
 * that every thread writes). */
uint64_t ml_livetab_count(void)
{
	uint64_t n = 0;
	for (uint32_t k = 0; k < SHARDS; k++)
		n += __atomic_load_n(&shards[k].count, __ATOMIC_RELAXED);
	return n;
}

void ml_livetab_reset(void)
{
	for (uint32_t k = 0; k < SHARDS; k++) {
		struct shard *s = &shards[k];
		if (s->slots)
			munmap(s->slots, (size_t)s->cap * sizeof(struct slot));
		memset(s, 0, sizeof(*s));
	}
}
