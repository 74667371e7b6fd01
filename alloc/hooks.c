/* alloc/hooks.c - the exported allocation entry points, and nothing else:
 * the malloc family, every C++ operator new/delete, jemalloc's *allocx API.
 * Each takes the guard, calls the real function, records, releases. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "core/core.h"
#include "alloc/real.h"

#define HEAP ML_KIND_HEAP

static inline void guard_release(bool *held)
{
	if (*held)
		ml_guard_exit();
}

/* Takes the guard for this scope; released on return and on a C++ exception
 * thrown through the hook (the runtime is built with -fexceptions). */
#define GUARD bool held __attribute__((cleanup(guard_release))) = guard_take()

/* The guard, starting recording on the first call that comes before the
 * runtime's constructor (core/lifecycle.c), once the real allocator is
 * known (READY_OR ran). */
static inline bool guard_take(void)
{
	if (__builtin_expect(!ml_core_active, 0) && ml_real.ready && !ml_real_resolving())
		ml_lifecycle_start();
	return ml_guard_enter();
}

/* Makes ml_real usable; while dlsym itself allocates, serve it from the
 * bootstrap buffer (the statement given). */
#define READY_OR(bootstrap_stmt) do { \
	if (__builtin_expect(!ml_real.ready, 0)) { \
		if (ml_real_resolving()) { bootstrap_stmt; } \
		ml_real_resolve(); \
	} \
} while (0)

/* The real function for a symbol that may load late (C++, jemalloc).  A
 * lookup that failed is tried again only once the loader has loaded
 * something since (each call site keeps the loader's count it failed at). */
#define LATE(field, sym) \
	(ml_real.field ? ml_real.field : ({ \
		static uint64_t absent_at_; \
		ml_real.field = (__typeof__(ml_real.field))ml_real_lookup(sym, &absent_at_); \
	}))

/* The real allocator is known before the core starts (constructor 102,
 * core/lifecycle.c); usually the first malloc has looked it up already. */
__attribute__((constructor(101))) static void resolve_early(void)
{
	ml_real_resolve();
}

/* The common case in one test: the real allocator known, recording on,
 * and this thread not inside memline (guard free).  Then the hook takes
 * the guard itself; else it goes the whole way (READY_OR, GUARD), which
 * tests each again and starts recording if it must. */
static inline __attribute__((always_inline)) bool fast(void)
{
	/* Each is 0 or 1: bit 0 of ready & active & ~guard (no compare) */
	return __builtin_expect((ml_real.ready & ml_core_active & ~ml_tl_guard) != 0, 1);
}

/* The thread is inside memline (the guard held: the runtime's own work, or
 * a real function called by another hook, as libstdc++'s operator new
 * calls malloc) and the real allocator is known: the slow paths pass the
 * call straight through, as their whole way (READY_OR, GUARD) would a few
 * dozen instructions later. */
static inline __attribute__((always_inline)) bool inside(void)
{
	return __builtin_expect((ml_real.ready & ml_tl_guard) != 0, 0);
}

/* Under --sample: an allocation that is no sample point stops at the
 * thread's countdown, a free whose block the filter says was not sampled
 * at the filter, both in the hook (two instructions more in exact mode's
 * paths, the sampled ones saved a call, and the mark, each). */
static inline __attribute__((always_inline)) bool sample_skip(size_t size)
{
	return __builtin_expect(ml_config.sample_bytes != 0, 0) &&
	       __builtin_expect(ml_track_sample_skip(size), 1);
}

static inline __attribute__((always_inline)) bool unsampled(void *p)
{
	return __builtin_expect(ml_config.sample_bytes != 0, 0) &&
	       __builtin_expect(!ml_sampling_maybe((uint64_t)(uintptr_t)p), 1);
}

/* --sample's way without the guard (the pass), where most calls end: an
 * allocation that is no sample point is counted before the real call (the
 * count taken back if the call fails: ml_track_sample_unskip), a free of a
 * block that the filter says was not sampled goes on (the filter read
 * before the real free, after which another thread may get p back).
 * Neither enters the core; the hook tests one word (ml_pass_stop) and the
 * guard, and jumps to the real call's own small frame (pass_malloc), or
 * to the way with the guard (malloc_held).  The allocators behind the
 * hooks call none of them on the way; one that did would have that
 * allocation recorded as the program's. */
