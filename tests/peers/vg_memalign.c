/* vg_memalign.c - peer: valgrind memcheck's memalign_test, memalign2,
 * posix_memalign: aligned allocations with valid and invalid alignments
 * (invalid ones fail and are not counted).  Not pvalloc: valgrind 3.19
 * aborts there (docs/comparison.md). */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	void *p[16];
	int n = 0, fails = 0;
	size_t aligns[] = { 8, 16, 64, 256, 4096, 65536 };
	for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		p[n++] = memalign(aligns[i], 100 + i);
		if (posix_memalign(&p[n], aligns[i], 200 + i) == 0)
			n++;
	}
	void *bad = NULL;
	fails += posix_memalign(&bad, 3, 10) == EINVAL;		/* not a power of 2 */
	fails += posix_memalign(&bad, 4, 10) == EINVAL;		/* below sizeof(void *) */
	p[n++] = valloc(300);
	p[n++] = aligned_alloc(128, 512);
	printf("%d allocations, %d refused\n", n, fails);
	for (int i = 0; i < n; i += 2)
		free(p[i]);				/* every other one leaks */
	return 0;
}
