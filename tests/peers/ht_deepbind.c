/* ht_deepbind.c - peer: heaptrack's tests/manual/dlopen.cpp: a library
 * opened with RTLD_DEEPBIND binds malloc and free to libc's before any
 * preloaded library's.  Blocks cross between it and the program both ways
 * (peers-flags: -ldl). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	void *lib = dlopen("./libht_deepbind.so", RTLD_NOW | RTLD_DEEPBIND);
	if (!lib) {
		printf("dlopen failed: %s\n", dlerror());
		return 1;
	}
	void *(*lib_alloc)(size_t) = (void *(*)(size_t))dlsym(lib, "lib_alloc");
	void (*lib_free)(void *) = (void (*)(void *))dlsym(lib, "lib_free");
	char *(*lib_copy)(const char *) = (char *(*)(const char *))dlsym(lib, "lib_copy");
	void *mine = malloc(100);
	lib_free(mine);				/* the program's block, freed in the library */
	void *theirs = lib_alloc(200);
	free(theirs);				/* the library's block, freed here */
	void *kept = lib_alloc(300);		/* leaked, allocated in the library */
	lib_free(lib_alloc(400));		/* both in the library */
	char *copy = lib_copy("deep");		/* strdup inside libc, from the library */
	void *grown = lib_alloc(10);
	grown = realloc(grown, 1000);		/* the library's block grown here */
	free(grown);
	printf("%s %d\n", copy, kept != NULL);
	free(copy);
	return 0;
}
