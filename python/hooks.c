/* python/hooks.c - the Python room's entry points: wrappers of the
 * interpreter's three PyMem domains (RAW, MEM, OBJ: every Python object at
 * the size asked for, ML_KIND_PYTHON) and of its arena allocator (the
 * memory pymalloc and the frame stacks map, ML_KIND_PY_ARENA), installed as
 * tracemalloc installs its own.  Each takes the guard, calls the allocator
 * it replaced, records, releases: the malloc a domain makes inside is not
 * recorded again. */
#include <errno.h>
#include <string.h>
#include "core/core.h"
#include "python/internal.h"

/* What each domain had before: what the wrappers call. */
static struct ml_py_memalloc orig[3];
static struct ml_py_arenaalloc orig_arena;

/* Inside a domain wrapper on this thread: the arena wrapper below it still
 * records (the guard is the domain wrapper's). */
static __thread int ml_tl_in_pymem __attribute__((tls_model("initial-exec")));
/* The guard's value while a lean wrapper's pymalloc runs (LEAN_CALL): held,
 * and inside pymalloc.  Bit 0 set: the allocation hooks' fast() reads it as
 * held. */
#define PYMEM_GUARD 3
__thread int ml_tl_py_object __attribute__((tls_model("initial-exec")));

/* (The core's ml_track_* leave errno as they found it.)  Inline: the
 * walk starts at the caller of the wrapper it is in. */
static inline __attribute__((always_inline)) void record(void *p, size_t size, enum ml_kind kind)
{
	ml_tl_py_object = kind == ML_KIND_PYTHON;
	ML_UNWIND_MARK();
	ml_track_alloc(p, size, kind);
	ml_unwind_unmark();
	ml_tl_py_object = 0;
}

/* A block the program gives back through a domain: a Python object, or a
 * malloc'd block recorded before the wrappers were installed (its free()
 * inside the domain is not seen). */
static void forget(void *p)
{
	struct ml_track_held h;
	if (ml_track_detach(p, ML_KIND_PYTHON, &h) || ml_track_detach(p, ML_KIND_HEAP, &h))
		ml_track_release(&h);
}

static void *py_malloc(void *ctx, size_t size)
{
	const struct ml_py_memalloc *o = ctx;
	if (!ml_guard_enter())
		return o->malloc(o->ctx, size);
	ml_tl_in_pymem++;
	void *p = o->malloc(o->ctx, size);
	ml_tl_in_pymem--;
	if (p)
		record(p, size, ML_KIND_PYTHON);
	ml_guard_exit();
	return p;
}

static void *py_calloc(void *ctx, size_t nelem, size_t elsize)
{
	const struct ml_py_memalloc *o = ctx;
	size_t size;
	if (!ml_guard_enter())
		return o->calloc(o->ctx, nelem, elsize);
	ml_tl_in_pymem++;
	void *p = o->calloc(o->ctx, nelem, elsize);
	ml_tl_in_pymem--;
	if (p && !__builtin_mul_overflow(nelem, elsize, &size))
		record(p, size, ML_KIND_PYTHON);
	ml_guard_exit();
	return p;
}

static void *py_realloc(void *ctx, void *old, size_t size)
{
	const struct ml_py_memalloc *o = ctx;
	if (!ml_guard_enter())
		return o->realloc(o->ctx, old, size);
	int saved = errno;
	struct ml_track_held py = { 0 }, heap = { 0 };
	if (old && !ml_track_detach(old, ML_KIND_PYTHON, &py))
		ml_track_detach(old, ML_KIND_HEAP, &heap);
	errno = saved;
	ml_tl_in_pymem++;
	void *q = o->realloc(o->ctx, old, size);
	ml_tl_in_pymem--;
	saved = errno;
	if (q) {
		ml_tl_py_object = 1;
		ML_UNWIND_MARK();
		/* A Python block moves (one event for the peak); an older malloc'd
		 * block ends and the new one is a Python object. */
		ml_track_release(&heap);
		ml_track_moved(&py, q, size, ML_KIND_PYTHON);
		ml_unwind_unmark();
		ml_tl_py_object = 0;
	} else {
		ml_track_reattach(&py);		/* failed: old is still there */
		ml_track_reattach(&heap);
	}
	errno = saved;
	ml_guard_exit();
	return q;
}

