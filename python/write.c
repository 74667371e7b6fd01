/* python/write.c - the Python room's profile sections: PYTHON (the
 * interpreter) and PYCODE (every code object seen on a stack, with what the
 * report needs to name it and decode its lines).  Async-signal-safe: it
 * runs where the profile is written (exit, exec, fatal signals). */
#include <string.h>
#include "core/core.h"
#include "python/internal.h"

static void put_code(const struct ml_py_code *c, void *arg)
{
	struct ml_writer *w = arg;
	struct ml_fmt_pycode r = {
		.id = c->id, .firstlineno = c->firstlineno, .filename_len = c->filename_len,
		.name_len = c->name_len, .linetable_len = c->linetable_len, .flags = c->flags,
	};
	ml_writer_put(w, &r, sizeof(r));
	ml_writer_put(w, c->data, (size_t)c->filename_len + c->name_len + c->linetable_len);
	ml_writer_record(w);
}

void ml_py_write_sections(struct ml_writer *w)
{
	struct ml_fmt_python p = {
		.version = ml_py.version, .flags = ml_py.flags,
		.linetable = ml_py.layout->linetable,
		.eval_lo = ml_py.eval_lo, .eval_hi = ml_py.eval_hi,
		.codes = ml_py_codes_count(),
		.frames_lost = __atomic_load_n(&ml_py.frames_lost, __ATOMIC_RELAXED),
		.cwd_len = (uint32_t)strlen(ml_py.cwd),
	};
	ml_writer_begin(w, ML_SEC_PYTHON);
	ml_writer_put(w, &p, sizeof(p));
	ml_writer_put(w, ml_py.cwd, p.cwd_len);
	ml_writer_record(w);
	ml_writer_end(w);
	ml_writer_begin(w, ML_SEC_PYCODE);
	ml_py_codes_foreach(put_code, w);
	ml_writer_end(w);
}
