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
	struct ml_view_line_mem m;	/* its memory */
	bool any;
};

struct func_lines {
	const char *name, *file;
	int first, last;
	struct line_row *rows;	/* rows[i] is line first + i */
	struct ml_source src;
	bool have_source, source_modified;	/* modified after the run started */
	bool cuda;		/* the profile has CUDA kinds: CUDA columns */
	bool torch;		/* ... and PyTorch's blocks: its columns */
};

static void fill_rows(const struct ml_agg *a, enum ml_kind kind, struct func_lines *fl)
{
	for (size_t i = 0; i < a->n_lines; i++) {
		const struct ml_agg_line *l = &a->lines[i];
		if (l->line < fl->first || l->line > fl->last ||
		    !ml_sym_name_matches(l->function, fl->name) || !ml_view_same_file(l->file, fl->file))
			continue;
		struct line_row *r = &fl->rows[l->line - fl->first];
		if (ml_view_line_mem_add(&r->m, a, l, kind))
			r->any = true;
	}
}

/* Sums the lines of name's definition def.  Returns 0 or -ENOMEM. */
static int load_function(const struct ml_agg *a, enum ml_kind kind, const char *name,
			 const struct ml_sym_source *def, struct func_lines *fl)
{
	memset(fl, 0, sizeof(*fl));
	fl->name = def->name ? def->name : name;
	fl->file = def->file;
	fl->first = def->first_line;
	fl->last = def->last_line;
	fl->rows = calloc((size_t)(fl->last - fl->first + 1), sizeof(*fl->rows));
	if (!fl->rows)
		return -ENOMEM;
	fl->cuda = ml_agg_has_cuda(a) && ml_view_main_kind(kind);	/* --kind X: plain layout */
	fl->torch = ml_agg_has_torch_blocks(a);
	fill_rows(a, kind, fl);
	fl->have_source = ml_view_load_source(a, fl->file, name, false, &fl->src,
					      &fl->source_modified);
	return 0;
}

