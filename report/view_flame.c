/* report/view_flame.c - the flame view for a terminal: the heaviest paths of
 * the call tree as an indented tree, one call site a line, chains of single
 * callers folded into one line; and the --value names the flame views share. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/flame.h"
#include "report/units.h"
#include "report/view_common.h"

static const char *const value_names[ML_FV_COUNT] = {
	"alloc", "allocs", "peak", "peak_blocks", "leaked", "leaked_blocks", "time",
};

static const char *const value_titles[ML_FV_COUNT] = {
	"bytes allocated", "allocations", "bytes live at the peak", "blocks live at the peak",
	"bytes leaked (live at exit)", "blocks leaked", "time (line timer samples)",
};

int ml_flame_value_parse(const char *name)
{
	for (int v = 0; v < ML_FV_COUNT; v++)
		if (strcmp(name, value_names[v]) == 0)
			return v;
	return -1;
}

const char *ml_flame_value_name(enum ml_flame_value v)
{
	return (unsigned)v < ML_FV_COUNT ? value_names[v] : "?";
}

const char *ml_flame_value_list(void)
{
	return "alloc, allocs, peak, peak_blocks, leaked, leaked_blocks, time";
}

const char *ml_view_flame_title(enum ml_flame_value v)
{
	return (unsigned)v < ML_FV_COUNT ? value_titles[v] : "?";
}

bool ml_view_flame_is_bytes(enum ml_flame_value v)
{
	return v == ML_FV_ALLOC || v == ML_FV_PEAK || v == ML_FV_LEAKED;
}

/* The group kind stands for: heap and the other kinds by name, cuda_gpu
 * for the GPU kinds together; -1 for one GPU kind alone (the tree sums them). */
static int group_of_kind(const struct ml_flame *t, enum ml_kind kind)
{
	if (kind == ML_KIND_CUDA_GPU)
		return ml_flame_group_find(t, "cuda");
	if (ml_kind_is_gpu(kind))
		return -1;
	return ml_flame_group_find(t, ml_kind_name(kind));
}

long ml_view_flame_index(const struct ml_flame *t, const struct ml_view_opts *o)
{
	if (o->value == ML_FV_TIME) {
		if (t->has_time)
			return (long)ml_flame_time_vi(t);
		fprintf(stderr, "memline: --value time needs a profile made with `memline run --lines`\n");
		return -1;
	}
	int g = group_of_kind(t, o->kind);
	if (g < 0) {
		if (ml_kind_is_gpu(o->kind))
			fprintf(stderr, "memline: the flame views show the GPU kinds together: "
				"use --kind cuda_gpu\n");
		else
			fprintf(stderr, "memline: the profile has no %s memory\n", ml_kind_name(o->kind));
		return -1;
	}
	static const enum ml_flame_field fields[] = {
		ML_FF_ALLOC_BYTES, ML_FF_ALLOCS, ML_FF_PEAK_BYTES, ML_FF_PEAK_BLOCKS,
		ML_FF_LEAK_BYTES, ML_FF_LEAK_BLOCKS,
	};
	return (long)ml_flame_vi((size_t)g, fields[o->value]);
}

void ml_view_flame_amount(char *buf, size_t len, int64_t v, enum ml_flame_value what,
			  uint64_t period_ns, bool sign)
{
	char u[ML_UNITS_LEN];
	const char *plus = sign && v > 0 ? "+" : v < 0 ? "-" : "";
	uint64_t m = v < 0 ? (uint64_t)-v : (uint64_t)v;
	if (ml_view_flame_is_bytes(what))
		snprintf(buf, len, "%s%s", plus, ml_units_bytes(m, u, sizeof(u)));
	else if (what == ML_FV_TIME && period_ns)
		snprintf(buf, len, "%s%.3f s", plus, (double)m * (double)period_ns / 1e9);
	else
		snprintf(buf, len, "%s%llu", plus, (unsigned long long)m);
}

struct tree_out {
	const struct ml_flame *t;
	const struct ml_view_opts *o;
	FILE *out;
	size_t vi;
	int64_t cut;		/* paths with |value| below are summarised */
	int64_t scale;		/* 100% */
	char prefix[512];	/* the tree's guide lines so far */
};

static int64_t val(const struct tree_out *w, uint32_t n)
{
	return w->t->total[(size_t)n * w->t->n_values + w->vi];
}

static int64_t mag(int64_t v)
{
	return v < 0 ? -v : v;
}

/* The one child worth showing of n, when its value is n's own (a call chain
 * with nothing else below): folded into n's line.  0 otherwise. */
static uint32_t only_child(const struct tree_out *w, uint32_t n)
{
	uint32_t c = w->t->nodes[n].first_child;
	if (!c || w->t->nodes[c].next_sibling || val(w, c) != val(w, n))
		return 0;
	return c;
}

static void print_value_columns(const struct tree_out *w, int64_t v)
{
	char amount[64];
	ml_view_flame_amount(amount, sizeof(amount), v, w->o->value, w->t->period_ns,
			     w->o->base != NULL);
	if (w->o->base)
		fprintf(w->out, "%12s  ", amount);
	else
		fprintf(w->out, "%5.1f%%  %11s  ", w->scale ? 100.0 * (double)v / (double)w->scale : 0.0,
			amount);
}

/* Prints node n's line (with its folded chain); returns the last node of
 * the chain, whose children come next. */
