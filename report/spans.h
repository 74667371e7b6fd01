/* report/spans.h - regions on the time axis (the SPANS section): rows under
 * the terminal timeline, and their JSON. */
#ifndef ML_REPORT_SPANS_H
#define ML_REPORT_SPANS_H

#include <stdint.h>
#include <stdio.h>
#include "report/json.h"
#include "report/profile.h"

/* The region with this id, or NULL. */
const struct ml_region *ml_spans_region(const struct ml_profile *p, uint32_t id);

/* "outer/inner": the names from the top-level region down, into buf. */
char *ml_spans_path(const struct ml_profile *p, uint32_t id, char *buf, size_t len);

/* One row per region, its spans drawn on width columns for [0, end_ns);
 * nothing when the profile has no spans. */
void ml_spans_text(FILE *out, const struct ml_profile *p, int width, uint64_t end_ns);

/* "spans": [{region, path, nvtx, tid, start_ns, end_ns}], "spans_dropped",
 * into the open object. */
void ml_spans_json(struct ml_json *j, const struct ml_profile *p);

#endif
