/* vg_many_small.c - peer: valgrind memcheck's malloc3 / heaptrack's test.c:
 * 20,000 allocations of pseudo-random sizes (a fixed seed), most freed. */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	static void *slots[512];
	unsigned seed = 12345;
	size_t total = 0;
	for (int i = 0; i < 20000; i++) {
		seed = seed * 1103515245u + 12345u;
		size_t size = (seed >> 16) % 1000;
		int k = (int)((seed >> 8) % 512);
		free(slots[k]);
		slots[k] = malloc(size);
		total += size;
	}
	for (int k = 0; k < 512; k += 3)
		free(slots[k]);
	printf("%zu\n", total);
	return 0;
}
