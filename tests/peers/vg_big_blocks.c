/* vg_big_blocks.c - peer: valgrind memcheck's big_blocks_freed_list and
 * LeakSanitizer's large_allocation_leak: blocks above glibc's mmap
 * threshold, freed and leaked, and one of 33 MB leaked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	for (int i = 0; i < 10; i++) {
		char *p = malloc((size_t)(i + 1) * 300000);
		memset(p, 1, 64);
		free(p);
	}
	char *leak = malloc(33 << 20);
	leak[0] = 1;
	char *mid = calloc(1, 1 << 20);
	printf("%d\n", leak[0] + mid[5]);
	return 0;
}
