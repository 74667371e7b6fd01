/* report/flame.c - builds the call tree the flame graphs draw: every
 * allocation stack (and line-timer sample) added along its path from the
 * outermost frame, so a node's value is everything allocated below it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/flame.h"
#include "report/strtab.h"

struct flame_priv {
	uint32_t *slots;	/* node index + 1, 0: empty; keyed by (parent, site) */
	size_t cap;		/* a power of two */
	size_t cap_nodes;
	struct ml_strtab names;	/* function names made here (offsets cut off) */
};

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h * 0x100000001b3ull;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static uint64_t site_hash(uint32_t parent, const char *fn, const char *file, int line)
{
	uint64_t h = 0xcbf29ce484222325ull ^ parent;
	h = hash_str(h, fn);
	h = hash_str(h, file);
	return (h ^ (uint64_t)(unsigned)line) * 0x9e3779b97f4a7c15ull;
}

static int grow_slots(struct ml_flame *t)
{
	struct flame_priv *pv = t->priv;
	size_t cap = pv->cap ? pv->cap * 2 : 1024;
	uint32_t *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t n = 1; n < t->n_nodes; n++) {
		const struct ml_flame_node *nd = &t->nodes[n];
		size_t s = site_hash(nd->parent, nd->function, nd->file, nd->line) >> 20 & (cap - 1);
		while (slots[s])
			s = (s + 1) & (cap - 1);
		slots[s] = (uint32_t)n + 1;
	}
	free(pv->slots);
	pv->slots = slots;
	pv->cap = cap;
	return 0;
}

static int grow_nodes(struct ml_flame *t)
{
	struct flame_priv *pv = t->priv;
	size_t cap = pv->cap_nodes ? pv->cap_nodes * 2 : 256;
	struct ml_flame_node *nodes = realloc(t->nodes, cap * sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	t->nodes = nodes;
	int64_t *total = realloc(t->total, cap * t->n_values * sizeof(*total));
	if (!total)
		return -ENOMEM;
	t->total = total;
	int64_t *self = realloc(t->self, cap * t->n_values * sizeof(*self));
	if (!self)
		return -ENOMEM;
	t->self = self;
	if (t->base_total) {
		int64_t *bt = realloc(t->base_total, cap * t->n_values * sizeof(*bt));
		if (!bt)
			return -ENOMEM;
		t->base_total = bt;
		int64_t *bs = realloc(t->base_self, cap * t->n_values * sizeof(*bs));
		if (!bs)
			return -ENOMEM;
		t->base_self = bs;
	}
	pv->cap_nodes = cap;
	return 0;
}

/* A function name with a "+0x1f" offset (a symbol without debug info) cut
 * off, kept in the tree's pool; name itself when there is nothing to cut.
 * NULL on ENOMEM. */
static const char *function_name(struct ml_flame *t, const struct ml_frame *fr)
{
	const char *name = fr->function ? fr->function : ML_AGG_UNKNOWN;
	const char *plus = strrchr(name, '+');
	if (fr->file || !plus || plus == name || strncmp(plus, "+0x", 3) != 0 || !plus[3] ||
	    strspn(plus + 3, "0123456789abcdefABCDEF") != strlen(plus + 3))
		return name;
	struct flame_priv *pv = t->priv;
	char *cut = strndup(name, (size_t)(plus - name));
	long id = cut ? ml_strtab_intern(&pv->names, cut) : -1;
	free(cut);
	return id < 0 ? NULL : pv->names.str[id];
}

/* The child of parent for frame fr, made on first sight.  Returns its index,
 * or 0 on ENOMEM. */
static uint32_t child_of(struct ml_flame *t, uint32_t parent, const struct ml_frame *fr)
{
	struct flame_priv *pv = t->priv;
	const char *fn = function_name(t, fr);
	if (!fn)
		return 0;
	const char *file = fr->line > 0 ? fr->file : NULL;
	int line = file ? fr->line : 0;
	if ((t->n_nodes + 1) * 2 >= pv->cap && grow_slots(t) < 0)
		return 0;
	size_t s = site_hash(parent, fn, file, line) >> 20 & (pv->cap - 1);
	for (; pv->slots[s]; s = (s + 1) & (pv->cap - 1)) {
		const struct ml_flame_node *nd = &t->nodes[pv->slots[s] - 1];
		if (nd->parent == parent && nd->line == line && str_eq(nd->function, fn) &&
		    str_eq(nd->file, file))
			return pv->slots[s] - 1;
	}
	if (t->n_nodes == pv->cap_nodes && grow_nodes(t) < 0)
		return 0;
	uint32_t n = (uint32_t)t->n_nodes++;
	struct ml_flame_node *nd = &t->nodes[n];
	*nd = (struct ml_flame_node){ .parent = parent, .depth = t->nodes[parent].depth + 1,
				      .function = fn, .file = file, .line = line,
				      .module = fr->module };
	nd->next_sibling = t->nodes[parent].first_child;
	t->nodes[parent].first_child = n;
	memset(&t->total[(size_t)n * t->n_values], 0, t->n_values * sizeof(int64_t));
	memset(&t->self[(size_t)n * t->n_values], 0, t->n_values * sizeof(int64_t));
	if (t->base_total) {
		memset(&t->base_total[(size_t)n * t->n_values], 0, t->n_values * sizeof(int64_t));
		memset(&t->base_self[(size_t)n * t->n_values], 0, t->n_values * sizeof(int64_t));
	}
	pv->slots[s] = n + 1;
	return n;
}

static void add_row(int64_t *dst, const int64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += v[i];
}

/* v holds the base negated (the difference subtracts it): the base
 * arrays keep its own, positive numbers. */
static void sub_row(int64_t *dst, const int64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] -= v[i];
}

