/* report/view_html.c - the html view: one self-contained page (our own
 * script and style, embedded by report/html_assets.S; no network) holding
 * each profile's data as JSON: memory over time per kind with the region
 * spans, the call tree for the flame graph (pruned below a share of the
 * total, the pruned amounts kept), the ops table and per-line heat with
 * source text. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/flame.h"
#include "report/series.h"
#include "report/source.h"
#include "report/spans.h"
#include "report/strtab.h"
#include "report/view_common.h"

extern const char ml_html_page[], ml_html_script[], ml_html_style[];

#define DEFAULT_FRACTION 0.0002	/* 0.02% of the total: nodes below are pruned */
#define MAX_OPS_ROWS 5000
#define MAX_SOURCE_FILES 60
#define MAX_SOURCE_BYTES (4u << 20)

struct html_doc {
	char *buf;
	size_t len;
	FILE *mem;		/* the profiles' JSON objects, comma separated */
	size_t n_profiles;
	char *title;
};

/* A JSON string safe inside <script>: '<', '>' and '&' escaped too. */
static void put_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20 || *c == '<' || *c == '>' || *c == '&')
			fprintf(out, "\\u%04x", *c);
		else if (c[0] == 0xe2 && c[1] == 0x80 && (c[2] == 0xa8 || c[2] == 0xa9)) {
			fprintf(out, "\\u%04x", c[2] == 0xa8 ? 0x2028 : 0x2029);
			c += 2;
		} else
			fputc(*c, out);
	}
	fputc('"', out);
}

static void put_key(FILE *out, const char *key, bool first)
{
	fprintf(out, "%s\"%s\":", first ? "" : ",", key);
}

static void put_i64s(FILE *out, const int64_t *v, size_t n, size_t stride)
{
	fputc('[', out);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s%lld", i ? "," : "", (long long)v[i * stride]);
	fputc(']', out);
}

static int html_begin(const struct ml_view_opts *o, void **state)
{
	struct html_doc *d = calloc(1, sizeof(*d));
	(void)o;
	if (!d || !(d->mem = open_memstream(&d->buf, &d->len))) {
		free(d);
		return -ENOMEM;
	}
	*state = d;
	return 0;
}

/* ---- the flame graph: the kept nodes in depth-first order ---- */

/* A kept node, or the merge of a kept node's pruned children (merged > 0:
 * how many; drawn as one "[N smaller calls]" frame so that the widths add
 * up and the pruned amounts stay where they were). */
struct kept {
	uint32_t node;		/* the node, or for a merge its parent */
	uint32_t merged;
	size_t vals;		/* a merge: its row in prune.merge_total */
};

struct prune {
	const struct ml_flame *t;
	bool *primary;		/* value indexes that decide what is kept */
	int64_t *cut;		/* per value index: |value| below is pruned */
	struct kept *order;	/* kept nodes and merges, preorder */
	uint32_t *index_of;	/* node -> position in order + 1 (0: pruned) */
	size_t n, cap;
	int64_t *merge_total, *merge_base;	/* per merge, n_values each */
	size_t n_merges;
	int64_t *pruned;	/* per value index: summed over the top pruned nodes */
	size_t n_pruned;
};

static bool keep(const struct prune *p, uint32_t n)
{
	const int64_t *v = &p->t->total[(size_t)n * p->t->n_values];
	const int64_t *b = p->t->base_total ? &p->t->base_total[(size_t)n * p->t->n_values] : NULL;
	for (size_t i = 0; i < p->t->n_values; i++) {
		int64_t m = v[i] < 0 ? -v[i] : v[i];
		if (b && b[i] > m)
			m = b[i];	/* a diff keeps what either run had */
		if (p->primary[i] && m && m >= p->cut[i])
			return true;
	}
	return false;
}

static int push(struct prune *p, struct kept k)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 1024;
		struct kept *o = realloc(p->order, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		p->order = o;
		p->cap = cap;
	}
	p->order[p->n++] = k;
	return 0;
}

