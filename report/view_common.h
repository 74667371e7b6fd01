/* report/view_common.h - helpers shared by the views (internal to report/). */
#ifndef ML_REPORT_VIEW_COMMON_H
#define ML_REPORT_VIEW_COMMON_H

#include <stdbool.h>
#include <stdio.h>
#include "report/views.h"
#include "report/source.h"

/* The kind's totals: the file's own totals where it has them, else the sum
 * of the counters.  The peak of a kind that shares its peak with another
 * (heap, python) is its bytes live at that shared (CPU) peak. */
struct ml_amount ml_view_totals(const struct ml_agg *a, enum ml_kind kind);

/* True when kind is the CPU memory the program asked for (heap, or cpu for
 * a profile with Python objects): the views then add the CUDA columns. */
static inline bool ml_view_main_kind(enum ml_kind kind)
{
	return kind == ML_KIND_HEAP || kind == ML_KIND_CPU;
}

/* When the kind reached its peak, ns since start-up (0 if unknown). */
uint64_t ml_view_peak_time(const struct ml_agg *a, enum ml_kind kind);

/* The stacks with bytes live at exit (peak false) or at the peak (true),
 * largest first.  Returns a calloc'd array of *n pointers (caller frees),
 * NULL on ENOMEM. */
const struct ml_agg_stack **ml_view_stacks(const struct ml_agg *a, enum ml_kind kind,
					   bool peak, size_t *n);

/* True when the profiled process had PyTorch's CUDA library loaded
 * (libc10_cuda): its CUDA blocks are then caching-allocator segments. */
bool ml_view_is_torch(const struct ml_agg *a);
/* The sentences the CUDA sections print for such a profile (whether it
has PyTorch's own blocks or only its segments). */
const char *ml_view_torch_note(const struct ml_agg *a);

/* Prints "N bytes", with " (1.50 KiB)" added from 1 KiB up. */
void ml_view_bytes(FILE *out, uint64_t bytes);
/* ml_view_bytes for an amount that may be an estimate (memline run
 * --sample): then "~N bytes (X MiB) +- S" with S one standard deviation
 * (var: its variance, bytes^2). */
void ml_view_bytes_est(FILE *out, uint64_t bytes, bool estimated, uint64_t var);

/* The last path component of path. */
const char *ml_view_base_name(const char *path);

/* True when two source paths name the same file: equal, or equal base names
 * (DWARF may hold a relative path where the user gave an absolute one). */
bool ml_view_same_file(const char *a, const char *b);
/* The one line for a --function NAME that no definition matches. */
void ml_view_no_function(const struct ml_agg *a, const char *name);

/* A source line's memory as the lines views show it: the kind's bytes, and
 * CUDA Mem (ml_agg_cuda_mem: PyTorch's blocks, else the GPU kinds summed),
 * each at its own kind's peak.  With PyTorch's blocks (torch), also their
 * net bytes (allocated less freed while the line ran, inclusive: the
 * change of torch.cuda.memory_allocated() across the line) and the
 * segment bytes the caching allocator reserved on the line. */
struct ml_view_line_mem {
	uint64_t self_bytes, total_bytes, peak_bytes, leaked_bytes, allocs;
	uint64_t cuda_self, cuda_total, cuda_peak, cuda_leaked;
	bool torch;
	int64_t cuda_net;
	uint64_t cuda_reserved;
	bool estimated;			/* memline run --sample: estimates, with */
	uint64_t var_self, var_total, var_peak, var_leaked;	/* their variances */
};

/* Adds line l's numbers of kind (and CUDA Mem) into m.  Returns true when
 * l allocated or freed anything (a row worth printing). */
bool ml_view_line_mem_add(struct ml_view_line_mem *m, const struct ml_agg *a,
			  const struct ml_agg_line *l, enum ml_kind kind);

/* Writes m's fields into the open JSON object: self_alloc_bytes ...
 * allocs, and the cuda_* ones when cuda is true. */
void ml_view_line_mem_json(struct ml_json *j, const struct ml_view_line_mem *m, bool cuda);

/* The CUDA columns of the lines views: their header (returns the width
 * printed) and one row's cells (blank when any is false).  torch: the
 * profile has PyTorch's blocks (ml_agg_has_torch_blocks). */
int ml_view_line_cuda_header(FILE *out, bool torch);
void ml_view_line_cuda_cells(FILE *out, const struct ml_view_line_mem *m, bool any, bool torch);

/* Writes a stack record's fields into the open JSON object: bytes, blocks,
 * stack_id, truncated, frames. */
void ml_view_record_json(struct ml_json *j, const struct ml_agg_stack *st, uint64_t bytes,
			 uint64_t blocks);

/* The most definitions of one name the lines views show. */
#define ML_VIEW_MAX_DEFS 16

/* The source definitions of function name, through the resolver (every one
 * where it can list them, else its one): those with a file and a line
 * range, each (file, first line) once.  Fills out[0..max), returns how
 * many; 0 when there is none. */
size_t ml_view_function_sources(const struct ml_agg *a, const char *name,
				struct ml_sym_source *out, size_t max);

/* Reads file, where function name's lines are, into src for the Line
 * Contents column.  Returns true when it was read; *modified (may be NULL)
 * tells whether the file was modified after the profiled run started, so
 * that its lines may no longer be the lines that ran.  Unless quiet, a
 * missing or unreadable file, and a modified one, get a warning on stderr. */
bool ml_view_load_source(const struct ml_agg *a, const char *file, const char *name, bool quiet,
			 struct ml_source *src, bool *modified);

/* How many of n rows a --limit lets through (limit < 0: all). */
size_t ml_view_limit(long limit, size_t n);
/* "N more [KIND ]records not shown (...)": what a --limit left out. */
void ml_view_more(FILE *out, size_t more, const char *kind, long limit);

/* ---- what the flame views (flame, folded, html, pprof) share ---- */
struct ml_flame;

/* The row index (report/flame.h) of what o asks the flame views to draw:
 * its kind's group and --value.  -1 after an error line on stderr when
 * the profile does not have it (no samples, no such kind). */
long ml_view_flame_index(const struct ml_flame *t, const struct ml_view_opts *o);

/* Builds the flame tree of a (minus o->base) and finds what o asks for.
 * Returns 0 with *out (ml_flame_free) and *vi, -ENOENT after an error line
 * (ml_view_flame_index), or -ENOMEM. */
int ml_view_flame_open(const struct ml_agg *a, const struct ml_view_opts *o,
		       struct ml_flame **out, size_t *vi);

/* A --value's title ("bytes allocated", ...) and whether it is bytes. */
const char *ml_view_flame_title(enum ml_flame_value v);
bool ml_view_flame_is_bytes(enum ml_flame_value v);

/* v as text: binary units for bytes, seconds for samples (x period_ns),
 * plain counts; "+" before a positive value when sign is set. */
void ml_view_flame_amount(char *buf, size_t len, int64_t v, enum ml_flame_value what,
			  uint64_t period_ns, bool sign);

/* o->node_fraction, or dflt when the command line did not set it. */
double ml_view_node_fraction(const struct ml_view_opts *o, double dflt);

/* The flame view's first line: what is drawn, its total, the cut. */
int ml_view_flame_header(FILE *out, const struct ml_flame *t, const struct ml_view_opts *o,
			 size_t vi, int64_t cut);

#endif
