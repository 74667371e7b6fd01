/* core/next.c - the definitions behind libmemline's own: dlsym(RTLD_NEXT)
 * with a cache per call site, and the real sigaction.  The one place the
 * runtime looks up the next definition of a symbol (alloc/real.c keeps the
 * allocator's table; cuda_hooks/dlsym.c the driver's). */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include "core/core.h"

void *ml_next_sym(const char *sym, void **cache)
{
	void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
	if (!p) {
		p = dlsym(RTLD_NEXT, sym);
		__atomic_store_n(cache, p, __ATOMIC_RELEASE);
	}
	return p;
}

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

int ml_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	static void *cache;
	sigaction_fn real = (sigaction_fn)ml_next_sym("sigaction", &cache);
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(sig, act, old);
}