/* Adds node c's values into the newest merge. */
static void merge_into(struct prune *p, uint32_t c)
{
	const struct ml_flame *t = p->t;
	size_t nv = t->n_values, m = p->n_merges - 1;
	for (size_t i = 0; i < nv; i++) {
		p->merge_total[m * nv + i] += t->total[(size_t)c * nv + i];
		p->pruned[i] += t->total[(size_t)c * nv + i];
		if (t->base_total)
			p->merge_base[m * nv + i] += t->base_total[(size_t)c * nv + i];
	}
}

static int new_merge(struct prune *p)
{
	size_t nv = p->t->n_values, m = p->n_merges++;
	int64_t *mt = realloc(p->merge_total, p->n_merges * nv * sizeof(*mt));
	if (!mt)
		return -ENOMEM;
	p->merge_total = mt;
	memset(&mt[m * nv], 0, nv * sizeof(*mt));
	int64_t *mb = realloc(p->merge_base, p->n_merges * nv * sizeof(*mb));
	if (!mb)
		return -ENOMEM;
	p->merge_base = mb;
	memset(&mb[m * nv], 0, nv * sizeof(*mb));
	return 0;
}

/* Keeps n, then its children that are big enough, then one merge of the
 * others.  0 or -ENOMEM. */
static int select_nodes(struct prune *p, uint32_t n)
{
	const struct ml_flame *t = p->t;
	if (push(p, (struct kept){ .node = n }) < 0)
		return -ENOMEM;
	p->index_of[n] = (uint32_t)p->n;
	uint32_t small = 0;
	for (uint32_t c = t->nodes[n].first_child; c; c = t->nodes[c].next_sibling) {
		if (keep(p, c)) {
			if (select_nodes(p, c) < 0)
				return -ENOMEM;
		} else {
			small++;
		}
	}
	if (!small)
		return 0;
	if (new_merge(p) < 0 ||
	    push(p, (struct kept){ .node = n, .merged = small, .vals = p->n_merges - 1 }) < 0)
		return -ENOMEM;
	for (uint32_t c = t->nodes[n].first_child; c; c = t->nodes[c].next_sibling)
		if (!keep(p, c))
			merge_into(p, c);
	p->n_pruned += small;
	return 0;
}

static int prune(struct prune *p, const struct ml_flame *t, double fraction)
{
	p->t = t;
	p->primary = calloc(t->n_values + 1, sizeof(*p->primary));
	p->cut = calloc(t->n_values + 1, sizeof(*p->cut));
	p->pruned = calloc(t->n_values + 1, sizeof(*p->pruned));
	p->index_of = calloc(t->n_nodes, sizeof(*p->index_of));
	if (!p->primary || !p->cut || !p->pruned || !p->index_of)
		return -ENOMEM;
	for (size_t g = 0; g < t->n_groups; g++) {
		p->primary[ml_flame_vi(g, ML_FF_ALLOC_BYTES)] = true;
		p->primary[ml_flame_vi(g, ML_FF_PEAK_BYTES)] = true;
		p->primary[ml_flame_vi(g, ML_FF_LEAK_BYTES)] = true;
	}
	if (t->has_time)
		p->primary[ml_flame_time_vi(t)] = true;
	for (size_t i = 0; i < t->n_values; i++) {
		int64_t root = t->total[i] < 0 ? -t->total[i] : t->total[i];
		if (t->base_total && t->base_total[i] > root)
			root = t->base_total[i];
		p->cut[i] = (int64_t)((double)root * fraction);
		if (p->cut[i] < 1)
			p->cut[i] = 1;
	}
	return select_nodes(p, 0);
}

static void prune_free(struct prune *p)
{
	free(p->primary);
	free(p->cut);
	free(p->pruned);
	free(p->order);
	free(p->index_of);
	free(p->merge_total);
	free(p->merge_base);
}

/* One value column of every kept node: arr's (total, self or base), a
 * merge's own sums (a merge is a leaf: its self is its total). */
static void flame_values(FILE *out, const struct prune *p, const int64_t *arr, const char *key)
{
	const struct ml_flame *t = p->t;
	const int64_t *merged = arr == t->base_total ? p->merge_base : p->merge_total;
	put_key(out, key, false);
	fputc('[', out);
	for (size_t i = 0; i < t->n_values; i++) {
		fputs(i ? ",[" : "[", out);
		for (size_t k = 0; k < p->n; k++) {
			const struct kept *e = &p->order[k];
			int64_t v = e->merged ? merged[e->vals * t->n_values + i]
					      : arr[(size_t)e->node * t->n_values + i];
			fprintf(out, "%s%lld", k ? "," : "", (long long)v);
		}
		fputc(']', out);
	}
	fputc(']', out);
}