static void py_free(void *ctx, void *p)
{
	const struct ml_py_memalloc *o = ctx;
	/* A code object freed (its type still there: code_dealloc frees it
	 * last, through OBJ): its address may name another one from now on
	 * (stackfast.c tells code objects apart by address within an epoch).
	 * Every OBJ block has 16 bytes to read; another block that happens to
	 * hold the word costs a new epoch, nothing more. */
	if (o == &orig[ML_PY_DOMAIN_OBJ] && p &&
	    ((void *const *)p)[1] == ml_py.api.code_type)
		__atomic_fetch_add(&ml_py_code_epoch, 1, __ATOMIC_SEQ_CST);
	/* --sample: a RAW block the filter says was not sampled has nothing
	 * to forget (RAW frees no pymalloc arena below us). */
	bool unsampled = __builtin_expect(ml_config.sample_bytes != 0, 0) &&
			 o == &orig[ML_PY_DOMAIN_RAW] && !ml_sampling_maybe((uint64_t)(uintptr_t)p);
	if (!p || unsampled || !ml_guard_enter()) {
		o->free(o->ctx, p);
		return;
	}
	/* Before the real free: after it another thread may get p back. */
	forget(p);
	ml_tl_in_pymem++;	/* an arena it empties is freed below us */
	o->free(o->ctx, p);
	ml_tl_in_pymem--;
	ml_guard_exit();
}

/* The arena allocator: under a domain wrapper (pymalloc growing) or on its
 * own (3.11+ frame stacks). */
static void *arena_alloc(void *ctx, size_t size)
{
	bool held = ml_guard_enter();
	void *p = orig_arena.alloc(orig_arena.ctx, size);
	if (p && (held || ml_tl_in_pymem || ml_tl_guard == PYMEM_GUARD))
		record(p, size, ML_KIND_PY_ARENA);
	if (held)
		ml_guard_exit();
	return p;
}

static void arena_free(void *ctx, void *p, size_t size)
{
	bool held = ml_guard_enter();
	if (p && (held || ml_tl_in_pymem)) {
		int saved = errno;
		ml_track_free(p, ML_KIND_PY_ARENA);
		errno = saved;
	}
	orig_arena.free(orig_arena.ctx, p, size);
	if (held)
		ml_guard_exit();
}

/* ---- --sample with pymalloc: the lean wrappers of MEM and OBJ ----
 *
 * Sampling records one allocation in thousands; the wrappers above cost
 * every object a stack-less visit of the core on both its allocation and
 * its free (a fifth more instructions on an object-heavy program).  With
 * the interpreter's own pymalloc in MEM and OBJ, less will do: pymalloc
 * serves requests up to PYMALLOC_MAX bytes from its pools and hands every
 * block it did not make from a pool (larger ones, its fallback) to
 * PyMem_RawFree on free, and PyMem_RawFree is the RAW domain's wrapper.
 * So a sampled block is made one pymalloc does not own (its realloc to
 * PYMALLOC_MAX + 1 bytes moves it to the RAW domain, its contents kept,
 * pymalloc's own count of such blocks kept right), and its free reaches
 * the RAW wrapper; every other free goes straight to pymalloc: MEM's free
 * is pymalloc's own, OBJ's only looks for code objects first (py_free).
 * An allocation costs a countdown (ml_track_sample_skip).  The installed
 * structs carry pymalloc's own context, which its free needs. */
#define PYMALLOC_MAX 512	/* SMALL_REQUEST_THRESHOLD, CPython 3.8-3.13 */

/* lean_settle's sample point, out of line (the hook's mark set by the
 * wrapper): p made a block pymalloc does not own, and recorded.  Out of
 * memory for the move: p as it is, not recorded (its free would not be
 * seen). */