static void lines_text(FILE *out, const struct func_lines *fl)
{
	char self[ML_UNITS_LEN], total[ML_UNITS_LEN], peak[ML_UNITS_LEN], leaked[ML_UNITS_LEN];
	fprintf(out, "Filename: %s\n\n", fl->file);
	int len = fprintf(out, "%6s %12s %12s %12s %12s  %10s", "Line #", "Self Alloc",
			  "Total Alloc", "Peak", "Leaked", "Allocs");
	if (fl->cuda)
		len += ml_view_line_cuda_header(out, fl->torch);
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
			/* Sampled profiles: "~" marks an estimate (the +- of
			 * each is in the JSON and the self one below). */
			char *(*fmt)(uint64_t, char *, size_t) =
				r->m.estimated ? ml_units_estimate : ml_units_bytes;
			fmt(r->m.self_bytes, self, sizeof(self));
			fmt(r->m.total_bytes, total, sizeof(total));
			fmt(r->m.peak_bytes, peak, sizeof(peak));
			fmt(r->m.leaked_bytes, leaked, sizeof(leaked));
			snprintf(allocs, sizeof(allocs), "%s%llu", r->m.estimated ? "~" : "",
				 (unsigned long long)r->m.allocs);
		}
		fprintf(out, "%6d %12s %12s %12s %12s  %10s", line, self, total, peak, leaked, allocs);
		if (fl->cuda)
			ml_view_line_cuda_cells(out, &r->m, r->any, fl->torch);
		if (fl->have_source) {
			const char *text = ml_source_line(&fl->src, line);
			fprintf(out, "   %s", text ? text : "");
		}
		if (r->any && r->m.estimated) {
			char sd[ML_UNITS_LEN];
			fprintf(out, "   [self +- %s]",
				ml_units_bytes(ml_stddev(r->m.var_self), sd, sizeof(sd)));
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
	ml_json_key(j, "source_modified");
	ml_json_bool(j, fl->source_modified);
	ml_json_key(j, "lines");
	ml_json_array_begin(j);
	for (int line = fl->first; line <= fl->last; line++) {
		const struct line_row *r = &fl->rows[line - fl->first];
		ml_json_object_begin(j);
		ml_json_key(j, "line");
		ml_json_i64(j, line);
		ml_json_key(j, "text");
		ml_json_string(j, fl->have_source ? ml_source_line(&fl->src, line) : NULL);
		ml_view_line_mem_json(j, &r->m, fl->cuda);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_object_end(j);
}

/* --function names some decorated functions and some others (text only):
 * the decorated ones in kernprof's table, then the others in this view's. */
static int lines_mixed(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out)
{
	const char **dec = calloc(o->n_functions + 1, sizeof(*dec));
	const char **rest = calloc(o->n_functions + 1, sizeof(*rest));
	struct ml_view_opts od = *o, orest = *o;
	int err = -ENOMEM;
	if (!dec || !rest)
		goto out;
	od.n_functions = orest.n_functions = 0;
	for (size_t i = 0; i < o->n_functions; i++) {
		if (ml_view_is_decorated(a, o->functions[i]))
			dec[od.n_functions++] = o->functions[i];
		else
			rest[orest.n_functions++] = o->functions[i];
	}
	od.functions = dec;
	orest.functions = rest;
	err = ml_view_lines_decorated(a, &od, out, NULL);
	if (!err)
		err = ml_view_lines(a, &orest, out, NULL);
out:
	free(dec);
	free(rest);
	return err;
}

int ml_view_lines(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j)
{
	/* @profile: every decorated function (no --function, or --layout), or
	 * those of the names given that are decorated. */
	if (!o->top && (!o->n_functions || o->layout))
		return ml_view_lines_decorated(a, o, out, j);
	if (!o->top && a->profile->has_pyprof) {
		size_t dec = 0;
		for (size_t i = 0; i < o->n_functions; i++)
			dec += ml_view_is_decorated(a, o->functions[i]);
		if (dec == o->n_functions)
			return ml_view_lines_decorated(a, o, out, j);
		if (dec && j) {
			fprintf(stderr, "memline: report: lines --json: name functions decorated "
				"with @profile or others, not both\n");
			return -EINVAL;
		}
		if (dec)
			return lines_mixed(a, o, out);
	}
	if (a->profile->has_samples)	/* memline run --lines: line_profiler's layout */
		return ml_view_lines_timed(a, o, out, j);
	if (o->top) {
		fprintf(stderr, "memline: lines --top needs a profile made with "
			"`memline run --lines`; name functions with --function\n");
		return -ENOENT;
	}
	struct func_lines *fls = NULL;
	size_t loaded = 0, cap = 0;
	int err = 0;
	/* Every definition of every name is looked up before anything is
	 * printed, so an unknown name fails cleanly.  A name several files
	 * define (static helpers) gets one table per file; a definition that
	 * repeats an earlier one (a header's function in several CUs) is the
	 * same lines, shown once. */
	for (size_t i = 0; i < o->n_functions; i++) {
		struct ml_sym_source defs[ML_VIEW_MAX_DEFS];
		size_t nd = ml_view_function_sources(a, o->functions[i], defs, ML_VIEW_MAX_DEFS);
		if (nd == 0) {
			ml_view_no_function(a, o->functions[i]);
			err = -ENOENT;
			goto out;
		}
		for (size_t d = 0; d < nd; d++) {
			if (loaded == cap) {
				size_t ncap = cap ? cap * 2 : 8;
				struct func_lines *mem = realloc(fls, ncap * sizeof(*fls));
				if (!mem) {
					err = -ENOMEM;
					goto out;
				}
				fls = mem;
				cap = ncap;
			}
			err = load_function(a, o->kind, o->functions[i], &defs[d], &fls[loaded]);
			loaded++;	/* freed at out, loaded or not */
			if (err < 0)
				goto out;
		}
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
	for (size_t i = 0; i < loaded; i++) {
		free(fls[i].rows);
		ml_source_free(&fls[i].src);
	}
	free(fls);
	return err;
}
