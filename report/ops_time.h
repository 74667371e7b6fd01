/* report/ops_time.h - the ops view's PyTorch time columns (Self CPU %, Self
 * CPU, CPU total %, CPU total, CPU time avg) for profiles with samples
 * (internal to report/view_ops.c and report/ops_time.c). */
#ifndef ML_REPORT_OPS_TIME_H
#define ML_REPORT_OPS_TIME_H

#include <stdbool.h>
#include <stdio.h>
#include "report/views.h"

/* Sets up the columns for this aggregation; true when they are shown. */
bool ml_ops_time_begin(const struct ml_agg *a, const struct ml_view_opts *o);
/* The pieces of a text row, each ending with the column gap. */
void ml_ops_time_dashes(FILE *out);
void ml_ops_time_header(FILE *out);
void ml_ops_time_cells(FILE *out, const struct ml_agg_func *f);
void ml_ops_time_footer(FILE *out);
/* The function's time fields, as JSON keys. */
void ml_ops_time_json(struct ml_json *j, const struct ml_agg_func *f);
/* The document's time fields. */
void ml_ops_time_json_totals(struct ml_json *j);

#endif
