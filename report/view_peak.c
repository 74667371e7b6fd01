/* report/view_peak.c - the peak view: what was live at the kind's peak, by
 * stack (largest first) and by source line (self: the allocating line). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/view_common.h"
#include "report/series.h"
#include "report/units.h"

/* Largest at the peak of the kind *ctx first, then by file and line. */
static int cmp_line(const void *x, const void *y, void *ctx)
{
	enum ml_kind kind = *(const enum ml_kind *)ctx;
	const struct ml_agg_line *a = *(const struct ml_agg_line *const *)x;
	const struct ml_agg_line *b = *(const struct ml_agg_line *const *)y;
	uint64_t va = ML_AGG_SELF(a, kind).peak_bytes, vb = ML_AGG_SELF(b, kind).peak_bytes;
	if (va != vb)
		return va > vb ? -1 : 1;
	int c = strcmp(a->file, b->file);
	return c ? c : (a->line > b->line) - (a->line < b->line);
}

/* Source lines that allocated blocks live at the peak, largest first.
 * Caller frees; NULL on ENOMEM. */
static const struct ml_agg_line **peak_lines(const struct ml_agg *a, enum ml_kind kind, size_t *n)
{
	const struct ml_agg_line **rows = calloc(a->n_lines + 1, sizeof(*rows));
	*n = 0;
	if (!rows)
		return NULL;
	for (size_t i = 0; i < a->n_lines; i++)
		if (ML_AGG_SELF(&a->lines[i], kind).peak_bytes || ML_AGG_SELF(&a->lines[i], kind).peak_blocks)
			rows[(*n)++] = &a->lines[i];
	qsort_r(rows, *n, sizeof(*rows), cmp_line, &kind);
	return rows;
}

static void lines_table(FILE *out, const struct ml_agg_line **lines, size_t n, enum ml_kind kind)
{
	char loc[4096], u[ML_UNITS_LEN];
	int wloc = (int)strlen("Location"), wfn = (int)strlen("Function");
	for (size_t i = 0; i < n; i++) {
		const char *slash = strrchr(lines[i]->file, '/');
		int len = snprintf(loc, sizeof(loc), "%s:%d", slash ? slash + 1 : lines[i]->file,
				   lines[i]->line);
		wloc = len > wloc ? len : wloc;
		int lf = (int)strlen(lines[i]->function);
		wfn = lf > wfn ? lf : wfn;
	}
	fprintf(out, "%-*s  %-*s  %12s  %14s  %8s\n", wloc, "Location", wfn, "Function",
		"Peak Mem", "Bytes", "Blocks");
	for (size_t i = 0; i < n; i++) {
		const struct ml_amount *m = &ML_AGG_SELF(lines[i], kind);
		const char *slash = strrchr(lines[i]->file, '/');
		snprintf(loc, sizeof(loc), "%s:%d", slash ? slash + 1 : lines[i]->file, lines[i]->line);
		fprintf(out, "%-*s  %-*s  %12s  %14llu  %8llu\n", wloc, loc, wfn, lines[i]->function,
			ml_units_bytes(m->peak_bytes, u, sizeof(u)),
			(unsigned long long)m->peak_bytes, (unsigned long long)m->peak_blocks);
	}
}