static int flame_json(FILE *out, const struct ml_flame *t, double fraction, struct ml_strtab *names)
{
	struct prune p = { 0 };
	int err = prune(&p, t, fraction);
	if (err < 0)
		goto out;
	fprintf(out, ",\"flame\":{\"fraction\":%g,\"nodes\":%zu,\"all_nodes\":%zu,\"pruned_nodes\":%zu",
		fraction, p.n - p.n_merges, t->n_nodes, p.n_pruned);
	put_key(out, "parent", false);
	fputc('[', out);
	for (size_t k = 0; k < p.n; k++) {
		const struct kept *e = &p.order[k];
		uint32_t parent = e->merged ? e->node : t->nodes[e->node].parent;
		fprintf(out, "%s%d", k ? "," : "", k ? (int)p.index_of[parent] - 1 : -1);
	}
	fputc(']', out);
	put_key(out, "merged", false);
	fputc('[', out);
	for (size_t k = 0; k < p.n; k++)
		fprintf(out, "%s%u", k ? "," : "", p.order[k].merged);
	fputc(']', out);
	static const char *const fields[] = { "fn", "file", "module" };
	for (int f = 0; f < 3; f++) {
		put_key(out, fields[f], false);
		fputc('[', out);
		for (size_t k = 0; k < p.n && err == 0; k++) {
			const struct kept *e = &p.order[k];
			const struct ml_flame_node *nd = &t->nodes[e->node];
			char label[64];
			snprintf(label, sizeof(label), "[%u smaller call%s]", e->merged,
				 e->merged == 1 ? "" : "s");
			const char *s = e->merged ? (f == 0 ? label : NULL)
				      : f == 0 ? (k ? nd->function : "all") : f == 1 ? nd->file : nd->module;
			long id = ml_strtab_intern(names, s);
			if (id < 0)
				err = -ENOMEM;
			fprintf(out, "%s%ld", k ? "," : "", id);
		}
		fputc(']', out);
	}
	put_key(out, "line", false);
	fputc('[', out);
	for (size_t k = 0; k < p.n; k++)
		fprintf(out, "%s%d", k ? "," : "", p.order[k].merged ? 0 : t->nodes[p.order[k].node].line);
	fputc(']', out);
	flame_values(out, &p, t->total, "total");
	flame_values(out, &p, t->self, "self");
	if (t->base_total)
		flame_values(out, &p, t->base_total, "base");
	put_key(out, "pruned", false);
	put_i64s(out, p.pruned, t->n_values, 1);
	fputc('}', out);
out:
	prune_free(&p);
	return err;
}

/* ---- tables keyed by name: ops rows and source lines, new minus base ---- */

struct table {
	struct ml_strtab keys;
	int64_t *v;		/* keys.n rows x width */
	size_t cap, width;
	const void **ref;	/* a function or line the row came from */
};

/* The row of key (made zero on first sight), or NULL on ENOMEM. */
static int64_t *table_row(struct table *tb, const char *key, const void *ref)
{
	size_t before = tb->keys.n;
	long r = ml_strtab_intern(&tb->keys, key);
	if (r < 0)
		return NULL;
	if (tb->keys.n != before) {
		if (tb->keys.n > tb->cap) {
			size_t cap = tb->cap ? tb->cap * 2 : 256;
			int64_t *v = realloc(tb->v, cap * tb->width * sizeof(*v));
			const void **refs = v ? realloc(tb->ref, cap * sizeof(*refs)) : NULL;
			if (v)
				tb->v = v;
			if (!v || !refs)
				return NULL;
			tb->ref = refs;
			tb->cap = cap;
		}
		memset(&tb->v[(size_t)r * tb->width], 0, tb->width * sizeof(int64_t));
		tb->ref[r] = ref;
	}
	return &tb->v[(size_t)r * tb->width];
}

static void table_free(struct table *tb)
{
	ml_strtab_free(&tb->keys);
	free(tb->v);
	free(tb->ref);
}

/* Columns per group of an ops row, then the time columns. */
#define OPS_COLS 7
#define LINE_COLS 5

