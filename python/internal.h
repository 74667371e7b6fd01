/* python/internal.h - private interfaces of the Python room: the interpreter's
 * layout per version, the functions found in it, the code-object table, the
 * raw frame walker, the allocator wrappers and the start-up (boot). */
#ifndef ML_PYTHON_INTERNAL_H
#define ML_PYTHON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/core.h"	/* the format: Python frames, PYTHON and PYCODE */

/* ---- layout.c: where the interpreter keeps what the walker reads ---- */

enum ml_py_model {
	ML_PY_FRAME_OBJECTS = 1,	/* 3.10: tstate->frame, PyFrameObject chain */
	ML_PY_IFRAMES_PREV = 2,		/* 3.11, 3.12: cframe->current_frame, prev_instr */
	ML_PY_IFRAMES_INSTR = 3,	/* 3.13: tstate->current_frame, instr_ptr */
};

/* Byte offsets into the interpreter's structures, for one minor version.
 * 0 in an optional field means "absent in this version". */
struct ml_py_layout {
	uint32_t minor;			/* 10 .. 13 */
	enum ml_py_model model;
	uint32_t linetable;		/* enum ml_py_linetable */
	/* PyThreadState */
	uint32_t ts_frame;		/* 3.10 frame, 3.13 current_frame */
	uint32_t ts_cframe;		/* 3.11/3.12: the _PyCFrame pointer */
	uint32_t cframe_current;	/* _PyCFrame.current_frame */
	/* the frame (PyFrameObject or _PyInterpreterFrame) */
	uint32_t fr_previous;		/* f_back / previous */
	uint32_t fr_code;		/* f_code / f_executable */
	uint32_t fr_instr;		/* 3.10 f_lasti (int); else prev_instr/instr_ptr */
	uint32_t fr_owner;		/* 3.11+: owner (char) */
	uint32_t fr_is_entry;		/* 3.11: is_entry (bool) */
	uint32_t fr_size;		/* bytes a safe read takes for one frame */
	/* PyCodeObject */
	uint32_t co_firstlineno;	/* int */
	uint32_t co_filename, co_name, co_qualname, co_linetable;	/* PyObject * */
	uint32_t co_firsttraceable;	/* 3.11+: int, in code units */
	uint32_t co_code_adaptive;	/* 3.11+: the instructions */
	uint32_t co_size;		/* bytes a safe read takes for the header */
	/* str and bytes */
	uint32_t str_length, str_state, str_ascii_size, str_compact_size;
	uint32_t bytes_size, bytes_data;
};

/* The owner values of _PyInterpreterFrame (3.11+). */
#define ML_PY_OWNED_BY_GENERATOR 1
#define ML_PY_OWNED_BY_CSTACK 3		/* 3.12+: a shim frame */

/* The layout of CPython 3.minor, or NULL when memline does not know it.
 * runtime is &_PyRuntime: 3.13 reads its _Py_DebugOffsets and returns NULL
 * when they disagree with what memline expects.  Start-up only. */
const struct ml_py_layout *ml_py_layout_for(uint32_t minor, const void *runtime);

/* ---- detect.c: the interpreter in this process ---- */

/* PyMemAllocatorEx and PyObjectArenaAllocator, the public ABI. */
struct ml_py_memalloc {
	void *ctx;
	void *(*malloc)(void *ctx, size_t size);
	void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
	void *(*realloc)(void *ctx, void *ptr, size_t size);
	void (*free)(void *ctx, void *ptr);
};
struct ml_py_arenaalloc {
	void *ctx;
	void *(*alloc)(void *ctx, size_t size);
	void (*free)(void *ctx, void *ptr, size_t size);
};
#define ML_PY_DOMAIN_RAW 0
#define ML_PY_DOMAIN_MEM 1
#define ML_PY_DOMAIN_OBJ 2

typedef int (*ml_py_audit_fn)(const char *event, void *args, void *data);

