/* vg_malloc_family.c - peer: valgrind memcheck's malloc1/malloc3/realloc*
 * tests: every malloc-family entry point, realloc chains (grow, shrink,
 * NULL, to 0), failed allocations (never counted), malloc(0). */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void *volatile sink;

int main(void)
{
	char *p = malloc(10);
	for (int i = 1; i <= 20; i++)
		p = realloc(p, (size_t)i * 100);	/* grow, then shrink below */
	p = realloc(p, 7);
	free(p);
	void *z = malloc(0);			/* a real 0-byte block */
	void *r = realloc(NULL, 33);		/* realloc(NULL) is malloc */
	void *q = malloc(44);
	q = realloc(q, 0);			/* glibc: frees, returns NULL */
	size_t huge = SIZE_MAX / 2;
	sink = malloc(huge);			/* fails: not counted */
	sink = calloc(huge, 4);			/* overflows: not counted */
	void *keep = malloc(55);
	sink = realloc(keep, huge);		/* fails: keep stays valid */
	void *c = calloc(12, 12);
	void *ra = reallocarray(NULL, 8, 9);
	printf("%d %d %d %d\n", z != NULL, r != NULL, q == NULL, c != NULL && ra != NULL);
	free(z);
	free(c);
	free(keep);
	(void)r;				/* leaked: 33 bytes */
	(void)ra;				/* leaked: 72 bytes */
	return 0;
}
