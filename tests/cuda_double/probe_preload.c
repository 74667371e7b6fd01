/* tests/cuda_double/probe_preload.c - another preloaded library that wraps
 * malloc and finds the real one with dlsym(RTLD_NEXT, "malloc"), the way
 * many tools do.  Preloaded after libmemline (whose dlsym is interposed):
 * RTLD_NEXT must still resolve relative to this library, or the lookup
 * returns this malloc itself and the program would recurse forever; this
 * library detects that and exits 99.  At exit it prints how many mallocs it
 * saw, so the test knows it was in the chain. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
static void *(*next_malloc)(size_t);
static __thread int resolving;
static unsigned long seen;

void *malloc(size_t n)
{
	if (!next_malloc) {
		if (resolving)
			return __libc_malloc(n);
		resolving = 1;
		void *p = dlsym(RTLD_NEXT, "malloc");
		resolving = 0;
		if (p == (void *)malloc) {
			static const char msg[] = "probe: dlsym(RTLD_NEXT) returned the caller's own malloc\n";
			write(2, msg, sizeof(msg) - 1);
			_exit(99);
		}
		next_malloc = (void *(*)(size_t))p;
		if (!next_malloc)
			return __libc_malloc(n);
	}
	__atomic_add_fetch(&seen, 1, __ATOMIC_RELAXED);
	return next_malloc(n);
}

__attribute__((destructor)) static void report(void)
{
	char buf[64];
	int len = snprintf(buf, sizeof(buf), "probe: %s\n", seen ? "saw mallocs" : "saw none");
	write(2, buf, (size_t)len);
}
