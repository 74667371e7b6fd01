/* report/pystack.h - a stack that holds Python frames, in program order: each
 * run of Python frames (what one call of the eval loop runs) in the place of
 * that eval-loop frame, and which frames the default view leaves out. */
#ifndef ML_REPORT_PYSTACK_H
#define ML_REPORT_PYSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ml_pystack_show {
	ML_PYSTACK_SHOW = 0,		/* always shown */
	ML_PYSTACK_NATIVE_ONLY = 1,	/* shown with --native only: interpreter
					 * internals where a Python frame explains
					 * them, launch frames outside the program */
	ML_PYSTACK_NEVER = 2,		/* a Python frame still in its prologue */
};

struct ml_pystack_item {
	uint64_t addr;			/* native address or tagged Python frame */
	uint32_t index;			/* its index in the recorded stack */
	bool python;
	enum ml_pystack_show show;
};

/* What the ordering needs to know of native frame index i (address addr). */
struct ml_pystack_env {
	void *ctx;
	bool (*is_eval)(void *ctx, uint64_t addr, uint32_t i);		/* the eval loop */
	bool (*in_interpreter)(void *ctx, uint64_t addr, uint32_t i);	/* the interpreter */
};

/* Orders frames[0..depth) (native frames innermost first, then Python
 * frames innermost first, common/pyformat.h) into out[0..depth).  Eval-loop
 * frames are paired with runs of Python frames from the outermost end
 * (the innermost eval-loop call may run in code memline cannot see as the
 * eval loop, its .cold part in a stripped binary: its frames then go just
 * inside the innermost paired run), or from the innermost end when the
 * stack was cut (flags: ML_STACK_TRUNCATED, ML_STACK_PY_TRUNCATED; the
 * Python frames past the native ones then come last; also for
 * ML_STACK_PY_NATIVE_CUT).  Eval-loop frames
 * stay in place (shown with --native).  Returns depth.  No allocation. */
size_t ml_pystack_order(const uint64_t *frames, uint32_t depth, uint32_t flags,
			const struct ml_pystack_env *env, struct ml_pystack_item *out);

#endif