static void add_func(const struct ml_flame *t, const struct ml_agg_func *f, int64_t sign,
		     int64_t *row)
{
	const struct ml_amount *self = ML_AGG_SELF_ALL(f), *total = ML_AGG_TOTAL_ALL(f);
	for (size_t g = 0; g < t->n_groups; g++) {
		struct ml_amount s = ml_flame_group_amount(&t->groups[g], self);
		struct ml_amount a = ml_flame_group_amount(&t->groups[g], total);
		int64_t *r = &row[g * OPS_COLS];
		r[0] += sign * (int64_t)s.alloc_bytes;
		r[1] += sign * (int64_t)a.alloc_bytes;
		r[2] += sign * (int64_t)s.allocs;
		r[3] += sign * (int64_t)a.allocs;
		r[4] += sign * (int64_t)a.peak_bytes;
		r[5] += sign * (int64_t)s.peak_bytes;
		r[6] += sign * (int64_t)a.live_bytes;
	}
	if (t->has_time) {
		row[t->n_groups * OPS_COLS] += sign * (int64_t)f->self_samples;
		row[t->n_groups * OPS_COLS + 1] += sign * (int64_t)f->total_samples;
	}
}

static void add_line(const struct ml_flame *t, const struct ml_agg_line *l, int64_t sign,
		     int64_t *row)
{
	const struct ml_amount *self = ML_AGG_SELF_ALL(l), *total = ML_AGG_TOTAL_ALL(l);
	for (size_t g = 0; g < t->n_groups; g++) {
		struct ml_amount s = ml_flame_group_amount(&t->groups[g], self);
		struct ml_amount a = ml_flame_group_amount(&t->groups[g], total);
		int64_t *r = &row[g * LINE_COLS];
		r[0] += sign * (int64_t)s.alloc_bytes;
		r[1] += sign * (int64_t)a.alloc_bytes;
		r[2] += sign * (int64_t)a.allocs;
		r[3] += sign * (int64_t)a.peak_bytes;
		r[4] += sign * (int64_t)a.live_bytes;
	}
	if (t->has_time) {
		row[t->n_groups * LINE_COLS] += sign * (int64_t)l->self_samples;
		row[t->n_groups * LINE_COLS + 1] += sign * (int64_t)l->total_samples;
	}
}

static int fill_ops(struct table *tb, const struct ml_flame *t, const struct ml_agg *a, int64_t sign)
{
	char key[4096];
	for (size_t i = 0; i < a->n_funcs; i++) {
		const struct ml_agg_func *f = &a->funcs[i];
		snprintf(key, sizeof(key), "%s\t%s", f->name, f->file ? ml_view_base_name(f->file) : "");
		int64_t *row = table_row(tb, key, f);
		if (!row)
			return -ENOMEM;
		add_func(t, f, sign, row);
	}
	return 0;
}

static int fill_lines(struct table *tb, const struct ml_flame *t, const struct ml_agg *a, int64_t sign)
{
	char key[4096];
	for (size_t i = 0; i < a->n_lines; i++) {
		const struct ml_agg_line *l = &a->lines[i];
		snprintf(key, sizeof(key), "%s\t%d", ml_view_base_name(l->file), l->line);
		int64_t *row = table_row(tb, key, l);
		if (!row)
			return -ENOMEM;
		add_line(t, l, sign, row);
	}
	return 0;
}

static bool nonzero(const int64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i])
			return true;
	return false;
}

struct rank_ctx {
	const struct table *tb;
	size_t col;
};

static int cmp_rank(const void *x, const void *y, void *arg)
{
	const struct rank_ctx *c = arg;
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	int64_t va = c->tb->v[a * c->tb->width + c->col], vb = c->tb->v[b * c->tb->width + c->col];
	va = va < 0 ? -va : va;
	vb = vb < 0 ? -vb : vb;
	return va != vb ? (va > vb ? -1 : 1) : (a > b) - (a < b);
}

