/* report/flame.h - a profile's call tree, outermost frame at the root, with
 * the memory of each group of kinds and the line timer's samples summed at
 * every node: what the flame graphs (text, HTML, folded) draw.  A tree built
 * from two profiles holds their difference (new minus base). */
#ifndef ML_REPORT_FLAME_H
#define ML_REPORT_FLAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "report/aggregate.h"

/* The numbers kept per group of kinds, in this order. */
enum ml_flame_field {
	ML_FF_ALLOC_BYTES,	/* bytes allocated */
	ML_FF_ALLOCS,		/* allocations */
	ML_FF_PEAK_BYTES,	/* bytes live at the group's peak */
	ML_FF_PEAK_BLOCKS,
	ML_FF_LEAK_BYTES,	/* bytes live at exit */
	ML_FF_LEAK_BLOCKS,
	ML_FF_COUNT,
};

/* A group of kinds: one kind (heap, a Python kind, pinned host memory, ...),
 * or "cuda", the GPU kinds summed (ml_kind_is_gpu) with their combined
 * peak.  The groups are those the profile has, in the kinds table's order. */
#define ML_FLAME_CUDA (-1)
struct ml_flame_group {
	const char *name;	/* ml_kind_name(kind), or "cuda" */
	int kind;		/* enum ml_kind, or ML_FLAME_CUDA */
};

/* A node is a call site: (function, file, line) under its caller's node.
 * Frames without a source line are merged by function (their offsets cut
 * off).  Node 0 is the root (frame NULL, parent 0). */
struct ml_flame_node {
	uint32_t parent;
	uint32_t first_child;	/* 0: none (the root is never a child) */
	uint32_t next_sibling;	/* 0: none */
	uint32_t depth;		/* root 0 */
	const char *function;	/* NULL for the root */
	const char *file;	/* NULL without a source line */
	int line;
	const char *module;
};

struct ml_flame {
	struct ml_flame_group groups[ML_KIND_COUNT + 1];
	size_t n_groups;
	bool has_time;		/* a time value after the groups' (samples) */
	size_t n_values;	/* ML_FF_COUNT * n_groups + has_time */
	struct ml_flame_node *nodes;
	size_t n_nodes;
	int64_t *total;		/* n_nodes x n_values: inclusive */
	int64_t *self;		/* n_nodes x n_values: stacks that end here */
	/* With a base profile: total and self hold new minus base, and these
	 * the base's own numbers (NULL without a base). */
	int64_t *base_total, *base_self;
	uint64_t period_ns;	/* of the samples (0 without time) */
	void *priv;
};

/* The index of field f of group g, and of the time value, in a node's row. */
static inline size_t ml_flame_vi(size_t group, enum ml_flame_field f)
{
	return group * ML_FF_COUNT + (size_t)f;
}
static inline size_t ml_flame_time_vi(const struct ml_flame *t)
{
	return t->n_groups * ML_FF_COUNT;
}

/* Builds the tree of a (and, with base non-NULL, subtracts base's: the
 * groups are those of either).  Returns 0 and *out (ml_flame_free), or
 * -ENOMEM.  The frames' strings belong to the aggregations' symbolizers. */
int ml_flame_build(const struct ml_agg *a, const struct ml_agg *base, struct ml_flame **out);
void ml_flame_free(struct ml_flame *t);

/* A group's amount out of per-kind amounts (ML_KIND_COUNT of them). */
struct ml_amount ml_flame_group_amount(const struct ml_flame_group *g,
				       const struct ml_amount *per_kind);

/* The group with this name, or -1. */
int ml_flame_group_find(const struct ml_flame *t, const char *name);

/* Children of node n sorted by value vi, largest first (by magnitude for
 * a difference), ties by function name.  Returns a malloc'd array of *count
 * node indexes (NULL when there are none or on ENOMEM). */
uint32_t *ml_flame_children(const struct ml_flame *t, uint32_t n, size_t vi, size_t *count);

/* The display name of a node: "function (file:line)", or "function (in
 * module)" without a source line.  Writes at most len bytes; returns buf. */
char *ml_flame_label(const struct ml_flame_node *nd, bool full_path, char *buf, size_t len);

#endif
