/* tests/torture/deepbind.lib.c - the library deepbind.c opens with
 * RTLD_DEEPBIND: its malloc and free bind to libc's, in its own scope. */
#include <stdlib.h>

void *lib_alloc(size_t n)
{
	return malloc(n);
}

void lib_free(void *p)
{
	free(p);
}
