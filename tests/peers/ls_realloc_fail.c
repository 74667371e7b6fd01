/* ls_realloc_fail.c - peer: LeakSanitizer's realloc_failure_keeps_original,
 * realloc_too_big, realloc_zero, malloc_zero and calloc overflow tests. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	char *p = malloc(64);
	strcpy(p, "kept");
	char *q = realloc(p, SIZE_MAX - 4096);		/* fails: p untouched */
	void *z1 = malloc(0);
	void *z2 = calloc(0, 10);
	void *z3 = realloc(malloc(1), 0);			/* frees, NULL */
	void *ov = calloc(SIZE_MAX / 8, 16);		/* overflow: NULL */
	printf("%s %d %d %d %d\n", p, q == NULL, z1 != NULL && z2 != NULL, z3 == NULL, ov == NULL);
	free(z1);
	free(p);
	return 0;	/* z2 leaks: 0 bytes, 1 block */
}
