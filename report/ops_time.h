/* report/ops_time.h - the ops view's PyTorch time columns (Self CPU %, Self
 * CPU, CPU total %, CPU total, CPU time avg) for profiles with samples
 * (internal to report/view_ops.c and report/ops_time.c). */
#ifndef ML_REPORT_OPS_TIME_H
#define ML_REPORT_OPS_TIME_H

#include <stdbool.h>
#include <stdio.h>
#include "report/views.h"

/* The time columns of one ops view. */
struct ml_ops_time {
	bool shown;		/* the profile has samples */
	uint64_t period_ns;
	uint64_t self_total;	/* every sample's innermost frame counts once */
	const struct ml_cov *cov;	/* call counts, or NULL */
};

/* Sets up t for this aggregation; returns t->shown. */
bool ml_ops_time_begin(struct ml_ops_time *t, const struct ml_agg *a,
		       const struct ml_view_opts *o);
/* The pieces of a text row, each ending with the column gap; nothing when
 * the columns are not shown. */
void ml_ops_time_dashes(const struct ml_ops_time *t, FILE *out);
void ml_ops_time_header(const struct ml_ops_time *t, FILE *out);
void ml_ops_time_cells(const struct ml_ops_time *t, FILE *out, const struct ml_agg_func *f);
void ml_ops_time_footer(const struct ml_ops_time *t, FILE *out);
/* The function's time fields, as JSON keys. */
void ml_ops_time_json(const struct ml_ops_time *t, struct ml_json *j,
		      const struct ml_agg_func *f);
/* The document's time fields. */
void ml_ops_time_json_totals(const struct ml_ops_time *t, struct ml_json *j);

#endif
