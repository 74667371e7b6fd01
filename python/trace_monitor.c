/* python/trace_monitor.c - line events on CPython 3.12+: sys.monitoring
 * callbacks, set as local events on the decorated code objects only, so
 * no other code pays anything.  The boot script registers them
 * (python/boot/profile.py); these are their C bodies.
 *
 * sys.settrace on 3.12+ is itself built on sys.monitoring: it sees the LINE
 * events, plus one line event for every backward jump that lands on the
 * line it left (a loop on one line, a comprehension's loop).  The JUMP
 * callback adds exactly those; every other jump is disabled where it is,
 * after its first event.  The frame an event belongs to is the thread's
 * current _PyInterpreterFrame (read raw, python/layout.c): a generator's
 * lives in the generator, so its address holds across yields. */
#include <string.h>
#include "core/core.h"
#include "python/internal.h"
#include "python/tracer.h"

static void *disable_obj;	/* sys.monitoring.DISABLE */
static uint64_t int_bytes;	/* what a callback's int argument holds, once known */
static bool int_bytes_known;

void ml_pyt_mon_set_disable(void *disable)
{
	ml_pyt_api.incref(disable);
	disable_obj = disable;
}

static void *result(void *obj)
{
	ml_pyt_api.incref(obj);
	return obj;
}

static uint64_t load64(uint64_t addr)
{
	uint64_t v;
	memcpy(&v, (const void *)(uintptr_t)addr, sizeof(v));
	return v;
}

/* The frame running on this thread (the one whose event this is). */
static uint64_t current_frame(void)
{
	const struct ml_py_layout *L = ml_py.layout;
	uint64_t ts = (uint64_t)(uintptr_t)ml_pyt_api.thread_state();
	if (L->model == ML_PY_IFRAMES_PREV)
		return load64(load64(ts + L->ts_cframe) + L->cframe_current);
	return load64(ts + L->ts_frame);
}

/* The int argument's value; small ints (-5..256) are the interpreter's
 * own, any other was made for this callback and is freed after it: its
 * bytes go into *extra.  Its size is looked up in the live table once (an
 * int below 2**30 is always the same size). */
static long int_arg(void *obj, uint64_t *extra)
{
	long v = ml_pyt_api.long_as_long(obj);
	if (v == -1 && ml_pyt_api.err_occurred()) {
		ml_pyt_api.err_clear();
		return -1;
	}
	if (v < -5 || v > 256) {
		if (!int_bytes_known) {
			int_bytes = ml_core_live_block_size(obj, ML_KIND_PYTHON);
			int_bytes_known = true;
		}
		*extra += int_bytes;
	}
	return v;
}

void *ml_pyt_mon_line(void *self, void *const *args, ssize_t nargs)
{
	(void)self;
	struct ml_pyt_code *c = nargs == 2 ? ml_pyt_find((uint64_t)(uintptr_t)args[0]) : NULL;
	if (!c)
		return result(ml_pyt_api.none);
	uint64_t extra = 0;
	long line = int_arg(args[1], &extra);
	ml_pyt_on_line(current_frame(), c, (int32_t)line, extra);
	return result(ml_pyt_api.none);
}

/* The line of the code unit at byte offset off, or -1. */
static int32_t line_at(const struct ml_pyt_code *c, long off)
{
	return off >= 0 && (unsigned long)off / 2 < c->n_units ? c->unit_lines[off / 2] : -1;
}

void *ml_pyt_mon_jump(void *self, void *const *args, ssize_t nargs)
{
	(void)self;
	if (nargs != 3)
		return result(ml_pyt_api.none);
	struct ml_pyt_code *c = ml_pyt_find((uint64_t)(uintptr_t)args[0]);
	uint64_t extra = 0;
	long from = int_arg(args[1], &extra);
	long to = int_arg(args[2], &extra);
	if (!c || !c->unit_lines || to > from)
		return result(disable_obj);
	int32_t line = line_at(c, to);
	/* Landing on another line: that line's own LINE event counts it. */
	if (line < 0 || line != line_at(c, from))
		return result(disable_obj);
	ml_pyt_on_line(current_frame(), c, line, extra);
	return result(ml_pyt_api.none);
}

void *ml_pyt_mon_start(void *self, void *const *args, ssize_t nargs)
{
	(void)self;
	struct ml_pyt_code *c = nargs == 2 ? ml_pyt_find((uint64_t)(uintptr_t)args[0]) : NULL;
	if (c) {
		uint64_t extra = 0;
		int_arg(args[1], &extra);
		ml_pyt_on_start(current_frame(), c, extra);
	}
	return result(ml_pyt_api.none);
}

/* PY_RETURN, PY_YIELD (local) and PY_UNWIND (global: any code's frame;
 * never answered with DISABLE, which it does not allow). */
void *ml_pyt_mon_exit(void *self, void *const *args, ssize_t nargs)
{
	(void)self;
	struct ml_pyt_code *c = nargs == 3 ? ml_pyt_find((uint64_t)(uintptr_t)args[0]) : NULL;
	if (c) {
		uint64_t extra = 0;
		int_arg(args[1], &extra);
		ml_pyt_on_exit(current_frame(), extra);
	}
	return result(ml_pyt_api.none);
}
