/* alloc/real.c - finds the real allocation functions behind the hooks
 * (dlsym RTLD_NEXT), and the bootstrap buffer that serves dlsym's own
 * allocations while that lookup runs. */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include "alloc/real.h"

struct ml_real ml_real;
static volatile int resolving;

#define BOOTSTRAP_SIZE (256u * 1024u)
static unsigned char bootstrap[BOOTSTRAP_SIZE] __attribute__((aligned(64)));
static size_t bootstrap_used;

void *ml_real_lookup(const char *sym)
{
	return dlsym(RTLD_NEXT, sym);
}

void ml_real_resolve(void)
{
	if (ml_real.ready || resolving)
		return;
	resolving = 1;
#define ML_REAL_LOAD(field, sym, ret, params) \
	ml_real.field = (ret (*) params)dlsym(RTLD_NEXT, sym);
	ML_REAL_SYMBOLS(ML_REAL_LOAD)
#undef ML_REAL_LOAD
	resolving = 0;
	ml_real.ready = 1;
}

bool ml_real_resolving(void)
{
	return resolving;
}

/* Each block is preceded by 16 bytes holding its size. */
void *ml_bootstrap_alloc(size_t size, size_t align)
{
	if (align < 16)
		align = 16;
	for (;;) {
		size_t used = __atomic_load_n(&bootstrap_used, __ATOMIC_RELAXED);
		size_t start = (used + 16 + align - 1) & ~(align - 1);
		size_t end = start + size;
		if (size > BOOTSTRAP_SIZE || end > BOOTSTRAP_SIZE)
			return NULL;
		if (__atomic_compare_exchange_n(&bootstrap_used, &used, end, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			memcpy(bootstrap + start - 16, &size, sizeof(size));
			return bootstrap + start;	/* static storage: already zero */
		}
	}
}

bool ml_bootstrap_owns(const void *p)
{
	return (const unsigned char *)p >= bootstrap &&
		(const unsigned char *)p < bootstrap + BOOTSTRAP_SIZE;
}

size_t ml_bootstrap_size(const void *p)
{
	size_t size;
	memcpy(&size, (const unsigned char *)p - 16, sizeof(size));
	return size;
}