/* The path of the stack added last: its frames, outermost first, and
 * their nodes.  The next stack's frames that are the same lead to the same
 * nodes; only the rest are looked up. */
struct flame_walk {
	const struct ml_frame **fr;
	uint32_t *node;
	size_t depth, cap;
};

/* Adds v to the node of st's path (outermost first) as a stack that ends
 * there: the tree's self; its totals are summed up the tree at the end
 * (sum_totals).  0 or -ENOMEM. */
static int add_path(struct ml_flame *t, struct flame_walk *w, const struct ml_agg_stack *st,
		    const int64_t *v, bool is_base)
{
	static const struct ml_frame unknown = { .function = ML_AGG_UNKNOWN };
	size_t depth = st->n_frames ? st->n_frames : 1;
	if (depth > w->cap) {
		size_t cap = w->cap ? w->cap : 64;
		while (cap < depth)
			cap *= 2;
		const struct ml_frame **fr = realloc(w->fr, cap * sizeof(*fr));
		if (fr)
			w->fr = fr;
		uint32_t *node = realloc(w->node, cap * sizeof(*node));
		if (node)
			w->node = node;
		if (!fr || !node)
			return -ENOMEM;
		w->cap = cap;
	}
	size_t d = 0, shared = depth < w->depth ? depth : w->depth;
	while (d < shared && w->fr[d] == (st->n_frames ? st->frames[depth - 1 - d] : &unknown))
		d++;
	for (; d < depth; d++) {
		const struct ml_frame *fr = st->n_frames ? st->frames[depth - 1 - d] : &unknown;
		uint32_t n = child_of(t, d ? w->node[d - 1] : 0, fr);
		if (!n) {
			w->depth = 0;
			return -ENOMEM;
		}
		w->fr[d] = fr;
		w->node[d] = n;
	}
	w->depth = depth;
	uint32_t n = w->node[depth - 1];
	add_row(&t->self[(size_t)n * t->n_values], v, t->n_values);
	if (is_base)
		sub_row(&t->base_self[(size_t)n * t->n_values], v, t->n_values);
	return 0;
}

/* Every node's total: its self and its children's totals (a child comes
 * after its parent). */
static void sum_totals(struct ml_flame *t)
{
	size_t nv = t->n_values;
	memcpy(t->total, t->self, t->n_nodes * nv * sizeof(*t->total));
	if (t->base_total)
		memcpy(t->base_total, t->base_self, t->n_nodes * nv * sizeof(*t->base_total));
	for (size_t n = t->n_nodes; n-- > 1;) {
		size_t parent = t->nodes[n].parent;
		add_row(&t->total[parent * nv], &t->total[n * nv], nv);
		if (t->base_total)
			add_row(&t->base_total[parent * nv], &t->base_total[n * nv], nv);
	}
}

