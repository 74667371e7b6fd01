/* python/python.h - the Python room's callbacks for the core (start-up,
 * stack decoration, fork, profile sections).  Everything else is internal. */
#ifndef ML_PYTHON_PYTHON_H
#define ML_PYTHON_PYTHON_H

#include <stdint.h>

struct ml_writer;

/* Finds the interpreter and registers the audit hook.  Constructor only. */
void ml_py_room_start(void);
/* Appends the calling thread's Python frames to a captured stack (safe
 * reads when *flags has ML_STACK_EXACT_IP: a sample).  Guard held;
 * async-signal-safe; no malloc. */
uint32_t ml_py_room_decorate(uint64_t *frames, uint32_t depth, uint32_t cap, uint32_t *flags);
void ml_py_room_fork_child(void);
void ml_py_room_write(struct ml_writer *w);

#endif
