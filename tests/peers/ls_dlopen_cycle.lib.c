/* ls_dlopen_cycle.lib.c - the library ls_dlopen_cycle loads and unloads. */
#include <stdlib.h>

static void *state;

__attribute__((constructor)) static void setup(void)
{
	state = malloc(2048);
}

__attribute__((destructor)) static void teardown(void)
{
	free(state);
}

void *give(size_t n)
{
	return malloc(n);
}
