/* bh_basic.c - peer: bytehound's integration-tests basic.c: malloc, realloc,
 * calloc, a 1 MB posix_memalign at 64 KiB alignment, and an mmap (which is
 * not heap memory: neither tool counts it). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

__attribute__((noinline)) static void foobar(void)
{
	void *a0 = malloc(10);
	void *a1 = malloc(100);
	void *a2 = malloc(1000);
	void *a3 = realloc(a2, 10000);
	void *a4 = calloc(100, 1000);
	void *a5 = NULL;
	if (posix_memalign(&a5, 65536, 1000000) != 0)
		a5 = NULL;
	void *a6 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	free(a1);
	munmap(a6, 4096);
	printf("%d\n", a0 && a3 && a4 && a5);
}

int main(void)
{
	foobar();
	return 0;
}
