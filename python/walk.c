/* python/walk.c - the calling thread's Python frames, read raw from the
 * interpreter's structures (layout.c): tstate, then the frame chain, each
 * frame as (code object id, instruction offset), tagged (common/pyformat.h);
 * the offset is the first code unit of its source line (codetab.c's runs),
 * so that the instructions of one line make one frame.
 * Never calls the interpreter beyond two plain getters, never takes the GIL,
 * never allocates through malloc (code objects are copied into the arena
 * the first time, codetab.c). */
#include <string.h>
#include "python/internal.h"

/* Frames followed at most per walk (a cycle in a corrupt chain ends here). */
#define MAX_HOPS 65536u

/* One frame as read: the fields the walk uses. */
struct frame_view {
	uint64_t previous, code, instr;
	uint8_t owner, is_entry;
};

/* Reads frame f into v.  A safe reader copies the frame once. */
static bool view_frame(struct ml_py_reader *r, uint64_t f, struct frame_view *v)
{
	const struct ml_py_layout *L = ml_py.layout;
	unsigned char buf[128];
	const unsigned char *base = (const unsigned char *)(uintptr_t)f;
	if (!f || (f & 7))
		return false;
	if (r->safe) {
		if (L->fr_size > sizeof(buf) || !ml_py_read(r, buf, f, L->fr_size))
			return false;
		base = buf;
	}
	memcpy(&v->previous, base + L->fr_previous, 8);
	memcpy(&v->code, base + L->fr_code, 8);
	if (L->model == ML_PY_FRAME_OBJECTS) {
		int32_t lasti;
		memcpy(&lasti, base + L->fr_instr, 4);
		v->instr = (uint64_t)(int64_t)lasti;
		v->owner = 0;
	} else {
		memcpy(&v->instr, base + L->fr_instr, 8);
		v->owner = base[L->fr_owner];
	}
	v->is_entry = L->fr_is_entry ? base[L->fr_is_entry] : 0;
	return true;
}

/* The innermost frame of thread state ts (0 if none). */
static uint64_t first_frame(struct ml_py_reader *r, uint64_t ts)
{
	const struct ml_py_layout *L = ml_py.layout;
	uint64_t f = 0;
	if (L->model == ML_PY_IFRAMES_PREV) {
		uint64_t cframe = 0;
		if (ml_py_read(r, &cframe, ts + L->ts_cframe, 8) && cframe)
			ml_py_read(r, &f, cframe + L->cframe_current, 8);
	} else {
		ml_py_read(r, &f, ts + L->ts_frame, 8);
	}
	return r->failed ? 0 : f;
}

/* The instruction offset of frame v in code units (-1: not started). */
static int64_t lasti_of(const struct frame_view *v)
{
	const struct ml_py_layout *L = ml_py.layout;
	if (L->model == ML_PY_FRAME_OBJECTS)
		return (int64_t)v->instr;
	/* prev_instr (3.11, 3.12) or instr_ptr (3.13) into co_code_adaptive;
	 * a frame not yet started has prev_instr one unit before it. */
	int64_t bytes = (int64_t)(v->instr - (v->code + L->co_code_adaptive));
	return bytes >= 0 ? bytes / 2 : -1;
}

uint32_t ml_py_walk(uint64_t *frames, uint32_t depth, uint32_t cap, uint32_t *flags,
		    unsigned mode)
{
	if (!ml_py.walking)
		return depth;
	return ml_py_walk_unchecked(frames, depth, cap, flags, mode);
}

