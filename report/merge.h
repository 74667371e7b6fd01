/* report/merge.h - several profiles summed into one (report/merge.c says
 * what the sums mean). */
#ifndef ML_REPORT_MERGE_H
#define ML_REPORT_MERGE_H

#include <stddef.h>
#include "report/profile.h"

/* Makes one profile of in[0..n): counters, totals, samples and regions
 * added up, equal stacks of different processes made one, the timeline
 * the sum of the processes' live bytes over wall-clock time; a kind's peak
 * is the sum of the processes' own peaks.  name becomes its path (kept,
 * not copied).  The result refers to the inputs (module paths, argv,
 * warnings): free it (ml_profile_free) before them.  Returns 0, or -errno
 * with one line in err (samples of different clocks cannot be merged). */
int ml_profile_merge(const struct ml_profile *const *in, size_t n, const char *name,
		     struct ml_profile **out, char *err, size_t errlen);

#endif
