/* report/view_lines.c - the lines view: every source line of a function with
 * its memory, in memory_profiler's layout (Line #, columns, Line Contents). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/view_common.h"
#include "report/source.h"
#include "report/units.h"

/* One row: a source line's numbers within the function. */
struct line_row {
	uint64_t self_bytes, total_bytes, peak_bytes, leaked_bytes, allocs;
	/* GPU kinds summed (ml_kind_is_gpu), each at its own kind's peak */
	uint64_t cuda_self, cuda_total, cuda_peak, cuda_leaked;
	bool any;
};

struct func_lines {
	const char *name, *file;
	int first, last;
	struct line_row *rows;	/* rows[i] is line first + i */
	struct ml_source src;
	bool have_source;
	bool cuda;		/* the profile has CUDA kinds: CUDA columns */
};

static void fill_rows(const struct ml_agg *a, enum ml_kind kind, struct func_lines *fl)
{
	for (size_t i = 0; i < a->n_lines; i++) {
		const struct ml_agg_line *l = &a->lines[i];
		if (l->line < fl->first || l->line > fl->last ||
		    !ml_sym_name_matches(l->function, fl->name) || !ml_view_same_file(l->file, fl->file))
			continue;
		struct line_row *r = &fl->rows[l->line - fl->first];
		r->self_bytes += l->self[kind].alloc_bytes;
		r->total_bytes += l->total[kind].alloc_bytes;
		r->peak_bytes += l->total[kind].peak_bytes;
		r->leaked_bytes += l->total[kind].live_bytes;
		r->allocs += l->total[kind].allocs;
		r->any = r->any || l->total[kind].allocs || l->total[kind].alloc_bytes;
		struct ml_amount gs = ml_amount_gpu(l->self), gt = ml_amount_gpu(l->total);
		r->cuda_self += gs.alloc_bytes;
		r->cuda_total += gt.alloc_bytes;
		r->cuda_peak += gt.peak_bytes;
		r->cuda_leaked += gt.live_bytes;
		r->any = r->any || gt.allocs;
	}
}

/* Finds NAME's source and sums its lines.  Returns 0, -ENOENT (after an
 * error line) or -ENOMEM. */
static int load_function(const struct ml_agg *a, enum ml_kind kind, const char *name,
			 struct func_lines *fl)
{
	memset(fl, 0, sizeof(*fl));
	fl->name = name;
	const struct ml_resolver *r = a->resolver;
	if (!r->function_source ||
	    r->function_source(r->ctx, name, &fl->file, &fl->first, &fl->last) < 0 ||
	    !fl->file || fl->first <= 0 || fl->last < fl->first) {
		fprintf(stderr, "memline: function '%s' not found in the debug info of %s; "
			"check the name (see `memline report ops`)\n", name, a->profile->exe);
		return -ENOENT;
	}
	fl->rows = calloc((size_t)(fl->last - fl->first + 1), sizeof(*fl->rows));
	if (!fl->rows)
		return -ENOMEM;
	fl->cuda = ml_agg_has_cuda(a) && kind == ML_KIND_HEAP;	/* --kind X: plain layout */
	fill_rows(a, kind, fl);
	if (ml_source_load(fl->file, &fl->src) == 0)
		fl->have_source = true;
	else
		fprintf(stderr, "memline: warning: source file %s not found; "
			"printing the lines of %s without Line Contents\n", fl->file, name);
	return 0;
}

