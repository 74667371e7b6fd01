/* report/aggregate.h - a profile's counters summed per stack, per function and
 * per source line, with self and inclusive semantics (DESIGN.md "Attribution").
 * Symbolization goes through struct ml_resolver, a seam tests can fake. */
#ifndef ML_REPORT_AGGREGATE_H
#define ML_REPORT_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "report/profile.h"
#include "report/symbolize.h"

/* What counters say, summed. */
struct ml_amount {
	uint64_t allocs, alloc_bytes;
	uint64_t frees, freed_bytes;
	uint64_t live_blocks, live_bytes;	/* at exit: leaked */
	uint64_t peak_blocks, peak_bytes;	/* live at the kind's peak */
	/* Sampled profiles (memline run --sample): the amounts above are
	 * estimates from this many samples, with these variances (bytes^2). */
	bool estimated;
	uint64_t samples;
	uint64_t var_alloc_bytes, var_live_bytes, var_peak_bytes;
};

/* Symbolization, as the aggregation needs it.  The real one wraps
 * ml_sym_resolve / ml_sym_function_source (report/resolver.c); tests pass a
 * fake.  Frames returned must outlive the aggregation. */
struct ml_resolver {
	void *ctx;
	int (*resolve)(void *ctx, uint64_t addr, bool return_address,
		       const struct ml_frame **frames, size_t *n);
	int (*function_source)(void *ctx, const char *name, const char **file,
			       int *first_line, int *last_line);
	/* Optional (NULL: function_source's one): every definition of name,
	 * as ml_sym_function_sources: for names several files define. */
	int (*function_sources)(void *ctx, const char *name, struct ml_sym_source *out,
				size_t max);
	/* Optional (NULL: stacks with Python frames keep the recorded order):
	 * whether a native frame is the interpreter's eval loop (fn: the name
	 * it symbolizes to) or lies in the interpreter (report/pyframes.h). */
	bool (*py_is_eval)(void *ctx, uint64_t addr, bool exact, const char *fn);
	bool (*py_in_interpreter)(void *ctx, uint64_t addr);
};

/* How stacks are shown. */
struct ml_agg_opts {
	/* Keep every native frame of stacks with Python frames (the
	 * interpreter's internals, launch frames); by default they are left
	 * out where a Python frame explains the allocation. */
	bool native;
};

struct ml_agg_stack {
	uint32_t id;
	bool truncated;			/* the real stack was deeper */
	const struct ml_frame **frames;	/* program frames, innermost first */
	size_t n_frames;
	uint32_t kinds;			/* bit k: the stack has counters of kind k */
	/* 0, or kind + 1 of the one kind the derived kind cpu sums here (heap
	 * or python): cpu's amount is then that kind's, not kept apart. */
	uint32_t cpu_of;
	struct ml_amount *amounts;	/* one per bit of kinds (but cpu's where
					 * cpu_of says), lowest kind first; read
					 * them with ml_agg_stack_kind */
};

extern const struct ml_amount ml_amount_zero;

/* A stack's amounts of one kind (all zero where it has none). */
static inline const struct ml_amount *ml_agg_stack_kind(const struct ml_agg_stack *st, int kind)
{
	if (!((st->kinds >> kind) & 1))
		return &ml_amount_zero;
	uint32_t kept = st->kinds;
	if (st->cpu_of) {
		kept &= ~(1u << ML_KIND_CPU);
		if (kind == ML_KIND_CPU)
			kind = (int)st->cpu_of - 1;
	}
	return &st->amounts[__builtin_popcount(kept & ((1u << kind) - 1))];
}

/* All of a stack's amounts, indexed by kind, into out. */
static inline void ml_agg_stack_kinds(const struct ml_agg_stack *st,
				      struct ml_amount out[ML_KIND_COUNT])
{
	for (int k = 0; k < ML_KIND_COUNT; k++)
		out[k] = *ml_agg_stack_kind(st, k);
}

struct ml_agg_func {
	const char *name;
	const char *module;		/* its module path (NULL for [unknown]) */
	const char *file;		/* its source file: the file of its frames'
					 * lines, NULL without debug info */
	const char *label;		/* name, or "name (b.c)" when another function
					 * (another file or module) has the same name */
	/* Per kind, read with ML_AGG_SELF and ML_AGG_TOTAL: self where the
	 * innermost program frame is here, total anywhere on the stack, once.
	 * Only the kinds of the stacks through it are kept: kind k's
	 * amount is self_slots[kind_slot[k]] (-1: none, all zero). */
	struct ml_amount *self_slots, *total_slots;
	const signed char *kind_slot;
	size_t seen;			/* internal: on the path the stacks are charged along */
	uint64_t self_samples;		/* line timer: innermost program frame here */
	uint64_t total_samples;		/* on the sampled stack, once per sample */
	uint64_t gil_samples;		/* of total_samples: waiting for the GIL */
	size_t seen_sample;		/* internal: last sample index + 1 */
};

struct ml_agg_line {
	const char *file;		/* as the symbolizer gives it */
	int line;
	const char *function;		/* the frame's function at that line */
	struct ml_amount *self_slots, *total_slots;	/* as for functions */
	const signed char *kind_slot;
	size_t seen;			/* internal, as for functions */
	uint64_t self_samples, total_samples;	/* as for functions */
	uint64_t gil_samples;
	size_t seen_sample;
};