#define PASS_C (ML_PASS_OFF | ML_PASS_UNREADY)
#define PASS_CXX (ML_PASS_OFF | ML_PASS_UNREADY | ML_PASS_NO_CXX)
static inline __attribute__((always_inline)) bool pass_alloc(uint32_t stops, size_t size)
{
	return __builtin_expect(!(ml_pass_stop & stops), 0) && !ml_guard_held() &&
	       __builtin_expect(ml_track_sample_skip(size), 1);
}

static inline __attribute__((always_inline)) bool pass_free(uint32_t stops, void *p)
{
	return __builtin_expect(!(ml_pass_stop & stops), 0) && !ml_guard_held() &&
	       __builtin_expect(!ml_sampling_maybe((uint64_t)(uintptr_t)p), 1);
}

/* The real calls of the passes, each a frame of its own (the hook's
 * stays unmade: it jumps here). */
static __attribute__((noinline)) void *pass_malloc(size_t size)
{
	void *p = ml_real.malloc(size);
	if (__builtin_expect(p == NULL, 0))
		ml_track_sample_unskip(size);
	return p;
}

static __attribute__((noinline)) void *pass_calloc(size_t n, size_t size, size_t bytes)
{
	void *p = ml_real.calloc(n, size);
	if (__builtin_expect(p == NULL, 0))
		ml_track_sample_unskip(bytes);
	return p;
}

/* Inlined into each hook: the walk starts at the hook's own frame.  (The
 * core's ml_track_* leave errno as the real call left it.) */
static inline __attribute__((always_inline)) void record(bool held, void *p, size_t size)
{
	if (held && p && !sample_skip(size)) {
		ML_UNWIND_MARK();
		ml_track_alloc_heap(p, size);
		ml_unwind_unmark();
	}
}

static inline void forget(bool held, void *p)
{
	if (held && p && !unsampled(p))
		ml_track_free_heap(p);
}

/* The guarded part of a hook for a C allocation function (which never
 * throws), after fast(): call is the real call (an expression of
 * ml_real), bytes what it asked for. */
#define GUARDED_ALLOC(call, bytes) ({ \
	ml_tl_guard = 1; \
	void *p_ = (call); \
	record(true, p_, (bytes)); \
	ml_tl_guard = 0; \
	p_; \
})
/* The whole body: slow is the hook's whole path (a function of the same
 * arguments). */
#define FAST_ALLOC(call, bytes, slow) do { \
	if (fast()) \
		return GUARDED_ALLOC(call, bytes); \
	return (slow); \
} while (0)

/* ---- the malloc family ---- */

static __attribute__((noinline)) void *malloc_whole(size_t size)
{
	READY_OR(return ml_bootstrap_alloc(size, 16));
	GUARD;
	void *p = ml_real.malloc(size);
	record(held, p, size);
	return p;
}

/* (No frame before the pass-through: the whole path is a call further.) */
static __attribute__((noinline)) void *malloc_slow(size_t size)
{
	return inside() ? ml_real.malloc(size) : malloc_whole(size);
}

/* The hook's way with the guard: it jumps here (its own frame unmade) when
 * the call does not pass. */
static __attribute__((noinline)) void *malloc_held(size_t size)
{
	FAST_ALLOC(ml_real.malloc(size), size, malloc_slow(size));
}

ML_EXPORT void *malloc(size_t size)
{
	if (pass_alloc(PASS_C, size))
		return pass_malloc(size);
	return malloc_held(size);
}

static __attribute__((noinline)) void *calloc_whole(size_t n, size_t size, size_t bytes)
{
	READY_OR(return ml_bootstrap_alloc(bytes, 16));
	GUARD;
	void *p = ml_real.calloc(n, size);
	record(held, p, bytes);
	return p;
}

static __attribute__((noinline)) void *calloc_slow(size_t n, size_t size, size_t bytes)
{
	return inside() ? ml_real.calloc(n, size) : calloc_whole(n, size, bytes);
}

static __attribute__((noinline)) void *calloc_held(size_t n, size_t size, size_t bytes)
{
	FAST_ALLOC(ml_real.calloc(n, size), bytes, calloc_slow(n, size, bytes));
}

ML_EXPORT void *calloc(size_t n, size_t size)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, size, &bytes))
		bytes = 0;	/* the real calloc fails; nothing recorded */
	if (pass_alloc(PASS_C, bytes))
		return pass_calloc(n, size, bytes);
	return calloc_held(n, size, bytes);
}

