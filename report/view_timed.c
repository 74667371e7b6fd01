/* report/view_timed.c - the lines view of a profile with samples (memline run
 * --lines), in line_profiler's layout: Timer unit, Total time, File,
 * Function, then Line #, Hits, Time, Per Hit, % Time, the line's memory and
 * Line Contents.  A line's time is inclusive of the calls made from it; its
 * self time is kept too.  Times are samples x the sampling period: estimates. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "report/view_common.h"
#include "report/coverage.h"
#include "report/source.h"
#include "report/units.h"

struct trow {
	uint64_t samples, self_samples;	/* inclusive / self */
	uint64_t gil;			/* of samples: waiting for the GIL */
	uint64_t hits;			/* exact (gcov) when have_hits */
	bool have_hits;
	struct ml_view_line_mem m;	/* its memory */
	bool mem;
};

struct tfunc {
	const char *name, *file;
	int first, last;
	uint64_t samples, self_samples;	/* the function's, from the aggregation */
	struct trow *rows;
	struct ml_source src;
	bool have_source, source_modified, exact;
	bool cuda;			/* the profile has CUDA kinds: CUDA columns */
	bool gil;			/* wall clock, Python: the GIL Wait column */
	uint64_t gil_samples;		/* the function's, waiting for the GIL */
};

static void fill(const struct ml_agg *a, const struct ml_view_opts *o, struct tfunc *tf)
{
	enum ml_kind kind = o->kind;
	for (size_t i = 0; i < a->n_lines; i++) {
		const struct ml_agg_line *l = &a->lines[i];
		if (l->line < tf->first || l->line > tf->last ||
		    !ml_sym_name_matches(l->function, tf->name) || !ml_view_same_file(l->file, tf->file))
			continue;
		struct trow *r = &tf->rows[l->line - tf->first];
		r->samples += l->total_samples;
		r->self_samples += l->self_samples;
		r->gil += l->gil_samples;
		if (ml_view_line_mem_add(&r->m, a, l, kind))
			r->mem = true;
	}
	tf->cuda = ml_agg_has_cuda(a) && ml_view_main_kind(o->kind);	/* --kind X: plain layout */
	for (size_t i = 0; i < a->n_funcs; i++)
		if (ml_sym_name_matches(a->funcs[i].name, tf->name) &&
		    (!a->funcs[i].file || ml_view_same_file(a->funcs[i].file, tf->file))) {
			tf->samples += a->funcs[i].total_samples;
			tf->self_samples += a->funcs[i].self_samples;
			tf->gil_samples += a->funcs[i].gil_samples;
		}
	tf->gil = a->profile->has_python && a->profile->sampling.clock == ML_CLOCK_WALL;
	tf->exact = o->cov && ml_cov_has_file(o->cov, tf->file);
	for (int line = tf->first; tf->exact && line <= tf->last; line++) {
		struct trow *r = &tf->rows[line - tf->first];
		r->have_hits = ml_cov_line(o->cov, tf->file, line, &r->hits);
	}
}

/* Loads name's definition def.  Returns 0 or -ENOMEM. */
static int load(const struct ml_agg *a, const struct ml_view_opts *o, const char *name,
		const struct ml_sym_source *def, struct tfunc *tf, bool quiet)
{
	memset(tf, 0, sizeof(*tf));
	tf->name = def->name ? def->name : name;
	tf->file = def->file;
	tf->first = def->first_line;
	tf->last = def->last_line;
	tf->rows = calloc((size_t)(tf->last - tf->first + 1), sizeof(*tf->rows));
	if (!tf->rows)
		return -ENOMEM;
	fill(a, o, tf);
	tf->have_source = ml_view_load_source(a, tf->file, name, quiet, &tf->src,
					      &tf->source_modified);
	return 0;
}

static bool has_hits(const struct tfunc *tf)
{
	if (tf->samples)
		return true;
	for (int line = tf->first; line <= tf->last; line++) {
		const struct trow *r = &tf->rows[line - tf->first];
		if (r->mem || (r->have_hits && r->hits))
			return true;
	}
	return false;
}

static double unit_of(const struct ml_view_opts *o)
{
	return o->unit > 0 ? o->unit : 1e-6;
}

