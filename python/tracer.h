/* python/tracer.h - private interfaces of the Python room's line tracer:
 * exact Hits, Time and memory per line of the functions a program decorates
 * with `@profile` (kernprof's and memory_profiler's convention).
 *
 *   tracer.c          decorated code objects, per-line numbers, the frames
 *                     running them; the PYFUNCS and PYLINES sections
 *   trace_legacy.c    3.10, 3.11: a C trace function (PyEval_SetTrace),
 *                     on while a decorated function runs on the thread
 *   trace_monitor.c   3.12+: sys.monitoring callbacks on the decorated code
 *                     objects only (local events)
 *   trace_bridge.c    the interpreter's functions the tracer calls, and the
 *                     C functions the boot script (python/boot/profile.py)
 *                     calls: no extension module, nothing compiled per
 *                     interpreter
 *
 * Every function here runs with the GIL held (it is called by the
 * interpreter or from Python), unless it says otherwise: the GIL is what
 * serialises the tables. */
#ifndef ML_PYTHON_TRACER_H
#define ML_PYTHON_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- trace_bridge.c: the interpreter's C API, found with dlsym ---- */

/* PyMethodDef, the public ABI. */
struct ml_pyt_methoddef {
	const char *name;
	void *meth;
	int flags;
	const char *doc;
};
#define ML_PY_METH_O 0x0008
#define ML_PY_METH_NOARGS 0x0004
#define ML_PY_METH_FASTCALL 0x0080

/* Py_tracefunc and the what codes it gets (Include/cpython/pystate.h). */
typedef int (*ml_pyt_tracefunc)(void *obj, void *frame, int what, void *arg);
#define ML_PYTRACE_CALL 0
#define ML_PYTRACE_LINE 2
#define ML_PYTRACE_RETURN 3

struct ml_pyt_api {
	void *(*cfunction_new)(struct ml_pyt_methoddef *def, void *self, void *module);
	void (*set_trace)(ml_pyt_tracefunc fn, void *obj);	/* PyEval_SetTrace, <= 3.11 */
	int (*frame_line)(void *frame);				/* PyFrame_GetLineNumber */
	void *(*frame_code)(void *frame);			/* PyFrame_GetCode: new ref */
	int (*frame_lasti)(void *frame);			/* PyFrame_GetLasti, 3.11+ */
	long (*long_as_long)(void *obj);
	void *(*long_from)(long long v);
	void (*incref)(void *obj);
	int (*bytes_parts)(void *obj, char **buf, ssize_t *len);	/* PyBytes_AsStringAndSize */
	void (*err_set)(void *type, const char *msg);		/* PyErr_SetString */
	void **exc_type_error;					/* &PyExc_TypeError */
	void *(*err_occurred)(void);
	void (*err_clear)(void);
	void *(*thread_state)(void);				/* PyThreadState_Get */
	int (*set_attr)(void *obj, const char *name, void *value);	/* PyObject_SetAttrString */
	void *none, *true_obj, *false_obj;			/* None, True, False */
};
extern struct ml_pyt_api ml_pyt_api;

/* New reference to None. */
void *ml_pyt_none(void);
/* Sets a TypeError and returns NULL (for the C functions' argument checks). */
void *ml_pyt_type_error(const char *msg);
/* The namespace the boot scripts get as `_memline` (a dict of the tracer's
 * C functions and constants), or NULL (no tracer: a Python exception is not
 * left set).  Made once; the caller gets a new reference. */
void *ml_pyt_namespace(void);

/* ---- tracer.c: decorated code objects and their lines ---- */

/* One line's numbers (struct ml_fmt_pyline without its key). */
struct ml_pyt_line {
	uint64_t hits, ended, time_ns;
	int64_t cpu_increment, cuda_increment;
	uint64_t cpu_usage, cuda_usage;
};

/* A decorated code object.  Lives for the process (its code object is
 * kept alive with a reference, so its address is never reused). */
struct ml_pyt_code {
	uint64_t code;			/* the code object */
	uint32_t code_id;		/* its id in the code table (PYCODE), 0 if none */
	uint32_t flags;			/* ML_PYFUNC_* */
	int32_t lo, hi;			/* lines[0] is line lo; hi is the last */
	uint64_t calls, entry_cpu, entry_cuda;
	int32_t *unit_lines;		/* line of each code unit (3.12+ jumps), or NULL */
	uint32_t n_units;
	struct ml_pyt_line *lines;	/* hi - lo + 1 */
	struct ml_pyt_code *next;	/* every decorated code, newest first */
};