static __attribute__((noinline)) void free_whole(void *p)
{
	READY_OR(return);
	GUARD;
	forget(held, p);
	ml_real.free(p);
}

static __attribute__((noinline)) void free_slow(void *p)
{
	if (inside())
		ml_real.free(p);
	else
		free_whole(p);
}

static __attribute__((noinline)) void free_held(void *p)
{
	if (!p || ml_bootstrap_owns(p))	/* dlsym's early calloc */
		return;
	if (fast()) {
		/* Record first: after the real free another thread may get p
		 * back. */
		ml_tl_guard = 1;
		forget(true, p);
		ml_real.free(p);
		ml_tl_guard = 0;
		return;
	}
	free_slow(p);
}

ML_EXPORT void free(void *p)
{
	if (!ml_bootstrap_owns(p) && pass_free(PASS_C, p)) {
		ml_real.free(p);	/* free(NULL) too */
		return;
	}
	free_held(p);
}

/* A realloc-like call on old: detach, run real, then settle the block
 * (held: the guard's). */
#define RESIZE(held, old, size, zero_frees, real_call) ({ \
	struct ml_track_held block = { 0, 0, 0, 0 }; \
	if (held) \
		ml_track_detach(old, HEAP, &block); \
	void *q_ = (real_call); \
	if (held) { \
		if (q_) { \
			ML_UNWIND_MARK();	/* as in record(): walk from the hook */ \
			ml_track_moved(&block, q_, size, HEAP); \
			ml_unwind_unmark(); \
		} else if ((zero_frees) && (size) == 0) \
			ml_track_release(&block);	/* glibc: realloc(p, 0) frees p */ \
		else \
			ml_track_reattach(&block);	/* failed: old still allocated */ \
	} \
	q_; })

/* realloc while dlsym is being resolved: served from the bootstrap buffer,
 * with old's contents when old is a bootstrap block (bounded by its size).
 * Any other old cannot be here yet (nothing else has allocated): fail and
 * leave it alone rather than lose its contents. */
static void *realloc_during_bootstrap(void *old, size_t size)
{
	if (old && !ml_bootstrap_owns(old)) {
		errno = ENOMEM;
		return NULL;
	}
	void *q = ml_bootstrap_alloc(size, 16);
	if (q && old) {
		size_t n = ml_bootstrap_size(old);
		memcpy(q, old, n < size ? n : size);
	}
	return q;
}

/* realloc of a bootstrap block: move it to the real heap. */
static void *realloc_bootstrap(void *old, size_t size)
{
	void *q = malloc(size);
	if (q) {
		size_t n = ml_bootstrap_size(old);
		memcpy(q, old, n < size ? n : size);
	}
	return q;
}

static __attribute__((noinline)) void *realloc_slow(void *old, size_t size)
{
	READY_OR(return realloc_during_bootstrap(old, size));
	if (old && ml_bootstrap_owns(old))
		return realloc_bootstrap(old, size);
	if (!old)
		return malloc(size);
	if (inside())
		return ml_real.realloc(old, size);
	GUARD;
	return RESIZE(held, old, size, true, ml_real.realloc(old, size));
}

ML_EXPORT void *realloc(void *old, size_t size)
{
	if (fast() && !ml_bootstrap_owns(old)) {
		if (!old)	/* malloc's own path: recorded as an allocation */
			return GUARDED_ALLOC(ml_real.malloc(size), size);
		ml_tl_guard = 1;
		void *q = RESIZE(true, old, size, true, ml_real.realloc(old, size));
		ml_tl_guard = 0;
		return q;
	}
	return realloc_slow(old, size);
}

ML_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	size_t bytes;
	READY_OR(return NULL);
	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	if (old && ml_bootstrap_owns(old))
		return realloc_bootstrap(old, bytes);
	if (!old)
		return malloc(bytes);
	GUARD;
	return RESIZE(held, old, bytes, true, ml_real.reallocarray ? ml_real.reallocarray(old, n, size) :
		      ml_real.realloc(old, bytes));
}

ML_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	READY_OR(*out = ml_bootstrap_alloc(size, align); return *out ? 0 : ENOMEM);
	GUARD;
	int rc = ml_real.posix_memalign(out, align, size);
	if (rc == 0)
		record(held, *out, size);
	return rc;
}