uint32_t ml_py_walk_unchecked(uint64_t *frames, uint32_t depth, uint32_t cap, uint32_t *flags,
			      unsigned mode)
{
	if (depth >= cap)
		return depth;
	uint64_t ts = (uint64_t)(uintptr_t)ml_py.api.this_thread_state();
	/* During finalization other threads' states are freed under them. */
	if (!ts || (ml_py.api.is_finalizing && ml_py.api.is_finalizing()))
		return depth;
	const struct ml_py_layout *L = ml_py.layout;
	struct ml_py_reader r = { .safe = (mode & ML_PY_WALK_SAFE) != 0,
				  .lookup_only = (mode & ML_PY_WALK_LOOKUP_ONLY) != 0 };
	uint64_t f = first_frame(&r, ts);
	uint32_t run_start = depth;	/* the first frame of the current run */
	uint64_t lost = 0;
	for (uint32_t hops = 0; f && hops < MAX_HOPS; hops++) {
		struct frame_view v;
		if (!view_frame(&r, f, &v)) {
			lost++;
			break;
		}
		uint64_t here = f;
		f = v.previous;
		if (L->minor >= 12 && v.owner == ML_PY_OWNED_BY_CSTACK) {
			/* A shim: the frame just inside it began an eval-loop call. */
			if (depth > run_start)
				frames[depth - 1] |= ML_PYFRAME_ENTRY;
			run_start = depth;
			continue;
		}
		int64_t lasti = lasti_of(&v);
		int32_t unit = 0;
		const struct ml_py_code *c = lasti < -1 || lasti > INT32_MAX ? NULL :
			ml_py_code_at(&r, here, v.code, (int32_t)lasti, &unit);
		if (!c) {
			lost++;
			if (r.failed)
				break;
			continue;
		}
		if (depth == cap) {
			*flags |= ML_STACK_PY_TRUNCATED;
			break;
		}
		bool entry = L->model == ML_PY_FRAME_OBJECTS || v.is_entry;
		bool hidden = L->model != ML_PY_FRAME_OBJECTS && v.owner != ML_PY_OWNED_BY_GENERATOR &&
			      lasti < c->firsttraceable;
		/* One line, one frame: the line's first code unit stands for it. */
		frames[depth++] = ml_pyframe_make(c->id, unit, entry, hidden);
		if (entry)
			run_start = depth;
	}
	if (lost)
		__atomic_fetch_add(&ml_py.frames_lost, lost, __ATOMIC_RELAXED);
	return depth;
}

/* ---- the chain as stackfast.c compares it ---- */

static inline uint64_t ld64(const unsigned char *at)
{
	uint64_t v;
	memcpy(&v, at, 8);
	return v;
}

/* view_frame and first_frame's plain reads, with the layout's offsets
 * held in registers: this runs at every Python object. */
int ml_py_chain(struct ml_py_raw *out, uint32_t max, const struct ml_py_raw *was,
		uint32_t was_n, uint32_t *diff_top)
{
	const struct ml_py_layout *L = ml_py.layout;
	const unsigned char *ts = ml_py.api.this_thread_state();
	if (!ts || (ml_py.api.is_finalizing && ml_py.api.is_finalizing()))
		return -1;
	const uint32_t o_prev = L->fr_previous, o_code = L->fr_code, o_instr = L->fr_instr,
		       o_owner = L->fr_owner, o_entry = L->fr_is_entry;
	const bool objects = L->model == ML_PY_FRAME_OBJECTS, shims = L->minor >= 12;
	uint64_t f;
	if (L->model == ML_PY_IFRAMES_PREV) {
		uint64_t cframe = ld64(ts + L->ts_cframe);
		f = cframe ? ld64((const unsigned char *)(uintptr_t)cframe + L->cframe_current) : 0;
	} else {
		f = ld64(ts + L->ts_frame);
	}
	uint32_t n = 0, top = 0;
	for (; f; n++) {
		if (n == max || (f & 7))
			return -1;
		const unsigned char *b = (const unsigned char *)(uintptr_t)f;
		struct ml_py_raw *o = &out[n];
		uint64_t code = ld64(b + o_code), instr;
		uint32_t bits = 0;
		if (objects) {
			int32_t lasti;
			memcpy(&lasti, b + o_instr, 4);
			instr = (uint64_t)(int64_t)lasti;
		} else {
			instr = ld64(b + o_instr);
			bits = b[o_owner] | (o_entry ? (uint32_t)b[o_entry] << 8 : 0);
		}
		f = ld64(b + o_prev);
		if (shims && (bits & 0xff) == ML_PY_OWNED_BY_CSTACK) {
			*o = (struct ml_py_raw){ .bits = ML_PY_RAW_SHIM };
			if (n && !(o[-1].bits & ML_PY_RAW_SHIM)) {
				o[-1].bits |= ML_PY_RAW_NEXT_SHIM;
				if (n - 1 < was_n && !ml_py_raw_same(&o[-1], &was[n - 1]) && top < n)
					top = n;
			}
			if (n < was_n && !ml_py_raw_same(o, &was[n]))
				top = n + 1;
			continue;
		}
		if (!code || (code & 7))
			return -1;
		o->code = code;
		o->instr = instr;
		o->bits = bits;
		if (n < was_n && !ml_py_raw_same(o, &was[n]))
			top = n + 1;
	}
	*diff_top = top;
	return (int)n;
}