static void lines_text(FILE *out, const struct func_lines *fl)
{
	char self[ML_UNITS_LEN], total[ML_UNITS_LEN], peak[ML_UNITS_LEN], leaked[ML_UNITS_LEN];
	fprintf(out, "Filename: %s\n\n", fl->file);
	int len = fprintf(out, "%6s %12s %12s %12s %12s  %10s", "Line #", "Self Alloc",
			  "Total Alloc", "Peak", "Leaked", "Allocs");
	if (fl->cuda)
		len += fprintf(out, " %12s %12s %12s", "CUDA Alloc", "CUDA Peak", "CUDA Leaked");
	if (fl->have_source)
		len += fprintf(out, "   %s", "Line Contents");
	fputc('\n', out);
	for (int i = 0; i < len; i++)
		fputc('=', out);
	fputc('\n', out);
	for (int line = fl->first; line <= fl->last; line++) {
		const struct line_row *r = &fl->rows[line - fl->first];
		char allocs[ML_UNITS_LEN] = "";
		self[0] = total[0] = peak[0] = leaked[0] = '\0';
		if (r->any) {
			ml_units_bytes(r->self_bytes, self, sizeof(self));
			ml_units_bytes(r->total_bytes, total, sizeof(total));
			ml_units_bytes(r->peak_bytes, peak, sizeof(peak));
			ml_units_bytes(r->leaked_bytes, leaked, sizeof(leaked));
			snprintf(allocs, sizeof(allocs), "%llu", (unsigned long long)r->allocs);
		}
		fprintf(out, "%6d %12s %12s %12s %12s  %10s", line, self, total, peak, leaked, allocs);
		if (fl->cuda) {
			char ca[ML_UNITS_LEN] = "", cp[ML_UNITS_LEN] = "", cl[ML_UNITS_LEN] = "";
			if (r->any) {
				ml_units_bytes(r->cuda_total, ca, sizeof(ca));
				ml_units_bytes(r->cuda_peak, cp, sizeof(cp));
				ml_units_bytes(r->cuda_leaked, cl, sizeof(cl));
			}
			fprintf(out, " %12s %12s %12s", ca, cp, cl);
		}
		if (fl->have_source) {
			const char *text = ml_source_line(&fl->src, line);
			fprintf(out, "   %s", text ? text : "");
		}
		fputc('\n', out);
	}
	fputc('\n', out);
}

static void lines_json(struct ml_json *j, const struct func_lines *fl)
{
	ml_json_object_begin(j);
	ml_json_key(j, "name");
	ml_json_string(j, fl->name);
	ml_json_key(j, "file");
	ml_json_string(j, fl->file);
	ml_json_key(j, "first_line");
	ml_json_i64(j, fl->first);
	ml_json_key(j, "last_line");
	ml_json_i64(j, fl->last);
	ml_json_key(j, "source_found");
	ml_json_bool(j, fl->have_source);
	ml_json_key(j, "lines");
	ml_json_array_begin(j);
	for (int line = fl->first; line <= fl->last; line++) {
		const struct line_row *r = &fl->rows[line - fl->first];
		ml_json_object_begin(j);
		ml_json_key(j, "line");
		ml_json_i64(j, line);
		ml_json_key(j, "text");
		ml_json_string(j, fl->have_source ? ml_source_line(&fl->src, line) : NULL);
		ml_json_key(j, "self_alloc_bytes");
		ml_json_u64(j, r->self_bytes);
		ml_json_key(j, "total_alloc_bytes");
		ml_json_u64(j, r->total_bytes);
		ml_json_key(j, "peak_bytes");
		ml_json_u64(j, r->peak_bytes);
		ml_json_key(j, "leaked_bytes");
		ml_json_u64(j, r->leaked_bytes);
		ml_json_key(j, "allocs");
		ml_json_u64(j, r->allocs);
		if (fl->cuda) {
			ml_json_key(j, "cuda_self_alloc_bytes");
			ml_json_u64(j, r->cuda_self);
			ml_json_key(j, "cuda_total_alloc_bytes");
			ml_json_u64(j, r->cuda_total);
			ml_json_key(j, "cuda_peak_bytes");
			ml_json_u64(j, r->cuda_peak);
			ml_json_key(j, "cuda_leaked_bytes");
			ml_json_u64(j, r->cuda_leaked);
		}
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_object_end(j);
}

int ml_view_lines(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j)
{
	if (a->profile->has_samples)	/* memline run --lines: line_profiler's layout */
		return ml_view_lines_timed(a, o, out, j);
	if (o->top) {
		fprintf(stderr, "memline: lines --top needs a profile made with "
			"`memline run --lines`; name functions with --function\n");
		return -ENOENT;
	}
	struct func_lines *fls = calloc(o->n_functions + 1, sizeof(*fls));
	if (!fls)
		return -ENOMEM;
	int err = 0;
	size_t loaded = 0;
	/* Every function is looked up before anything is printed, so an unknown
	 * name fails cleanly. */
	for (; loaded < o->n_functions; loaded++) {
		err = load_function(a, o->kind, o->functions[loaded], &fls[loaded]);
		if (err < 0)
			goto out;
	}
	if (j) {
		ml_json_key(j, "functions");
		ml_json_array_begin(j);
	}
	for (size_t i = 0; i < loaded; i++) {
		if (j)
			lines_json(j, &fls[i]);
		else
			lines_text(out, &fls[i]);
	}
	if (j)
		ml_json_array_end(j);
out:
	for (size_t i = 0; i <= loaded && i < o->n_functions; i++) {
		free(fls[i].rows);
		ml_source_free(&fls[i].src);
	}
	free(fls);
	return err;
}