static __attribute__((noinline)) void *lean_sampled(const struct ml_py_memalloc *o, void *p,
						    size_t size)
{
	if (size <= PYMALLOC_MAX) {
		void *q = o->realloc(o->ctx, p, PYMALLOC_MAX + 1);
		if (!q)
			return p;
		p = q;
	}
	ml_tl_py_object = 1;
	ml_track_alloc(p, size, ML_KIND_PYTHON);
	ml_tl_py_object = 0;
	return p;
}

/* p, size bytes just made by o (guard held), counted as an allocation;
 * at a sample point (or before the thread has a state) lean_sampled's. */
static inline __attribute__((always_inline)) void *lean_settle(const struct ml_py_memalloc *o,
							  void *p, size_t size)
{
	if (__builtin_expect(ml_track_sample_skip(size), 1))
		return p;
	ML_UNWIND_MARK();
	p = lean_sampled(o, p, size);
	ml_unwind_unmark();
	return p;
}

/* A pymalloc-sized block made the short way (lean_small, the guard given
 * back since) that is a sample point (or the thread has no state yet):
 * lean_sampled's under the guard, the hook's mark set by the wrapper. */
static __attribute__((noinline)) void *lean_small_point(const struct ml_py_memalloc *o, void *p,
							size_t size)
{
	if (!ml_guard_enter())
		return p;
	ml_tl_in_pymem++;
	p = lean_sampled(o, p, size);
	ml_tl_in_pymem--;
	ml_guard_exit();
	return p;
}

/* Whether a request of size bytes takes the short way (lean_small): a
 * size pymalloc serves from its pools (1 to PYMALLOC_MAX bytes: it passes
 * 0 on to the RAW domain), and this thread not inside memline.  Whether
 * recording is on is asked at sample points only (lean_small_point's
 * guard): after the profile is written, or in a fork child that is not
 * followed, the countdown goes on counting into the thread's state, which
 * is never freed, and nothing reads it. */
static inline bool lean_small(size_t size)
{
	return __builtin_expect(size - 1 < PYMALLOC_MAX, 1) && __builtin_expect(!ml_guard_held(), 1);
}

/* The short way's call: o's pymalloc under PYMEM_GUARD, which stands for
 * the guard and the in-pymalloc count together (one store each way): what
 * pymalloc calls on the way (the RAW domain, to grow its arena list or,
 * out of memory, for the block itself) passes through, as under the full
 * wrappers, and a new arena is recorded (arena_alloc). */
#define LEAN_CALL(call) ({ \
	ml_tl_guard = PYMEM_GUARD; \
	void *p_ = (call); \
	ml_tl_guard = 0; \
	p_; \
})

/* The short way's end: p (of o's, size bytes, NULL when it failed) counted
 * as an allocation, or recorded at a sample point. */
static inline __attribute__((always_inline)) void *lean_small_end(const struct ml_py_memalloc *o,
							     void *p, size_t size)
{
	if (__builtin_expect(p == NULL, 0) || __builtin_expect(ml_track_sample_skip(size), 1))
		return p;
	ML_UNWIND_MARK();
	p = lean_small_point(o, p, size);
	ml_unwind_unmark();
	return p;
}

/* The other way: under the guard (a larger request goes on to the RAW
 * domain, whose wrapper must not record it again). */
static __attribute__((noinline)) void *lean_malloc_guarded(const struct ml_py_memalloc *o,
							   size_t size)
{
	if (!ml_guard_enter())
		return o->malloc(o->ctx, size);
	ml_tl_in_pymem++;
	void *p = o->malloc(o->ctx, size);
	if (p)
		p = lean_settle(o, p, size);
	ml_tl_in_pymem--;
	ml_guard_exit();
	return p;
}

