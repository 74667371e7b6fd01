/* tests/torture/own_malloc.c - the program defines malloc, calloc, realloc
 * and free itself (a bump allocator), so every caller, libc included, gets
 * them instead of memline's: memline can record none of those calls, and
 * says so on stderr and in the profile instead of showing an empty
 * profile without a word.
 *
 * @warns malloc, calloc, realloc and free are defined by
 * @expect own_malloc main allocs=0 frees=0
 * @end own_malloc exit 0
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static _Alignas(16) char arena[1 << 20];
static size_t used;

void *malloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n > sizeof(arena) - used)
		return NULL;
	used += n;
	return arena + used - n;
}

void free(void *p)
{
	(void)p;
}

void *calloc(size_t n, size_t size)
{
	void *p = n && size > (size_t)-1 / n ? NULL : malloc(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

void *realloc(void *p, size_t n)
{
	void *q = malloc(n);
	if (q && p)
		memmove(q, p, n);	/* bump blocks: the old one is at most as long */
	return q;
}

int main(void)
{
	char *s = malloc(100);
	strcpy(s, "own allocator");
	puts(s);
	free(s);
	return 0;
}
