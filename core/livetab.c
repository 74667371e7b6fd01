/* core/livetab.c - the live blocks: (address, kind) -> (size, stack id).
 *
 * Sharded bucketized cuckoo hash tables.  A block's shard comes from its
 * 1 MiB address region: allocators give each thread regions of its own
 * (glibc's arenas, jemalloc's and tcmalloc's caches), so threads mostly
 * touch shards no other thread touches, and a shard's lock and lines stay
 * in one core's cache.  In a shard, a key has two candidate buckets of four
 * slots (one 64-byte cache line each: the four keys, then their stacks and
 * sizes), b and b ^ alt(key).  An insert goes to the first bucket when it
 * has room, so a remove finds most keys there: one line, compared four
 * keys at a time (SSE2).  An insert reads both lines (the second
 * prefetched) to see that the key is new: the allocator may have reused
 * an address whose free we missed.  It reads the second one only when
 * some key of the first one lives there (each bucket's spill count): with
 * millions of live blocks that line is a miss all the way to memory.  The common paths are inline
 * (internal.h); growth, evictions and missed frees are here.  Tables
 * double at 80% load, so a block costs 20-40 bytes (about 28 on average;
 * shards grow at different moments).  Sizes of 4 GiB and more are kept in
 * a small side list.  Memory comes from mmap, never from the hooked
 * malloc.
 *
 * Why not the old table (1024 shards of linear probing by a hash of the
 * address): its 1024 sparse tables and lock lines spread a few thousand
 * live blocks over megabytes, so nearly every event missed the L1 and L2
 * caches, and both threads of a two-thread program hit every shard. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "core/internal.h"

#define WAYS ML_LIVE_WAYS
#define MIN_BITS 4u		/* 16 buckets, 1 KiB */
#define MAX_KICKS 500u
#define LOAD_PERCENT 80u
#define BIG_SIZE ML_LIVE_BIG

struct ml_live_big {
	uint64_t key, size;
};

struct ml_live_shard ml_live_shards[ML_LIVE_SHARDS];

/* One entry on its way between buckets. */
struct entry {
	uint64_t key;
	uint32_t stack, size;
};


static inline uint32_t empty_way(const struct ml_live_bucket *b)
{
	return ml_live_match(b, _mm_setzero_si128());
}

/* Writes e into way w of b; the way's spill bit (the bucket's) stays. */
static inline void set_way(struct ml_live_bucket *b, unsigned w, const struct entry *e)
{
	b->key[w] = e->key;
	b->stack[w] = e->stack | (b->stack[w] & ML_LIVE_SPILL);
	b->size[w] = e->size;
}

static inline struct entry way_of(const struct ml_live_bucket *b, unsigned w)
{
	return (struct entry){ b->key[w], b->stack[w] & ~ML_LIVE_SPILL, b->size[w] };
}

/* ---- spill counts (internal.h, ML_LIVE_SPILL): how many entries whose
 * first bucket is b live in their other one, in the top bits of b's four
 * stack words.  15 is sticky: the real count is then unknown, and inserts
 * keep looking at the other bucket until the table grows (put() counts
 * afresh).  Every move of an entry goes through place() and unplace(). ---- */

static void spill_set(struct ml_live_bucket *b, uint32_t n)
{
	_Static_assert(WAYS == 4, "four stack words: one vector");
	/* bit w of n in the top bit of stack word w: all four words at once */
	__m128i sel = _mm_setr_epi32(1, 2, 4, 8);
	__m128i bits = _mm_and_si128(_mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32((int)n), sel), sel),
				     _mm_set1_epi32((int)ML_LIVE_SPILL));
	__m128i *p = (__m128i *)(void *)b->stack;
	_mm_store_si128(p, _mm_or_si128(_mm_and_si128(_mm_load_si128(p),
						       _mm_set1_epi32(~ML_LIVE_SPILL)), bits));
}

static void spill_inc(struct ml_live_bucket *b)
{
	uint32_t n = ml_live_spilled(b);
	if (n < 15)
		spill_set(b, n + 1);
}

