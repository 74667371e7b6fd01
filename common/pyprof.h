/* common/pyprof.h - @profile in the profile (format.h, docs/format.md): the
 * exact per-line numbers of the Python functions a program decorated with
 * kernprof's `@profile`, as the Python room's tracer counted them
 * (python/tracer.c), and the records the report reads them from. */
#ifndef ML_COMMON_PYPROF_H
#define ML_COMMON_PYPROF_H

#include <stdint.h>

/* Sections ML_SEC_PYFUNCS (one ml_fmt_pyprof, then count-1 x ml_fmt_pyfunc)
 * and ML_SEC_PYLINES (count x ml_fmt_pyline): common/format.h. */

/* How the line events were caught. */
enum ml_pyprof_mechanism {
	ML_PYPROF_SETTRACE = 1,		/* 3.10, 3.11: a C trace function (PyEval_SetTrace) */
	ML_PYPROF_MONITORING = 2,	/* 3.12+: sys.monitoring, local events */
};

/* ML_SEC_PYFUNCS record 0: the tracer. */
struct ml_fmt_pyprof {
	uint32_t mechanism;	/* enum ml_pyprof_mechanism */
	uint32_t tool_id;	/* sys.monitoring tool id (MONITORING), else 0 */
	uint64_t events;	/* line events counted, every function */
	uint64_t dropped;	/* events that could not be counted (a line outside
				 * its code's range, memory exhausted) */
	uint32_t flags;		/* ML_PYPROF_* */
	uint32_t reserved;
	uint64_t reserved2[3];
};

/* The live bytes of the CUDA kinds were read at every event (the process
 * used CUDA): the CUDA columns mean something. */
#define ML_PYPROF_CUDA 0x1u

/* ML_SEC_PYFUNCS records 1..count-1: one per decorated code object (its
 * name, file and lines are the PYCODE record code_id), whether it ran or
 * not. */
struct ml_fmt_pyfunc {
	uint32_t code_id;	/* ML_SEC_PYCODE id */
	uint32_t flags;		/* ML_PYFUNC_* */
	uint64_t calls;		/* frames of it that started (a generator: once) */
	uint64_t entry_cpu;	/* the most live CPU bytes seen when a call began */
	uint64_t entry_cuda;	/* the same for CUDA */
};

#define ML_PYFUNC_GENERATOR 0x1u	/* a generator, coroutine or async generator */

/* ML_SEC_PYLINES record: one line of a decorated code object that had line
 * events.  Hits count the line events the interpreter fired for it (what
 * sys.settrace sees; line_profiler >= 4.1's Hits).  An execution of the line
 * lasts from its event to the next event of the same frame (another line,
 * a return, a yield, an exception leaving the frame): time_ns is the
 * CLOCK_MONOTONIC time of those executions, callees included (line_profiler's
 * rule); the memory fields are the process's live bytes at both ends. */
struct ml_fmt_pyline {
	uint32_t code_id;
	int32_t line;
	uint64_t hits;
	uint64_t ended;		/* executions whose end was seen (time, memory) */
	uint64_t time_ns;	/* summed over the executions (and, for one still
				 * running when the profile was written, until then) */
	int64_t cpu_increment;	/* live CPU bytes (heap + Python objects) at the
				 * end minus at the start, summed over executions */
	uint64_t cpu_usage;	/* the most live CPU bytes seen at an execution's end */
	int64_t cuda_increment;	/* the same for GPU memory (the CUDA_GPU total) */
	uint64_t cuda_usage;
};

#endif
