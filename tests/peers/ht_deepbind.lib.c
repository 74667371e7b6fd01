/* ht_deepbind.lib.c - the library ht_deepbind opens with RTLD_DEEPBIND. */
#include <stdlib.h>
#include <string.h>

void *lib_alloc(size_t n)
{
	return malloc(n);
}

void lib_free(void *p)
{
	free(p);
}

char *lib_copy(const char *s)
{
	return strdup(s);
}
