/* report/view_folded.c - folded stacks, Brendan Gregg's collapsed format:
 * one line per distinct stack, "outer;...;inner COUNT", for flamegraph.pl,
 * inferno and speedscope; with --base, difffolded's "stack BASE NEW". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/flame.h"
#include "report/view_common.h"

struct folded_out {
	const struct ml_flame *t;
	FILE *out;
	size_t vi;
	uint32_t *path;		/* node indexes from the root's child down */
	size_t depth, cap;
};

/* A frame as one token: "function (file:line)", with the separators of
 * the format (';' between frames, a newline between stacks) replaced. */
static void put_frame(FILE *out, const struct ml_flame_node *nd)
{
	char label[1024];
	ml_flame_label(nd, false, label, sizeof(label));
	for (char *c = label; *c; c++)
		if (*c == ';' || *c == '\n' || *c == '\r')
			*c = *c == ';' ? ':' : ' ';
	fputs(label, out);
}

static void put_stack(const struct folded_out *w)
{
	for (size_t i = 0; i < w->depth; i++) {
		if (i)
			fputc(';', w->out);
		put_frame(w->out, &w->t->nodes[w->path[i]]);
	}
}

static int walk(struct folded_out *w, uint32_t n)
{
	const struct ml_flame *t = w->t;
	if (n) {
		if (w->depth == w->cap) {
			size_t cap = w->cap ? w->cap * 2 : 64;
			uint32_t *p = realloc(w->path, cap * sizeof(*p));
			if (!p)
				return -ENOMEM;
			w->path = p;
			w->cap = cap;
		}
		w->path[w->depth++] = n;
		size_t at = (size_t)n * t->n_values + w->vi;
		if (t->base_self && (t->self[at] || t->base_self[at])) {
			int64_t base = t->base_self[at];
			put_stack(w);
			fprintf(w->out, " %lld %lld\n", (long long)base, (long long)(base + t->self[at]));
		} else if (!t->base_self && t->self[at]) {
			put_stack(w);
			fprintf(w->out, " %lld\n", (long long)t->self[at]);
		}
	}
	int err = 0;
	for (uint32_t c = t->nodes[n].first_child; c && err == 0; c = t->nodes[c].next_sibling)
		err = walk(w, c);
	if (n)
		w->depth--;
	return err;
}

int ml_view_folded(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		   struct ml_json *j)
{
	struct ml_flame *t;
	size_t vi;
	(void)j;
	int err = ml_view_flame_open(a, o, &t, &vi);
	if (err < 0)
		return err;
	struct folded_out w = { .t = t, .out = out, .vi = vi };
	err = walk(&w, 0);
	free(w.path);
	ml_flame_free(t);
	return err;
}
