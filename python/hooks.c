/* python/hooks.c - the Python room's entry points: wrappers of the
 * interpreter's three PyMem domains (RAW, MEM, OBJ: every Python object at
 * the size asked for, ML_KIND_PYTHON) and of its arena allocator (the
 * memory pymalloc and the frame stacks map, ML_KIND_PY_ARENA), installed as
 * tracemalloc installs its own.  Each takes the guard, calls the allocator
 * it replaced, records, releases: the malloc a domain makes inside is not
 * recorded again. */
#include <errno.h>
#include "core/core.h"
#include "python/internal.h"

/* What each domain had before: what the wrappers call. */
static struct ml_py_memalloc orig[3];
static struct ml_py_arenaalloc orig_arena;

/* Inside a domain wrapper on this thread: the arena wrapper below it still
 * records (the guard is the domain wrapper's). */
static __thread int ml_tl_in_pymem __attribute__((tls_model("initial-exec")));
__thread int ml_tl_py_object __attribute__((tls_model("initial-exec")));

static void record(void *p, size_t size, enum ml_kind kind)
{
	int saved = errno;
	ml_tl_py_object = kind == ML_KIND_PYTHON;
	ML_UNWIND_MARK();
	ml_track_alloc(p, size, kind);
	ml_unwind_unmark();
	ml_tl_py_object = 0;
	errno = saved;
}

/* A block the program gives back through a domain: a Python object, or a
 * malloc'd block recorded before the wrappers were installed (its free()
 * inside the domain is not seen). */
static void forget(void *p)
{
	struct ml_track_held h;
	int saved = errno;
	if (ml_track_detach(p, ML_KIND_PYTHON, &h) || ml_track_detach(p, ML_KIND_HEAP, &h))
		ml_track_release(&h);
	errno = saved;
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
	if (!p || !ml_guard_enter()) {
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
	if (p && (held || ml_tl_in_pymem))
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

int ml_py_hooks_install(void)
{
	const struct ml_py_api *api = &ml_py.api;
	if (!api->get_allocator || !api->set_allocator || !api->get_arena || !api->set_arena)
		return -ENOSYS;
	for (int d = ML_PY_DOMAIN_RAW; d <= ML_PY_DOMAIN_OBJ; d++) {
		api->get_allocator(d, &orig[d]);
		struct ml_py_memalloc mine = {
			.ctx = &orig[d], .malloc = py_malloc, .calloc = py_calloc,
			.realloc = py_realloc, .free = py_free,
		};
		api->set_allocator(d, &mine);
	}
	api->get_arena(&orig_arena);
	struct ml_py_arenaalloc arena = { .ctx = NULL, .alloc = arena_alloc, .free = arena_free };
	api->set_arena(&arena);
	return 0;
}