/* The interpreter's functions memline calls, found with dlsym. */
struct ml_py_api {
	void *(*this_thread_state)(void);	/* PyGILState_GetThisThreadState */
	int (*is_finalizing)(void);		/* _Py_IsFinalizing / Py_IsFinalizing */
	int (*is_initialized)(void);		/* Py_IsInitialized */
	int (*add_audit_hook)(ml_py_audit_fn hook, void *data);
	void (*get_allocator)(int domain, struct ml_py_memalloc *out);
	void (*set_allocator)(int domain, struct ml_py_memalloc *in);
	void (*get_arena)(struct ml_py_arenaalloc *out);
	void (*set_arena)(struct ml_py_arenaalloc *in);
	/* For boot scripts (boot.c). */
	void *(*compile)(const char *src, const char *file, int start, void *flags, int opt);
	void *(*eval_code)(void *code, void *globals, void *locals);
	void *(*dict_new)(void);
	int (*dict_set)(void *dict, const char *key, void *value);
	void *(*builtins)(void);		/* PyEval_GetBuiltins: borrowed */
	void *(*unicode_from)(const char *s);
	void (*decref)(void *obj);		/* Py_DecRef */
	void (*err_fetch)(void **type, void **value, void **tb);
	void (*err_restore)(void *type, void *value, void *tb);
	void *(*object_str)(void *obj);
	const char *(*unicode_utf8)(void *obj);
	const void *code_type;			/* &PyCode_Type */
	const char *(*allocator_name)(void);	/* _PyMem_GetCurrentAllocatorName */
	/* The audit hooks' list lock (boot.c): 3.12's PyThread_type_lock, 3.13's PyMutex. */
	int (*lock_acquire)(void *lock, int wait);	/* PyThread_acquire_lock */
	void (*lock_release)(void *lock);		/* PyThread_release_lock */
	void (*mutex_lock)(void *mutex);		/* PyMutex_Lock (3.13) */
	void (*mutex_unlock)(void *mutex);		/* PyMutex_Unlock (3.13) */
};

/* The interpreter this process runs, as found at start-up. */
struct ml_py_state {
	bool found;			/* a CPython memline understands */
	volatile bool walking;		/* Python frames are read (after the first audit event) */
	volatile bool booted;		/* allocators wrapped, boot scripts run */
	uint32_t version;		/* PY_VERSION_HEX */
	const struct ml_py_layout *layout;
	struct ml_py_api api;
	uint64_t eval_lo, eval_hi;	/* _PyEval_EvalFrameDefault */
	uint64_t interp_lo, interp_hi;	/* the module that holds it: its PT_LOAD span */
	uint64_t interp_cut;		/* interp_hi - interp_lo with ML_PY_INTERP_CUT, else 0 */
	void *runtime;			/* &_PyRuntime */
	size_t runtime_size;		/* its dynamic symbol's size */
	uint32_t flags;			/* ML_PY_* (format) */
	uint64_t frames_lost;		/* atomic */
	char cwd[4096];			/* the working directory at boot */
};
extern struct ml_py_state ml_py;

/* A return address in the interpreter's module that a Python object's
 * stack leaves out: below its Python frames, the eval-loop frame included
 * (ML_PY_INTERP_CUT; never without it). */
static inline bool ml_py_interp_cut(uint64_t ra)
{
	return ra - 1 - ml_py.interp_lo < ml_py.interp_cut;
}

/* Looks for a CPython interpreter in the process (dlsym, no allocation
 * through Python).  Fills ml_py; found stays false for a process that is
 * not Python, and for a version memline does not know (one warning).
 * Start-up only. */
void ml_py_detect(void);

/* ---- codetab.c: code objects seen on stacks ---- */

/* One code object, as copied the first time a stack held it.  Strings are
 * UTF-8 without a NUL; data holds filename, name, linetable in that order:
 * the lines-only form (flags ML_PYCODE_LINES, common/pyline.h) when its
 * runs could be made, else co_linetable's bytes. */
