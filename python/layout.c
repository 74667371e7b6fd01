/* python/layout.c - where CPython 3.10 to 3.13 keep the thread's frames, the
 * code objects' names and line tables, and str/bytes contents: one table
 * per minor version, read from the interpreters' own headers (verified by
 * tests/python/layout_check.c against every installed version).  3.13
 * publishes these offsets itself (_Py_DebugOffsets at the start of
 * _PyRuntime): they are read from there and checked. */
#include <string.h>
#include "python/internal.h"

/* 3.10: PyFrameObject chain from tstate->frame; f_lasti counts code units. */
static const struct ml_py_layout layout_310 = {
	.minor = 10, .model = ML_PY_FRAME_OBJECTS, .linetable = ML_PY_LINETABLE_310,
	.ts_frame = 24,
	.fr_previous = 24, .fr_code = 32, .fr_instr = 96, .fr_size = 112,
	.co_firstlineno = 40, .co_filename = 104, .co_name = 112, .co_linetable = 120,
	.co_size = 128,
	.str_length = 16, .str_state = 32, .str_ascii_size = 48, .str_compact_size = 72,
	.bytes_size = 16, .bytes_data = 32,
};

/* 3.11: _PyInterpreterFrame chain from tstate->cframe->current_frame. */
static const struct ml_py_layout layout_311 = {
	.minor = 11, .model = ML_PY_IFRAMES_PREV, .linetable = ML_PY_LINETABLE_311,
	.ts_cframe = 56, .cframe_current = 8,
	.fr_previous = 48, .fr_code = 32, .fr_instr = 56, .fr_owner = 69, .fr_is_entry = 68,
	.fr_size = 72,
	.co_firstlineno = 72, .co_filename = 112, .co_name = 120, .co_qualname = 128,
	.co_linetable = 136, .co_firsttraceable = 168, .co_code_adaptive = 184, .co_size = 176,
	.str_length = 16, .str_state = 32, .str_ascii_size = 48, .str_compact_size = 72,
	.bytes_size = 16, .bytes_data = 32,
};

/* 3.12: as 3.11, entry frames marked by C-stack shim frames instead. */
static const struct ml_py_layout layout_312 = {
	.minor = 12, .model = ML_PY_IFRAMES_PREV, .linetable = ML_PY_LINETABLE_311,
	.ts_cframe = 56, .cframe_current = 0,
	.fr_previous = 8, .fr_code = 0, .fr_instr = 56, .fr_owner = 70, .fr_size = 72,
	.co_firstlineno = 68, .co_filename = 112, .co_name = 120, .co_qualname = 128,
	.co_linetable = 136, .co_firsttraceable = 176, .co_code_adaptive = 192, .co_size = 184,
	.str_length = 16, .str_state = 32, .str_ascii_size = 40, .str_compact_size = 56,
	.bytes_size = 16, .bytes_data = 32,
};

/* 3.13: tstate->current_frame; instr_ptr is the current instruction. */
static const struct ml_py_layout layout_313 = {
	.minor = 13, .model = ML_PY_IFRAMES_INSTR, .linetable = ML_PY_LINETABLE_311,
	.ts_frame = 72,
	.fr_previous = 8, .fr_code = 0, .fr_instr = 56, .fr_owner = 70, .fr_size = 72,
	.co_firstlineno = 68, .co_filename = 112, .co_name = 120, .co_qualname = 128,
	.co_linetable = 136, .co_firsttraceable = 184, .co_code_adaptive = 200, .co_size = 192,
	.str_length = 16, .str_state = 32, .str_ascii_size = 40, .str_compact_size = 56,
	.bytes_size = 16, .bytes_data = 32,
};

/* The start of 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h):
 * only the parts read here, in their order. */
struct debug_offsets_313 {
	char cookie[8];			/* "xdebugpy" */
	uint64_t version;		/* PY_VERSION_HEX */
	uint64_t free_threaded;
	struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
	struct {
		uint64_t size, id, next, threads_head, gc, imports_modules, sysdict,
			builtins, ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
			gil_runtime_state_locked, gil_runtime_state_holder;
	} interpreter_state;
	struct {
		uint64_t size, prev, next, interp, current_frame, thread_id,
			native_thread_id, datastack_chunk, status;
	} thread_state;
	struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			localsplusnames, localspluskinds, co_code_adaptive;
	} code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object;
	struct { uint64_t size, ob_item, ob_size; } list_object;
	struct { uint64_t size, ma_keys, ma_values; } dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct { uint64_t size, ob_size, ob_sval; } bytes_object;
	struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
};

static bool fits(uint64_t v)
{
	return v < 4096;
}

/* 3.13's layout from its debug offsets, into *out; false when they are
 * missing or name another layout than the one memline reads. */
static bool from_debug_offsets(const void *runtime, struct ml_py_layout *out)
{
	const struct debug_offsets_313 *d = runtime;
	if (!d || memcmp(d->cookie, "xdebugpy", 8) != 0 || (d->version >> 16) != 0x030d ||
	    d->free_threaded)
		return false;
	*out = layout_313;
	out->ts_frame = (uint32_t)d->thread_state.current_frame;
	out->fr_previous = (uint32_t)d->interpreter_frame.previous;
	out->fr_code = (uint32_t)d->interpreter_frame.executable;
	out->fr_instr = (uint32_t)d->interpreter_frame.instr_ptr;
	out->fr_owner = (uint32_t)d->interpreter_frame.owner;
	out->co_filename = (uint32_t)d->code_object.filename;
	out->co_name = (uint32_t)d->code_object.name;
	out->co_qualname = (uint32_t)d->code_object.qualname;
	out->co_linetable = (uint32_t)d->code_object.linetable;
	out->co_firstlineno = (uint32_t)d->code_object.firstlineno;
	out->co_code_adaptive = (uint32_t)d->code_object.co_code_adaptive;
	/* Not published: the int two words before co_code_adaptive (after
	 * co_extra), as in every 3.13 release. */
	out->co_firsttraceable = out->co_code_adaptive - 16;
	out->co_size = out->co_code_adaptive - 8;
	out->str_state = (uint32_t)d->unicode_object.state;
	out->str_length = (uint32_t)d->unicode_object.length;
	out->str_ascii_size = (uint32_t)d->unicode_object.asciiobject_size;
	/* PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject. */
	out->str_compact_size = out->str_ascii_size + 16;
	out->bytes_size = (uint32_t)d->bytes_object.ob_size;
	out->bytes_data = (uint32_t)d->bytes_object.ob_sval;
	return fits(d->thread_state.current_frame) && fits(d->interpreter_frame.owner) &&
	       out->fr_previous + 8 <= out->fr_size && out->fr_code + 8 <= out->fr_size &&
	       out->fr_instr + 8 <= out->fr_size && out->fr_owner < out->fr_size &&
	       out->co_filename + 8 <= out->co_size && out->co_linetable + 8 <= out->co_size &&
	       out->co_qualname + 8 <= out->co_size && out->co_firstlineno + 4 <= out->co_size &&
	       out->co_code_adaptive > 16 && fits(out->co_code_adaptive) &&
	       fits(out->str_ascii_size) && fits(out->bytes_data);
}

const struct ml_py_layout *ml_py_layout_for(uint32_t minor, const void *runtime)
{
	static struct ml_py_layout from_runtime;
	switch (minor) {
	case 10: return &layout_310;
	case 11: return &layout_311;
	case 12: return &layout_312;
	case 13: return from_debug_offsets(runtime, &from_runtime) ? &from_runtime : NULL;
	default: return NULL;
	}
}
