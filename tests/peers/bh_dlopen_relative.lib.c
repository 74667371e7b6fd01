/* bh_dlopen_relative.lib.c - the library bh_dlopen_relative opens. */
#include <stdlib.h>

void *function(void)
{
	return malloc(123123);	/* L:lib_alloc */
}
