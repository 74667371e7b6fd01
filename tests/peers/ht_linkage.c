/* ht_linkage.c - peer: heaptrack's tests/manual/test_linkage.c: malloc and
 * free reached through bound-at-start symbols (-Wl,-z,now) and through
 * function pointers taken before any call (peers-flags: -Wl,-z,now). */
#include <stdio.h>
#include <stdlib.h>

static void *(*volatile malloc_ptr)(size_t) = malloc;
static void (*volatile free_ptr)(void *) = free;

int main(void)
{
	for (int i = 0; i < 10; ++i) {
		void *a = malloc(256);
		void *b = malloc_ptr(128);
		free(a);
		free_ptr(b);
	}
	void *leak = malloc_ptr(64);
	printf("%d\n", leak != NULL);
	return 0;
}
