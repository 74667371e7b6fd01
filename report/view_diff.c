/* report/view_diff.c - what grew and shrank between two runs (--base OLD NEW
 * with ops, peak or leaks): by source line, by function and by stack, the
 * base's and the new profile's bytes and their difference, largest change
 * first.  Stacks, functions and lines are matched by their symbolized
 * names (addresses differ from run to run). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/units.h"
#include "report/view_common.h"

/* What a row compares, by view: bytes allocated (ops), live at the peak
 * (peak), live at exit (leaks). */
enum measure { M_ALLOC, M_PEAK, M_LEAKED };

struct keyed {
	char *key;
	const void *ref;	/* the stack, function or line it came from */
	int64_t bytes, count;
};

struct drow {
	const char *key;
	const void *ref_new, *ref_base;
	int64_t base, now, base_count, now_count;
};

static struct ml_amount amount_of(const struct ml_amount *per_kind, enum ml_kind kind)
{
	return kind == ML_KIND_CUDA_GPU ? ml_amount_gpu(per_kind) : per_kind[kind];
}

static void measure_of(const struct ml_amount *m, enum measure what, int64_t *bytes, int64_t *count)
{
	*bytes = (int64_t)(what == M_ALLOC ? m->alloc_bytes : what == M_PEAK ? m->peak_bytes
				: m->live_bytes);
	*count = (int64_t)(what == M_ALLOC ? m->allocs : what == M_PEAK ? m->peak_blocks
				: m->live_blocks);
}

static int cmp_keyed(const void *x, const void *y)
{
	return strcmp(((const struct keyed *)x)->key, ((const struct keyed *)y)->key);
}

/* Keys for one profile's lines, functions or stacks (section s), sorted. */
enum section { S_LINES, S_FUNCS, S_STACKS };