static bool kind_seen(const struct ml_agg *a, int k)
{
	return a && (a->totals[k].allocs || a->totals[k].live_blocks ||
		     (a->profile->kinds_present & (1u << k)));
}

/* The groups: heap first (for a Python program, cpu: heap + Python
 * objects), the other kinds the profiles have in the kinds table's order,
 * the GPU kinds as one "cuda" group where the first is. */
static void pick_groups(struct ml_flame *t, const struct ml_agg *a, const struct ml_agg *b)
{
	bool cuda_done = false;
	bool python = kind_seen(a, ML_KIND_PYTHON) || kind_seen(b, ML_KIND_PYTHON);
	if (python)
		t->groups[t->n_groups++] = (struct ml_flame_group){ ml_kind_name(ML_KIND_CPU),
								    ML_KIND_CPU };
	for (int k = 0; k < ML_KIND_COUNT; k++) {
		if (k == ML_KIND_CUDA_GPU || ml_kind_is_event((enum ml_kind)k) ||
		    ml_kind_is_derived((enum ml_kind)k) ||
		    (k != ML_KIND_HEAP && !kind_seen(a, k) && !kind_seen(b, k)))
			continue;
		if (!ml_kind_is_gpu((enum ml_kind)k))
			t->groups[t->n_groups++] = (struct ml_flame_group){ ml_kind_name((enum ml_kind)k), k };
		else if (!cuda_done) {
			t->groups[t->n_groups++] = (struct ml_flame_group){ "cuda", ML_FLAME_CUDA };
			cuda_done = true;
		}
	}
	t->has_time = (a->profile->has_samples || (b && b->profile->has_samples));
	t->n_values = t->n_groups * ML_FF_COUNT + (t->has_time ? 1 : 0);
	t->period_ns = a->profile->has_samples ? a->profile->sampling.period_ns
			: b && b->profile->has_samples ? b->profile->sampling.period_ns : 0;
}

struct ml_amount ml_flame_group_amount(const struct ml_flame_group *g,
				       const struct ml_amount *per_kind)
{
	return g->kind == ML_FLAME_CUDA ? ml_amount_gpu(per_kind) : per_kind[g->kind];
}

static void stack_values(const struct ml_flame *t, const struct ml_agg_stack *st, int64_t sign,
			 int64_t *v)
{
	struct ml_amount per_kind[ML_KIND_COUNT];
	ml_agg_stack_kinds(st, per_kind);
	memset(v, 0, t->n_values * sizeof(*v));
	for (size_t g = 0; g < t->n_groups; g++) {
		struct ml_amount m = ml_flame_group_amount(&t->groups[g], per_kind);
		int64_t *row = &v[g * ML_FF_COUNT];
		row[ML_FF_ALLOC_BYTES] = sign * (int64_t)m.alloc_bytes;
		row[ML_FF_ALLOCS] = sign * (int64_t)m.allocs;
		row[ML_FF_PEAK_BYTES] = sign * (int64_t)m.peak_bytes;
		row[ML_FF_PEAK_BLOCKS] = sign * (int64_t)m.peak_blocks;
		row[ML_FF_LEAK_BYTES] = sign * (int64_t)m.live_bytes;
		row[ML_FF_LEAK_BLOCKS] = sign * (int64_t)m.live_blocks;
	}
}

static int add_agg(struct ml_flame *t, const struct ml_agg *a, int64_t sign)
{
	int64_t *v = calloc(t->n_values + 1, sizeof(*v));
	struct flame_walk w = { 0 };
	int err = v ? 0 : -ENOMEM;
	for (size_t i = 0; i < a->n_stacks && err == 0; i++) {
		stack_values(t, &a->stacks[i], sign, v);
		err = add_path(t, &w, &a->stacks[i], v, sign < 0);
	}
	for (size_t i = 0; t->has_time && i < a->profile->n_samples && err == 0; i++) {
		struct ml_agg_stack st;
		err = ml_agg_sample_stack(a, i, &st);
		if (err < 0)
			break;
		memset(v, 0, t->n_values * sizeof(*v));
		v[ml_flame_time_vi(t)] = sign * (int64_t)a->profile->samples[i].count;
		err = add_path(t, &w, &st, v, sign < 0);
		free(st.frames);
	}
	free(w.fr);
	free(w.node);
	free(v);
	return err;
}

