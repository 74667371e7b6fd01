/* report/series.c - the timeline section split into sorted per-kind series. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include "report/series.h"

static int cmp_point(const void *x, const void *y)
{
	const struct ml_fmt_timepoint *a = x, *b = y;
	if (a->time_ns != b->time_ns)
		return a->time_ns < b->time_ns ? -1 : 1;
	return (a->live_bytes > b->live_bytes) - (a->live_bytes < b->live_bytes);
}

bool ml_series_peak_shared(const struct ml_profile *p, enum ml_kind kind)
{
	enum ml_kind top = ml_kind_peak_of(kind);
	if (ml_kind_is_derived(kind))
		return false;	/* cpu: the shared total itself */
	for (int k = 0; k < ML_KIND_COUNT; k++)
		if (k != (int)kind && ml_kind_peak_of((enum ml_kind)k) == top &&
		    ((p->kinds_present >> k) & 1))
			return true;
	return false;
}

static int fill(const struct ml_profile *p, enum ml_kind k, size_t count, struct ml_series *s)
{
	struct ml_fmt_timepoint *pts = calloc(count, sizeof(*pts));
	s->time_ns = calloc(count, sizeof(uint64_t));
	s->bytes = calloc(count, sizeof(uint64_t));
	if (!pts || !s->time_ns || !s->bytes) {
		free(pts);
		return -ENOMEM;
	}
	size_t n = 0;
	for (size_t i = 0; i < p->n_timeline; i++)
		if (p->timeline[i].kind == (uint32_t)k)
			pts[n++] = p->timeline[i];
	qsort(pts, n, sizeof(*pts), cmp_point);
	for (size_t i = 0; i < n; i++) {
		s->time_ns[i] = pts[i].time_ns;
		s->bytes[i] = pts[i].live_bytes;
	}
	s->n = n;
	s->kind = k;
	/* The points of a kind others share the peak of are their sum: the
	 * heap's, with Python objects, are the cpu kind's. */
	int has = -1, kinds = 0;	/* the kinds of this total in the file */
	for (int m = 0; m < ML_KIND_COUNT; m++)
		if (ml_kind_peak_of((enum ml_kind)m) == k && ((p->kinds_present >> m) & 1)) {
			has = has < 0 ? m : has;
			kinds++;
		}
	if (kinds > 1 && k == ML_KIND_HEAP)
		s->kind = ML_KIND_CPU;
	else if (kinds == 1)
		s->kind = (enum ml_kind)has;	/* python alone: its own */
	if (has >= 0) {
		s->peak_bytes = p->totals[has].peak_bytes;
		s->peak_time_ns = p->totals[has].peak_time_ns;
	} else {
		for (size_t i = 0; i < n; i++)
			if (s->bytes[i] > s->peak_bytes) {
				s->peak_bytes = s->bytes[i];
				s->peak_time_ns = s->time_ns[i];
			}
	}
	free(pts);
	return 0;
}

int ml_series_build(const struct ml_profile *p, struct ml_series **out, size_t *n)
{
	size_t count[ML_KIND_COUNT] = { 0 }, kinds = 0;
	for (size_t i = 0; i < p->n_timeline; i++)
		if (p->timeline[i].kind < ML_KIND_COUNT &&
		    !ml_kind_is_event((enum ml_kind)p->timeline[i].kind) &&
		    count[p->timeline[i].kind]++ == 0)
			kinds++;
	struct ml_series *s = calloc(kinds + 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	size_t m = 0;
	for (int k = 0; k < ML_KIND_COUNT; k++) {
		if (!count[k])
			continue;
		if (fill(p, (enum ml_kind)k, count[k], &s[m++]) < 0) {
			ml_series_free(s, m);
			return -ENOMEM;
		}
	}
	*out = s;
	*n = m;
	return 0;
}

void ml_series_free(struct ml_series *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++) {
		free(s[i].time_ns);
		free(s[i].bytes);
	}
	free(s);
}

uint64_t ml_series_max(const struct ml_series *s, uint64_t t0, uint64_t t1)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {	/* the first point at or after t0 */
		size_t mid = lo + (hi - lo) / 2;
		if (s->time_ns[mid] < t0)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t v = lo ? s->bytes[lo - 1] : 0;
	bool inside = false;
	for (size_t i = lo; i < s->n && s->time_ns[i] < t1; i++) {
		if (!inside || s->bytes[i] > v)
			v = s->bytes[i];
		inside = true;
	}
	return v;
}