static int ops_json(FILE *out, const struct ml_flame *t, const struct ml_agg *a,
		    const struct ml_agg *base)
{
	struct table tb = { .width = t->n_groups * OPS_COLS + (t->has_time ? 2 : 0) };
	int err = fill_ops(&tb, t, a, 1);
	if (err == 0 && base)
		err = fill_ops(&tb, t, base, -1);
	size_t *rows = err == 0 ? calloc(tb.keys.n + 1, sizeof(*rows)) : NULL;
	if (err == 0 && !rows)
		err = -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; err == 0 && i < tb.keys.n; i++)
		if (nonzero(&tb.v[i * tb.width], tb.width))
			rows[n++] = i;
	if (err == 0) {
		/* the largest first by total allocation (or time), then cut */
		struct rank_ctx c = { &tb, t->n_groups ? 1 : 0 };
		qsort_r(rows, n, sizeof(*rows), cmp_rank, &c);
		fprintf(out, ",\"ops\":{\"width\":%zu,\"functions\":%zu,\"rows\":[", tb.width, n);
		for (size_t k = 0; k < n && k < MAX_OPS_ROWS; k++) {
			const struct ml_agg_func *f = tb.ref[rows[k]];
			fputs(k ? ",[" : "[", out);
			put_str(out, f->label ? f->label : f->name);
			fputc(',', out);
			put_str(out, f->file);
			for (size_t i = 0; i < tb.width; i++)
				fprintf(out, ",%lld", (long long)tb.v[rows[k] * tb.width + i]);
			fputc(']', out);
		}
		fputs("]}", out);
	}
	free(rows);
	table_free(&tb);
	return err;
}

/* ---- source views: the files with the most heat, their text and lines ---- */

struct file_heat {
	const char *path;
	int64_t heat;
};

static int cmp_heat(const void *x, const void *y)
{
	const struct file_heat *a = x, *b = y;
	return a->heat != b->heat ? (a->heat > b->heat ? -1 : 1) : strcmp(a->path, b->path);
}

static int64_t row_heat(const int64_t *row, size_t width)
{
	int64_t h = 0;
	for (size_t i = 0; i < width; i++)
		h += row[i] < 0 ? -row[i] : row[i];
	return h;
}

/* The files of the lines table, hottest first: fills *files. */
static int rank_files(const struct table *tb, struct file_heat **files, size_t *n)
{
	struct ml_strtab seen = { 0 };
	struct file_heat *f = calloc(tb->keys.n + 1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < tb->keys.n; i++) {
		const struct ml_agg_line *l = tb->ref[i];
		size_t before = seen.n;
		long k = ml_strtab_intern(&seen, l->file);
		if (k < 0) {
			free(f);
			ml_strtab_free(&seen);
			return -ENOMEM;
		}
		if (seen.n != before)
			f[k].path = l->file;
		f[k].heat += row_heat(&tb->v[i * tb->width], tb->width);
	}
	*n = seen.n;
	ml_strtab_free(&seen);
	qsort(f, *n, sizeof(*f), cmp_heat);
	*files = f;
	return 0;
}

static void source_json(FILE *out, const struct table *tb, const char *path,
			const struct ml_source *src, bool first)
{
	fputs(first ? "{" : ",{", out);
	put_key(out, "file", true);
	put_str(out, path);
	put_key(out, "text", false);
	fputc('[', out);
	for (size_t i = 0; i < src->n_lines; i++) {
		if (i)
			fputc(',', out);
		put_str(out, src->lines[i]);
	}
	fputs("],\"heat\":{", out);
	bool any = false;
	for (size_t i = 0; i < tb->keys.n; i++) {
		const struct ml_agg_line *l = tb->ref[i];
		const int64_t *row = &tb->v[i * tb->width];
		if (!ml_view_same_file(l->file, path) || !nonzero(row, tb->width))
			continue;
		fprintf(out, "%s\"%d\":", any ? "," : "", l->line);
		put_i64s(out, row, tb->width, 1);
		any = true;
	}
	fputs("}}", out);
}

