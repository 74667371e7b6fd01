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
	/* The path's frames as one line: "outer;...;inner", and where each
	 * depth's frame begins in it (its ';' before it). */
	char *line;
	size_t len, cap;
	size_t *at;
	size_t depth, cap_at;
};

/* Appends node nd's frame to the line, as one token: "function
 * (file:line)", with the separators of the format (';' between frames, a
 * newline between stacks) replaced.  0 or -ENOMEM. */
static int push_frame(struct folded_out *w, const struct ml_flame_node *nd)
{
	char label[1024];
	ml_flame_label(nd, false, label, sizeof(label));
	for (char *c = label; *c; c++)
		if (*c == ';' || *c == '\n' || *c == '\r')
			*c = *c == ';' ? ':' : ' ';
	size_t n = strlen(label) + 1;
	if (w->depth == w->cap_at) {
		size_t cap = w->cap_at ? w->cap_at * 2 : 64;
		size_t *at = realloc(w->at, cap * sizeof(*at));
		if (!at)
			return -ENOMEM;
		w->at = at;
		w->cap_at = cap;
	}
	if (w->len + n + 1 > w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 4096;
		while (cap < w->len + n + 1)
			cap *= 2;
		char *line = realloc(w->line, cap);
		if (!line)
			return -ENOMEM;
		w->line = line;
		w->cap = cap;
	}
	w->at[w->depth++] = w->len;
	if (w->depth > 1)
		w->line[w->len++] = ';';
	memcpy(w->line + w->len, label, n - 1);
	w->len += n - 1;
	return 0;
}

static int walk(struct folded_out *w, uint32_t n)
{
	const struct ml_flame *t = w->t;
	if (n) {
		int err = push_frame(w, &t->nodes[n]);
		if (err < 0)
			return err;
		size_t at = (size_t)n * t->n_values + w->vi;
		if (t->base_self && (t->self[at] || t->base_self[at])) {
			int64_t base = t->base_self[at];
			fwrite_unlocked(w->line, 1, w->len, w->out);
			fprintf(w->out, " %lld %lld\n", (long long)base, (long long)(base + t->self[at]));
		} else if (!t->base_self && t->self[at]) {
			fwrite_unlocked(w->line, 1, w->len, w->out);
			fprintf(w->out, " %lld\n", (long long)t->self[at]);
		}
	}
	int err = 0;
	for (uint32_t c = t->nodes[n].first_child; c && err == 0; c = t->nodes[c].next_sibling)
		err = walk(w, c);
	if (n)
		w->len = w->at[--w->depth];
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
	free(w.line);
	free(w.at);
	ml_flame_free(t);
	return err;
}