struct ml_py_code {
	uint64_t code;			/* the object's address when it was seen */
	uint64_t filename_obj, name_obj, linetable_obj;	/* what it pointed to then */
	int32_t firstlineno;
	int32_t firsttraceable;		/* 3.11+, code units */
	uint32_t id;			/* > 0 */
	uint32_t flags;			/* ML_PYCODE_* */
	uint32_t filename_len, name_len, linetable_len;
	uint32_t n_runs;		/* runs' length (end mark included); 0: none */
	uint32_t last_run;		/* the run a lookup found last, any thread's: a hint
					 * (ml_pyline_canon_near) for a new frame of it */
	const struct ml_pyline_run *runs;	/* by code unit, with each line's first unit */
	struct ml_py_code *next;	/* every code, newest first */
	char data[];
};

/* How the walker reads the interpreter's memory: plainly (allocation hooks:
 * the thread is at a call, its frames are consistent) or through
 * process_vm_readv (the sampler: the thread may be anywhere, mid-update). */
struct ml_py_reader {
	bool safe;
	bool lookup_only;		/* never add a code object (no allocation) */
	bool failed;			/* a safe read failed: stop */
};

/* Reads len bytes at addr into out.  Returns false (and sets r->failed)
 * when a safe read fails.  Async-signal-safe. */
bool ml_py_read(struct ml_py_reader *r, void *out, uint64_t addr, size_t len);

/* The table entry of the code object at code, made (and its strings
 * copied) on first sight; NULL when code is not a code object or memory
 * is exhausted.  A code object that died and whose address now holds
 * another one is told apart by what it points to (file, name, line table):
 * see codetab.c.  Thread-safe, lock-free; async-signal-safe with a safe
 * reader; never allocates through malloc. */
const struct ml_py_code *ml_py_code_get(struct ml_py_reader *r, uint64_t code);
/* ml_py_code_get for the code object of the frame at address frame,
 * through a per-thread memo of the frames last read (plain readers only);
 * and in *unit the instruction offset stacks record for the frame's lasti
 * (code units, -1 or more): the first code unit of the code object on the
 * same line (its runs), or lasti itself where it has none. */
const struct ml_py_code *ml_py_code_at(struct ml_py_reader *r, uint64_t frame, uint64_t code,
				       int32_t lasti, int32_t *unit);
/* Counts the times an address's entry was replaced by a new one (another
 * code object there now), and the code objects freed (hooks.c): until it
 * changes, ml_py_code_get gives every code object it gave an entry to that
 * same entry again, and a code object's address names that object.
 * Atomic. */
extern uint32_t ml_py_code_epoch;
/* Calls fn for every code object recorded. */
void ml_py_codes_foreach(void (*fn)(const struct ml_py_code *c, void *arg), void *arg);
uint32_t ml_py_codes_count(void);
/* Creates the table (idempotent).  0 or -ENOMEM. */
int ml_py_codetab_init(void);
/* In a fork child: the safe reader reads the new process. */
void ml_py_codetab_after_fork(void);

/* ---- walk.c: the calling thread's Python frames ---- */

/* Appends the calling thread's Python frames, innermost first, as tagged
 * addresses (common/pyformat.h) to frames[depth..cap).  Returns the new
 * depth; sets ML_STACK_PY_TRUNCATED in *flags when they did not all fit.
 * Reads only the calling thread's own frames; never calls the interpreter
 * except PyGILState_GetThisThreadState and _Py_IsFinalizing; never takes
 * the GIL; no malloc.  mode: ML_PY_WALK_* (struct ml_py_reader). */
#define ML_PY_WALK_SAFE 0x1u		/* read through process_vm_readv */
#define ML_PY_WALK_LOOKUP_ONLY 0x2u	/* known code objects only: no allocation */
uint32_t ml_py_walk(uint64_t *frames, uint32_t depth, uint32_t cap, uint32_t *flags,
		    unsigned mode);
/* Set by the PyMem wrappers around recording a Python object: its stack
 * keeps native frames only up to the innermost eval-loop frame
 * (ML_STACK_PY_NATIVE_CUT).  initial-exec TLS, hooks.c. */
