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
	for (; o->n_rows < n; o->n_rows++) {
		/* Every kind's amounts: an op's are few. */
		struct ml_agg_func *f = &o->rows[o->n_rows].f;
		f->self_slots = calloc(2 * ML_KIND_COUNT, sizeof(*f->self_slots));
		if (!f->self_slots)
			return -ENOMEM;
		f->total_slots = f->self_slots + ML_KIND_COUNT;
		f->kind_slot = ml_kind_slot_identity;
	}
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

/* A file of an installed package or of Python's own library, not the
 * program's. */
static bool library_file(const char *file)
{
	return strstr(file, "-packages/") || strstr(file, "/lib/python3") ||
	       strncmp(file, "<frozen ", 8) == 0;
}

/* The Python frame the op at frames[first] was called from (struct
 * ml_aten_site), or NULL. */
static const struct ml_frame *call_site(const struct ml_frame *const *frames, size_t n,
					size_t first)
{
	const struct ml_frame *any = NULL;
	for (size_t i = first + 1; i < n; i++) {
		if (!frames[i]->python || !frames[i]->file)
			continue;
		if (!library_file(frames[i]->file))
			return frames[i];
		if (!any)
			any = frames[i];
	}
	return any;
}

static bool same_line(const struct ml_frame *a, const struct ml_frame *b)
{
	return a == b || (a->line == b->line && strcmp(a->file, b->file) == 0 &&
			  strcmp(a->function, b->function) == 0);
}

/* The row's site for frame (added, zeroed), or NULL on ENOMEM. */
static struct ml_aten_site *site_of(struct ml_aten_row *r, const struct ml_frame *frame)
{
	for (size_t i = 0; i < r->n_sites; i++)
		if (same_line(r->sites[i].frame, frame))
			return &r->sites[i];
	if ((r->n_sites & (r->n_sites - 1)) == 0) {	/* 0, 1, 2, 4, ...: grow */
		size_t cap = r->n_sites ? r->n_sites * 2 : 1;
		struct ml_aten_site *m = realloc(r->sites, cap * sizeof(*m));
		if (!m)
			return NULL;
		r->sites = m;
	}
	r->sites[r->n_sites] = (struct ml_aten_site){ .frame = frame };
	return &r->sites[r->n_sites++];
}

static int charge_site(struct ml_aten_ops *o, const struct ml_agg_stack *st, long n_ops,
		       size_t first)
{
	struct priv *pv = o->priv;
	const struct ml_frame *frame = n_ops ? call_site(st->frames, st->n_frames, first) : NULL;
	if (!frame)
		return 0;
	bool tensor = tensor_storage(st->frames, first);
	const struct ml_amount *h = ml_agg_stack_kind(st, ML_KIND_HEAP);
	const struct ml_amount *c = ml_agg_stack_kind(st, ML_KIND_TORCH_CUDA);
	for (long i = 0; i < n_ops; i++) {
		struct ml_aten_site *site = site_of(&o->rows[pv->ops[i] - 1], frame);
		if (!site)
			return -ENOMEM;
		if (tensor) {
			site->cpu_bytes += h->alloc_bytes;
			site->allocs += h->allocs;
		}
		site->cuda_bytes += c->alloc_bytes;
		site->allocs += c->allocs;
	}
	return 0;
}

static int cmp_site(const void *x, const void *y)
{
	const struct ml_aten_site *a = x, *b = y;
	uint64_t va = a->cpu_bytes + a->cuda_bytes, vb = b->cpu_bytes + b->cuda_bytes;
	if (va != vb)
		return va > vb ? -1 : 1;
	if (a->allocs != b->allocs)
		return a->allocs > b->allocs ? -1 : 1;
	if (a->samples != b->samples)
		return a->samples > b->samples ? -1 : 1;
	int c = strcmp(a->frame->file, b->frame->file);
	return c ? c : (a->frame->line > b->frame->line) - (a->frame->line < b->frame->line);
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
		ml_amount_add(split ? &self->other_self[k] : &self->f.self_slots[k], m);
		for (long i = 0; i < n_ops; i++) {
			struct ml_aten_row *r = &o->rows[pv->ops[i] - 1];
			ml_amount_add(split ? &r->other_total[k] : &r->f.total_slots[k], m);
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
	const struct ml_frame *frame = call_site(sm->frames, sm->n_frames, first);
	for (long i = 0; frame && i < n_ops; i++) {
		struct ml_aten_site *site = site_of(&o->rows[pv->ops[i] - 1], frame);
		if (!site)
			return -ENOMEM;
		site->samples += sm->count;
	}
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
		if (charge_site(o, st, n_ops, first) < 0)
			goto fail;
	}
	for (size_t si = 0; si < a->profile->n_samples; si++)
		if (charge_sample(o, &a->samples[si]) < 0)
			goto fail;
	for (size_t i = 0; i < o->n_rows; i++) {
		struct ml_agg_func *f = &o->rows[i].f;
		f->name = f->label = ml_aten_name(pv->names, (uint32_t)i + 1);
		if (o->rows[i].n_sites > 1)
			qsort(o->rows[i].sites, o->rows[i].n_sites, sizeof(*o->rows[i].sites), cmp_site);
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
	for (size_t i = 0; i < o->n_rows; i++) {
		free(o->rows[i].sites);
		free(o->rows[i].f.self_slots);
	}
	free(o->rows);
	free(o);
}
