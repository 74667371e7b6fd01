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
	/* By ATen op (--by op), beside the tensor storage of the CPU keys: */
	ML_OPS_SELF_OTHER_MEMORY,	/* self CPU bytes that are not tensor storage */
	ML_OPS_OTHER_MEMORY,		/* the same, inclusive */
	ML_OPS_SELF_CUDA_RESERVED,	/* self segment bytes (GPU kinds) with PyTorch's blocks */
	ML_OPS_KEY_COUNT,
};

/* What the flame views measure (--value): a field of the chosen kind's
 * group (report/flame.h), or the line timer's samples. */
enum ml_flame_value {
	ML_FV_ALLOC,		/* bytes allocated (default) */
	ML_FV_ALLOCS,		/* allocations */
	ML_FV_PEAK,		/* bytes live at the peak */
	ML_FV_PEAK_BLOCKS,
	ML_FV_LEAKED,		/* bytes live at exit */
	ML_FV_LEAKED_BLOCKS,
	ML_FV_TIME,		/* samples (--lines profiles) */
	ML_FV_COUNT,
};

/* --layout of the lines view: the tables of @profile functions. */
enum ml_lines_layout {
	ML_LINES_DEFAULT = 0,
	ML_LINES_LINE_PROFILER = 1,	/* kernprof -l -v's table (the default for them) */
	ML_LINES_MEMORY_PROFILER = 2,	/* python -m memory_profiler's table */
};

/* What the ops view's rows are. */
enum ml_ops_by {
	ML_OPS_BY_AUTO,			/* ATen ops when the profile has them, else functions */
	ML_OPS_BY_OP,			/* ATen ops, as torch.profiler's key_averages() */
	ML_OPS_BY_FUNCTION,		/* functions (native and Python) */
};

#define ML_VIEW_RECORDS_DEFAULT 100	/* leaks, peak, ops: records or rows shown
					 * without --limit */

struct ml_view_opts {
	enum ml_kind kind;		/* the memory kind shown */
	bool kind_set;			/* kind was asked for; else the profile's default
					 * (ml_report_default_kind) */
	bool native;			/* stacks with Python frames keep every native frame */
	long limit;			/* rows or records at most; < 0: all (the
					 * command line's default for leaks, peak, ops:
					 * ML_VIEW_RECORDS_DEFAULT) */
	enum ml_ops_key sort;		/* ops only */
	enum ml_ops_by by;		/* ops only */
	const char *const *functions;	/* lines only */
	size_t n_functions;
	long top;			/* lines: the N functions with most time (0: off) */
	int layout;			/* lines: enum ml_lines_layout (0: the default) */
	double unit;			/* lines: timer unit in seconds (0: 1e-6) */
	const struct ml_cov *cov;	/* exact line and call counts (gcov), or NULL */
	enum ml_flame_value value;	/* flame, folded: what is measured */
	double node_fraction;		/* flame, html: hide nodes below this share
					 * of the root (< 0: the view's default) */
	const struct ml_agg *base;	/* --base: the profile subtracted, or NULL */
	const char *base_path;
	uint64_t t0_realtime_ns;	/* the earliest start of the profiles reported */
	int diff_measure;		/* --base with ops 0 (allocated), peak 1, leaks 2 */
};

/* Each view writes text to out when j is NULL; otherwise it writes its
 * fields (keys and values) into the JSON object the caller has open.
 * Returns 0, or -ENOENT when lines cannot find a function (after an error
 * line on stderr).  Warnings go to stderr. */
int ml_view_leaks(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j);
int ml_view_peak(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j);
int ml_view_ops(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j);
int ml_view_lines(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j);
/* lines of the functions decorated with @profile (the profile's PYFUNCS):
 * kernprof's or memory_profiler's table (o->layout) with exact hits, time
 * and memory.  With o->functions, only the decorated ones among them
 * (names of others are skipped when skip_others, else an error). */
int ml_view_lines_decorated(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
			    struct ml_json *j);
/* Whether name designates a function decorated with @profile. */
bool ml_view_is_decorated(const struct ml_agg *a, const char *name);
/* lines for a profile with samples (--lines): line_profiler's layout. */
int ml_view_lines_timed(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
			struct ml_json *j);
/* regions: the tree of memline.h / NVTX regions. */
int ml_view_regions(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		    struct ml_json *j);

/* Terminal pictures: memory over time per kind (and regions), and the
 * heaviest paths of the call tree as an indented text tree. */
int ml_view_timeline(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		     struct ml_json *j);
int ml_view_flame(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		  struct ml_json *j);
/* Folded stacks ("main;f;g 1234" per line) for flamegraph.pl, inferno and
 * speedscope; with a base, difffolded's "stack base new" lines. */
int ml_view_folded(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		   struct ml_json *j);
/* What grew and shrank against o->base, by stack, function and line (ops,
 * peak and leaks with --base). */
int ml_view_diff(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		 struct ml_json *j);

/* --value names: parse one (returns the value or -1), name one, list all. */
int ml_flame_value_parse(const char *name);
const char *ml_flame_value_name(enum ml_flame_value v);
const char *ml_flame_value_list(void);

/* Documents that hold every profile of the command line at once (html,
 * trace, pprof): begin, add each profile, then end writes the document to
 * out.  Each returns 0 or -errno (end frees the state either way). */
struct ml_docview {
	const char *name;
	int (*begin)(const struct ml_view_opts *o, void **state);
	int (*add)(void *state, const struct ml_agg *a, const struct ml_view_opts *o);
	int (*end)(void *state, FILE *out);
	bool binary;		/* refuses to write to a terminal */
};
extern const struct ml_docview ml_docview_html, ml_docview_trace, ml_docview_pprof;

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
