/* common/pyline.h - line numbers from a code object's co_linetable, as the
 * interpreter that made it decodes them (PyCode_Addr2Line): the 3.10 byte
 * pairs and the 3.11+ location entries.  Pure functions over bytes. */
#ifndef ML_REPORT_PYLINE_H
#define ML_REPORT_PYLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The source line of the instruction at lasti (code units; -1: a frame
 * that has not started, which is at firstlineno) in a line table of the
 * given format (enum ml_py_linetable).  Returns the line, or -1 when the
 * instruction has no line (or lies past the table). */
int ml_pyline_at(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
		 int32_t lasti);

/* The lowest and highest source line the table names (3.11+: including
 * the end lines of multi-line instructions).  Returns 0, or -1 when the
 * table names no line (then *lo = *hi = firstlineno). */
int ml_pyline_range(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
		    int *lo, int *hi);

/* A run of code units on one line: [start, next run's start), in code
 * units; line -1: no line.  A table's runs end with a mark whose start is
 * the table's end and whose line is ML_PYLINE_END.  canon: the first code
 * unit of the code object on the same line (ml_pyline_canonical). */
struct ml_pyline_run {
	uint32_t start;
	int32_t line;
	uint32_t canon;
};

#define ML_PYLINE_END INT32_MIN
#define ML_PYLINE_RUNS_BAD SIZE_MAX
/* Bytes ml_pyline_encode writes at most for n runs (end mark included). */
#define ML_PYLINE_ENCODED_MAX(n) (21u + 15u * (size_t)(n))

/* The runs of a 3.10 or 3.11+ table (adjacent ranges of one line merged,
 * empty ones dropped), end mark included: writes at most cap of them to
 * out and returns how many there are (call with cap 0 to count), or
 * ML_PYLINE_RUNS_BAD for a table whose ranges do not tile whole code units
 * from 0. */
size_t ml_pyline_runs(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
		      struct ml_pyline_run *out, size_t cap);

/* Sets every run's canon (n runs, end mark included, sorted by start as
 * ml_pyline_runs gives them; they are sorted so again on return).  Two
 * heap sorts: O(n log n). */
void ml_pyline_canonical(struct ml_pyline_run *runs, size_t n);

/* The first code unit on the line of code unit unit (runs as
 * ml_pyline_canonical left them); unit itself when it is negative or past
 * the table's end.  O(log n). */
int32_t ml_pyline_canon(const struct ml_pyline_run *runs, size_t n, int32_t unit);
/* ml_pyline_canon starting from *run (a run index, any value; where the
 * last call left it): the run there and the two after it are tried before
 * the binary search, and *run is left at the run holding unit.  A frame's
 * next instruction is mostly on its line or a line or two further (a
 * module body being imported runs straight through). */
int32_t ml_pyline_canon_near(const struct ml_pyline_run *runs, size_t n, int32_t unit,
			     uint32_t *run);

/* Writes the lines-only form (ML_PY_LINETABLE_LINES) of n runs to out
 * (ML_PYLINE_ENCODED_MAX(n) bytes of room; NULL: only measure it) with the
 * range lo..hi that ml_pyline_range gave for the original table (NULLs: it
 * names no line); returns its length.  Every code unit then has the line
 * it had. */
size_t ml_pyline_encode(const struct ml_pyline_run *runs, size_t n, int firstlineno,
			const int *lo, const int *hi, uint8_t *out);

/* What ml_pyline_plan finds in one walk of a table. */
struct ml_pyline_plan {
	size_t n_runs;		/* ml_pyline_runs's count, or ML_PYLINE_RUNS_BAD */
	size_t encoded_len;	/* ml_pyline_encode's length for those runs, lo and hi */
	bool any;		/* ml_pyline_range returned 0 ... */
	int lo, hi;		/* ... with these (else both are firstlineno) */
	bool sorted;		/* the canons came from ml_pyline_canonical's sort */
};

/* The runtime's first look at a table: ml_pyline_runs, ml_pyline_canonical,
 * ml_pyline_range and ml_pyline_encode's measure, with the same answers
 * (tests/check_pyline.c holds it to them), in one walk of the table.
 * Returns plan->n_runs.  When it is at most cap, out holds the runs with
 * their canons: O(n), a run's canon being the start of the first run on
 * its line, found by a hash of the line; the sort only where that takes
 * too long (plan->sorted).  When it is more, out holds nothing of use and
 * the rest of *plan is set: call again with room for n_runs.  When it is
 * ML_PYLINE_RUNS_BAD, nothing else is set.  No allocation (1 KiB of
 * stack), async-signal-safe. */
size_t ml_pyline_plan(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
		      struct ml_pyline_run *out, size_t cap, struct ml_pyline_plan *plan);

#endif
