/* tests/torture/deepbind.c - a library opened with RTLD_DEEPBIND finds libc's
 * malloc and free in its own scope before memline's; memline points its
 * references at its own hooks after dlopen, so blocks that cross between
 * the library and the program are seen on both sides: the program's block
 * freed by the library is not a leak, the library's blocks are counted.
 * The library is found next to the program (libdeepbind.so).
 *
 * @expect deepbind main allocs=2 alloc_bytes=1100 frees=2 freed_bytes=1100 leaked_bytes=0
 * @expect deepbind lib_alloc allocs=3 alloc_bytes=700 frees=2 freed_bytes=400 leaked_bytes=300
 * @end deepbind exit 0
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *open_next_to_me(const char *lib, int mode)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 64);
	if (n <= 0)
		return NULL;
	path[n] = '\0';
	strcpy(strrchr(path, '/') + 1, lib);
	return dlopen(path, mode);
}

int main(void)
{
	void *lib = open_next_to_me("libdeepbind.so", RTLD_NOW | RTLD_DEEPBIND);
	if (!lib) {
		printf("dlopen failed: %s\n", dlerror());
		return 1;
	}
	printf("dlerror after dlopen: %s\n", dlerror() ? "set" : "none");
	void *(*lib_alloc)(size_t) = (void *(*)(size_t))dlsym(lib, "lib_alloc");
	void (*lib_free)(void *) = (void (*)(void *))dlsym(lib, "lib_free");
	void *mine = malloc(100);
	lib_free(mine);			/* the program's block, freed in the library */
	void *theirs = lib_alloc(200);
	free(theirs);			/* the library's block, freed here */
	void *kept = lib_alloc(300);	/* leaked, allocated in the library */
	lib_free(lib_alloc(200));	/* both in the library */
	void *big = malloc(1000);
	lib_free(big);
	printf("%d\n", kept != NULL);
	return 0;
}
