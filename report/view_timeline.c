/* report/view_timeline.c - memory over time in a terminal: one chart per
 * kind (live bytes, block characters at an eighth of a row), the peak
 * marked under its column; the region spans below on the same time axis. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/series.h"
#include "report/spans.h"
#include "report/units.h"
#include "report/view_common.h"

#define ROWS 8
#define MIN_WIDTH 20
#define MAX_WIDTH 200

/* The chart's columns: $COLUMNS less the axis labels, 72 by default. */
static int chart_width(void)
{
	const char *c = getenv("COLUMNS");
	int w = c ? atoi(c) - 14 : 72;
	return w < MIN_WIDTH ? MIN_WIDTH : w > MAX_WIDTH ? MAX_WIDTH : w;
}

static const char *const eighths[9] = { " ", "\u2581", "\u2582", "\u2583", "\u2584",
					"\u2585", "\u2586", "\u2587", "\u2588" };

static void chart_rows(FILE *out, const uint64_t *col, int width, uint64_t top)
{
	char u[ML_UNITS_LEN];
	for (int r = ROWS - 1; r >= 0; r--) {
		if (r == ROWS - 1)
			fprintf(out, "%11s \u2524", ml_units_bytes(top, u, sizeof(u)));
		else
			fprintf(out, "%11s \u2502", "");
		for (int x = 0; x < width; x++) {
			/* eighths of a row filled at this row, 0..8 */
			double h = top ? (double)col[x] * ROWS * 8 / (double)top : 0;
			long e = (long)(h + 0.5) - r * 8;
			if (col[x] && r == 0 && e < 1)
				e = 1;	/* anything above zero shows */
			fputs(eighths[e < 0 ? 0 : e > 8 ? 8 : e], out);
		}
		fputc('\n', out);
	}
}

static void time_axis(FILE *out, int width, uint64_t end_ns)
{
	char a[ML_UNITS_LEN], b[ML_UNITS_LEN], m[ML_UNITS_LEN];
	fprintf(out, "%11s \u2514", "0 B");
	for (int x = 0; x < width; x++)
		fputs(x == width / 2 ? "\u252c" : "\u2500", out);
	ml_units_seconds(0, a, sizeof(a));
	ml_units_seconds(end_ns / 2, m, sizeof(m));
	ml_units_seconds(end_ns, b, sizeof(b));
	int mid = width / 2 - (int)strlen(m) / 2;
	int gap1 = mid - (int)strlen(a), gap2 = width - mid - (int)strlen(m) - (int)strlen(b);
	fprintf(out, "\n%13s%s%*s%s%*s%s\n", "", a, gap1 > 1 ? gap1 : 1, "", m, gap2 > 1 ? gap2 : 1,
		"", b);
}

/* The "^ peak" line under the column of the peak. */
static void peak_marker(FILE *out, const struct ml_series *s, int width, uint64_t end_ns)
{
	char u[ML_UNITS_LEN], t[ML_UNITS_LEN];
	int x = end_ns ? (int)((double)s->peak_time_ns * width / (double)end_ns) : 0;
	if (x >= width)
		x = width - 1;
	char label[128];
	snprintf(label, sizeof(label), "peak %s at %s", ml_units_bytes(s->peak_bytes, u, sizeof(u)),
		 ml_units_seconds(s->peak_time_ns, t, sizeof(t)));
	int len = (int)strlen(label);
	if (x + 2 + len <= width)
		fprintf(out, "%13s%*s\u25b2 %s\n", "", x, "", label);
	else
		fprintf(out, "%13s%*s%s \u25b2\n", "", x - len - 1 > 0 ? x - len - 1 : 0, "", label);
}