static char *stack_key(const struct ml_agg_stack *st)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return NULL;
	for (size_t i = 0; i < st->n_frames; i++) {
		const struct ml_frame *fr = st->frames[i];
		fprintf(m, "%s\t%s\t%d\n", fr->function ? fr->function : "?",
			fr->file ? ml_view_base_name(fr->file) : "", fr->file ? fr->line : 0);
	}
	if (fclose(m) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int collect(const struct ml_agg *a, enum section s, enum measure what, enum ml_kind kind,
		   struct keyed **out, size_t *n)
{
	size_t total = s == S_LINES ? a->n_lines : s == S_FUNCS ? a->n_funcs : a->n_stacks;
	struct keyed *k = calloc(total + 1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	size_t m = 0;
	for (size_t i = 0; i < total; i++) {
		struct ml_amount am;
		const void *ref;
		char *key = NULL;
		if (s == S_LINES) {
			const struct ml_agg_line *l = &a->lines[i];
			am = amount_of(ML_AGG_SELF_ALL(l), kind);
			ref = l;
			if (asprintf(&key, "%s\t%d", ml_view_base_name(l->file), l->line) < 0)
				key = NULL;
		} else if (s == S_FUNCS) {
			const struct ml_agg_func *f = &a->funcs[i];
			am = amount_of(ML_AGG_TOTAL_ALL(f), kind);
			ref = f;
			if (asprintf(&key, "%s\t%s", f->name,
				     f->file ? ml_view_base_name(f->file) : "") < 0)
				key = NULL;
		} else {
			const struct ml_agg_stack *st = &a->stacks[i];
			struct ml_amount per_kind[ML_KIND_COUNT];
			ml_agg_stack_kinds(st, per_kind);
			am = amount_of(per_kind, kind);
			ref = st;
			key = stack_key(st);
		}
		if (!key) {
			for (size_t j = 0; j < m; j++)
				free(k[j].key);
			free(k);
			return -ENOMEM;
		}
		k[m] = (struct keyed){ .key = key, .ref = ref };
		measure_of(&am, what, &k[m].bytes, &k[m].count);
		m++;
	}
	qsort(k, m, sizeof(*k), cmp_keyed);
	*out = k;
	*n = m;
	return 0;
}

static int64_t mag(int64_t v)
{
	return v < 0 ? -v : v;
}

static int cmp_drow(const void *x, const void *y)
{
	const struct drow *a = x, *b = y;
	int64_t da = mag(a->now - a->base), db = mag(b->now - b->base);
	if (da != db)
		return da > db ? -1 : 1;
	return strcmp(a->key, b->key);
}

/* Merges two sorted key lists into rows whose bytes or counts changed;
 * equal keys (a stack that the symbolizer gives twice) are summed. */
static struct drow *merge(const struct keyed *b, size_t nb, const struct keyed *n, size_t nn,
			  size_t *count)
{
	struct drow *rows = calloc(nb + nn + 1, sizeof(*rows));
	size_t i = 0, j = 0, m = 0;
	if (!rows)
		return NULL;
	while (i < nb || j < nn) {
		int c = i >= nb ? 1 : j >= nn ? -1 : strcmp(b[i].key, n[j].key);
		const char *key = c <= 0 ? b[i].key : n[j].key;
		struct drow r = { .key = key };
		for (; i < nb && strcmp(b[i].key, key) == 0; i++) {
			r.base += b[i].bytes;
			r.base_count += b[i].count;
			r.ref_base = b[i].ref;
		}
		for (; j < nn && strcmp(n[j].key, key) == 0; j++) {
			r.now += n[j].bytes;
			r.now_count += n[j].count;
			r.ref_new = n[j].ref;
		}
		if (r.base != r.now || r.base_count != r.now_count)
			rows[m++] = r;
	}
	qsort(rows, m, sizeof(*rows), cmp_drow);
	*count = m;
	return rows;
}

static void free_keyed(struct keyed *k, size_t n)
{
	for (size_t i = 0; k && i < n; i++)
		free(k[i].key);
	free(k);
}

static const char *const section_names[] = { "lines", "functions", "stacks" };

static void row_text(FILE *out, enum section s, const struct drow *r)
{
	char b[ML_UNITS_LEN], n[ML_UNITS_LEN], d[ML_UNITS_LEN + 1];
	int64_t delta = r->now - r->base;
	ml_units_bytes((uint64_t)r->base, b, sizeof(b));
	ml_units_bytes((uint64_t)r->now, n, sizeof(n));
	d[0] = delta < 0 ? '-' : '+';
	ml_units_bytes((uint64_t)mag(delta), d + 1, sizeof(d) - 1);
	fprintf(out, "%12s  %12s  %12s  %+8lld  ", d, b, n,
		(long long)(r->now_count - r->base_count));
	if (s == S_LINES) {
		const struct ml_agg_line *l = r->ref_new ? r->ref_new : r->ref_base;
		fprintf(out, "%s:%d  %s\n", ml_view_base_name(l->file), l->line, l->function);
	} else if (s == S_FUNCS) {
		const struct ml_agg_func *f = r->ref_new ? r->ref_new : r->ref_base;
		fprintf(out, "%s\n", f->label ? f->label : f->name);
	} else {
		const struct ml_agg_stack *st = r->ref_new ? r->ref_new : r->ref_base;
		fputc('\n', out);
		ml_stack_print(out, st);
	}
}

static void row_json(struct ml_json *j, enum section s, const struct drow *r)
{
	ml_json_object_begin(j);
	ml_json_key(j, "base_bytes");
	ml_json_i64(j, r->base);
	ml_json_key(j, "new_bytes");
	ml_json_i64(j, r->now);
	ml_json_key(j, "delta_bytes");
	ml_json_i64(j, r->now - r->base);
	ml_json_key(j, "base_count");
	ml_json_i64(j, r->base_count);
	ml_json_key(j, "new_count");
	ml_json_i64(j, r->now_count);
	if (s == S_LINES) {
		const struct ml_agg_line *l = r->ref_new ? r->ref_new : r->ref_base;
		ml_json_key(j, "file");
		ml_json_string(j, l->file);
		ml_json_key(j, "line");
		ml_json_i64(j, l->line);
		ml_json_key(j, "function");
		ml_json_string(j, l->function);
	} else if (s == S_FUNCS) {
		const struct ml_agg_func *f = r->ref_new ? r->ref_new : r->ref_base;
		ml_json_key(j, "name");
		ml_json_string(j, f->name);
		ml_json_key(j, "file");
		ml_json_string(j, f->file);
	} else {
		ml_json_key(j, "frames");
		ml_stack_json(j, r->ref_new ? r->ref_new : r->ref_base);
	}
	ml_json_object_end(j);
}

static const char *const measure_titles[] = {
	"bytes allocated", "bytes live at the peak", "bytes leaked (live at exit)",
};
static const char *const section_titles[] = {
	"By line (allocated at the line itself)", "By function (inclusive)", "By stack",
};

static int section(const struct ml_agg *a, const struct ml_view_opts *o, enum section s,
		   enum measure what, FILE *out, struct ml_json *j)
{
	struct keyed *kb = NULL, *kn = NULL;
	size_t nb = 0, nn = 0, n = 0;
	int err = collect(o->base, s, what, o->kind, &kb, &nb);
	if (err == 0)
		err = collect(a, s, what, o->kind, &kn, &nn);
	struct drow *rows = err == 0 ? merge(kb, nb, kn, nn, &n) : NULL;
	if (err == 0 && !rows)
		err = -ENOMEM;
	if (err == 0 && j) {
		ml_json_key(j, section_names[s]);
		ml_json_array_begin(j);
		for (size_t i = 0; i < ml_view_limit(o->limit, n); i++)
			row_json(j, s, &rows[i]);
		ml_json_array_end(j);
	} else if (err == 0) {
		size_t shown = ml_view_limit(o->limit < 0 ? 20 : o->limit, n);
		fprintf(out, "%s: %zu changed\n\n%12s  %12s  %12s  %8s  %s\n", section_titles[s], n,
			"Change", "Base", "New", "Count", s == S_STACKS ? "Stack" :
			s == S_LINES ? "Location  Function" : "Function");
		for (size_t i = 0; i < shown; i++)
			row_text(out, s, &rows[i]);
		if (shown < n)
			fprintf(out, "(%zu more; --limit N shows more)\n", n - shown);
		fputc('\n', out);
	}
	free(rows);
	free_keyed(kb, nb);
	free_keyed(kn, nn);
	return err;
}

int ml_view_diff(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		 struct ml_json *j)
{
	enum measure what = M_ALLOC;
	struct ml_amount tb = ml_view_totals(o->base, o->kind), tn = ml_view_totals(a, o->kind);
	if (o->kind == ML_KIND_CUDA_GPU) {
		tb = ml_amount_gpu(o->base->totals);
		tn = ml_amount_gpu(a->totals);
	}
	/* ops compares bytes allocated; peak and leaks what they show. */
	if (o->diff_measure == 1)
		what = M_PEAK;
	else if (o->diff_measure == 2)
		what = M_LEAKED;
	int64_t bt, bc, nt, nc;
	measure_of(&tb, what, &bt, &bc);
	measure_of(&tn, what, &nt, &nc);
	if (j) {
		ml_json_key(j, "measure");
		ml_json_string(j, what == M_ALLOC ? "alloc_bytes" : what == M_PEAK ? "peak_bytes"
			       : "leaked_bytes");
		ml_json_key(j, "base_total");
		ml_json_i64(j, bt);
		ml_json_key(j, "new_total");
		ml_json_i64(j, nt);
	} else {
		char b[ML_UNITS_LEN], n[ML_UNITS_LEN], d[ML_UNITS_LEN];
		fprintf(out, "%s, %s: %s -> %s (%s%s)\nbase: %s\n\n", ml_kind_name(o->kind),
			measure_titles[what], ml_units_bytes((uint64_t)bt, b, sizeof(b)),
			ml_units_bytes((uint64_t)nt, n, sizeof(n)), nt >= bt ? "+" : "-",
			ml_units_bytes((uint64_t)mag(nt - bt), d, sizeof(d)),
			o->base_path ? o->base_path : "?");
	}
	int err = 0;
	for (int s = S_LINES; s <= S_STACKS && err == 0; s++)
		err = section(a, o, (enum section)s, what, out, j);
	return err;
}
