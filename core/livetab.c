/* core/livetab.c - the live blocks: (address, kind) -> (size, stack id).
 *
 * Sharded bucketized cuckoo hash tables.  A block's shard comes from its
 * 1 MiB address region: allocators give each thread regions of its own
 * (glibc's arenas, jemalloc's and tcmalloc's caches), so threads mostly
 * touch shards no other thread touches, and a shard's lock and lines stay
 * in one core's cache.  In a shard, a key has two candidate buckets of four
 * 16-byte slots (one cache line each): a lookup reads at most two lines
 * (the second is prefetched with the first), never a chain, and a delete
 * just clears a slot.  Tables double at 92% load, so a block costs 17-35
 * bytes (about 24 on average; shards grow at different moments).
 * Sizes of 4 GiB and more are kept in a small side list.  Memory comes
 * from mmap, never from the hooked malloc.
 *
 * Why not the old table (1024 shards of linear probing by a hash of the
 * address): its 1024 sparse tables and lock lines spread a few thousand
 * live blocks over megabytes, so nearly every event missed the L1 and L2
 * caches, and both threads of a two-thread program hit every shard. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "core/internal.h"

#define SHARD_BITS 8u
#define SHARDS (1u << SHARD_BITS)
#define REGION_SHIFT 20u
#define WAYS 4u
#define MIN_BITS 4u		/* 16 buckets, 1 KiB */
#define MAX_KICKS 500u
#define BIG_SIZE 0xffffffffu	/* slot.size escape: the size is in the side list */
#define K1 0xd6e8feb86659fd93ull
#define K2 0x9fb21c651e98df25ull

struct slot {
	uint64_t key;		/* address | kind << 60; 0 = empty */
	uint32_t stack;
	uint32_t size;		/* BIG_SIZE: the size is in the side list */
};

struct bucket {
	struct slot s[WAYS];
} __attribute__((aligned(64)));

struct big {
	uint64_t key, size;
};

struct shard {
	ml_spin_t lock;
	uint32_t count;
	uint32_t shift;		/* 64 - log2(buckets); 0 before the first insert */
	uint32_t grow_at;
	uint32_t rng;		/* picks the slot a kick evicts */
	struct bucket *b;
	struct big *big;
	uint32_t n_big, big_cap;
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct slot) == 16, "four slots per cache line");

static struct shard shards[SHARDS];

static inline uint64_t key_of(uint64_t addr, uint32_t kind)
{
	return addr | (uint64_t)kind << 60;
}

static inline struct shard *shard_of(uint64_t addr)
{
	return &shards[((addr >> REGION_SHIFT) * 0x9e3779b97f4a7c15ull) >> (64 - SHARD_BITS)];
}

static inline uint32_t b1_of(uint32_t shift, uint64_t key)
{
	return (uint32_t)((key * K1) >> shift);
}

static inline uint32_t b2_of(uint32_t shift, uint64_t key)
{
	uint32_t a = b1_of(shift, key), b = (uint32_t)((key * K2) >> shift);
	return a == b ? a ^ 1 : b;
}

static inline size_t table_bytes(uint32_t shift)
{
	return sizeof(struct bucket) << (64 - shift);
}

/* Which ways of b hold key, as a bit mask.  No branches: which way holds a
 * key is random, and a mispredicted branch would cost more than the four
 * compares. */
static inline unsigned match(const struct bucket *b, uint64_t key)
{
	return (unsigned)(b->s[0].key == key) | (unsigned)(b->s[1].key == key) << 1 |
		(unsigned)(b->s[2].key == key) << 2 | (unsigned)(b->s[3].key == key) << 3;
}

/* Puts *in (absent) into the table b of 2^(64 - shift) buckets.  Returns
 * true, or false when the eviction walk gives up: *in then holds the
 * entry left without a slot (the caller grows the table). */
