/* report/views.h - the report views (leaks, peak, ops, lines), each as text or
 * as fields of a JSON document.  Views read an aggregation; they never load
 * files or symbolize themselves (lines reads source text via source.h). */
#ifndef ML_REPORT_VIEWS_H
#define ML_REPORT_VIEWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "report/aggregate.h"
#include "report/json.h"

struct ml_cov;	/* report/coverage.h */

/* ops sort keys: PyTorch's names first, then ours. */
enum ml_ops_key {
	ML_OPS_SELF_CPU_MEMORY_USAGE,	/* self bytes allocated (default) */
	ML_OPS_CPU_MEMORY_USAGE,	/* inclusive bytes allocated */
	ML_OPS_COUNT,			/* self allocations */
	ML_OPS_PEAK_CPU_MEMORY,		/* inclusive bytes live at the peak */
	ML_OPS_LEAKED_CPU_MEMORY,	/* inclusive bytes live at exit */
	ML_OPS_SELF_PEAK_CPU_MEMORY,	/* self bytes live at the peak */
	ML_OPS_ALLOCS,			/* inclusive allocations */
	ML_OPS_SELF_CUDA_MEMORY_USAGE,	/* self GPU bytes allocated (ml_kind_is_gpu kinds) */
	ML_OPS_CUDA_MEMORY_USAGE,	/* inclusive GPU bytes allocated */
	ML_OPS_SELF_CPU_TIME_TOTAL,	/* line timer: self samples */
	ML_OPS_CPU_TIME_TOTAL,		/* line timer: inclusive samples */
	ML_OPS_KEY_COUNT,
};

struct ml_view_opts {
	enum ml_kind kind;		/* the memory kind shown */
	bool kind_set;			/* kind was asked for; else the profile's default
					 * (ml_report_default_kind) */
	bool native;			/* stacks with Python frames keep every native frame */
	long limit;			/* rows or records at most; < 0: all */
	enum ml_ops_key sort;		/* ops only */
	const char *const *functions;	/* lines only */
	size_t n_functions;
	long top;			/* lines: the N functions with most time (0: off) */
	double unit;			/* lines: timer unit in seconds (0: 1e-6) */
	const struct ml_cov *cov;	/* exact line and call counts (gcov), or NULL */
};

/* Each view writes text to out when j is NULL; otherwise it writes its
 * fields (keys and values) into the JSON object the caller has open.
 * Returns 0, or -ENOENT when lines cannot find a function (after an error
 * line on stderr).  Warnings go to stderr. */
int ml_view_leaks(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j);
int ml_view_peak(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j);
int ml_view_ops(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j);
int ml_view_lines(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j);
/* lines for a profile with samples (--lines): line_profiler's layout. */
int ml_view_lines_timed(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
			struct ml_json *j);
/* regions: the tree of memline.h / NVTX regions. */
int ml_view_regions(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		    struct ml_json *j);

/* ops keys: parse a name (returns the key or -1), name a key, and list all
 * valid names separated by ", " (a static string). */
int ml_ops_key_parse(const char *name);
const char *ml_ops_key_name(enum ml_ops_key key);
const char *ml_ops_key_list(void);

/* The value a key sorts by, for one function and kind. */
uint64_t ml_ops_key_value(const struct ml_agg_func *f, enum ml_ops_key key, enum ml_kind kind);

/* Sorts rows by key, largest first, ties by name.  Does not allocate. */
void ml_ops_sort(const struct ml_agg_func **rows, size_t n, enum ml_ops_key key, enum ml_kind kind);

/* A stack as valgrind prints it: "   at f (file.c:12)" then "   by ..."
 * lines; frames without a source line show their module. */
void ml_stack_print(FILE *out, const struct ml_agg_stack *st);

/* A stack as a JSON array of frame objects. */
void ml_stack_json(struct ml_json *j, const struct ml_agg_stack *st);

/* Writes an amount's fields as JSON keys into the open object. */
void ml_amount_json(struct ml_json *j, const struct ml_amount *m);

#endif
