/* report/units.h - byte counts and times as short human text (binary units). */
#ifndef ML_REPORT_UNITS_H
#define ML_REPORT_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define ML_UNITS_LEN 32	/* enough for any formatted value */

/* Formats bytes as "320 B", "1.50 KiB", "12.00 MiB" or "3.25 GiB": whole
 * bytes below 1 KiB, two decimals above, never beyond GiB.  A value that
 * would round up to 1024.00 of a unit is shown in the next unit.  Writes at
 * most len bytes, NUL included; returns buf.  Does not allocate. */
char *ml_units_bytes(uint64_t bytes, char *buf, size_t len);

/* ml_units_bytes for a signed count: "-1.50 KiB" below zero (what an op
 * freed more than it allocated, as torch.profiler shows it). */
char *ml_units_bytes_signed(int64_t bytes, char *buf, size_t len);

/* The standard deviation (rounded bytes) of a variance in bytes^2. */
uint64_t ml_stddev(uint64_t var);

/* An estimated byte count (memline run --sample) as "~1.50 MiB": the value
 * of ml_units_bytes after a "~".  Returns buf. */
char *ml_units_estimate(uint64_t bytes, char *buf, size_t len);

/* Formats nanoseconds as seconds with three decimals ("1.234 s"). */
char *ml_units_seconds(uint64_t ns, char *buf, size_t len);

#endif
