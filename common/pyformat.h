/* common/pyformat.h - Python frames in the profile (format.h, docs/format.md):
 * the tagged frame addresses that stacks and samples hold for Python frames,
 * and the records of the PYTHON and PYCODE sections.  Shared by the runtime's
 * Python room (python/) and the report. */
#ifndef ML_COMMON_PYFORMAT_H
#define ML_COMMON_PYFORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include "common/pyline.h"	/* PYCODE line tables: decoding, the lines-only form */

/*
 * A stack (ML_SEC_STACKS, ML_SEC_SAMPLES) of a thread that runs Python code
 * holds its native frames, innermost first, then its Python frames,
 * innermost first.  A Python frame is a tagged address:
 *
 *   bit 63      set: a Python frame (no native address has it on x86-64)
 *   bit 62      ENTRY: the outermost frame that one C-level call of the
 *               interpreter's eval loop runs (3.10: every frame; 3.11: the
 *               frame's is_entry; 3.12+: the frame just inside a C-stack
 *               shim frame)
 *   bit 61      HIDDEN: a frame still in its prologue (not yet at its first
 *               traceable instruction).  Kept for pairing eval-loop calls
 *               with frames; never shown (traceback does not show it)
 *   bits 32-60  the code object's id (ML_SEC_PYCODE)
 *   bits 0-31   the instruction offset in code units (f_lasti; 0xffffffff
 *               for -1, a 3.10 frame that has not started); for a code
 *               object flagged ML_PYCODE_LINES, the first code unit of the
 *               code object on the instruction's source line (one line,
 *               one frame)
 *
 * The report puts each eval-loop run of Python frames in the place of the
 * native frame of the eval loop that runs it (report/pysplice.c).
 */
#define ML_PYFRAME_TAG (1ull << 63)
#define ML_PYFRAME_ENTRY (1ull << 62)
#define ML_PYFRAME_HIDDEN (1ull << 61)
#define ML_PYFRAME_CODE_MAX ((1u << 29) - 1u)

static inline uint64_t ml_pyframe_make(uint32_t code_id, int32_t lasti, bool entry, bool hidden)
{
	return ML_PYFRAME_TAG | (entry ? ML_PYFRAME_ENTRY : 0) | (hidden ? ML_PYFRAME_HIDDEN : 0) |
	       ((uint64_t)(code_id & ML_PYFRAME_CODE_MAX) << 32) | (uint32_t)lasti;
}

static inline bool ml_pyframe_is(uint64_t addr)
{
	return (addr & ML_PYFRAME_TAG) != 0;
}

static inline uint32_t ml_pyframe_code(uint64_t addr)
{
	return (uint32_t)(addr >> 32) & ML_PYFRAME_CODE_MAX;
}

static inline int32_t ml_pyframe_lasti(uint64_t addr)
{
	return (int32_t)(uint32_t)addr;
}

static inline bool ml_pyframe_entry(uint64_t addr)
{
	return (addr & ML_PYFRAME_ENTRY) != 0;
}

static inline bool ml_pyframe_hidden(uint64_t addr)
{
	return (addr & ML_PYFRAME_HIDDEN) != 0;
}

/* A stack holds at most this many Python frames beside its max_depth
 * native ones (what a reader accepts). */
#define ML_PYFRAMES_MAX 512u

/* Stack flag (ml_fmt_stack.flags, ml_fmt_sample.flags): the Python frames
 * were cut at the room the stack had; the outermost ones are missing. */
#define ML_STACK_PY_TRUNCATED 0x4u
/* Stack flag: a Python object's stack keeps its native frames only up to
 * the innermost eval-loop frame (the C path from the Python line that made
 * it: the interpreter's, or an extension's); the native frames between
 * outer Python frames are not recorded. */
#define ML_STACK_PY_NATIVE_CUT 0x8u

/* How co_linetable encodes lines (the interpreter's minor version). */
enum ml_py_linetable {
	ML_PY_LINETABLE_310 = 310,	/* (bytecode delta, line delta) byte pairs */
	ML_PY_LINETABLE_311 = 311,	/* 3.11+ location entries (Objects/locations.md) */
	ML_PY_LINETABLE_LINES = 1,	/* memline's lines-only form (common/pyline.c): a
					 * record flagged ML_PYCODE_LINES holds it */
};

/* ML_SEC_PYTHON: one record, for a process that ran a CPython interpreter
 * memline understands: this struct, then cwd_len bytes of the working
 * directory when the program started (relative co_filename values are
 * relative to it), padded.  eval_lo..eval_hi is the hot code of
 * _PyEval_EvalFrameDefault (its dynamic symbol's size); the module that
 * holds it is the interpreter. */
struct ml_fmt_python {
	uint32_t version;	/* PY_VERSION_HEX, e.g. 0x030b02f0 for 3.11.2 */
	uint32_t flags;		/* ML_PY_* */
	uint32_t linetable;	/* enum ml_py_linetable */
	uint32_t cwd_len;
	uint64_t eval_lo, eval_hi;
	uint64_t codes;		/* PYCODE records */
	uint64_t frames_lost;	/* Python frames that could not be read */
	uint64_t reserved2[2];
};

#define ML_PY_ALLOCATORS 0x1u	/* PyMem domains and the arena allocator were wrapped */
#define ML_PY_QUALNAME_IS_NAME 0x2u	/* 3.10: code objects know co_name only */
/* A Python object's stack leaves out the interpreter module's own frames
 * below its innermost eval-loop frame (the C path inside python3.x or
 * libpython from the line to the allocator); an extension's frames there
 * stay.  Not set with `memline run --native`. */
#define ML_PY_INTERP_CUT 0x4u

/* ML_SEC_PYCODE record: one code object seen on a stack; this struct, then
 * filename_len bytes of co_filename, name_len bytes of co_qualname (3.10:
 * co_name), linetable_len bytes of its line table (co_linetable, or with
 * ML_PYCODE_LINES memline's lines-only form of it), padded.  Strings are
 * UTF-8 without a NUL. */
struct ml_fmt_pycode {
	uint32_t id;		/* > 0, unique in the file */
	int32_t firstlineno;
	uint32_t filename_len;
	uint32_t name_len;
	uint32_t linetable_len;
	uint32_t flags;		/* ML_PYCODE_* */
};

#define ML_PYCODE_LINETABLE_CUT 0x1u	/* co_linetable was longer than the runtime keeps */
/* The line table is memline's lines-only form of co_linetable
 * (ML_PY_LINETABLE_LINES), not the interpreter's bytes; and the instruction
 * offsets of this code's frames on stacks are each the first code unit of
 * the code object on the same line, so that one line is one frame. */
#define ML_PYCODE_LINES 0x2u

#endif