static void spill_dec(struct ml_live_bucket *b)
{
	uint32_t n = ml_live_spilled(b);
	ML_ASSERT(n != 0);
	if (n < 15 && n > 0)
		spill_set(b, n - 1);
}

/* e goes into way w of bucket i of the table b (2^(64 - shift) buckets);
 * away from its first bucket, that one counts it. */
static void place(struct ml_live_bucket *b, uint32_t shift, uint32_t i, unsigned w,
		  const struct entry *e)
{
	set_way(&b[i], w, e);
	uint32_t home = ml_live_b1(shift, e->key);
	if (i != home)
		spill_inc(&b[home]);
}

/* The entry in way w of bucket i leaves it (its key stays: the caller
 * overwrites or clears it). */
static struct entry unplace(struct ml_live_bucket *b, uint32_t shift, uint32_t i, unsigned w)
{
	struct entry e = way_of(&b[i], w);
	uint32_t home = ml_live_b1(shift, e.key);
	if (i != home)
		spill_dec(&b[home]);
	return e;
}

/* Puts *in (absent) into the table b of 2^(64 - shift) buckets.  Returns
 * true, or false when the eviction walk gives up: *in then holds the
 * entry left without a slot (the caller grows the table). */
static bool put(struct ml_live_bucket *b, uint32_t shift, struct entry *in, uint32_t *rng)
{
	uint32_t i = ml_live_b1(shift, in->key);
	uint32_t m = empty_way(&b[i]);
	if (__builtin_expect(m != 0, 1)) {
		place(b, shift, i, ML_LIVE_WAY(m), in);
		return true;
	}
	i ^= ml_live_alt(shift, in->key);
	if ((m = empty_way(&b[i]))) {
		place(b, shift, i, ML_LIVE_WAY(m), in);
		return true;
	}
	for (unsigned k = 0; k < MAX_KICKS; k++) {
		*rng = *rng * 1103515245u + 12345u;
		unsigned w = (*rng >> 16) % WAYS;
		struct entry victim = unplace(b, shift, i, w);
		place(b, shift, i, w, in);
		*in = victim;
		i ^= ml_live_alt(shift, in->key);	/* the victim's other bucket */
		if ((m = empty_way(&b[i]))) {
			place(b, shift, i, ML_LIVE_WAY(m), in);
			return true;
		}
	}
	return false;
}

static inline size_t table_bytes(uint32_t shift)
{
	return sizeof(struct ml_live_bucket) << (64 - shift);
}

/* Moves s into a table twice as big (more if unlucky), with *pending (if
 * not NULL) as one more entry.  Returns 0, or -ENOMEM with s and *pending
 * unchanged. */