static void peak_text(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		      const struct ml_agg_stack **rows, size_t n,
		      const struct ml_agg_line **lines, size_t n_lines)
{
	struct ml_amount t = ml_view_totals(a, o->kind);
	char u[ML_UNITS_LEN], s[ML_UNITS_LEN];
	bool shared = ml_series_peak_shared(a->profile, o->kind);
	if (o->kind == ML_KIND_CUDA_GPU)
		fputs("GPU peak", out);
	else if (shared)	/* heap or python: its part of the one CPU peak */
		fprintf(out, "%s at the CPU peak", ml_kind_name(o->kind));
	else
		fprintf(out, "peak %s", ml_kind_name(o->kind));
	fprintf(out, ": %s%s (%llu bytes)", t.estimated ? "~" : "",
		ml_units_bytes(t.peak_bytes, u, sizeof(u)), (unsigned long long)t.peak_bytes);
	if (shared) {
		struct ml_amount c = ml_view_totals(a, ML_KIND_CPU);
		fprintf(out, " of %s%s (cpu: heap + Python objects)", c.estimated ? "~" : "",
			ml_units_bytes(c.peak_bytes, u, sizeof(u)));
	}
	fprintf(out, " at %s%s\n\n", ml_units_seconds(ml_view_peak_time(a, o->kind), s, sizeof(s)),
		t.estimated ? " (the highest total of the estimates: an estimate that leans high)" : "");
	size_t shown = ml_view_limit(o->limit, n);
	for (size_t i = 0; i < shown; i++) {
		const struct ml_amount *m = ml_agg_stack_kind(rows[i], o->kind);
		ml_view_bytes_est(out, m->peak_bytes, m->estimated, m->var_peak_bytes);
		fprintf(out, " in %s%llu blocks live at the peak (record %zu of %zu)\n",
			m->estimated ? "~" : "", (unsigned long long)m->peak_blocks, i + 1, n);
		ml_stack_print(out, rows[i]);
		fputc('\n', out);
	}
	if (shown < n)
		ml_view_more(out, n - shown, NULL, o->limit);
	fputs("Live at the peak by source line:\n", out);
	lines_table(out, lines, ml_view_limit(o->limit, n_lines), o->kind);
}

