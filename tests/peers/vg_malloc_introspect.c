/* vg_malloc_introspect.c - peer: valgrind memcheck's malloc_usable_size,
 * mallinfo and malloc_trim tests: glibc's introspection calls on memory
 * allocated through memline (they must not allocate or crash). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	char *p = malloc(100);
	size_t usable = malloc_usable_size(p);
	struct mallinfo2 mi = mallinfo2();
	malloc_trim(0);
	mallopt(M_TRIM_THRESHOLD, 1 << 20);
	char *q = malloc(1 << 20);
	free(q);
	/* (valgrind's own allocator fills mallinfo2 differently: not printed) */
	printf("%d %d\n", usable >= 100, mi.arena >= 0);
	free(p);
	return 0;
}