static __attribute__((noinline)) void *lean_calloc_guarded(const struct ml_py_memalloc *o,
							   size_t nelem, size_t elsize, size_t size)
{
	if (!ml_guard_enter())
		return o->calloc(o->ctx, nelem, elsize);
	ml_tl_in_pymem++;
	void *p = o->calloc(o->ctx, nelem, elsize);
	if (p)
		p = lean_settle(o, p, size);	/* the move keeps the zeroed bytes */
	ml_tl_in_pymem--;
	ml_guard_exit();
	return p;
}

static inline __attribute__((always_inline)) void *lean_malloc(const struct ml_py_memalloc *o,
							  size_t size)
{
	if (lean_small(size))
		return lean_small_end(o, LEAN_CALL(o->malloc(o->ctx, size)), size);
	return lean_malloc_guarded(o, size);
}

static inline __attribute__((always_inline)) void *lean_calloc(const struct ml_py_memalloc *o,
							  size_t nelem, size_t elsize)
{
	size_t size;
	if (__builtin_mul_overflow(nelem, elsize, &size))
		return o->calloc(o->ctx, nelem, elsize);	/* fails: nothing to count */
	if (lean_small(size))
		return lean_small_end(o, LEAN_CALL(o->calloc(o->ctx, nelem, elsize)), size);
	return lean_calloc_guarded(o, nelem, elsize, size);
}

/* old may be a sampled block: the filter says at once when it is not
 * (then there is nothing to detach, release or put back).  Such a block
 * (most) takes the short way: pymalloc's realloc under PYMEM_GUARD (what
 * it calls on the way, the RAW domain to move a block out of its pools,
 * passes through), and the new block counted as an allocation, as
 * ml_track_moved counts it. */
static __attribute__((noinline)) void *lean_realloc_guarded(const struct ml_py_memalloc *o,
							    void *old, size_t size)
{
	if (!ml_guard_enter())
		return o->realloc(o->ctx, old, size);
	struct ml_track_held py = { 0 }, heap = { 0 };
	bool sampled = old && ml_sampling_maybe((uint64_t)(uintptr_t)old);
	if (sampled && !ml_track_detach(old, ML_KIND_PYTHON, &py))
		ml_track_detach(old, ML_KIND_HEAP, &heap);
	ml_tl_in_pymem++;
	void *q = o->realloc(o->ctx, old, size);
	if (q) {
		/* Sampling: the old block ends, the new one is an allocation
		 * (as ml_track_moved counts it) */
		if (sampled) {
			ml_track_release(&heap);
			ml_track_release(&py);
		}
		q = lean_settle(o, q, size);
	} else if (sampled) {
		ml_track_reattach(&py);		/* failed: old is still there */
		ml_track_reattach(&heap);
	}
	ml_tl_in_pymem--;
	ml_guard_exit();
	return q;
}

static inline __attribute__((always_inline)) void *lean_realloc(const struct ml_py_memalloc *o,
							   void *old, size_t size)
{
	if (__builtin_expect(!ml_guard_held(), 1) &&
	    __builtin_expect(!old || !ml_sampling_maybe((uint64_t)(uintptr_t)old), 1))
		return lean_small_end(o, LEAN_CALL(o->realloc(o->ctx, old, size)), size);
	return lean_realloc_guarded(o, old, size);
}

#define LEAN_DOMAIN(name, d) \
	static void *lean_malloc_##name(void *ctx, size_t size) \
	{ (void)ctx; return lean_malloc(&orig[d], size); } \
	static void *lean_calloc_##name(void *ctx, size_t nelem, size_t elsize) \
	{ (void)ctx; return lean_calloc(&orig[d], nelem, elsize); } \
	static void *lean_realloc_##name(void *ctx, void *old, size_t size) \
	{ (void)ctx; return lean_realloc(&orig[d], old, size); }
LEAN_DOMAIN(mem, ML_PY_DOMAIN_MEM)
LEAN_DOMAIN(obj, ML_PY_DOMAIN_OBJ)

/* OBJ's free: py_free's look for a code object, then pymalloc's (where
 * code objects' deaths cannot be seen at their type: watch_code_deaths). */
