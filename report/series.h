/* report/series.h - a profile's timeline as one series per kind: total live
 * bytes over time, sorted by time, with the kind's exact peak. */
#ifndef ML_REPORT_SERIES_H
#define ML_REPORT_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "report/profile.h"

struct ml_series {
	enum ml_kind kind;	/* ML_KIND_CPU for the heap's series when Python
				 * objects share its total (heap + python) */
	size_t n;
	uint64_t *time_ns;	/* since start-up, ascending */
	uint64_t *bytes;	/* live bytes: the highest in that stretch of time */
	uint64_t peak_bytes;	/* the kind's exact peak (from its totals) */
	uint64_t peak_time_ns;
};

/* True when kind keeps its peak in one total with another kind that p
 * has (heap and python: the CPU peak, common/kinds.h): kind's own bytes
 * over time are then not recorded, only the shared total's. */
bool ml_series_peak_shared(const struct ml_profile *p, enum ml_kind kind);

/* One series per kind with timeline points, in the kinds table's order.
 * Returns 0, *out (ml_series_free) and *n, or -ENOMEM. */
int ml_series_build(const struct ml_profile *p, struct ml_series **out, size_t *n);
void ml_series_free(struct ml_series *s, size_t n);

/* The highest value of s in [t0, t1), carrying the level of the last point
 * before t0 when no point falls inside; 0 before the first point. */
uint64_t ml_series_max(const struct ml_series *s, uint64_t t0, uint64_t t1);

#endif