/* Kind k's amount of per-slot amounts (ml_agg_func.kind_slot). */
static inline const struct ml_amount *ml_kind_slot_amount(const struct ml_amount *slots,
							  const signed char *kind_slot, int kind)
{
	int s = (unsigned)kind < ML_KIND_COUNT ? kind_slot[kind] : -1;
	return s < 0 ? &ml_amount_zero : &slots[s];
}

/* Every kind's amount of per-slot amounts, into out (ML_KIND_COUNT). */
static inline const struct ml_amount *ml_kind_slot_all(const struct ml_amount *slots,
						       const signed char *kind_slot,
						       struct ml_amount *out)
{
	for (int k = 0; k < ML_KIND_COUNT; k++)
		out[k] = *ml_kind_slot_amount(slots, kind_slot, k);
	return out;
}

/* A function's or line's (x) self or total amount of one kind, and all of
 * them as an array indexed by kind (valid in the enclosing block). */
#define ML_AGG_SELF(x, kind) (*ml_kind_slot_amount((x)->self_slots, (x)->kind_slot, (kind)))
#define ML_AGG_TOTAL(x, kind) (*ml_kind_slot_amount((x)->total_slots, (x)->kind_slot, (kind)))
#define ML_AGG_SELF_ALL(x) \
	ml_kind_slot_all((x)->self_slots, (x)->kind_slot, (struct ml_amount[ML_KIND_COUNT]){ { 0 } })
#define ML_AGG_TOTAL_ALL(x) \
	ml_kind_slot_all((x)->total_slots, (x)->kind_slot, (struct ml_amount[ML_KIND_COUNT]){ { 0 } })

/* kind_slot for amounts kept for every kind (slot k is kind k). */
extern const signed char ml_kind_slot_identity[ML_KIND_COUNT];

/* A sample record's stack as symbolized (the ops view by ATen op charges
 * time from it): samples[i] is profile->samples[i]. */
struct ml_agg_sample {
	const struct ml_frame **frames;	/* innermost first */
	size_t n_frames;
	uint64_t count;
};

struct ml_agg {
	const struct ml_profile *profile;
	const struct ml_resolver *resolver;
	struct ml_agg_opts opts;
	struct ml_agg_stack *stacks;
	size_t n_stacks;
	struct ml_agg_func *funcs;
	size_t n_funcs;
	struct ml_agg_line *lines;
	size_t n_lines;
	struct ml_amount totals[ML_KIND_COUNT];	/* sum of every counter */
	uint64_t total_samples;		/* every sample of the profile */
	struct ml_agg_sample *samples;	/* profile->n_samples of them */
	uint64_t gil_samples;		/* of them: a Python thread waiting for the GIL */
	void *priv;
};

/* Name used for stacks with no program frame left (all memline's). */
#define ML_AGG_UNKNOWN "[unknown]"
/* The function samples of a Python thread waiting for the GIL are charged
 * to (self); their Python lines count them as time and as GIL wait. */
#define ML_AGG_GIL_WAIT "[waiting for the GIL]"

/* Aggregates p's counters through r.  Returns 0 and *out (free with
 * ml_agg_free), or -errno.  Allocates; not thread-safe; p and r must
 * outlive the result. */
int ml_agg_build(const struct ml_profile *p, const struct ml_resolver *r, struct ml_agg **out);
/* The same with options (NULL: the defaults). */
int ml_agg_build_opts(const struct ml_profile *p, const struct ml_resolver *r,
		      const struct ml_agg_opts *opts, struct ml_agg **out);
void ml_agg_free(struct ml_agg *a);

/* The first function with this name (functions are kept apart by name,
 * module and source file), or NULL. */
const struct ml_agg_func *ml_agg_find_func(const struct ml_agg *a, const char *name);

/* The program frames of sample record i of the profile, symbolized as an
 * allocation stack's are (memline's frames removed, inlined calls
 * expanded), into *out (its frames array is the caller's to free; its
 * amounts are zero).  Returns 0 or -ENOMEM. */
int ml_agg_sample_stack(const struct ml_agg *a, size_t i, struct ml_agg_stack *out);

/* Adds a counter's numbers into an amount. */
void ml_amount_add_counter(struct ml_amount *dst, const struct ml_fmt_counter *c);
void ml_amount_add(struct ml_amount *dst, const struct ml_amount *src);

/* Kind names, parsing and ml_kind_is_gpu: common/kinds.h.  Every kind's
 * name, separated by ", " (a static string). */
const char *ml_kind_list(void);
/* The sum of amounts over the GPU kinds; its peak_* are the bytes and
 * blocks live at the combined GPU peak (ML_KIND_CUDA_GPU) when the profile
 * has it, else the sum of each kind's own peak. */
struct ml_amount ml_amount_gpu(const struct ml_amount *per_kind);
/* True when the profile has PyTorch's own CUDA blocks (torch_cuda: one
 * per tensor storage, reported by its caching allocator). */
bool ml_agg_has_torch_blocks(const struct ml_agg *a);
/* What the views call "CUDA Mem" of per_kind: PyTorch's blocks when the
 * profile has them (its segments, the GPU kinds, are then the memory
 * reserved), else the GPU kinds (ml_amount_gpu). */
struct ml_amount ml_agg_cuda_mem(const struct ml_agg *a, const struct ml_amount *per_kind);
/* True for the kinds the derived kind cpu sums: those that share the
 * heap's peak (heap and python), so their bytes at it add up exactly. */
bool ml_kind_in_cpu(enum ml_kind kind);
/* True when the profile saw any CUDA kind. */
bool ml_agg_has_cuda(const struct ml_agg *a);

#endif
