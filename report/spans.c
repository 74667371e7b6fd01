/* report/spans.c - regions on the time axis, for the timeline views. */
#include <stdlib.h>
#include <string.h>
#include "report/spans.h"

#define MAX_ROWS 24

const struct ml_region *ml_spans_region(const struct ml_profile *p, uint32_t id)
{
	for (size_t i = 0; i < p->n_regions; i++)
		if (p->regions[i].id == id)
			return &p->regions[i];
	return NULL;
}

char *ml_spans_path(const struct ml_profile *p, uint32_t id, char *buf, size_t len)
{
	const struct ml_region *chain[64];
	size_t n = 0;
	for (const struct ml_region *r = ml_spans_region(p, id); r && n < 64;
	     r = r->parent ? ml_spans_region(p, r->parent) : NULL)
		chain[n++] = r;
	buf[0] = '\0';
	size_t at = 0;
	while (n-- > 0 && at + 1 < len) {
		int w = snprintf(buf + at, len - at, "%s%s", at ? "/" : "", chain[n]->name);
		if (w < 0)
			break;
		at += (size_t)w;
	}
	return buf;
}

static int region_depth(const struct ml_profile *p, const struct ml_region *r)
{
	int d = 0;
	while (r && r->parent && d < 64) {
		r = ml_spans_region(p, r->parent);
		d++;
	}
	return d;
}

static void row(FILE *out, const struct ml_profile *p, const struct ml_region *r, char *cells,
		int width, uint64_t end_ns)
{
	memset(cells, 0, (size_t)width);
	for (size_t i = 0; i < p->n_spans; i++) {
		const struct ml_fmt_span *s = &p->spans[i];
		if (s->region != r->id)
			continue;
		int x0 = (int)((double)s->start_ns * width / (double)end_ns);
		int x1 = (int)((double)s->end_ns * width / (double)end_ns);
		for (int x = x0 < 0 ? 0 : x0; x <= x1 && x < width; x++)
			cells[x] = 1;
	}
	char name[64];
	int depth = region_depth(p, r);
	snprintf(name, sizeof(name), "%*s%s", depth > 6 ? 6 : depth, "", r->name);
	fprintf(out, " %-10.10s \u2502", name);
	for (int x = 0; x < width; x++)
		fputs(cells[x] ? "\u2588" : " ", out);
	fprintf(out, "\u2502 %llu\n", (unsigned long long)r->count);
}

void ml_spans_text(FILE *out, const struct ml_profile *p, int width, uint64_t end_ns)
{
	if (!p->n_spans)
		return;
	char *cells = malloc((size_t)width);
	if (!cells)
		return;
	fputs("\nregions (a mark where one was open; then how often it ran):\n", out);
	size_t rows = 0;
	for (size_t i = 0; i < p->n_regions && rows < MAX_ROWS; i++, rows++)
		row(out, p, &p->regions[i], cells, width, end_ns ? end_ns : 1);
	if (p->n_regions > rows)
		fprintf(out, "(%zu more regions: memline report regions lists them all)\n",
			p->n_regions - rows);
	if (p->spans_dropped)
		fprintf(out, "(only the first %zu region spans were recorded; %llu later ones are "
			"counted in the regions view but not drawn)\n", p->n_spans,
			(unsigned long long)p->spans_dropped);
	free(cells);
}

void ml_spans_json(struct ml_json *j, const struct ml_profile *p)
{
	char path[512];
	ml_json_key(j, "spans");
	ml_json_array_begin(j);
	for (size_t i = 0; i < p->n_spans; i++) {
		const struct ml_fmt_span *s = &p->spans[i];
		const struct ml_region *r = ml_spans_region(p, s->region);
		ml_json_object_begin(j);
		ml_json_key(j, "region");
		ml_json_string(j, r ? r->name : "?");
		ml_json_key(j, "path");
		ml_json_string(j, ml_spans_path(p, s->region, path, sizeof(path)));
		ml_json_key(j, "nvtx");
		ml_json_bool(j, r && (r->flags & ML_REGION_NVTX));
		ml_json_key(j, "tid");
		ml_json_u64(j, s->tid);
		ml_json_key(j, "start_ns");
		ml_json_u64(j, s->start_ns);
		ml_json_key(j, "end_ns");
		ml_json_u64(j, s->end_ns);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_key(j, "spans_dropped");
	ml_json_u64(j, p->spans_dropped);
}