static int chart(FILE *out, const struct ml_series *s, int width, uint64_t end_ns)
{
	uint64_t *col = calloc((size_t)width, sizeof(*col));
	if (!col)
		return -ENOMEM;
	uint64_t top = s->peak_bytes;
	for (int x = 0; x < width; x++) {
		uint64_t t0 = end_ns * (uint64_t)x / (uint64_t)width;
		uint64_t t1 = end_ns * (uint64_t)(x + 1) / (uint64_t)width;
		col[x] = ml_series_max(s, t0, t1 > t0 ? t1 : t0 + 1);
		if (col[x] > top)
			top = col[x];
	}
	char u[ML_UNITS_LEN], t[ML_UNITS_LEN];
	fprintf(out, "%s: peak %s at %s", ml_kind_name(s->kind),
		ml_units_bytes(s->peak_bytes, u, sizeof(u)),
		ml_units_seconds(s->peak_time_ns, t, sizeof(t)));
	if (s->kind == ML_KIND_CUDA_GPU)
		fputs(" (the GPU kinds together)", out);
	else if (s->kind == ML_KIND_CPU)
		fputs(" (heap + Python objects, one total in the runtime)", out);
	fputc('\n', out);
	chart_rows(out, col, width, top);
	time_axis(out, width, end_ns);
	peak_marker(out, s, width, end_ns);
	free(col);
	return 0;
}

/* The time the charts span: the run, or the last point if later. */
static uint64_t end_time(const struct ml_profile *p, const struct ml_series *s, size_t n)
{
	uint64_t end = p->meta.duration_ns;
	for (size_t i = 0; i < n; i++) {
		if (s[i].n && s[i].time_ns[s[i].n - 1] >= end)
			end = s[i].time_ns[s[i].n - 1] + 1;
		if (s[i].peak_time_ns >= end)
			end = s[i].peak_time_ns + 1;
	}
	return end ? end : 1;
}

static void series_json(struct ml_json *j, const struct ml_series *s)
{
	ml_json_object_begin(j);
	ml_json_key(j, "kind");
	ml_json_string(j, ml_kind_name(s->kind));
	ml_json_key(j, "peak_bytes");
	ml_json_u64(j, s->peak_bytes);
	ml_json_key(j, "peak_time_ns");
	ml_json_u64(j, s->peak_time_ns);
	ml_json_key(j, "points");
	ml_json_array_begin(j);
	for (size_t i = 0; i < s->n; i++) {
		ml_json_array_begin(j);
		ml_json_u64(j, s->time_ns[i]);
		ml_json_u64(j, s->bytes[i]);
		ml_json_array_end(j);
	}
	ml_json_array_end(j);
	ml_json_object_end(j);
}

int ml_view_timeline(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		     struct ml_json *j)
{
	const struct ml_profile *p = a->profile;
	struct ml_series *s;
	size_t n;
	if (o->kind_set && o->kind != ML_KIND_CPU && ml_series_peak_shared(p, o->kind)) {
		fprintf(stderr, "memline: timeline --kind %s: the runtime keeps heap and Python "
			"objects over time as one total; --kind cpu shows it (`peak --kind %s` "
			"gives %s's part of the CPU peak)\n", ml_kind_name(o->kind),
			ml_kind_name(o->kind), ml_kind_name(o->kind));
		return -ENOENT;
	}
	if (ml_series_build(p, &s, &n) < 0)
		return -ENOMEM;
	uint64_t end = end_time(p, s, n);
	if (o->kind_set) {	/* that kind's series alone (cpu: the heap's without Python) */
		size_t m = 0;
		for (size_t i = 0; i < n; i++) {
			bool want = s[i].kind == o->kind ||
				    (o->kind == ML_KIND_CPU && s[i].kind == ML_KIND_HEAP);
			if (!want) {
				free(s[i].time_ns);
				free(s[i].bytes);
				continue;
			}
			s[m++] = s[i];
		}
		n = m;
		if (n == 0 && !j) {
			fprintf(out, "%s: no memory over time (the profile has no timeline points "
				"of this kind).\n", ml_kind_name(o->kind));
			ml_series_free(s, n);
			return 0;
		}
	}
	int err = 0;
	if (j) {
		ml_json_key(j, "duration_ns");
		ml_json_u64(j, end);
		ml_json_key(j, "kinds");
		ml_json_array_begin(j);
		for (size_t i = 0; i < n; i++)
			series_json(j, &s[i]);
		ml_json_array_end(j);
		ml_spans_json(j, p);
	} else {
		int width = chart_width();
		if (n == 0)
			fputs("No memory over time: the profile has no timeline points.\n", out);
		for (size_t i = 0; i < n && err == 0; i++) {
			if (i)
				fputc('\n', out);
			err = chart(out, &s[i], width, end);
		}
		if (err == 0)
			ml_spans_text(out, p, width, end);
	}
	ml_series_free(s, n);
	return err;
}