ML_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	READY_OR(return ml_bootstrap_alloc(size, align));
	GUARD;
	void *p = ml_real.aligned_alloc(align, size);
	record(held, p, size);
	return p;
}

ML_EXPORT void *memalign(size_t align, size_t size)
{
	READY_OR(return ml_bootstrap_alloc(size, align));
	GUARD;
	void *p = ml_real.memalign(align, size);
	record(held, p, size);
	return p;
}

ML_EXPORT void *valloc(size_t size)
{
	READY_OR(return ml_bootstrap_alloc(size, 4096));
	GUARD;
	void *p = ml_real.valloc(size);
	record(held, p, size);
	return p;
}

/* Records the requested size, not the page-rounded one. */
ML_EXPORT void *pvalloc(size_t size)
{
	READY_OR(return ml_bootstrap_alloc(size, 4096));
	GUARD;
	void *p = ml_real.pvalloc(size);
	record(held, p, size);
	return p;
}

/* ---- C++ operator new / delete, by mangled name ---- */

/* Without libstdc++ nobody can call operator new; if it happens anyway,
 * fall back on malloc and abort where new would throw. */
static void *new_fallback(size_t size, size_t align, bool nothrow)
{
	void *p = align ? aligned_alloc(align, (size + align - 1) & ~(align - 1)) : malloc(size ? size : 1);
	if (!p && !nothrow)
		abort();
	return p;
}

/* libstdc++'s own new, after malloc failed in a hook that did its work
 * (NEW_DIRECT): its new-handler loop, or std::bad_alloc, on whose way out
 * the guard is released. */
static __attribute__((noinline)) void *new_failed(void *(*real)(size_t), size_t size)
{
	bool held __attribute__((cleanup(guard_release))) = true;
	void *p = real(size);
	held = false;	/* returned: the hook releases it */
	return p;
}

/* NEW_DIRECT's pass (the allocation counted) when malloc failed: the
 * count taken back, then libstdc++'s new by new_failed's way, whose block
 * is recorded as NEW_DIRECT would. */
static __attribute__((noinline, cold)) void *pass_new_failed(void *(*real)(size_t), size_t size)
{
	ml_track_sample_unskip(size);
	ml_tl_guard = 1;
	void *p = new_failed(real, size);
	record(true, p, size);
	ml_tl_guard = 0;
	return p;
}

/* The common case of new and new[] where libstdc++'s are malloc
 * (ml_real_cxx_decide): as malloc's own fast path. */
#define NEW_DIRECT(field) do { \
	if (fast() && ml_real.cxx_direct > 0) { \
		ml_tl_guard = 1; \
		void *p_ = ml_real.malloc(size ? size : 1); \
		if (__builtin_expect(p_ == NULL, 0)) \
			p_ = new_failed(ml_real.field, size); \
		record(true, p_, size); \
		ml_tl_guard = 0; \
		return p_; \
	} \
} while (0)

/* The same for delete, delete[] and their sized forms: free's. */
#define DELETE_DIRECT() do { \
	if (fast() && ml_real.cxx_direct > 0) { \
		ml_tl_guard = 1; \
		forget(true, p); \
		ml_real.free(p); \
		ml_tl_guard = 0; \
		return; \
	} \
} while (0)

#define NEW_HOOK(field, sym, ...) \
	ML_EXPORT void *field##_hook(size_t size __VA_ARGS__) __asm__(sym); \
	ML_EXPORT void *field##_hook(size_t size __VA_ARGS__)

#define NEW_BODY(field, sym, align, nothrow, ...) do { \
	if (inside() && ml_real.field) \
		return ml_real.field(size __VA_ARGS__); \
	READY_OR(return ml_bootstrap_alloc(size, 16)); \
	GUARD; \
	if (held && !ml_real.cxx_direct) \
		ml_real_cxx_decide(); \
	void *p = LATE(field, sym) ? ml_real.field(size __VA_ARGS__) : \
		new_fallback(size, align, nothrow); \
	record(held, p, size); \
	return p; \
} while (0)

/* new and new[]: NEW_DIRECT, else the whole way in a function of its own
 * (the hook's frame stays small: no registers saved for the rest). */