static void lean_free_obj(void *ctx, void *p)
{
	if (p && ((void *const *)p)[1] == ml_py.api.code_type)
		__atomic_fetch_add(&ml_py_code_epoch, 1, __ATOMIC_SEQ_CST);
	orig[ML_PY_DOMAIN_OBJ].free(ctx, p);
}

/* ---- code objects' deaths at their type ----
 * The lean wrappers would rather leave OBJ's free to pymalloc itself: then
 * CPython's PyObject_Free takes its inlined pymalloc path again (it
 * checks for its own allocator first).  A code object's death, which
 * starts a new ml_py_code_epoch before its address can be reused, is then
 * seen at the code type's tp_dealloc (every code object dies there, with
 * the GIL held, before its memory is freed): memline's function in that
 * slot starts the epoch and calls the interpreter's.  PyTypeObject's
 * layout (CPython 3.8-3.13, no Py_TRACE_REFS): tp_name at 24, tp_dealloc
 * at 48. */
#define TP_NAME_OFFSET 24
#define TP_DEALLOC_OFFSET 48

typedef void (*dealloc_fn)(void *);
static dealloc_fn code_dealloc_orig;

static void code_dealloc(void *op)
{
	__atomic_fetch_add(&ml_py_code_epoch, 1, __ATOMIC_SEQ_CST);
	code_dealloc_orig(op);
}

/* Puts code_dealloc in the code type's tp_dealloc (GIL held); false, with
 * nothing changed, where the type is not as expected. */
static bool watch_code_deaths(const struct ml_py_api *api)
{
	unsigned char *type = (unsigned char *)(uintptr_t)api->code_type;
	const char *name;
	dealloc_fn dealloc;
	memcpy(&name, type + TP_NAME_OFFSET, sizeof(name));
	memcpy(&dealloc, type + TP_DEALLOC_OFFSET, sizeof(dealloc));
	if (!name || strcmp(name, "code") != 0 || !dealloc)
		return false;
	if (dealloc != code_dealloc) {
		code_dealloc_orig = dealloc;
		__atomic_store_n((dealloc_fn *)(void *)(type + TP_DEALLOC_OFFSET), code_dealloc,
				 __ATOMIC_RELEASE);
	}
	return true;
}

/* Whether MEM and OBJ get the lean wrappers: sampling, and the
 * interpreter's allocators its own pymalloc (no debug hooks, no other
 * tool's wrappers: PYTHONMALLOC unset or "pymalloc"). */
static bool lean_wanted(const struct ml_py_api *api)
{
	if (!ml_config.sample_bytes || !api->allocator_name)
		return false;
	const char *name = api->allocator_name();
	return name && strcmp(name, "pymalloc") == 0;
}

int ml_py_hooks_install(void)
{
	const struct ml_py_api *api = &ml_py.api;
	if (!api->get_allocator || !api->set_allocator || !api->get_arena || !api->set_arena)
		return -ENOSYS;
	bool lean = lean_wanted(api);
	for (int d = ML_PY_DOMAIN_RAW; d <= ML_PY_DOMAIN_OBJ; d++) {
		api->get_allocator(d, &orig[d]);
		struct ml_py_memalloc mine = {
			.ctx = &orig[d], .malloc = py_malloc, .calloc = py_calloc,
			.realloc = py_realloc, .free = py_free,
		};
		if (lean && d == ML_PY_DOMAIN_MEM)
			mine = (struct ml_py_memalloc){ orig[d].ctx, lean_malloc_mem, lean_calloc_mem,
							lean_realloc_mem, orig[d].free };
		else if (lean && d == ML_PY_DOMAIN_OBJ)
			mine = (struct ml_py_memalloc){ orig[d].ctx, lean_malloc_obj, lean_calloc_obj,
							lean_realloc_obj,
							watch_code_deaths(api) ? orig[d].free :
										 lean_free_obj };
		api->set_allocator(d, &mine);
	}
	api->get_arena(&orig_arena);
	struct ml_py_arenaalloc arena = { .ctx = NULL, .alloc = arena_alloc, .free = arena_free };
	api->set_arena(&arena);
	return 0;
}
