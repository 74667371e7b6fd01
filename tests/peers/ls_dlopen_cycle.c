/* ls_dlopen_cycle.c - peer: LeakSanitizer's and bytehound's dlopen tests: a
 * library loaded and unloaded five times allocates in its constructor and
 * frees in its destructor; one block it hands out is kept after the last
 * dlclose, allocated by code no longer mapped (peers-flags: -ldl). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	void *kept = NULL;
	for (int i = 0; i < 5; i++) {
		void *lib = dlopen("./libls_dlopen_cycle.so", RTLD_NOW | RTLD_LOCAL);
		if (!lib)
			return 1;
		void *(*give)(size_t) = (void *(*)(size_t))dlsym(lib, "give");
		void *p = give(1000 + (size_t)i);
		if (i == 4)
			kept = p;
		else
			free(p);
		dlclose(lib);
	}
	printf("%d\n", kept != NULL);
	return 0;
}