/* The decorated code object at address code, or NULL. */
struct ml_pyt_code *ml_pyt_find(uint64_t code);

/* Registers code (a code object; the caller checked its type) with its
 * lines lo..hi, the line of each code unit (may be NULL), and flags.
 * Idempotent.  Returns 0, or -ENOMEM (nothing registered). */
int ml_pyt_register(uint64_t code, int32_t lo, int32_t hi, const int32_t *unit_lines,
		    uint32_t n_units, uint32_t flags);

/* Events of a decorated code's frame, keyed by the frame's address (a
 * PyFrameObject up to 3.11, a _PyInterpreterFrame from 3.12).  Each reads
 * the clock and the live bytes once; extra is the bytes live at that
 * moment only because of the event itself (3.12+: the int objects the
 * interpreter made for the callback's arguments), left out. */
/* A frame begins (a call, not a resumption): forgets any state left under
 * its key by a frame that ended unseen, and counts the call. */
void ml_pyt_on_start(uint64_t frame, struct ml_pyt_code *c, uint64_t extra);
/* The interpreter fired a line event for line in frame: the line before it
 * in that frame (if any) ends, this one begins and counts one hit. */
void ml_pyt_on_line(uint64_t frame, struct ml_pyt_code *c, int32_t line, uint64_t extra);
/* The frame returns, yields or is left by an exception: its line ends. */
void ml_pyt_on_exit(uint64_t frame, uint64_t extra);

/* Counts events that could not be recorded. */
void ml_pyt_drop(void);

/* The mechanism in use (enum ml_pyprof_mechanism), set by the bridge when
 * the tracer is ready; 0: no tracer.  tool_id for sys.monitoring. */
extern uint32_t ml_pyt_mechanism, ml_pyt_tool_id;

/* In a fork child: every number starts from zero (the parent's profile has
 * them); decorated code objects stay decorated. */
void ml_pyt_fork_child(void);

/* Appends the PYFUNCS and PYLINES sections.  Async-signal-safe. */
struct ml_writer;
void ml_pyt_write_sections(struct ml_writer *w);

/* ---- trace_legacy.c: 3.10, 3.11 ---- */

/* The C trace function is on for this thread while enable() calls
 * outnumber disable() calls (the decorator's wrapper calls them around
 * every call and every step of a generator or coroutine). */
void ml_pyt_legacy_enable(void);
void ml_pyt_legacy_disable(void);
/* Where PyFrameObject keeps f_trace_lines (a char), checked by the boot
 * script on a real frame; -1 until then (lines of other frames are then
 * not turned off: slower, still exact). */
extern int ml_pyt_frame_trace_lines_offset;
/* The offset memline expects for this version, or -1 (no legacy tracer). */
int ml_pyt_legacy_expected_offset(void);
/* Checks the offsets the tracer reads on frame (a live frame object of the
 * caller) and, when the thread has no trace function (untraced), on the
 * thread state.  A frame offset that does not hold what it should is not
 * used (a slower path, the same events).  Returns false when the thread
 * state could not be checked: the tracer must then stay off, as it could
 * not keep a trace function the program sets. */
bool ml_pyt_legacy_probe(void *frame, bool untraced);

/* ---- trace_monitor.c: 3.12+ ---- */

/* sys.monitoring callbacks (METH_FASTCALL): LINE (code, line), JUMP (code,
 * from, to), PY_START (code, offset), PY_RETURN / PY_YIELD / PY_UNWIND
 * (code, offset, value). */
void *ml_pyt_mon_line(void *self, void *const *args, ssize_t nargs);
void *ml_pyt_mon_jump(void *self, void *const *args, ssize_t nargs);
void *ml_pyt_mon_start(void *self, void *const *args, ssize_t nargs);
void *ml_pyt_mon_exit(void *self, void *const *args, ssize_t nargs);
/* Keeps sys.monitoring.DISABLE (a new reference). */
void ml_pyt_mon_set_disable(void *disable);

#endif
