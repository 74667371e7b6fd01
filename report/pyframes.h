/* report/pyframes.h - a profile's Python frames as symbolized frames: each
 * tagged frame address (common/pyformat.h) becomes a struct ml_frame with
 * the code object's qualified name, its file and the line of the
 * instruction; and Python functions are found by name for the lines view. */
#ifndef ML_REPORT_PYFRAMES_H
#define ML_REPORT_PYFRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "report/profile.h"
#include "report/symbolize.h"

struct ml_pyframes;

/* The module name Python frames carry (struct ml_frame.module). */
#define ML_PY_MODULE "[python]"

/* Prepares p's code objects.  Returns 0 and *out (NULL when p ran no
 * Python: every call below then does nothing), or -ENOMEM. */
int ml_pyframes_open(const struct ml_profile *p, struct ml_pyframes **out);
void ml_pyframes_close(struct ml_pyframes *pf);

/* The frame of tagged address addr: its function (qualified name; for
 * 3.10, rebuilt from the source where it can be read), its file (made
 * absolute with the run's working directory) and line (0 when the
 * instruction has none).  A code id the profile lacks gives a frame named
 * "[unknown Python code]".  The frame lives as long as pf. */
const struct ml_frame *ml_pyframes_resolve(struct ml_pyframes *pf, uint64_t addr);

/* Every Python function name designates: its qualified name, its
 * plain name (the last part), or a dotted tail of it ("Model.forward",
 * "forward").  Fills out[0..max) with (file, first line, last line,
 * qualified name), each definition once.  Returns how many, or -ENOENT. */
int ml_pyframes_function_sources(struct ml_pyframes *pf, const char *name,
				 struct ml_sym_source *out, size_t max);

/* Whether addr (a native frame) lies in the interpreter itself: the module
 * of its eval loop, or one of its standard extension modules
 * (.../lib-dynload/). */
bool ml_pyframes_in_interpreter(struct ml_pyframes *pf, uint64_t addr);

/* Whether the native return address addr (or exact IP, for exact) lies in
 * the eval loop, _PyEval_EvalFrameDefault: by the address range the
 * runtime recorded, or by fn, the name it symbolizes to (its .cold part). */
bool ml_pyframes_is_eval(struct ml_pyframes *pf, uint64_t addr, bool exact, const char *fn);

#endif
