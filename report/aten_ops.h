/* report/aten_ops.h - an aggregation's stacks and samples summed per ATen
 * operator, as torch.profiler's key_averages() sums its events: self is
 * charged to the innermost op on the stack, total once to every op on it.
 * CPU bytes are split into tensor storage (what torch.profiler counts:
 * allocated under c10::alloc_cpu) and everything else the op allocated. */
#ifndef ML_REPORT_ATEN_OPS_H
#define ML_REPORT_ATEN_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include "report/aggregate.h"

/* One op.  f.name and f.label are its name ("aten::mm"); f.self and
 * f.total hold, per kind, what it allocated, except that the CPU kinds
 * (ml_aten_ops_cpu_kind) count tensor storage only; f.self_samples and
 * f.total_samples its samples.  other_self and other_total hold, per CPU
 * kind, the rest: CPU bytes that are not tensor storage. */
struct ml_aten_row {
	struct ml_agg_func f;
	struct ml_amount other_self[ML_KIND_COUNT], other_total[ML_KIND_COUNT];
	/* Where the op was called from in Python (ml_aten_site), n_sites of
	 * them, the most bytes first (ml_aten_ops_build sorts them). */
	struct ml_aten_site *sites;
	size_t n_sites;
};

/* A Python line an op was called from: the innermost Python frame of the
 * program's own files on the stacks with the op on them (a frame of an
 * installed package, torch's nn modules say, only when the stack has no
 * other), and what the op did there, inclusive as its total: tensor
 * storage and PyTorch CUDA blocks allocated (bytes and blocks, gross), and
 * the samples that caught it. */
struct ml_aten_site {
	const struct ml_frame *frame;	/* file, line, function */
	uint64_t cpu_bytes, cuda_bytes, allocs, samples;
};

struct ml_aten_ops {
	struct ml_aten_row *rows;
	size_t n_rows;
	bool exact;			/* names from the profile's schemas */
	/* What no op allocated (per kind; CPU kinds all bytes) and the samples
	 * that caught no op. */
	struct ml_amount outside[ML_KIND_COUNT];
	uint64_t outside_samples;
	/* Every tensor storage block, in an op or not (heap blocks: the derived
	 * kind cpu holds them too, and they are counted once here). */
	struct ml_amount tensor_total;
	void *priv;
};

/* Whether kind counts as CPU memory (heap, Python objects, and the derived
 * kind cpu that sums them), split into tensor storage and the rest. */
bool ml_aten_ops_cpu_kind(enum ml_kind kind);

/* Sums a's stacks and samples per op.  Returns 0 and *out (free with
 * ml_aten_ops_free; n_rows is 0 for a profile without ATen ops), or
 * -ENOMEM.  a must outlive the result. */
int ml_aten_ops_build(const struct ml_agg *a, struct ml_aten_ops **out);
void ml_aten_ops_free(struct ml_aten_ops *o);

/* The row holding f (f must be some row's f). */
static inline const struct ml_aten_row *ml_aten_row_of(const struct ml_agg_func *f)
{
	return (const struct ml_aten_row *)f;	/* f is the row's first member */
}

#endif