static bool put(struct bucket *b, uint32_t shift, struct slot *in, uint32_t *rng)
{
	uint32_t i = b1_of(shift, in->key);
	unsigned m = match(&b[i], 0);
	if (__builtin_expect(m != 0, 1)) {
		b[i].s[__builtin_ctz(m)] = *in;
		return true;
	}
	uint32_t j = b2_of(shift, in->key);
	if ((m = match(&b[j], 0))) {
		b[j].s[__builtin_ctz(m)] = *in;
		return true;
	}
	for (unsigned k = 0; k < MAX_KICKS; k++) {
		*rng = *rng * 1103515245u + 12345u;
		unsigned w = (*rng >> 16) % WAYS;
		struct slot victim = b[i].s[w];
		b[i].s[w] = *in;
		*in = victim;
		uint32_t a = b1_of(shift, in->key);
		i = a == i ? b2_of(shift, in->key) : a;
		if ((m = match(&b[i], 0))) {
			b[i].s[__builtin_ctz(m)] = *in;
			return true;
		}
	}
	return false;
}

/* Moves s into a table twice as big (more if unlucky), with *pending (if
 * not NULL) as one more entry.  Returns 0, or -ENOMEM with s and *pending
 * unchanged. */
static int grow(struct shard *s, const struct slot *pending)
{
	uint32_t shift = s->shift ? s->shift - 1 : 64 - MIN_BITS;
	uint32_t n = s->shift ? 1u << (64 - s->shift) : 0;
	for (;; shift--) {
		void *p = mmap(NULL, table_bytes(shift), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -ENOMEM;
		struct bucket *fresh = p;
		bool ok = true;
		for (uint32_t i = 0; ok && i < n; i++)
			for (unsigned w = 0; ok && w < WAYS; w++)
				if (s->b[i].s[w].key) {
					struct slot e = s->b[i].s[w];
					ok = put(fresh, shift, &e, &s->rng);
				}
		if (ok && pending) {
			struct slot e = *pending;
			ok = put(fresh, shift, &e, &s->rng);
		}
		if (ok) {
			if (s->b)
				munmap(s->b, table_bytes(s->shift));
			s->b = fresh;
			s->shift = shift;
			s->grow_at = (uint32_t)(((uint64_t)WAYS << (64 - shift)) * 92 / 100);
			return 0;
		}
		munmap(p, table_bytes(shift));	/* an unlucky walk: twice as big again */
	}
}

/* The slot holding key, or NULL.  Lock held. */
static inline struct slot *lookup(struct shard *s, uint64_t key)
{
	struct bucket *b1 = &s->b[b1_of(s->shift, key)];
	struct bucket *b2 = &s->b[b2_of(s->shift, key)];
	__builtin_prefetch(b2);
	unsigned m = match(b1, key);
	if (__builtin_expect(m != 0, 1))
		return &b1->s[__builtin_ctz(m)];
	m = match(b2, key);
	return m ? &b2->s[__builtin_ctz(m)] : NULL;
}

static uint64_t big_take(struct shard *s, uint64_t key)
{
	for (uint32_t i = 0; i < s->n_big; i++)
		if (s->big[i].key == key) {
			uint64_t size = s->big[i].size;
			s->big[i] = s->big[--s->n_big];
			return size;
		}
	return BIG_SIZE;	/* not reached: every BIG_SIZE slot has its entry */
}

static int big_add(struct shard *s, uint64_t key, uint64_t size)
{
	if (s->n_big == s->big_cap) {
		uint32_t cap = s->big_cap ? s->big_cap * 2 : 256;
		void *p = mmap(NULL, cap * sizeof(struct big), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -ENOMEM;
		if (s->big) {
			memcpy(p, s->big, s->n_big * sizeof(struct big));
			munmap(s->big, s->big_cap * sizeof(struct big));
		}
		s->big = p;
		s->big_cap = cap;
	}
	s->big[s->n_big++] = (struct big){ key, size };
	return 0;
}

/* Fills *out from sl and empties it.  Lock held. */
static inline void take(struct shard *s, struct slot *sl, uint64_t addr, uint32_t kind,
			struct ml_live_block *out)
{
	out->addr = addr;
	out->kind = kind;
	out->stack = sl->stack;
	out->size = sl->size == BIG_SIZE ? big_take(s, sl->key) : sl->size;
	sl->key = 0;
	s->count--;
}

int ml_livetab_insert(uint64_t addr, uint32_t kind, uint64_t size, uint32_t stack,
		      struct ml_live_block *old)
{
	uint64_t key = key_of(addr, kind);
	struct shard *s = shard_of(addr);
	struct slot in = { key, stack, size >= BIG_SIZE ? BIG_SIZE : (uint32_t)size };
	int rc = 0;
	old->addr = 0;
	if (!ml_tl_plain)
		ml_spin_lock(&s->lock);
	if (__builtin_expect(s->count >= s->grow_at, 0) && (rc = grow(s, NULL)) < 0)
		goto out;
	/* The common case in one pass over the key's two buckets: the key in
	 * neither (else the allocator reused an address whose free we missed)
	 * and a free way in the first. */
	struct bucket *b1 = &s->b[b1_of(s->shift, key)], *b2 = &s->b[b2_of(s->shift, key)];
	__builtin_prefetch(b2);
	unsigned empty = match(b1, 0);
	if (__builtin_expect(!match(b1, key) && !match(b2, key) && empty && size < BIG_SIZE, 1)) {
		b1->s[__builtin_ctz(empty)] = in;
		s->count++;
		goto out;
	}
	struct slot *sl = lookup(s, key);
	if (__builtin_expect(sl != NULL, 0))
		take(s, sl, addr, kind, old);	/* the allocator reused it: we missed its free */
	if (__builtin_expect(size >= BIG_SIZE, 0) && (rc = big_add(s, key, size)) < 0)
		goto out;
	struct slot left = in;
	if (!put(s->b, s->shift, &left, &s->rng) && (rc = grow(s, &left)) < 0) {
		/* left is an entry evicted on the way, now without a slot: it
		 * takes the place of ours, which is not recorded. */
		if (left.key != key && (sl = lookup(s, key)))
			*sl = left;
		goto out;
	}
	s->count++;
out:
	if (!ml_tl_plain)
		ml_spin_unlock(&s->lock);
	return rc;
}

bool ml_livetab_remove(uint64_t addr, uint32_t kind, struct ml_live_block *out)
{
	uint64_t key = key_of(addr, kind);
	struct shard *s = shard_of(addr);
	bool found = false;
	if (!ml_tl_plain)
		ml_spin_lock(&s->lock);
	if (__builtin_expect(s->shift != 0, 1)) {
		struct slot *sl = lookup(s, key);
		if (sl) {
			take(s, sl, addr, kind, out);
			found = true;
		}
	}
	if (!ml_tl_plain)
		ml_spin_unlock(&s->lock);
	return found;
}

uint64_t ml_livetab_count(void)
{
	uint64_t n = 0;
	for (uint32_t k = 0; k < SHARDS; k++)
		n += __atomic_load_n(&shards[k].count, __ATOMIC_RELAXED);
	return n;
}

uint64_t ml_livetab_bytes(void)
{
	uint64_t n = 0;
	for (uint32_t k = 0; k < SHARDS; k++) {
		const struct shard *s = &shards[k];
		if (s->shift)
			n += table_bytes(s->shift);
		n += s->big_cap * sizeof(struct big);
	}
	return n;
}

void ml_livetab_reset(void)
{
	for (uint32_t k = 0; k < SHARDS; k++) {
		struct shard *s = &shards[k];
		if (s->b)
			munmap(s->b, table_bytes(s->shift));
		if (s->big)
			munmap(s->big, s->big_cap * sizeof(struct big));
		memset(s, 0, sizeof(*s));
	}
}
