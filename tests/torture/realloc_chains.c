/* tests/torture/realloc_chains.c - realloc chains: from NULL, growing one
 * byte at a time, shrinking, to zero, reallocarray, a failed (overflowing)
 * reallocarray that leaves its block alone, and one chain left to leak.
 *
 * @expect realloc_chains grow allocs=100 alloc_bytes=5050 frees=100 freed_bytes=5050
 * @expect realloc_chains shrink allocs=4 alloc_bytes=2000 frees=4 freed_bytes=2000
 * @expect realloc_chains leak_one allocs=3 alloc_bytes=60 frees=2 freed_bytes=30 leaked_blocks=1 leaked_bytes=30
 * @expect realloc_chains arrays allocs=2 alloc_bytes=120 frees=2 freed_bytes=120
 * @expect realloc_chains main allocs=0 frees=0
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *kept;

/* 1, 2, ..., 100 bytes: 100 allocations of 5050 bytes, each freed by the
 * next realloc or the last free. */
__attribute__((noinline)) static unsigned grow(void)
{
	unsigned char *p = NULL;
	unsigned sum = 0;
	for (unsigned n = 1; n <= 100; n++) {
		p = realloc(p, n);
		p[n - 1] = (unsigned char)n;
	}
	for (unsigned i = 0; i < 100; i++)
		sum += p[i];
	free(p);
	return sum;
}

/* 1000 -> 500 -> 300 -> 200, then realloc(p, 0) frees it (glibc). */
__attribute__((noinline)) static void shrink(void)
{
	char *p = realloc(NULL, 1000);
	memset(p, 'x', 1000);
	p = realloc(p, 500);
	p = realloc(p, 300);
	p = realloc(p, 200);
	p = realloc(p, 0);
	free(p);	/* NULL */
}

/* 10 -> 20 -> 30, never freed: one block of 30 bytes leaks. */
__attribute__((noinline)) static void leak_one(void)
{
	char *p = malloc(10);
	p = realloc(p, 20);
	kept = realloc(p, 30);
}

/* reallocarray: 5 x 8, then 10 x 8; an overflowing one fails and the block
 * stays as it was. */
__attribute__((noinline)) static int arrays(void)
{
	uint64_t *a = reallocarray(NULL, 5, sizeof(*a));
	uint64_t *b = reallocarray(a, 10, sizeof(*a));
	void *c = reallocarray(b, SIZE_MAX / 2, 4);
	int failed = c == NULL;
	free(b);
	return failed;
}

int main(void)
{
	printf("grow %u\n", grow());
	shrink();
	leak_one();
	printf("overflow refused %d\n", arrays());
	return 0;
}
