/* core/arena.c - the runtime's private heap: bump allocation in mmap'd
 * chunks.  Bookkeeping never goes through the hooked malloc, so it never
 * shows up in a profile.  Nothing is ever freed (stacks and counters live
 * for the whole run). */
#include <sys/mman.h>
#include <stdint.h>
#include "core/internal.h"

#define CHUNK_SIZE (4u << 20)
#define ARENA_LIMIT (4ull << 30)	/* past this, the run is degraded */

struct chunk {
	char *base;
	uint64_t used;		/* bump offset, advanced atomically */
	uint64_t size;
};

static struct chunk *volatile current;
static struct chunk first_chunk_header;	/* the header of the first chunk */
static ml_spin_t grow_lock;
static uint64_t total_mapped;
static uint64_t total_used;

void ml_want_huge_pages(void *p, size_t size)
{
	if (size >= (4u << 20))
		madvise(p, size, MADV_HUGEPAGE);
}

static void *map(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* A chunk of a big run (past 16 MiB, where counters and nodes read at
 * random span more than the TLB covers in 4 KiB pages): 2 MiB-aligned,
 * with huge pages asked for.  A small run's chunks stay on 4 KiB pages
 * (no page of 2 MiB for a few KiB used). */
#define HUGE (2u << 20)
static void *map_chunk(size_t size)
{
	if (total_mapped < (16u << 20) || size % HUGE)
		return map(size);
	char *p = map(size + HUGE);
	if (!p)
		return NULL;
	char *at = (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	if (at > p)
		munmap(p, (size_t)(at - p));
	if (p + HUGE > at)
		munmap(at + size, (size_t)(p + HUGE - at));
	ml_want_huge_pages(at, size);
	return at;
}

/* Bumps inside c; NULL if c is full. */
static void *bump(struct chunk *c, size_t size)
{
	uint64_t off = __atomic_fetch_add(&c->used, size, __ATOMIC_RELAXED);
	if (off + size > c->size)
		return NULL;
	return c->base + off;
}

/* Installs a new chunk big enough for size; called under grow_lock. */
static struct chunk *grow(size_t size)
{
	uint64_t want = size + sizeof(struct chunk) + 16 > CHUNK_SIZE ?
		(size + sizeof(struct chunk) + 16 + 4095) & ~4095ull : CHUNK_SIZE;
	if (total_mapped + want > ARENA_LIMIT)
		return NULL;
	char *base = map_chunk(want);
	if (!base)
		return NULL;
	total_mapped += want;
	struct chunk *c;
	if (!current) {
		c = &first_chunk_header;
		c->base = base;
		c->size = want;
	} else {
		/* The header lives at the start of its own chunk. */
		c = (struct chunk *)base;
		c->base = base;
		c->size = want;
		c->used = (sizeof(struct chunk) + 15) & ~15ull;
	}
	__atomic_store_n(&current, c, __ATOMIC_RELEASE);
	return c;
}

void *ml_arena_alloc(size_t size)
{
	size = (size + 15) & ~(size_t)15;
	for (;;) {
		struct chunk *c = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
		if (c) {
			void *p = bump(c, size);
			if (p) {
				__atomic_fetch_add(&total_used, size, __ATOMIC_RELAXED);
				return p;
			}
		}
		ml_spin_lock(&grow_lock);
		if (__atomic_load_n(&current, __ATOMIC_ACQUIRE) == c && !grow(size)) {
			ml_spin_unlock(&grow_lock);
			ml_degrade("out of memory for bookkeeping; allocations are no longer recorded");
			return NULL;
		}
		ml_spin_unlock(&grow_lock);
	}
}

size_t ml_arena_used(void)
{
	return __atomic_load_n(&total_used, __ATOMIC_RELAXED);
}

void ml_arena_after_fork(void)
{
	grow_lock.locked = 0;
}