#define NEW_SPLIT(field, sym) \
	static __attribute__((noinline)) void *field##_whole(size_t size) \
	{ NEW_BODY(field, sym, 0, false); } \
	static __attribute__((noinline)) void *field##_held(size_t size) \
	{ \
		NEW_DIRECT(field); \
		return field##_whole(size); \
	} \
	static __attribute__((noinline)) void *field##_pass(size_t size) \
	{ \
		void *p = ml_real.malloc(size ? size : 1); \
		if (__builtin_expect(p != NULL, 1)) \
			return p; \
		return pass_new_failed(ml_real.field, size); \
	} \
	NEW_HOOK(field, sym) \
	{ \
		if (pass_alloc(PASS_CXX, size)) \
			return field##_pass(size); \
		return field##_held(size); \
	}
NEW_SPLIT(new_plain, "_Znwm")
NEW_SPLIT(new_array, "_Znam")
NEW_HOOK(new_nothrow, "_ZnwmRKSt9nothrow_t", , const void *nt)
{ NEW_BODY(new_nothrow, "_ZnwmRKSt9nothrow_t", 0, true, , nt); }
NEW_HOOK(new_array_nothrow, "_ZnamRKSt9nothrow_t", , const void *nt)
{ NEW_BODY(new_array_nothrow, "_ZnamRKSt9nothrow_t", 0, true, , nt); }
NEW_HOOK(new_aligned, "_ZnwmSt11align_val_t", , size_t al)
{ NEW_BODY(new_aligned, "_ZnwmSt11align_val_t", al, false, , al); }
NEW_HOOK(new_array_aligned, "_ZnamSt11align_val_t", , size_t al)
{ NEW_BODY(new_array_aligned, "_ZnamSt11align_val_t", al, false, , al); }
NEW_HOOK(new_aligned_nothrow, "_ZnwmSt11align_val_tRKSt9nothrow_t", , size_t al, const void *nt)
{ NEW_BODY(new_aligned_nothrow, "_ZnwmSt11align_val_tRKSt9nothrow_t", al, true, , al, nt); }
NEW_HOOK(new_array_aligned_nothrow, "_ZnamSt11align_val_tRKSt9nothrow_t", , size_t al,
	 const void *nt)
{ NEW_BODY(new_array_aligned_nothrow, "_ZnamSt11align_val_tRKSt9nothrow_t", al, true, , al, nt); }

#define DELETE_HOOK(field, sym, ...) \
	ML_EXPORT void field##_hook(void *p __VA_ARGS__) __asm__(sym); \
	ML_EXPORT void field##_hook(void *p __VA_ARGS__)

#define DELETE_BODY(field, sym, ...) do { \
	if (!p || ml_bootstrap_owns(p)) \
		return; \
	if (inside() && ml_real.field) { \
		ml_real.field(p __VA_ARGS__);	/* libstdc++'s sized delete calls delete */ \
		return; \
	} \
	READY_OR(return); \
	GUARD; \
	if (held && !ml_real.cxx_direct) \
		ml_real_cxx_decide(); \
	forget(held, p); \
	if (LATE(field, sym)) \
		ml_real.field(p __VA_ARGS__); \
	else \
		ml_real.free(p); \
} while (0)

/* The pass of delete's direct way (delete of NULL too). */
#define DELETE_PASS() \
	(!ml_bootstrap_owns(p) && pass_free(PASS_CXX, p))

/* delete, delete[] and their sized forms: DELETE_DIRECT, else the whole
 * way in a function of its own (a null or bootstrap p goes there too). */
#define DELETE_SPLIT(field, sym) \
	static __attribute__((noinline)) void field##_whole(void *p) \
	{ DELETE_BODY(field, sym); } \
	static __attribute__((noinline)) void field##_held(void *p) \
	{ \
		if (p && !ml_bootstrap_owns(p)) \
			DELETE_DIRECT(); \
		field##_whole(p); \
	} \
	DELETE_HOOK(field, sym) \
	{ \
		if (DELETE_PASS()) \
			ml_real.free(p); \
		else \
			field##_held(p); \
	}
#define DELETE_SPLIT_SIZED(field, sym) \
	static __attribute__((noinline)) void field##_whole(void *p, size_t n) \
	{ DELETE_BODY(field, sym, , n); } \
	static __attribute__((noinline)) void field##_held(void *p, size_t n) \
	{ \
		if (p && !ml_bootstrap_owns(p)) \
			DELETE_DIRECT(); \
		field##_whole(p, n); \
	} \
	DELETE_HOOK(field, sym, , size_t n) \
	{ \
		if (DELETE_PASS()) \
			ml_real.free(p); \
		else \
			field##_held(p, n); \
	}