static int sources_json(FILE *out, const struct ml_flame *t, const struct ml_agg *a,
			const struct ml_agg *base)
{
	struct table tb = { .width = t->n_groups * LINE_COLS + (t->has_time ? 2 : 0) };
	struct file_heat *files = NULL;
	size_t n = 0;
	int err = fill_lines(&tb, t, a, 1);
	if (err == 0 && base)
		err = fill_lines(&tb, t, base, -1);
	if (err == 0)
		err = rank_files(&tb, &files, &n);
	fprintf(out, ",\"sources\":{\"width\":%zu,\"files\":[", tb.width);
	size_t bytes = 0, shown = 0;
	for (size_t i = 0; err == 0 && i < n && shown < MAX_SOURCE_FILES; i++) {
		struct ml_source src;
		if (files[i].heat == 0 || ml_source_load(files[i].path, &src) < 0)
			continue;
		for (size_t k = 0; k < src.n_lines; k++)
			bytes += strlen(src.lines[k]) + 4;
		if (bytes <= MAX_SOURCE_BYTES || shown == 0) {
			source_json(out, &tb, files[i].path, &src, shown == 0);
			shown++;
		}
		ml_source_free(&src);
	}
	fprintf(out, "],\"files_with_lines\":%zu}", n);
	free(files);
	table_free(&tb);
	return err;
}

/* ---- the profile's header, timeline and regions ---- */

static void meta_json(FILE *out, const struct ml_agg *a, const struct ml_view_opts *o)
{
	const struct ml_profile *p = a->profile;
	put_key(out, "path", true);
	put_str(out, p->path);
	put_key(out, "exe", false);
	put_str(out, p->exe);
	put_key(out, "argv", false);
	fputc('[', out);
	for (uint32_t i = 0; i < p->meta.argc; i++) {
		if (i)
			fputc(',', out);
		put_str(out, p->argv[i]);
	}
	fputc(']', out);
	fprintf(out, ",\"pid\":%llu,\"ppid\":%llu,\"duration_ns\":%llu,\"start_realtime_ns\":%llu",
		(unsigned long long)p->meta.pid, (unsigned long long)p->meta.ppid,
		(unsigned long long)p->meta.duration_ns,
		(unsigned long long)p->meta.start_realtime_ns);
	put_key(out, "base", false);
	if (o->base)
		put_str(out, o->base_path);
	else
		fputs("null", out);
	put_key(out, "totals", false);
	fputc('{', out);
	bool first = true;
	for (int k = 0; k < ML_KIND_COUNT; k++) {
		struct ml_amount m = ml_view_totals(a, (enum ml_kind)k);
		if (ml_kind_is_event((enum ml_kind)k) ||
		    (!m.allocs && !m.live_blocks && !(p->kinds_present & (1u << k))))
			continue;
		put_key(out, ml_kind_name((enum ml_kind)k), first);
		fprintf(out, "{\"allocs\":%llu,\"alloc_bytes\":%llu,\"frees\":%llu,"
			"\"leaked_bytes\":%llu,\"leaked_blocks\":%llu,\"peak_bytes\":%llu,"
			"\"peak_time_ns\":%llu}",
			(unsigned long long)m.allocs, (unsigned long long)m.alloc_bytes,
			(unsigned long long)m.frees, (unsigned long long)m.live_bytes,
			(unsigned long long)m.live_blocks, (unsigned long long)m.peak_bytes,
			(unsigned long long)ml_view_peak_time(a, (enum ml_kind)k));
		first = false;
	}
	fputc('}', out);
	if (p->has_samples)
		fprintf(out, ",\"samples\":{\"period_ns\":%llu,\"samples\":%llu,\"clock\":\"%s\"}",
			(unsigned long long)p->sampling.period_ns,
			(unsigned long long)p->sampling.samples,
			p->sampling.clock == ML_CLOCK_WALL ? "wall" : "cpu");
}

static int timeline_json(FILE *out, const struct ml_profile *p)
{
	struct ml_series *s;
	size_t n;
	char path[512];
	if (ml_series_build(p, &s, &n) < 0)
		return -ENOMEM;
	fputs(",\"timeline\":[", out);
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "%s{\"kind\":\"%s\",\"peak_bytes\":%llu,\"peak_time_ns\":%llu,\"t\":",
			i ? "," : "", ml_kind_name(s[i].kind), (unsigned long long)s[i].peak_bytes,
			(unsigned long long)s[i].peak_time_ns);
		put_i64s(out, (const int64_t *)s[i].time_ns, s[i].n, 1);
		fputs(",\"b\":", out);
		put_i64s(out, (const int64_t *)s[i].bytes, s[i].n, 1);
		fputc('}', out);
	}
	fputs("],\"spans\":[", out);
	for (size_t i = 0; i < p->n_spans; i++) {
		const struct ml_fmt_span *sp = &p->spans[i];
		const struct ml_region *r = ml_spans_region(p, sp->region);
		fputs(i ? ",[" : "[", out);
		put_str(out, ml_spans_path(p, sp->region, path, sizeof(path)));
		fprintf(out, ",%u,%llu,%llu,%d]", sp->tid, (unsigned long long)sp->start_ns,
			(unsigned long long)sp->end_ns, r && (r->flags & ML_REGION_NVTX) ? 1 : 0);
	}
	fprintf(out, "],\"spans_dropped\":%llu", (unsigned long long)p->spans_dropped);
	ml_series_free(s, n);
	return 0;
}

