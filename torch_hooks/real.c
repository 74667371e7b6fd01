/* torch_hooks/real.c - libc10's own c10::reportMemoryUsageToProfiler, behind
 * memline's.  torch._C loads libc10 with RTLD_LOCAL, so dlsym(RTLD_NEXT)
 * finds nothing (and a caller that trusted it would crash): the loaded
 * libraries' own dynamic symbol tables are read (ml_export_among), which
 * never names memline's preloaded definition. */
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

static bool is_c10(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	return strncmp(base, "libc10.", 7) == 0;
}

/* The first definition of sym among the loaded libraries, libc10.* first
 * (their dynamic symbol tables read in place: opening each library again,
 * as an earlier version did, cost the loader a walk of its dependencies
 * per library, 181 M instructions in an `import torch`). */
static void *lookup(const char *sym)
{
	const char *path;
	void *fn = ml_export_among(sym, &path, is_c10);
	return fn ? fn : ml_export_among(sym, &path, NULL);
}

void *ml_torch_real(enum ml_torch_fn fn)
{
	if (__atomic_load_n(&looked[fn], __ATOMIC_ACQUIRE))
		return found[fn];
	/* Nothing in here is recorded (the guard); one look-up at a time. */
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
