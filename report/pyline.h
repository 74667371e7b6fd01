/* report/pyline.h - line numbers from a code object's co_linetable, as the
 * interpreter that made it decodes them (PyCode_Addr2Line): the 3.10 byte
 * pairs and the 3.11+ location entries.  Pure functions over bytes. */
#ifndef ML_REPORT_PYLINE_H
#define ML_REPORT_PYLINE_H

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

#endif
