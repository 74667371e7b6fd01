/* report/aten_ops.c - per-op sums (see aten_ops.h).  One pass over the
 * aggregation's stacks and one over its samples; rows are indexed by op id
 * (report/aten.h) and grow as ids appear. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/aten.h"
#include "report/aten_ops.h"

struct priv {
	struct ml_aten *names;
	uint32_t *ops;		/* scratch: the op ids of one stack, innermost first */
	size_t cap_ops;
	size_t cap_rows;
};

bool ml_aten_ops_cpu_kind(enum ml_kind kind)
{
	return kind == ML_KIND_CPU || ml_kind_in_cpu(kind);
}

/* Rows up to op id n exist (zeroed).  0 or -ENOMEM. */
static int rows_reserve(struct ml_aten_ops *o, size_t n)
{
	struct priv *pv = o->priv;
	if (n <= o->n_rows)
		return 0;
	if (n > pv->cap_rows) {
		size_t cap = pv->cap_rows ? pv->cap_rows : 64;
		while (cap < n)
			cap *= 2;
		struct ml_aten_row *r = realloc(o->rows, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		o->rows = r;
		pv->cap_rows = cap;
	}
	memset(o->rows + o->n_rows, 0, (n - o->n_rows) * sizeof(*o->rows));
	o->n_rows = n;
	return 0;
}

/* The distinct op ids of frames[0..n) into pv->ops, the innermost first
 * (recursion counts an op once); *first is the frame index of the
 * innermost one.  Returns how many, or -ENOMEM. */
static long stack_ops(struct ml_aten_ops *o, const struct ml_frame *const *frames, size_t n,
		      size_t *first)
{
	struct priv *pv = o->priv;
	size_t k = 0;
	if (n > pv->cap_ops) {
		uint32_t *ops = realloc(pv->ops, n * sizeof(*ops));
		if (!ops)
			return -ENOMEM;
		pv->ops = ops;
		pv->cap_ops = n;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t op = ml_aten_op(pv->names, frames[i]);
		if (!op)
			continue;
		if (!k)
			*first = i;
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = pv->ops[j] == op;
		if (!seen)
			pv->ops[k++] = op;
	}
	if (k && rows_reserve(o, ml_aten_count(pv->names)) < 0)
		return -ENOMEM;
	return (long)k;
}

/* Tensor storage: PyTorch's CPU allocator inside the innermost op. */
static bool tensor_storage(const struct ml_frame *const *frames, size_t upto)
{
	for (size_t i = 0; i < upto; i++)
		if (ml_aten_is_tensor_alloc(frames[i]))
			return true;
	return false;
}

static void charge_stack(struct ml_aten_ops *o, const struct ml_agg_stack *st, long n_ops,
			 size_t first)
{
	struct priv *pv = o->priv;
	bool tensor = tensor_storage(st->frames, n_ops ? first : st->n_frames);
	for (int k = 0; k < ML_KIND_COUNT; k++) {
		if (!((st->kinds >> k) & 1))
			continue;
		const struct ml_amount *m = ml_agg_stack_kind(st, k);
		bool cpu = ml_aten_ops_cpu_kind((enum ml_kind)k);
		if (k == ML_KIND_HEAP && tensor)
			ml_amount_add(&o->tensor_total, m);
		if (!n_ops) {
			ml_amount_add(&o->outside[k], m);
			continue;
		}
		bool split = cpu && !tensor;
		struct ml_aten_row *self = &o->rows[pv->ops[0] - 1];
		ml_amount_add(split ? &self->other_self[k] : &self->f.self[k], m);
		for (long i = 0; i < n_ops; i++) {
			struct ml_aten_row *r = &o->rows[pv->ops[i] - 1];
			ml_amount_add(split ? &r->other_total[k] : &r->f.total[k], m);
		}
	}
}

static int charge_sample(struct ml_aten_ops *o, const struct ml_agg_sample *sm)
{
	struct priv *pv = o->priv;
	size_t first = 0;
	long n_ops = stack_ops(o, sm->frames, sm->n_frames, &first);
	if (n_ops < 0)
		return -ENOMEM;
	if (!n_ops) {
		o->outside_samples += sm->count;
		return 0;
	}
	o->rows[pv->ops[0] - 1].f.self_samples += sm->count;
	for (long i = 0; i < n_ops; i++)
		o->rows[pv->ops[i] - 1].f.total_samples += sm->count;
	return 0;
}

int ml_aten_ops_build(const struct ml_agg *a, struct ml_aten_ops **out)
{
	struct ml_aten_ops *o = calloc(1, sizeof(*o));
	struct priv *pv = calloc(1, sizeof(*pv));
	int err = -ENOMEM;
	if (!o || !pv || ml_aten_open(a->profile, &pv->names) < 0) {
		free(pv);
		free(o);
		return -ENOMEM;
	}
	o->priv = pv;
	o->exact = ml_aten_exact(pv->names);
	for (size_t si = 0; si < a->n_stacks; si++) {
		const struct ml_agg_stack *st = &a->stacks[si];
		size_t first = 0;
		long n_ops = stack_ops(o, st->frames, st->n_frames, &first);
		if (n_ops < 0)
			goto fail;
		charge_stack(o, st, n_ops, first);
	}
	for (size_t si = 0; si < a->profile->n_samples; si++)
		if (charge_sample(o, &a->samples[si]) < 0)
			goto fail;
	for (size_t i = 0; i < o->n_rows; i++) {
		struct ml_agg_func *f = &o->rows[i].f;
		f->name = f->label = ml_aten_name(pv->names, (uint32_t)i + 1);
	}
	*out = o;
	return 0;
fail:
	ml_aten_ops_free(o);
	return err;
}

void ml_aten_ops_free(struct ml_aten_ops *o)
{
	if (!o)
		return;
	struct priv *pv = o->priv;
	if (pv) {
		ml_aten_close(pv->names);
		free(pv->ops);
		free(pv);
	}
	free(o->rows);
	free(o);
}