DELETE_SPLIT(delete_plain, "_ZdlPv")
DELETE_SPLIT(delete_array, "_ZdaPv")
DELETE_SPLIT_SIZED(delete_sized, "_ZdlPvm")
DELETE_SPLIT_SIZED(delete_array_sized, "_ZdaPvm")
DELETE_HOOK(delete_nothrow, "_ZdlPvRKSt9nothrow_t", , const void *nt)
{ DELETE_BODY(delete_nothrow, "_ZdlPvRKSt9nothrow_t", , nt); }
DELETE_HOOK(delete_array_nothrow, "_ZdaPvRKSt9nothrow_t", , const void *nt)
{ DELETE_BODY(delete_array_nothrow, "_ZdaPvRKSt9nothrow_t", , nt); }
DELETE_HOOK(delete_aligned, "_ZdlPvSt11align_val_t", , size_t al)
{ DELETE_BODY(delete_aligned, "_ZdlPvSt11align_val_t", , al); }
DELETE_HOOK(delete_array_aligned, "_ZdaPvSt11align_val_t", , size_t al)
{ DELETE_BODY(delete_array_aligned, "_ZdaPvSt11align_val_t", , al); }
DELETE_HOOK(delete_sized_aligned, "_ZdlPvmSt11align_val_t", , size_t n, size_t al)
{ DELETE_BODY(delete_sized_aligned, "_ZdlPvmSt11align_val_t", , n, al); }
DELETE_HOOK(delete_array_sized_aligned, "_ZdaPvmSt11align_val_t", , size_t n, size_t al)
{ DELETE_BODY(delete_array_sized_aligned, "_ZdaPvmSt11align_val_t", , n, al); }
DELETE_HOOK(delete_aligned_nothrow, "_ZdlPvSt11align_val_tRKSt9nothrow_t", , size_t al,
	    const void *nt)
{ DELETE_BODY(delete_aligned_nothrow, "_ZdlPvSt11align_val_tRKSt9nothrow_t", , al, nt); }
DELETE_HOOK(delete_array_aligned_nothrow, "_ZdaPvSt11align_val_tRKSt9nothrow_t", , size_t al,
	    const void *nt)
{ DELETE_BODY(delete_array_aligned_nothrow, "_ZdaPvSt11align_val_tRKSt9nothrow_t", , al, nt); }

/* ---- jemalloc's non-standard API: absent jemalloc, fail as it would ---- */

ML_EXPORT void *mallocx(size_t size, int flags)
{
	READY_OR(return NULL);
	if (!LATE(mallocx, "mallocx"))
		return NULL;
	GUARD;
	void *p = ml_real.mallocx(size, flags);
	record(held, p, size);
	return p;
}

ML_EXPORT void *rallocx(void *old, size_t size, int flags)
{
	READY_OR(return NULL);
	if (!LATE(rallocx, "rallocx"))
		return NULL;
	GUARD;
	return RESIZE(held, old, size, false, ml_real.rallocx(old, size, flags));
}

/* Resizes in place: a success (result >= size) moves the block to size. */
ML_EXPORT size_t xallocx(void *p, size_t size, size_t extra, int flags)
{
	READY_OR(return 0);
	if (!LATE(xallocx, "xallocx"))
		return 0;
	GUARD;
	struct ml_track_held block = { 0, 0, 0, 0 };
	if (held)
		ml_track_detach(p, HEAP, &block);
	size_t r = ml_real.xallocx(p, size, extra, flags);
	if (held) {
		if (r >= size && block.addr) {
			ML_UNWIND_MARK();
			ml_track_moved(&block, p, size, HEAP);
			ml_unwind_unmark();
		} else
			ml_track_reattach(&block);
	}
	return r;
}

ML_EXPORT void sdallocx(void *p, size_t size, int flags)
{
	READY_OR(return);
	if (!p || !LATE(sdallocx, "sdallocx"))
		return;
	GUARD;
	forget(held, p);
	ml_real.sdallocx(p, size, flags);
}

ML_EXPORT void dallocx(void *p, int flags)
{
	READY_OR(return);
	if (!p || !LATE(dallocx, "dallocx"))
		return;
	GUARD;
	forget(held, p);
	ml_real.dallocx(p, flags);
}