static void peak_json(const struct ml_agg *a, const struct ml_view_opts *o, struct ml_json *j,
		      const struct ml_agg_stack **rows, size_t n,
		      const struct ml_agg_line **lines, size_t n_lines)
{
	struct ml_amount t = ml_view_totals(a, o->kind);
	ml_json_key(j, "peak_bytes");
	ml_json_u64(j, t.peak_bytes);
	if (ml_series_peak_shared(a->profile, o->kind)) {
		/* heap or python: peak_bytes is its part of the CPU peak */
		ml_json_key(j, "cpu_peak_bytes");
		ml_json_u64(j, ml_view_totals(a, ML_KIND_CPU).peak_bytes);
	}
	ml_json_key(j, "peak_time_ns");
	ml_json_u64(j, ml_view_peak_time(a, o->kind));
	ml_json_key(j, "total_records");
	ml_json_u64(j, n);
	ml_json_key(j, "stacks");
	ml_json_array_begin(j);
	for (size_t i = 0; i < ml_view_limit(o->limit, n); i++) {
		ml_json_object_begin(j);
		ml_json_key(j, "bytes");
		ml_json_u64(j, ml_agg_stack_kind(rows[i], o->kind)->peak_bytes);
		ml_json_key(j, "blocks");
		ml_json_u64(j, ml_agg_stack_kind(rows[i], o->kind)->peak_blocks);
		ml_json_key(j, "stack_id");
		ml_json_u64(j, rows[i]->id);
		ml_json_key(j, "frames");
		ml_stack_json(j, rows[i]);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_key(j, "lines");
	ml_json_array_begin(j);
	for (size_t i = 0; i < ml_view_limit(o->limit, n_lines); i++) {
		ml_json_object_begin(j);
		ml_json_key(j, "file");
		ml_json_string(j, lines[i]->file);
		ml_json_key(j, "line");
		ml_json_i64(j, lines[i]->line);
		ml_json_key(j, "function");
		ml_json_string(j, lines[i]->function);
		ml_json_key(j, "bytes");
		ml_json_u64(j, ML_AGG_SELF(lines[i], o->kind).peak_bytes);
		ml_json_key(j, "blocks");
		ml_json_u64(j, ML_AGG_SELF(lines[i], o->kind).peak_blocks);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
}

/* ---- CUDA: each CUDA kind's peak is its own moment, apart from the heap's;
 * shown after the heap's peak with the lines live at it ---- */

static int cuda_peaks(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		      struct ml_json *j)
{
	char u[ML_UNITS_LEN], s[ML_UNITS_LEN];
	if (j) {
		ml_json_key(j, "cuda_peaks");
		ml_json_array_begin(j);
	} else {
		fputs("\nCUDA: each kind's peak is its own moment; live at it by source line:\n", out);
	}
	for (int k = 0; k < ML_KIND_COUNT; k++) {
		if (!ml_kind_is_cuda((enum ml_kind)k))
			continue;
		struct ml_amount t = ml_view_totals(a, (enum ml_kind)k);
		if (!t.allocs || k == ML_KIND_CUDA_GPU || ml_kind_is_event((enum ml_kind)k))
			continue;
		size_t n;
		const struct ml_agg_line **lines = peak_lines(a, (enum ml_kind)k, &n);
		if (!lines)
			return -ENOMEM;
		size_t shown = ml_view_limit(o->limit, n);
		uint64_t at = ml_view_peak_time(a, (enum ml_kind)k);
		if (!j) {
			fprintf(out, "\npeak %s: %s (%llu bytes) at %s\n", ml_kind_name((enum ml_kind)k),
				ml_units_bytes(t.peak_bytes, u, sizeof(u)),
				(unsigned long long)t.peak_bytes, ml_units_seconds(at, s, sizeof(s)));
			lines_table(out, lines, shown, (enum ml_kind)k);
			free(lines);
			continue;
		}
		ml_json_object_begin(j);
		ml_json_key(j, "kind");
		ml_json_string(j, ml_kind_name((enum ml_kind)k));
		ml_json_key(j, "peak_bytes");
		ml_json_u64(j, t.peak_bytes);
		ml_json_key(j, "peak_time_ns");
		ml_json_u64(j, at);
		ml_json_key(j, "lines");
		ml_json_array_begin(j);
		for (size_t i = 0; i < shown; i++) {
			ml_json_object_begin(j);
			ml_json_key(j, "file");
			ml_json_string(j, lines[i]->file);
			ml_json_key(j, "line");
			ml_json_i64(j, lines[i]->line);
			ml_json_key(j, "function");
			ml_json_string(j, lines[i]->function);
			ml_json_key(j, "bytes");
			ml_json_u64(j, ML_AGG_SELF(lines[i], k).peak_bytes);
			ml_json_key(j, "blocks");
			ml_json_u64(j, ML_AGG_SELF(lines[i], k).peak_blocks);
			ml_json_object_end(j);
		}
		ml_json_array_end(j);
		ml_json_object_end(j);
		free(lines);
	}
	if (j)
		ml_json_array_end(j);
	else if (ml_view_is_torch(a))
		fprintf(out, "\n%s", ml_view_torch_note(a));
	return 0;
}

/* ---- the combined GPU peak (device + managed + pool + VMM physical +
 * arrays, the ML_KIND_CUDA_GPU pseudo-kind): its own moment, with the stacks
 * and lines live on the GPU at it ---- */

static int gpu_peak(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		    struct ml_json *j)
{
	if (!ml_view_totals(a, ML_KIND_CUDA_GPU).allocs)
		return 0;	/* no GPU kind, or a profile written before the total existed */
	struct ml_view_opts go = *o;
	go.kind = ML_KIND_CUDA_GPU;
	size_t n, n_lines;
	const struct ml_agg_stack **rows = ml_view_stacks(a, go.kind, true, &n);
	const struct ml_agg_line **lines = peak_lines(a, go.kind, &n_lines);
	if (!rows || !lines) {
		free(rows);
		free(lines);
		return -ENOMEM;
	}
	if (j) {
		ml_json_key(j, "gpu_peak");
		ml_json_object_begin(j);
		peak_json(a, &go, j, rows, n, lines, n_lines);
		ml_json_object_end(j);
	} else {
		fputs("\nGPU (device + managed + pool + VMM physical + arrays; not pinned host "
		      "memory,\nmapped ranges or reservations):\n", out);
		peak_text(a, &go, out, rows, n, lines, n_lines);
	}
	free(rows);
	free(lines);
	return 0;
}

int ml_view_peak(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j)
{
	size_t n, n_lines;
	const struct ml_agg_stack **rows = ml_view_stacks(a, o->kind, true, &n);
	const struct ml_agg_line **lines = peak_lines(a, o->kind, &n_lines);
	if (!rows || !lines) {
		free(rows);
		free(lines);
		return -ENOMEM;
	}
	if (j)
		peak_json(a, o, j, rows, n, lines, n_lines);
	else
		peak_text(a, o, out, rows, n, lines, n_lines);
	free(rows);
	free(lines);
	if (ml_view_main_kind(o->kind) && ml_agg_has_cuda(a)) {
		int rc = gpu_peak(a, o, out, j);
		return rc < 0 ? rc : cuda_peaks(a, o, out, j);
	}
	return 0;
}
