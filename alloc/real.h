/* alloc/real.h - the real (next) implementations of every hooked symbol,
 * found with dlsym(RTLD_NEXT).  One X-macro line per hooked symbol:
 * X(field, "symbol", return type, (parameter types)). */
#ifndef ML_ALLOC_REAL_H
#define ML_ALLOC_REAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ML_REAL_SYMBOLS(X) \
	X(malloc, "malloc", void *, (size_t)) \
	X(calloc, "calloc", void *, (size_t, size_t)) \
	X(realloc, "realloc", void *, (void *, size_t)) \
	X(reallocarray, "reallocarray", void *, (void *, size_t, size_t)) \
	X(free, "free", void, (void *)) \
	X(posix_memalign, "posix_memalign", int, (void **, size_t, size_t)) \
	X(aligned_alloc, "aligned_alloc", void *, (size_t, size_t)) \
	X(memalign, "memalign", void *, (size_t, size_t)) \
	X(valloc, "valloc", void *, (size_t)) \
	X(pvalloc, "pvalloc", void *, (size_t)) \
	X(new_plain, "_Znwm", void *, (size_t)) \
	X(new_array, "_Znam", void *, (size_t)) \
	X(new_nothrow, "_ZnwmRKSt9nothrow_t", void *, (size_t, const void *)) \
	X(new_array_nothrow, "_ZnamRKSt9nothrow_t", void *, (size_t, const void *)) \
	X(new_aligned, "_ZnwmSt11align_val_t", void *, (size_t, size_t)) \
	X(new_array_aligned, "_ZnamSt11align_val_t", void *, (size_t, size_t)) \
	X(new_aligned_nothrow, "_ZnwmSt11align_val_tRKSt9nothrow_t", void *, \
	  (size_t, size_t, const void *)) \
	X(new_array_aligned_nothrow, "_ZnamSt11align_val_tRKSt9nothrow_t", void *, \
	  (size_t, size_t, const void *)) \
	X(delete_plain, "_ZdlPv", void, (void *)) \
	X(delete_array, "_ZdaPv", void, (void *)) \
	X(delete_sized, "_ZdlPvm", void, (void *, size_t)) \
	X(delete_array_sized, "_ZdaPvm", void, (void *, size_t)) \
	X(delete_nothrow, "_ZdlPvRKSt9nothrow_t", void, (void *, const void *)) \
	X(delete_array_nothrow, "_ZdaPvRKSt9nothrow_t", void, (void *, const void *)) \
	X(delete_aligned, "_ZdlPvSt11align_val_t", void, (void *, size_t)) \
	X(delete_array_aligned, "_ZdaPvSt11align_val_t", void, (void *, size_t)) \
	X(delete_sized_aligned, "_ZdlPvmSt11align_val_t", void, (void *, size_t, size_t)) \
	X(delete_array_sized_aligned, "_ZdaPvmSt11align_val_t", void, (void *, size_t, size_t)) \
	X(delete_aligned_nothrow, "_ZdlPvSt11align_val_tRKSt9nothrow_t", void, \
	  (void *, size_t, const void *)) \
	X(delete_array_aligned_nothrow, "_ZdaPvSt11align_val_tRKSt9nothrow_t", void, \
	  (void *, size_t, const void *)) \
	X(mallocx, "mallocx", void *, (size_t, int)) \
	X(rallocx, "rallocx", void *, (void *, size_t, int)) \
	X(xallocx, "xallocx", size_t, (void *, size_t, size_t, int)) \
	X(sdallocx, "sdallocx", void, (void *, size_t, int)) \
	X(dallocx, "dallocx", void, (void *, int))

#define ML_REAL_FIELD(field, sym, ret, params) ret (*field) params;
struct ml_real {
	ML_REAL_SYMBOLS(ML_REAL_FIELD)
	volatile int ready;
	/* libstdc++'s new and delete are malloc and free (ml_real_cxx_decide):
	 * 0 not known yet, 1 yes, -1 no. */
	int cxx_direct;
};
#undef ML_REAL_FIELD

extern struct ml_real ml_real;

/* Looks every symbol up (idempotent; cheap once ready).  While it runs,
 * dlsym's own allocations are served by the bootstrap buffer. */
void ml_real_resolve(void);
/* True while ml_real_resolve() is running (on any thread). */
bool ml_real_resolving(void);
/* dlsym(RTLD_NEXT, sym) for a symbol that was absent at start-up (C++ or
 * jemalloc loaded later by dlopen), else the first definition in a
 * library's local scope (ml_export_anywhere; its module then stays
 * loaded).  NULL if still absent.  *absent_at
 * (the caller's, 0 at first) remembers the loader's count of loaded objects
 * at the last miss: while no object has been loaded since, the answer is
 * NULL without asking the loader again (a failed dlsym walks every global
 * object and formats an error: ~20 us; libstdc++ loaded only into an
 * extension's local scope, as by python3 importing torch, would otherwise
 * pay it on every operator new and delete). */
void *ml_real_lookup(const char *sym, uint64_t *absent_at);

/* Sets ml_real.cxx_direct: 1 when the next operator new, new[], delete,
 * delete[] and their sized deletes are libstdc++'s and malloc, free and
 * the operators libstdc++ calls (new, delete, delete[]) reach memline's
 * hooks first; -1 when not; left 0 while libstdc++ is not loaded.  Called
 * with the guard held. */
void ml_real_cxx_decide(void);

/* The bootstrap buffer: a static heap for allocations made before the real
 * allocator is known (dlsym's calloc).  Never freed. */
void *ml_bootstrap_alloc(size_t size, size_t align);
#define ML_BOOTSTRAP_SIZE (256u << 10)
extern unsigned char ml_bootstrap[ML_BOOTSTRAP_SIZE];
static inline bool ml_bootstrap_owns(const void *p)
{
	return (uintptr_t)p - (uintptr_t)ml_bootstrap < ML_BOOTSTRAP_SIZE;
}
/* The size a bootstrap block was allocated with. */
size_t ml_bootstrap_size(const void *p);

/* At start-up: when another definition of malloc (or of the rest of the C
 * family) comes first in the symbol lookup, the program's own or an earlier
 * preload's, says so in one line and in the profile (a note, and
 * ML_META_ALLOC_SHADOWED). */
void ml_real_check_first(void);

#endif