static int html_add(void *state, const struct ml_agg *a, const struct ml_view_opts *o)
{
	struct html_doc *d = state;
	struct ml_flame *t;
	struct ml_strtab names = { 0 };
	int err = ml_flame_build(a, o->base, &t);
	if (err < 0)
		return err;
	FILE *out = d->mem;
	fputs(d->n_profiles++ ? ",\n{" : "\n{", out);
	meta_json(out, a, o);
	fputs(",\"groups\":[", out);
	for (size_t g = 0; g < t->n_groups; g++)
		fprintf(out, "%s\"%s\"", g ? "," : "", t->groups[g].name);
	fprintf(out, "],\"has_time\":%s,\"period_ns\":%llu", t->has_time ? "true" : "false",
		(unsigned long long)t->period_ns);
	err = timeline_json(out, a->profile);
	if (err == 0)
		err = flame_json(out, t, ml_view_node_fraction(o, DEFAULT_FRACTION), &names);
	if (err == 0)
		err = ops_json(out, t, a, o->base);
	if (err == 0)
		err = sources_json(out, t, a, o->base);
	put_key(out, "names", false);
	fputc('[', out);
	for (size_t i = 0; i < names.n; i++) {
		if (i)
			fputc(',', out);
		put_str(out, names.str[i]);
	}
	fputs("]}", out);
	if (!d->title) {
		const char *exe = a->profile->meta.argc ? a->profile->argv[0] : a->profile->exe;
		const char *slash = strrchr(exe, '/');
		d->title = strdup(slash ? slash + 1 : exe);
	}
	ml_strtab_free(&names);
	ml_flame_free(t);
	return err < 0 ? err : ferror(out) ? -EIO : 0;
}

/* Writes the page: the template with @TITLE@, @STYLE@, @DATA@ and
 * @SCRIPT@ filled in. */
static void write_page(FILE *out, const struct html_doc *d)
{
	const char *at = ml_html_page;
	for (const char *m; (m = strchr(at, '@'));) {
		fwrite(at, 1, (size_t)(m - at), out);
		if (strncmp(m, "@TITLE@", 7) == 0) {
			for (const char *c = d->title ? d->title : "memline"; *c; c++)
				if (*c == '<' || *c == '&' || *c == '>')
					fprintf(out, "&#%d;", *c);
				else
					fputc(*c, out);
			at = m + 7;
		} else if (strncmp(m, "@STYLE@", 7) == 0) {
			fputs(ml_html_style, out);
			at = m + 7;
		} else if (strncmp(m, "@DATA@", 6) == 0) {
			fputs("{\"schema\":\"memline.html\",\"version\":1,\"profiles\":[", out);
			fwrite(d->buf, 1, d->len, out);
			fputs("]}", out);
			at = m + 6;
		} else if (strncmp(m, "@SCRIPT@", 8) == 0) {
			fputs(ml_html_script, out);
			at = m + 8;
		} else {
			fputc('@', out);
			at = m + 1;
		}
	}
	fputs(at, out);
}

static int html_end(void *state, FILE *out)
{
	struct html_doc *d = state;
	int err = fclose(d->mem) != 0 ? -ENOMEM : 0;
	if (out && err == 0) {
		write_page(out, d);
		if (ferror(out))
			err = -EIO;
	}
	free(d->buf);
	free(d->title);
	free(d);
	return err;
}

const struct ml_docview ml_docview_html = {
	.name = "html", .begin = html_begin, .add = html_add, .end = html_end,
};
