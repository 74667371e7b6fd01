/* cuda_hooks/blocks.c - the table of CUDA blocks (blocks.h): open addressing
 * with linear probing and backward-shift deletion (no tombstones), in one
 * lazily mmap'd array behind one spinlock.  CUDA allocation calls cost
 * microseconds in the driver, so one lock is not the bottleneck. */
#include <stddef.h>
#include <sys/mman.h>
#include "cuda_hooks/blocks.h"

#define SLOTS (1u << 20)		/* 24 MiB of address space, touched as used */
#define MAX_USED (SLOTS - SLOTS / 8)

struct slot {
	uint64_t addr;
	uint32_t kind;
	uint32_t used;
	void *ctx;
};

static struct slot *table;
static uint32_t n_used;
static volatile int lock;
static int map_failed;

static void lock_take(void)
{
	while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&lock, __ATOMIC_RELAXED))
			__builtin_ia32_pause();
}

static void lock_drop(void)
{
	__atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}

/* Maps the table on first use; lock held. */
static bool ready(void)
{
	if (table)
		return true;
	if (map_failed)
		return false;
	void *p = mmap(NULL, (size_t)SLOTS * sizeof(struct slot), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		map_failed = 1;
		return false;
	}
	table = p;
	return true;
}

static uint32_t home(uint64_t addr, uint32_t kind)
{
	uint64_t h = (addr ^ ((uint64_t)kind << 56)) * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(h >> 44) & (SLOTS - 1);
}

/* The slot holding (addr, kind), or SLOTS.  Lock held. */
static uint32_t find(uint64_t addr, uint32_t kind)
{
	for (uint32_t i = home(addr, kind);; i = (i + 1) & (SLOTS - 1)) {
		if (!table[i].used)
			return SLOTS;
		if (table[i].addr == addr && table[i].kind == kind)
			return i;
	}
}

/* Empties slot i and shifts later members of its cluster back.  Lock held. */
static void erase(uint32_t i)
{
	uint32_t j = i;
	for (;;) {
		j = (j + 1) & (SLOTS - 1);
		if (!table[j].used)
			break;
		uint32_t h = home(table[j].addr, table[j].kind);
		/* j may move to i if its home is not in (i, j] (cyclically). */
		bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
		if (stays)
			continue;
		table[i] = table[j];
		i = j;
	}
	table[i].used = 0;
	n_used--;
}

bool ml_cuda_blocks_put(uint64_t addr, uint32_t kind, void *ctx)
{
	bool ok = false;
	lock_take();
	if (!ready())
		goto out;
	uint32_t i = find(addr, kind);
	if (i == SLOTS) {
		if (n_used >= MAX_USED)
			goto out;
		for (i = home(addr, kind); table[i].used; i = (i + 1) & (SLOTS - 1))
			;
		n_used++;
	}
	table[i].addr = addr;
	table[i].kind = kind;
	table[i].used = 1;
	table[i].ctx = ctx;
	ok = true;
out:
	lock_drop();
	return ok;
}

bool ml_cuda_blocks_take(uint64_t addr, uint32_t kinds, uint32_t *kind, void **ctx)
{
	bool found = false;
	lock_take();
	if (!table)
		goto out;
	for (uint32_t k = 0; k < 32 && !found; k++) {
		if (!(kinds & (1u << k)))
			continue;
		uint32_t i = find(addr, k);
		if (i == SLOTS)
			continue;
		*kind = k;
		*ctx = table[i].ctx;
		erase(i);
		found = true;
	}
out:
	lock_drop();
	return found;
}

uint64_t ml_cuda_blocks_sweep(void *ctx, uint32_t kinds,
			      void (*fn)(uint64_t addr, uint32_t kind, void *arg), void *arg)
{
	uint64_t n = 0;
	lock_take();
	if (!table)
		goto out;
	for (uint32_t i = 0; i < SLOTS;) {
		struct slot s = table[i];
		if (s.used && s.ctx == ctx && s.kind < 32 && (kinds & (1u << s.kind))) {
			erase(i);	/* a later entry may now sit at i: look again */
			fn(s.addr, s.kind, arg);
			n++;
			continue;
		}
		i++;
	}
out:
	lock_drop();
	return n;
}

void ml_cuda_blocks_reset(void)
{
	lock = 0;
	if (!table)
		return;
	for (uint32_t i = 0; i < SLOTS; i++)
		if (table[i].used)
			table[i].used = 0;
	n_used = 0;
}