int ml_flame_build(const struct ml_agg *a, const struct ml_agg *base, struct ml_flame **out)
{
	struct ml_flame *t = calloc(1, sizeof(*t));
	if (!t || !(t->priv = calloc(1, sizeof(struct flame_priv)))) {
		free(t);
		return -ENOMEM;
	}
	pick_groups(t, a, base);
	/* A placeholder until grow_nodes sizes it: base arrays exist iff base. */
	if (base && !(t->base_total = malloc(sizeof(int64_t)))) {
		ml_flame_free(t);
		return -ENOMEM;
	}
	int err = grow_nodes(t);
	if (err == 0) {
		t->nodes[0] = (struct ml_flame_node){ 0 };
		memset(t->total, 0, t->n_values * sizeof(int64_t));
		memset(t->self, 0, t->n_values * sizeof(int64_t));
		if (base) {
			memset(t->base_total, 0, t->n_values * sizeof(int64_t));
			memset(t->base_self, 0, t->n_values * sizeof(int64_t));
		}
		t->n_nodes = 1;
		err = add_agg(t, a, 1);
	}
	if (err == 0 && base)
		err = add_agg(t, base, -1);
	if (err == 0)
		sum_totals(t);
	if (err < 0) {
		ml_flame_free(t);
		return err;
	}
	*out = t;
	return 0;
}

void ml_flame_free(struct ml_flame *t)
{
	if (!t)
		return;
	struct flame_priv *pv = t->priv;
	if (pv) {
		ml_strtab_free(&pv->names);
		free(pv->slots);
		free(pv);
	}
	free(t->nodes);
	free(t->total);
	free(t->self);
	free(t->base_total);
	free(t->base_self);
	free(t);
}

int ml_flame_group_find(const struct ml_flame *t, const char *name)
{
	for (size_t g = 0; g < t->n_groups; g++)
		if (strcmp(t->groups[g].name, name) == 0)
			return (int)g;
	return -1;
}

struct child_order {
	const struct ml_flame *t;
	size_t vi;
};

static int cmp_child(const void *x, const void *y, void *arg)
{
	const struct child_order *o = arg;
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	int64_t va = o->t->total[(size_t)a * o->t->n_values + o->vi];
	int64_t vb = o->t->total[(size_t)b * o->t->n_values + o->vi];
	va = va < 0 ? -va : va;
	vb = vb < 0 ? -vb : vb;
	if (va != vb)
		return va > vb ? -1 : 1;
	int c = strcmp(o->t->nodes[a].function, o->t->nodes[b].function);
	return c ? c : (a > b) - (a < b);
}

uint32_t *ml_flame_children(const struct ml_flame *t, uint32_t n, size_t vi, size_t *count)
{
	size_t k = 0;
	for (uint32_t c = t->nodes[n].first_child; c; c = t->nodes[c].next_sibling)
		k++;
	*count = 0;
	uint32_t *kids = k ? malloc(k * sizeof(*kids)) : NULL;
	if (!kids)
		return NULL;
	k = 0;
	for (uint32_t c = t->nodes[n].first_child; c; c = t->nodes[c].next_sibling)
		kids[k++] = c;
	struct child_order o = { t, vi };
	qsort_r(kids, k, sizeof(*kids), cmp_child, &o);
	*count = k;
	return kids;
}

char *ml_flame_label(const struct ml_flame_node *nd, bool full_path, char *buf, size_t len)
{
	const char *fn = nd->function ? nd->function : "[root]";
	if (nd->file) {
		const char *slash = strrchr(nd->file, '/');
		snprintf(buf, len, "%s (%s:%d)", fn, full_path || !slash ? nd->file : slash + 1,
			 nd->line);
	} else if (nd->module && nd->function) {
		const char *slash = strrchr(nd->module, '/');
		snprintf(buf, len, "%s (in %s)", fn, full_path || !slash ? nd->module : slash + 1);
	} else {
		snprintf(buf, len, "%s", fn);
	}
	return buf;
}
