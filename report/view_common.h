/* report/view_common.h - helpers shared by the views (internal to report/). */
#ifndef ML_REPORT_VIEW_COMMON_H
#define ML_REPORT_VIEW_COMMON_H

#include <stdbool.h>
#include <stdio.h>
#include "report/views.h"

/* The kind's totals: the file's own totals where it has them, else the sum
 * of the counters. */
struct ml_amount ml_view_totals(const struct ml_agg *a, enum ml_kind kind);

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
/* The sentence the CUDA sections print for such a profile. */
extern const char ml_view_torch_note[];

/* Prints "N bytes", with " (1.50 KiB)" added from 1 KiB up. */
void ml_view_bytes(FILE *out, uint64_t bytes);

/* The last path component of path. */
const char *ml_view_base_name(const char *path);

/* True when two source paths name the same file: equal, or equal base names
 * (DWARF may hold a relative path where the user gave an absolute one). */
bool ml_view_same_file(const char *a, const char *b);

/* How many of n rows a --limit lets through (limit < 0: all). */
size_t ml_view_limit(long limit, size_t n);

#endif
