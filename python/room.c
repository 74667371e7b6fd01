/* python/room.c - the Python room's place in the runtime's life (struct
 * ml_room): found and started with the runtime, a stack decorator for every
 * capture, a fork child's reset, its sections in every profile. */
#include <stdlib.h>
#include <string.h>
#include "core/core.h"
#include "python/internal.h"
#include "python/tracer.h"

static bool env_off(const char *name)
{
	const char *v = getenv(name);
	return v && (strcmp(v, "0") == 0 || strcmp(v, "no") == 0 || strcmp(v, "off") == 0 ||
		     strcmp(v, "false") == 0);
}

static void start(void)
{
	ml_py_detect();
	if (!ml_py.found)
		return;
	ml_py_boot_config.allocators = !env_off("MEMLINE_PYMEM");
	/* Off only to measure what reading frames costs (bench/python_bench.py). */
	ml_py_boot_config.frames = !env_off("MEMLINE_PY_FRAMES");
	/* memline run --native: the interpreter's frames below a Python
	 * object's line are kept. */
	const char *native = getenv("MEMLINE_PY_NATIVE");
	ml_py_boot_config.native = native && *native && !env_off("MEMLINE_PY_NATIVE");
	if (!ml_py_boot_config.native && ml_py.interp_hi > ml_py.interp_lo) {
		ml_py.interp_cut = ml_py.interp_hi - ml_py.interp_lo;
		ml_py.flags |= ML_PY_INTERP_CUT;
	}
	const char *dir = getenv("MEMLINE_PY_BOOT_DIR");
	if (dir && strlen(dir) < sizeof(ml_py_boot_config.boot_dir))
		strcpy(ml_py_boot_config.boot_dir, dir);
	if (ml_py_codetab_init() < 0 || ml_py_boot_init() < 0) {
		ml_warn("cannot follow the Python interpreter; its profile has native frames only");
		ml_py.found = false;
	}
}

/* A Python object's stack: native frames up to the innermost eval-loop
 * frame, when one is there (python/internal.h, ML_STACK_PY_NATIVE_CUT),
 * less the interpreter's own frames, that one included (ML_PY_INTERP_CUT:
 * the report puts the Python frames outside the native ones left). */
static uint32_t cut_at_eval(uint64_t *frames, uint32_t depth, uint32_t *flags)
{
	for (uint32_t i = 0; i < depth; i++)
		if (frames[i] - 1 - ml_py.eval_lo < ml_py.eval_hi - ml_py.eval_lo) {
			if (i + 1 < depth) {
				*flags |= ML_STACK_PY_NATIVE_CUT;
				*flags &= ~ML_STACK_TRUNCATED;
			}
			uint32_t n = 0;
			for (uint32_t j = 0; j <= i; j++)
				if (!ml_py_interp_cut(frames[j]))
					frames[n++] = frames[j];
			return n;
		}
	return depth;
}

static uint32_t decorate(uint64_t *frames, uint32_t depth, uint32_t cap, uint32_t *flags)
{
	if (!ml_py.walking)
		return depth;
	if (ml_tl_py_object && !(*flags & ML_STACK_EXACT_IP))
		depth = cut_at_eval(frames, depth, flags);
	/* A sample (exact IP) interrupted the thread anywhere: read safely;
	 * inside memline itself: take no lock, add no code object. */
	unsigned mode = (*flags & ML_STACK_EXACT_IP) ? ML_PY_WALK_SAFE : 0;
	if (*flags & ML_STACK_NESTED)
		mode |= ML_PY_WALK_LOOKUP_ONLY;
	return ml_py_walk(frames, depth, cap, flags, mode);
}

/* Only a Python interpreter's stacks are decorated, and only when its
 * frames are read (MEMLINE_PY_FRAMES=0: the core's fast unwinder). */
static bool decorates(void)
{
	return ml_py.found && ml_py_boot_config.frames;
}

static void fork_child(void)
{
	if (ml_py.found) {
		ml_py_codetab_after_fork();
		ml_pyt_fork_child();
	}
}

static void write_sections(struct ml_writer *w)
{
	if (ml_py.found) {
		ml_py_write_sections(w);
		ml_pyt_write_sections(w);
	}
}

static const struct ml_room python_room = {
	.name = "python",
	.start = start,
	.fork_child = fork_child,
	.decorate_stack = decorate,
	.decorates = decorates,
	.stack_id = ml_py_stack_id,
	.stack_memo_size = ML_PY_STACK_MEMO_BYTES,
	.python_audit_remove = ml_py_audit_remove,
	.write_sections = write_sections,
};
ML_ROOM(python_room)