static void text(FILE *out, const struct ml_agg *a, const struct ml_view_opts *o,
		 const struct tfunc *tf)
{
	const struct ml_fmt_sampling *s = &a->profile->sampling;
	double period_s = (double)s->period_ns * 1e-9, unit = unit_of(o);
	char self[ML_UNITS_LEN], total[ML_UNITS_LEN], peak[ML_UNITS_LEN], leaked[ML_UNITS_LEN];
	fprintf(out, "Total time: %g s\n", (double)tf->samples * period_s);
	fprintf(out, "File: %s\n", tf->file);
	fprintf(out, "Function: %s at line %d\n\n", tf->name, tf->first);
	/* Per Hit only where hits are exact (gcov): a time per sample would
	 * just be the sampling period. */
	int len = tf->exact ? fprintf(out, "%6s %9s %12s %8s %8s %12s", "Line #", "Hits", "Time",
				      "Per Hit", "% Time", "Self Time")
			    : fprintf(out, "%6s %9s %12s %8s %12s", "Line #", "Samples", "Time",
				      "% Time", "Self Time");
	if (tf->gil)
		len += fprintf(out, " %12s", "GIL Wait");
	len += fprintf(out, " %12s %12s %12s %12s  %10s", "Self Alloc", "Total Alloc", "Peak",
		       "Leaked", "Allocs");
	if (tf->cuda)
		len += ml_view_line_cuda_header(out, ml_agg_has_torch_blocks(a));
	if (tf->have_source)
		len += fprintf(out, "  %s", "Line Contents");
	fputc('\n', out);
	for (int i = 0; i < len; i++)
		fputc('=', out);
	fputc('\n', out);
	for (int line = tf->first; line <= tf->last; line++) {
		const struct trow *r = &tf->rows[line - tf->first];
		char hits[32] = "", time[32] = "", per[32] = "", pct[32] = "", stime[32] = "";
		char allocs[32] = "", gil[32] = "";
		uint64_t h = tf->exact ? r->hits : r->samples;
		bool show = tf->exact ? (r->have_hits && (r->hits || r->samples)) : r->samples > 0;
		if (tf->exact && r->have_hits && !r->hits && r->samples)
			show = true;
		if (show) {
			double t = (double)r->samples * period_s / unit;
			snprintf(hits, sizeof(hits), "%llu", (unsigned long long)h);
			snprintf(time, sizeof(time), "%.1f", t);
			if (h)
				snprintf(per, sizeof(per), "%.1f", t / (double)h);
			snprintf(pct, sizeof(pct), "%.1f", tf->samples ?
				 100.0 * (double)r->samples / (double)tf->samples : 0.0);
			snprintf(stime, sizeof(stime), "%.1f", (double)r->self_samples * period_s / unit);
			snprintf(gil, sizeof(gil), "%.1f", (double)r->gil * period_s / unit);
		}
		self[0] = total[0] = peak[0] = leaked[0] = '\0';
		if (r->mem) {
			ml_units_bytes(r->m.self_bytes, self, sizeof(self));
			ml_units_bytes(r->m.total_bytes, total, sizeof(total));
			ml_units_bytes(r->m.peak_bytes, peak, sizeof(peak));
			ml_units_bytes(r->m.leaked_bytes, leaked, sizeof(leaked));
			snprintf(allocs, sizeof(allocs), "%llu", (unsigned long long)r->m.allocs);
		}
		if (tf->exact)
			fprintf(out, "%6d %9s %12s %8s %8s %12s", line, hits, time, per, pct, stime);
		else
			fprintf(out, "%6d %9s %12s %8s %12s", line, hits, time, pct, stime);
		if (tf->gil)
			fprintf(out, " %12s", gil);
		fprintf(out, " %12s %12s %12s %12s  %10s", self, total, peak, leaked, allocs);
		if (tf->cuda)
			ml_view_line_cuda_cells(out, &r->m, r->mem, ml_agg_has_torch_blocks(a));
		if (tf->have_source) {
			const char *t = ml_source_line(&tf->src, line);
			fprintf(out, "  %s", t ? t : "");
		}
		fputc('\n', out);
	}
	fputc('\n', out);
}

