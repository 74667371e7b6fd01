/* cuda_hooks/procaddr.c - which hook stands for a driver function handed
 * out by cuGetProcAddress or dlsym, keyed by (name, version, flags), and the
 * claim of one of its wrapper slots for that function. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cuda_hooks/internal.h"

int ml_cuda_hook_by_sym(const char *name)
{
	for (int i = 0; i < H_COUNT; i++)
		if (strcmp(ml_cuda_hooks[i].sym, name) == 0)
			return i;
	return -1;
}

/* ------------------------------------------------- learning driver functions */

/* The driver's own cuGetProcAddress entry points, when seen (they tell the
 * two ABIs apart in a lookup of "cuGetProcAddress" itself). */
void *volatile ml_cuda_gpa_v1_real, *volatile ml_cuda_gpa_v2_real;

/* MEMLINE_CUDA_TRACE=1: one line on stderr per driver function wrapped (for
 * tests and for checking a new driver or runtime). */
int ml_cuda_trace;

static void trace_wrapped(const char *sym, int slot)
{
	char line[160];
	if (!ml_cuda_trace)
		return;
	int n = snprintf(line, sizeof(line), "memline: cuda: wrapped %s (slot %d)\n", sym, slot);
	if (n > 0 && ml_stderr_is_ours() && write(2, line, (size_t)n) < 0)
		ml_cuda_trace = 0;
}

/* Hands out h's wrapper for the driver's function real, or real itself when
 * h already stands for another function (then the call is not counted). */
/* Hands out h's wrapper for the driver's function real; NULL when both of
 * h's slots already stand for other functions. */
static void *claim_slot(struct hook *h, void *real)
{
	if (real == h->export_wrap)
		return real;		/* ours already */
	for (int s = 0; s < PROC_SLOTS; s++) {
		void *expected = NULL;
		if (real == h->proc_wrap[s])
			return real;
		if (__atomic_compare_exchange_n(&h->proc_real[s], &expected, real, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			trace_wrapped(h->sym, s);
			return h->proc_wrap[s];
		}
		if (expected == real)
			return h->proc_wrap[s];
	}
	return NULL;
}

/* Hands out h's wrapper for the driver's function real, or real itself when
 * h already stands for other functions (then the call is not counted).  A
 * guard-only hook's wrapper forwards any revision of its function, so the
 * other guard-only hooks of the same base name are tried first. */
void *ml_cuda_claim(struct hook *h, void *real)
{
	void *w = claim_slot(h, real);
	for (int i = 0; !w && h->guard_only && i < H_COUNT; i++)
		if (ml_cuda_hooks[i].guard_only && &ml_cuda_hooks[i] != h && strcmp(ml_cuda_hooks[i].base, h->base) == 0)
			w = claim_slot(&ml_cuda_hooks[i], real);
	if (w)
		return w;
	static int warned;
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		ml_warn("CUDA: a driver function changed address; calls through the new one are not counted");
	return real;
}

/* The hook for a successful lookup of symbol, or -1. */
int ml_cuda_hook_for_lookup(const char *symbol, int version, uint64_t flags, void *real)
{
	if (strcmp(symbol, "cuGetProcAddress") == 0) {
		if (real == ml_cuda_gpa_v1_real)
			return H_GPA;
		if (real == ml_cuda_gpa_v2_real)
			return H_GPA_V2;
	}
	int ptsz = (flags & ML_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	for (int i = 0; i < H_COUNT; i++) {
		const struct hook *h = &ml_cuda_hooks[i];
		if (strcmp(h->base, symbol) == 0 && version >= h->vmin &&
		    (!h->vmax || version < h->vmax) && (h->stream < 0 || h->stream == ptsz))
			return i;
	}
	return ml_cuda_hook_by_sym(symbol);	/* asked for by its exact name */
}