static uint32_t print_line(const struct tree_out *w, uint32_t n, const char *branch)
{
	char label[1024];
	print_value_columns(w, val(w, n));
	fprintf(w->out, "%s%s%s", w->prefix, branch,
		ml_flame_label(&w->t->nodes[n], false, label, sizeof(label)));
	uint32_t chain[4096];
	size_t len = 0;
	for (uint32_t c = only_child(w, n); c && len < 4096; c = only_child(w, c))
		chain[len++] = c;
	if (len > 3) {
		fprintf(w->out, " > ... %zu calls ... > %s", len - 2,
			ml_flame_label(&w->t->nodes[chain[len - 2]], false, label, sizeof(label)));
		fprintf(w->out, " > %s",
			ml_flame_label(&w->t->nodes[chain[len - 1]], false, label, sizeof(label)));
	} else {
		for (size_t i = 0; i < len; i++)
			fprintf(w->out, " > %s",
				ml_flame_label(&w->t->nodes[chain[i]], false, label, sizeof(label)));
	}
	fputc('\n', w->out);
	return len ? chain[len - 1] : n;
}

static int print_tree(struct tree_out *w, uint32_t n, int depth)
{
	size_t count;
	uint32_t *kids = ml_flame_children(w->t, n, w->vi, &count);
	if (count && !kids)
		return -ENOMEM;
	size_t shown = 0;
	while (shown < count && mag(val(w, kids[shown])) >= w->cut && val(w, kids[shown]))
		shown++;
	int64_t rest = 0;
	for (size_t i = shown; i < count; i++)
		rest += val(w, kids[i]);
	bool rest_line = rest != 0;
	size_t plen = strlen(w->prefix);
	int err = 0;
	for (size_t i = 0; i < shown && err == 0; i++) {
		bool last = i + 1 == shown && !rest_line;
		uint32_t end = print_line(w, kids[i], depth ? (last ? "`- " : "|- ") : "");
		if (depth && plen + 4 < sizeof(w->prefix))
			strcat(w->prefix, last ? "   " : "|  ");
		if (depth < 200)
			err = print_tree(w, end, depth + 1);
		w->prefix[plen] = '\0';
	}
	if (rest_line) {
		print_value_columns(w, rest);
		fprintf(w->out, "%s%s(%zu smaller call%s)\n", w->prefix, depth ? "`- " : "",
			count - shown, count - shown == 1 ? "" : "s");
	}
	free(kids);
	return err;
}

/* The share of the root below which the views hide a node. */
double ml_view_node_fraction(const struct ml_view_opts *o, double dflt)
{
	return o->node_fraction >= 0 ? o->node_fraction : dflt;
}

int ml_view_flame_header(FILE *out, const struct ml_flame *t, const struct ml_view_opts *o,
			 size_t vi, int64_t cut)
{
	char amount[64], cut_s[64], what[128];
	if (o->value == ML_FV_TIME)
		snprintf(what, sizeof(what), "time (estimated from line-timer samples)");
	else
		snprintf(what, sizeof(what), "%s, %s", ml_kind_name(o->kind), value_titles[o->value]);
	ml_view_flame_amount(amount, sizeof(amount), t->total[vi], o->value, t->period_ns,
			     o->base != NULL);
	ml_view_flame_amount(cut_s, sizeof(cut_s), cut, o->value, t->period_ns, false);
	if (o->base) {
		char base_s[64];
		ml_view_flame_amount(base_s, sizeof(base_s), t->base_total[vi], o->value,
				     t->period_ns, false);
		fprintf(out, "%s: %s against the base's %s (%s); calls changing less than %s "
			"are summarised\n\n", what, amount, base_s,
			o->base_path ? o->base_path : "base", cut_s);
	} else {
		fprintf(out, "%s: %s in all; calls under %s (%.2g%%) are summarised\n\n", what,
			amount, cut_s,
			100.0 * ml_view_node_fraction(o, 0.01));
	}
	return 0;
}

int ml_view_flame_open(const struct ml_agg *a, const struct ml_view_opts *o,
		       struct ml_flame **out, size_t *vi)
{
	int err = ml_flame_build(a, o->base, out);
	if (err < 0)
		return err;
	long i = ml_view_flame_index(*out, o);
	if (i < 0) {
		ml_flame_free(*out);
		*out = NULL;
		return -ENOENT;
	}
	*vi = (size_t)i;
	return 0;
}

int ml_view_flame(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		  struct ml_json *j)
{
	struct ml_flame *t;
	size_t vi;
	int err = ml_view_flame_open(a, o, &t, &vi);
	if (err < 0)
		return err;
	struct tree_out w = { .t = t, .o = o, .out = out, .vi = vi };
	int64_t root = mag(t->total[vi]);
	if (o->base && mag(t->base_total[vi]) > root)
		root = mag(t->base_total[vi]);
	if (o->base && mag(t->base_total[vi] + t->total[vi]) > root)
		root = mag(t->base_total[vi] + t->total[vi]);
	w.scale = t->total[vi];
	w.cut = (int64_t)((double)root * ml_view_node_fraction(o, 0.01));
	if (w.cut < 1)
		w.cut = 1;
	ml_view_flame_header(out, t, o, vi, w.cut);
	if (t->total[vi] == 0 && !o->base)
		fprintf(out, "(nothing: the profile has no %s)\n", value_titles[o->value]);
	else
		err = print_tree(&w, 0, 0);
	ml_flame_free(t);
	(void)j;
	return err;
}