static void json_func(struct ml_json *j, const struct ml_agg *a, const struct tfunc *tf)
{
	uint64_t period = a->profile->sampling.period_ns;
	ml_json_object_begin(j);
	ml_json_key(j, "name");
	ml_json_string(j, tf->name);
	ml_json_key(j, "file");
	ml_json_string(j, tf->file);
	ml_json_key(j, "first_line");
	ml_json_i64(j, tf->first);
	ml_json_key(j, "last_line");
	ml_json_i64(j, tf->last);
	ml_json_key(j, "source_found");
	ml_json_bool(j, tf->have_source);
	ml_json_key(j, "source_modified");
	ml_json_bool(j, tf->source_modified);
	ml_json_key(j, "hits_exact");
	ml_json_bool(j, tf->exact);
	ml_json_key(j, "samples");
	ml_json_u64(j, tf->samples);
	ml_json_key(j, "self_samples");
	ml_json_u64(j, tf->self_samples);
	ml_json_key(j, "total_time_ns");
	ml_json_u64(j, tf->samples * period);
	if (tf->gil) {
		ml_json_key(j, "gil_wait_samples");
		ml_json_u64(j, tf->gil_samples);
	}
	ml_json_key(j, "lines");
	ml_json_array_begin(j);
	for (int line = tf->first; line <= tf->last; line++) {
		const struct trow *r = &tf->rows[line - tf->first];
		ml_json_object_begin(j);
		ml_json_key(j, "line");
		ml_json_i64(j, line);
		ml_json_key(j, "text");
		ml_json_string(j, tf->have_source ? ml_source_line(&tf->src, line) : NULL);
		ml_json_key(j, "hits");	/* exact counts only (gcov); samples are not hits */
		if (tf->exact && r->have_hits)
			ml_json_u64(j, r->hits);
		else
			ml_json_null(j);
		ml_json_key(j, "samples");
		ml_json_u64(j, r->samples);
		ml_json_key(j, "self_samples");
		ml_json_u64(j, r->self_samples);
		ml_json_key(j, "time_ns");
		ml_json_u64(j, r->samples * period);
		ml_json_key(j, "self_time_ns");
		ml_json_u64(j, r->self_samples * period);
		if (tf->gil) {
			ml_json_key(j, "gil_wait_samples");
			ml_json_u64(j, r->gil);
		}
		ml_view_line_mem_json(j, &r->m, tf->cuda);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_object_end(j);
}

/* Function indexes into the aggregation ctx: most time first, then by name. */
static int cmp_time(const void *x, const void *y, void *ctx)
{
	const struct ml_agg *agg = ctx;
	const struct ml_agg_func *a = &agg->funcs[*(const size_t *)x];
	const struct ml_agg_func *b = &agg->funcs[*(const size_t *)y];
	if (a->total_samples != b->total_samples)
		return a->total_samples > b->total_samples ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* True when tf's definition (name, file, first line) is among tfs[0..n). */
static bool seen_before(const struct tfunc *tfs, size_t n, const struct tfunc *tf)
{
	for (size_t i = 0; i < n; i++)
		if (tfs[i].file && strcmp(tfs[i].name, tf->name) == 0 && tfs[i].first == tf->first &&
		    strcmp(tfs[i].file, tf->file) == 0)
			return true;
	return false;
}

/* The functions to show: those named, or the top N by inclusive time that
 * have source lines.  Fills tfs (n slots); returns the count or -errno. */
static long pick(const struct ml_agg *a, const struct ml_view_opts *o, struct tfunc *tfs,
		 size_t cap)
{
	size_t n = 0;
	struct ml_sym_source defs[ML_VIEW_MAX_DEFS];
	if (o->n_functions) {	/* every definition of each name: cap is enough */
		for (size_t i = 0; i < o->n_functions; i++) {
			size_t nd = ml_view_function_sources(a, o->functions[i], defs,
							     ML_VIEW_MAX_DEFS);
			if (nd == 0) {
				ml_view_no_function(a, o->functions[i]);
				return -ENOENT;
			}
			for (size_t d = 0; d < nd && n < cap; d++) {
				int err = load(a, o, o->functions[i], &defs[d], &tfs[n], false);
				n++;	/* freed by the caller, loaded or not */
				if (err < 0)
					return err;
			}
		}
		return (long)n;
	}
	size_t *order = calloc(a->n_funcs + 1, sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_funcs; i++)
		order[i] = i;
	qsort_r(order, a->n_funcs, sizeof(*order), cmp_time, (void *)a);
	for (size_t k = 0; k < a->n_funcs && n < cap && n < (size_t)o->top; k++) {
		const struct ml_agg_func *f = &a->funcs[order[k]];
		if (!f->total_samples || strcmp(f->name, ML_AGG_UNKNOWN) == 0)
			break;
		/* its own definition, when several files have one of its name */
		size_t nd = ml_view_function_sources(a, f->name, defs, ML_VIEW_MAX_DEFS), d = 0;
		while (f->file && d + 1 < nd && !ml_view_same_file(defs[d].file, f->file))
			d++;
		if (d < nd && f->file && !ml_view_same_file(defs[d].file, f->file))
			d = 0;
		int err = nd ? load(a, o, f->name, &defs[d], &tfs[n], true) : -ENOENT;
		if (err == 0 && seen_before(tfs, n, &tfs[n])) {
			err = -ENOENT;	/* its definition is shown already */
			free(tfs[n].rows);
			ml_source_free(&tfs[n].src);
			memset(&tfs[n], 0, sizeof(tfs[n]));
		}
		if (err == -ENOMEM) {
			free(order);
			return err;
		}
		if (err == 0 && tfs[n].have_source) {
			n++;
		} else if (err == 0) {	/* no source to show (libc, ...): the next one */
			free(tfs[n].rows);
			ml_source_free(&tfs[n].src);
			memset(&tfs[n], 0, sizeof(tfs[n]));
		}
	}
	free(order);
	return (long)n;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

/* "threads": [{"tid", "samples"}], by tid. */
static int threads_json(struct ml_json *j, const struct ml_profile *p)
{
	uint64_t *keys = calloc(p->n_samples + 1, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_samples; i++)
		keys[i] = (uint64_t)p->samples[i].tid << 32 | i;
	qsort(keys, p->n_samples, sizeof(*keys), cmp_u64);
	ml_json_key(j, "per_thread");
	ml_json_array_begin(j);
	for (size_t i = 0; i < p->n_samples;) {
		uint32_t tid = (uint32_t)(keys[i] >> 32);
		uint64_t n = 0;
		for (; i < p->n_samples && (uint32_t)(keys[i] >> 32) == tid; i++)
			n += p->samples[(uint32_t)keys[i]].count;
		ml_json_object_begin(j);
		ml_json_key(j, "tid");
		ml_json_u64(j, tid);
		ml_json_key(j, "samples");
		ml_json_u64(j, n);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	free(keys);
	return 0;
}

static const char *clock_name(uint32_t c)
{
	return c == ML_CLOCK_WALL ? "wall" : "cpu";
}

int ml_view_lines_timed(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
			struct ml_json *j)
{
	/* Room for 16 definitions of each name named (static functions of one
	 * name in several files), or for --top N. */
	size_t cap = o->n_functions ? o->n_functions * 16 : (size_t)(o->top > 0 ? o->top : 0);
	struct tfunc *tfs = calloc(cap + 1, sizeof(*tfs));
	if (!tfs)
		return -ENOMEM;
	long n = pick(a, o, tfs, cap);
	int err = n < 0 ? (int)n : 0;
	const struct ml_fmt_sampling *s = &a->profile->sampling;
	if (err)
		goto out;
	if (j) {
		ml_json_key(j, "timer");
		ml_json_object_begin(j);
		ml_json_key(j, "estimated");
		ml_json_bool(j, true);
		ml_json_key(j, "clock");
		ml_json_string(j, clock_name(s->clock));
		ml_json_key(j, "period_ns");
		ml_json_u64(j, s->period_ns);
		ml_json_key(j, "samples");
		ml_json_u64(j, s->samples);
		ml_json_key(j, "dropped");
		ml_json_u64(j, s->dropped);
		ml_json_key(j, "threads");
		ml_json_u64(j, s->threads);
		ml_json_key(j, "stepped_aside");
		ml_json_bool(j, (s->flags & ML_SAMPLING_STEPPED_ASIDE) != 0);
		err = threads_json(j, a->profile);
		ml_json_object_end(j);
		if (err)
			goto out;
		ml_json_key(j, "functions");
		ml_json_array_begin(j);
		for (long i = 0; i < n; i++)
			if (has_hits(&tfs[i]))
				json_func(j, a, &tfs[i]);
		ml_json_array_end(j);
		goto out;
	}
	fprintf(out, "Timer unit: %g s\n", unit_of(o));
	fprintf(out, "Time is estimated from %llu samples of the %s clock every %.3f ms "
		"(memline run --lines)%s\n\n", (unsigned long long)s->samples,
		s->clock == ML_CLOCK_WALL ? "wall" : "thread CPU", (double)s->period_ns / 1e6,
		(s->flags & ML_SAMPLING_STEPPED_ASIDE) ?
		"; sampling stopped early: the program took SIGPROF" : "");
	for (long i = 0; i < n; i++) {
		if (!has_hits(&tfs[i])) {
			fprintf(stderr, "memline: %s has no samples, hits or allocations; skipped\n",
				tfs[i].name);
			continue;
		}
		text(out, a, o, &tfs[i]);
	}
out:
	for (size_t i = 0; i < cap; i++) {
		free(tfs[i].rows);
		ml_source_free(&tfs[i].src);
	}
	free(tfs);
	return err;
}