static int grow(struct ml_live_shard *s, const struct entry *pending)
{
	uint32_t shift = s->shift ? s->shift - 1 : 64 - MIN_BITS;
	uint32_t n = s->shift ? 1u << (64 - s->shift) : 0;
	for (;; shift--) {
		void *p = mmap(NULL, table_bytes(shift), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -ENOMEM;
		ml_want_huge_pages(p, table_bytes(shift));	/* read at random */
		struct ml_live_bucket *fresh = p;
		bool ok = true;
		for (uint32_t i = 0; ok && i < n; i++)
			for (unsigned w = 0; ok && w < WAYS; w++)
				if (s->b[i].key[w]) {
					struct entry e = way_of(&s->b[i], w);
					ok = put(fresh, shift, &e, &s->rng);
				}
		if (ok && pending) {
			struct entry e = *pending;
			ok = put(fresh, shift, &e, &s->rng);
		}
		if (ok) {
			if (s->b)
				munmap(s->b, table_bytes(s->shift));
			s->b = fresh;
			s->shift = shift;
			s->grow_at = (uint32_t)(((uint64_t)WAYS << (64 - shift)) * LOAD_PERCENT / 100);
			return 0;
		}
		munmap(p, table_bytes(shift));	/* an unlucky walk: twice as big again */
	}
}

/* The bucket and way holding key, or NULL.  Lock held. */
static struct ml_live_bucket *lookup(struct ml_live_shard *s, uint64_t key, unsigned *way)
{
	if (!s->shift)
		return NULL;
	__m128i k = _mm_set1_epi64x((long long)key);
	uint32_t i = ml_live_b1(s->shift, key);
	for (int round = 0; round < 2; round++, i ^= ml_live_alt(s->shift, key)) {
		uint32_t m = ml_live_match(&s->b[i], k);
		if (m) {
			*way = ML_LIVE_WAY(m);
			return &s->b[i];
		}
	}
	return NULL;
}

static uint64_t big_take(struct ml_live_shard *s, uint64_t key)
{
	for (uint32_t i = 0; i < s->n_big; i++)
		if (s->big[i].key == key) {
			uint64_t size = s->big[i].size;
			s->big[i] = s->big[--s->n_big];
			return size;
		}
	return BIG_SIZE;	/* not reached: every BIG_SIZE slot has its entry */
}

static int big_add(struct ml_live_shard *s, uint64_t key, uint64_t size)
{
	if (s->n_big == s->big_cap) {
		uint32_t cap = s->big_cap ? s->big_cap * 2 : 256;
		void *p = mmap(NULL, cap * sizeof(struct ml_live_big), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -ENOMEM;
		if (s->big) {
			memcpy(p, s->big, s->n_big * sizeof(struct ml_live_big));
			munmap(s->big, s->big_cap * sizeof(struct ml_live_big));
		}
		s->big = p;
		s->big_cap = cap;
	}
	s->big[s->n_big++] = (struct ml_live_big){ key, size };
	return 0;
}

/* Fills *out from way w of b and empties it.  Lock held. */
static void take(struct ml_live_shard *s, struct ml_live_bucket *b, unsigned w, uint64_t addr,
		 uint32_t kind, struct ml_live_block *out)
{
	struct entry e = unplace(s->b, s->shift, (uint32_t)(b - s->b), w);
	out->addr = addr;
	out->kind = kind;
	out->stack = e.stack;
	out->size = e.size == BIG_SIZE ? big_take(s, e.key) : e.size;
	b->key[w] = 0;
	s->count--;
}

int ml_livetab_insert_slow(uint64_t addr, uint32_t kind, uint64_t size, uint32_t stack,
			   struct ml_live_block *old)
{
	uint64_t key = ml_live_key(addr, kind);
	struct ml_live_shard *s = ml_live_shard_of(addr);
	struct entry in = { key, stack, size >= BIG_SIZE ? BIG_SIZE : (uint32_t)size };
	unsigned w;
	int rc = 0;
	old->addr = 0;
	if (!ml_tl_plain)
		ml_spin_lock(&s->lock);
	if (s->count >= s->grow_at && (rc = grow(s, NULL)) < 0)
		goto out;
	if (__builtin_expect(size < BIG_SIZE, 1)) {
		/* The common case here (the inline insert found the first
		 * bucket full): the key in neither bucket (the other one read
		 * only if the first sent keys there), an empty way in either. */
		uint32_t i = ml_live_b1(s->shift, key);
		struct ml_live_bucket *b1 = &s->b[i], *b2 = &s->b[i ^ ml_live_alt(s->shift, key)];
		__m128i k = _mm_set1_epi64x((long long)key);
		uint32_t n = ml_live_spilled(b1);
		if (!ml_live_match(b1, k) && !(n && ml_live_match(b2, k))) {
			uint32_t m = empty_way(b1);
			if (m) {
				set_way(b1, ML_LIVE_WAY(m), &in);
				s->count++;
				goto out;
			}
			if ((m = empty_way(b2))) {
				set_way(b2, ML_LIVE_WAY(m), &in);
				spill_inc(b1);
				s->count++;
				goto out;
			}
		}
	}
	struct ml_live_bucket *b = lookup(s, key, &w);
	if (__builtin_expect(b != NULL, 0))
		take(s, b, w, addr, kind, old);	/* the allocator reused it: we missed its free */
	if (__builtin_expect(size >= BIG_SIZE, 0) && (rc = big_add(s, key, size)) < 0)
		goto out;
	struct entry left = in;
	if (!put(s->b, s->shift, &left, &s->rng) && (rc = grow(s, &left)) < 0) {
		/* left is an entry evicted on the way, now without a slot: it
		 * takes the place of ours, which is not recorded. */
		if (left.key != key && (b = lookup(s, key, &w))) {
			uint32_t i = (uint32_t)(b - s->b);
			unplace(s->b, s->shift, i, w);
			place(s->b, s->shift, i, w, &left);
		}
		goto out;
	}
	s->count++;
out:
	if (!ml_tl_plain)
		ml_spin_unlock(&s->lock);
	return rc;
}

struct ml_live_val ml_livetab_take_slow(uint64_t addr, uint32_t kind)
{
	uint64_t key = ml_live_key(addr, kind);
	struct ml_live_shard *s = ml_live_shard_of(addr);
	struct ml_live_val v = { 0, 0, 0 };
	unsigned w;
	if (!ml_tl_plain)
		ml_spin_lock(&s->lock);
	if (__builtin_expect(s->shift != 0, 1)) {
		/* lookup and take in one: the key's first bucket, then its
		 * other one (whose entry the first one counts as spilled) */
		uint32_t i = ml_live_b1(s->shift, key);
		struct ml_live_bucket *b1 = &s->b[i], *b = b1;
		__m128i k = _mm_set1_epi64x((long long)key);
		uint32_t m = ml_live_match(b1, k);
		if (!m && (m = ml_live_match(b = &s->b[i ^ ml_live_alt(s->shift, key)], k)))
			spill_dec(b1);
		if (m) {
			w = ML_LIVE_WAY(m);
			uint32_t size = b->size[w];
			v = (struct ml_live_val){ size == BIG_SIZE ? big_take(s, key) : size,
						  b->stack[w] & ~ML_LIVE_SPILL, 1 };
			b->key[w] = 0;
			s->count--;
		}
	}
	if (!ml_tl_plain)
		ml_spin_unlock(&s->lock);
	return v;
}

uint64_t ml_livetab_size(uint64_t addr, uint32_t kind)
{
	uint64_t key = ml_live_key(addr, kind), size = 0;
	struct ml_live_shard *s = ml_live_shard_of(addr);
	unsigned w;
	if (!ml_tl_plain)
		ml_spin_lock(&s->lock);
	struct ml_live_bucket *b = lookup(s, key, &w);
	if (b && b->size[w] != BIG_SIZE)
		size = b->size[w];
	else if (b)
		for (uint32_t i = 0; i < s->n_big; i++)
			if (s->big[i].key == key)
				size = s->big[i].size;
	if (!ml_tl_plain)
		ml_spin_unlock(&s->lock);
	return size;
}

uint64_t ml_core_live_block_size(const void *ptr, enum ml_kind kind)
{
	return ptr ? ml_livetab_size((uint64_t)(uintptr_t)ptr, kind) : 0;
}

uint64_t ml_livetab_count(void)
{
	uint64_t n = 0;
	for (uint32_t k = 0; k < ML_LIVE_SHARDS; k++)
		n += __atomic_load_n(&ml_live_shards[k].count, __ATOMIC_RELAXED);
	return n;
}

uint64_t ml_livetab_bytes(void)
{
	uint64_t n = 0;
	for (uint32_t k = 0; k < ML_LIVE_SHARDS; k++) {
		const struct ml_live_shard *s = &ml_live_shards[k];
		if (s->shift)
			n += table_bytes(s->shift);
		n += s->big_cap * sizeof(struct ml_live_big);
	}
	return n;
}

void ml_livetab_reset(void)
{
	for (uint32_t k = 0; k < ML_LIVE_SHARDS; k++) {
		struct ml_live_shard *s = &ml_live_shards[k];
		if (s->b)
			munmap(s->b, table_bytes(s->shift));
		if (s->big)
			munmap(s->big, s->big_cap * sizeof(struct ml_live_big));
		memset(s, 0, sizeof(*s));
	}
}