extern __thread int ml_tl_py_object __attribute__((tls_model("initial-exec")));
/* The same before the frames are known to be readable (boot.c's check). */
uint32_t ml_py_walk_unchecked(uint64_t *frames, uint32_t depth, uint32_t cap, uint32_t *flags,
			      unsigned mode);

/* One frame of the calling thread's chain as read plainly: what its tagged
 * form in a stack is a function of while ml_py_code_epoch stands (the code
 * object's address, the instruction, the owner and entry flags, whether a
 * shim frame follows it).  A shim (3.12+) is bits ML_PY_RAW_SHIM alone. */
struct ml_py_raw {
	uint64_t code, instr;
	uint64_t bits;			/* owner | is_entry << 8 | ML_PY_RAW_* */
};
#define ML_PY_RAW_SHIM 0x10000u
#define ML_PY_RAW_NEXT_SHIM 0x20000u	/* the next frame out is a shim */
static inline bool ml_py_raw_same(const struct ml_py_raw *a, const struct ml_py_raw *b)
{
	return ((a->code ^ b->code) | (a->instr ^ b->instr) | (a->bits ^ b->bits)) == 0;
}
/* Reads the chain, innermost first, into out[0..max): the count, or -1
 * when it is longer, a frame cannot be read, or there is no thread state
 * (the interpreter finalizing): ml_py_walk then says what to do.  Compares
 * it on the way with was[0, was_n) frame by frame from the innermost:
 * *diff_top is 1 + the outermost index where they differ, 0 when none
 * does.  Plain reads; no code-table lookup (walk.c). */
int ml_py_chain(struct ml_py_raw *out, uint32_t max, const struct ml_py_raw *was,
		uint32_t was_n, uint32_t *diff_top);

/* ---- stackfast.c: a Python object's stack id without the full capture ---- */

/* The Python room's stack_id (struct ml_room), and its memo's size. */
uint32_t ml_py_stack_id(void *memo, struct ml_intern_cache *ic);
#define ML_PY_STACK_MEMO_BYTES (84u << 10)

/* ---- hooks.c: the PyMem domains and the arena allocator, wrapped ---- */

/* Wraps RAW, MEM and OBJ (Python objects, ML_KIND_PYTHON) and the arena
 * allocator (ML_KIND_PY_ARENA), as tracemalloc does.  Call with the GIL
 * held.  Returns 0, or -ENOSYS when the interpreter lacks the API. */
int ml_py_hooks_install(void);

/* ---- boot.c: the audit hook; wrapping and boot scripts at the run event ---- */

/* Settings, read from the environment at start-up (room.c). */
struct ml_py_boot_config {
	bool allocators;		/* MEMLINE_PYMEM (default on): wrap the PyMem domains */
	bool frames;			/* MEMLINE_PY_FRAMES (default on): read Python frames */
	bool native;			/* MEMLINE_PY_NATIVE (default off): keep the interpreter's
					 * own frames below a Python object's line */
	char boot_dir[4096];		/* MEMLINE_PY_BOOT_DIR, else <libmemline's dir>/python */
};
extern struct ml_py_boot_config ml_py_boot_config;

/* Registers the audit hook (from the constructor, before the interpreter
 * starts).  Returns 0 or -ENOSYS. */
int ml_py_boot_init(void);

/* Takes the entry of hook out of the interpreter's list of C audit hooks
 * (_PyRuntime's, found by ml_py_boot_init), never to be freed; GIL held.
 * Our own hook leaves it at the end of boot.  Returns 0, or -ENOENT when
 * the list is unknown or hook is not in it (nothing changes).  The room's
 * python_audit_remove (core/core.h). */
int ml_py_audit_remove(ml_py_audit_fn hook);

/* ---- write.c: the PYTHON and PYCODE sections ---- */
struct ml_writer;
void ml_py_write_sections(struct ml_writer *w);

#endif
