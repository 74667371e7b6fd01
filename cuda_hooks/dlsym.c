/* cuda_hooks/dlsym.c - finding the real definitions behind our hooks: the
 * real dlsym, RTLD_NEXT, and a search of each loaded object's own scope; and
 * the C halves of the dlsym trampoline (the trampoline itself, an exported
 * hook, is in hooks.c). */
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "cuda_hooks/internal.h"

void *(*ml_cuda_real_dlsym)(void *, const char *);

void ml_cuda_resolve_real_dlsym(void)
{
	if (ml_cuda_real_dlsym)
		return;
	void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!p)
		p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	__atomic_store_n(&ml_cuda_real_dlsym, (void *(*)(void *, const char *))p,
			 __ATOMIC_RELEASE);
}

/* Our dlsym(RTLD_NEXT, sym): the call comes from inside libmemline. */
void *ml_cuda_next_sym(const char *sym)
{
	ml_cuda_resolve_real_dlsym();
	return ml_cuda_real_dlsym ? ml_cuda_real_dlsym(RTLD_NEXT, sym) : NULL;
}

/* The definition of sym the program would have used without us, when
 * RTLD_NEXT cannot see it: a library loaded with RTLD_LOCAL (a Python
 * extension such as PyTorch's, linked with libcudart.so or -lcuda) binds its
 * calls to our exported symbol, but its libcudart / libcuda is outside the
 * global scope.  Searches each loaded object's own scope (dlopen NOLOAD +
 * dlsym on the handle), skipping ours.  Guard held by the caller. */
#define MAX_OBJECTS 512
struct objects {
	const char *name[MAX_OBJECTS];
	int n;
	uintptr_t self_base;
};

static int collect_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct objects *o = arg;
	if (o->n < MAX_OBJECTS && info->dlpi_name && info->dlpi_name[0] &&
	    info->dlpi_addr != o->self_base)
		o->name[o->n++] = info->dlpi_name;
	return 0;
}

static void *search_loaded(const char *sym, void *ours)
{
	static struct objects objs;	/* static: large; callers are rare (first call only) */
	static volatile int busy;
	Dl_info self;
	void *found = NULL;
	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return NULL;
	if (!dladdr((void *)search_loaded, &self))
		goto out;
	objs.n = 0;
	objs.self_base = (uintptr_t)self.dli_fbase;
	/* Names first, lookups after: dlopen must not run under the loader's
	 * lock that dl_iterate_phdr holds. */
	dl_iterate_phdr(collect_object, &objs);
	int (*real_dlclose)(void *) = (int (*)(void *))ml_cuda_next_sym("dlclose");
	for (int i = 0; i < objs.n && !found; i++) {
		void *h = dlopen(objs.name[i], RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		void *p = ml_cuda_real_dlsym(h, sym);
		if (p && p != ours) {
			Dl_info at;
			if (!dladdr(p, &at) || at.dli_fbase != self.dli_fbase)
				found = p;
		}
		if (real_dlclose)
			real_dlclose(h);
	}
out:
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	return found;
}

/* The real definition behind our exported sym (ours: our export). */
void *ml_cuda_find_real(const char *sym, void *ours)
{
	void *p = ml_cuda_next_sym(sym);
	if (p && p != ours)
		return p;
	bool guarded = ml_guard_enter_always();
	p = ml_cuda_real_dlsym ? search_loaded(sym, ours) : NULL;
	if (guarded)
		ml_guard_exit();
	return p;
}

int ml_cuda_dlsym_wants(const char *name)
{
	ml_cuda_resolve_real_dlsym();
	if (!ml_cuda_real_dlsym)
		return 1;	/* ml_cuda_dlsym_hooked answers NULL */
	return name && name[0] == 'c' && name[1] == 'u' && ml_cuda_hook_by_sym(name) >= 0;
}

void *ml_cuda_dlsym_hooked(void *handle, const char *name)
{
	if (!ml_cuda_real_dlsym || !name)
		return NULL;
	void *real = ml_cuda_real_dlsym(handle, name);
	int i = ml_cuda_hook_by_sym(name);
	if (!real || i < 0)
		return real;
	if (i == H_GPA && real != ml_cuda_hooks[i].export_wrap)
		ml_cuda_gpa_v1_real = real;
	if (i == H_GPA_V2 && real != ml_cuda_hooks[i].export_wrap)
		ml_cuda_gpa_v2_real = real;
	return ml_cuda_claim(&ml_cuda_hooks[i], real);
}

