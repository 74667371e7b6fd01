/* torch_hooks/real.c - libc10's own c10::reportMemoryUsageToProfiler, behind
 * memline's.  torch._C loads libc10 with RTLD_LOCAL, so dlsym(RTLD_NEXT)
 * finds nothing (and a caller that trusted it would crash): each loaded
 * library is opened again with RTLD_NOLOAD, which only takes a reference
 * to what is there, and asked for the symbol in its own scope, which
 * memline's preloaded definition is not part of. */
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include "torch_hooks/internal.h"

const char *const ml_torch_symbol[ML_TORCH_FNS] = {
	[ML_TORCH_REPORT_V1] = "_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE",
	[ML_TORCH_REPORT_V2] = "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE",
	[ML_TORCH_FREE_CPU] = "_ZN3c108free_cpuEPv",
};

static void *volatile found[ML_TORCH_FNS];
static volatile bool looked[ML_TORCH_FNS];
static ml_spin_t lock;

/* Which loaded object dl_iterate_phdr should name: the index-th one that
 * passes the filter. */
struct pick {
	bool c10_only;		/* only libraries named libc10.* */
	unsigned index, seen;
	char path[4096];
};

static bool is_c10(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	return strncmp(base, "libc10.", 7) == 0;
}

static int pick_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct pick *p = arg;
	const char *name = info->dlpi_name;
	(void)size;
	if (!name || !name[0] || (p->c10_only && !is_c10(name)))
		return 0;
	if (p->seen++ != p->index)
		return 0;
	size_t len = strlen(name);
	if (len >= sizeof(p->path))
		return 0;
	memcpy(p->path, name, len + 1);
	return 1;
}

/* The definition of sym in the loaded object at path, if it is not ours. */
static void *lookup_in(const char *path, const char *sym)
{
	void *h = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return NULL;
	void *p = dlsym(h, sym);
	dlclose(h);		/* NOLOAD took a reference; give it back */
	Dl_info self, there;
	if (p && dladdr((void *)&ml_torch_real, &self) && dladdr(p, &there) &&
	    self.dli_fbase == there.dli_fbase)
		return NULL;	/* memline's own */
	return p;
}

/* The first definition of sym among the loaded libraries (libc10.* first;
 * paths are copied out of dl_iterate_phdr before dlopen, which must not run
 * inside its callback). */
static void *lookup(const char *sym)
{
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0;; i++) {
			struct pick p = { .c10_only = pass == 0, .index = i };
			if (!dl_iterate_phdr(pick_one, &p))
				break;
			if (pass == 1 && is_c10(p.path))
				continue;	/* asked already */
			void *fn = lookup_in(p.path, sym);
			if (fn)
				return fn;
		}
	}
	return NULL;
}

void *ml_torch_real(enum ml_torch_fn fn)
{
	if (__atomic_load_n(&looked[fn], __ATOMIC_ACQUIRE))
		return found[fn];
	/* dlopen and dlsym allocate: never recorded. */
	bool held = ml_guard_enter_always();
	ml_spin_lock(&lock);
	if (!looked[fn]) {
		found[fn] = lookup(ml_torch_symbol[fn]);
		__atomic_store_n(&looked[fn], true, __ATOMIC_RELEASE);
		if (!found[fn]) {
			ml_torch_flag(ML_TORCH_NO_FORWARD);
			ml_warn(fn == ML_TORCH_FREE_CPU
				? "cannot find PyTorch's c10::free_cpu; its tensors are freed with free()"
				: "cannot find PyTorch's c10::reportMemoryUsageToProfiler; "
				  "torch.profiler gets no memory events in this run");
		}
	}
	ml_spin_unlock(&lock);
	if (held)
		ml_guard_exit();
	return found[fn];
}

/* Only what this PyTorch defines: asking for the other signature would
 * warn about a function that was never there. */
void ml_torch_real_resolve(void)
{
	for (int f = 0; f < ML_TORCH_FNS; f++)
		if (!looked[f] && lookup(ml_torch_symbol[f]))
			ml_torch_real((enum ml_torch_fn)f);
}
