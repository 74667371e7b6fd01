/* bh_dlopen_relative.c - peer: bytehound's dlopen.c: a library opened by a
 * relative path ("./libbh_dlopen_relative.so", from the program's directory)
 * allocates; the report must symbolize it from any directory
 * (peers-flags: -ldl). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	void *lib = dlopen("./libbh_dlopen_relative.so", RTLD_NOW);
	if (!lib) {
		printf("dlopen failed\n");
		return 1;
	}
	void *(*function)(void) = (void *(*)(void))dlsym(lib, "function");
	void *kept = function();
	free(function());
	printf("%d\n", kept != NULL);
	return 0;
}
