/* report/view_kernprof.c - the lines view of the Python functions a program
 * decorated with `@profile` (PYFUNCS and PYLINES, common/pyprof.h): exact
 * Hits, Time and memory per line, in kernprof's layout (`kernprof -l -v`:
 * Timer unit, Total time, File, Function, Line #, Hits, Time, Per Hit,
 * % Time, then memline's memory columns and Line Contents) or in
 * memory_profiler's (Line #, Mem usage, Increment, Occurrences, Line
 * Contents).  docs/kernprof.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/view_common.h"
#include "report/pyframes.h"
#include "common/pyline.h"
#include "report/source.h"
#include "report/units.h"

struct krow {
	uint64_t hits, ended, time_ns;
	int64_t cpu_increment, cuda_increment;
	uint64_t cpu_usage, cuda_usage;
	struct ml_view_line_mem m;	/* from the allocation stacks */
	bool mem;
};

struct kfunc {
	const char *name, *file;
	int first, last;
	const struct ml_fmt_pyfunc *f;
	struct krow *rows;		/* rows[i] is line first + i */
	uint64_t total_ns;
	struct ml_source src;
	bool have_source, source_modified;
	bool cuda;
};

/* The qualified name and absolute file of a Python code id, through the
 * resolver (3.10's qualified names rebuilt from the source). */
static bool code_names(const struct ml_agg *a, uint32_t code_id, const char **name,
		       const char **file)
{
	const struct ml_resolver *r = a->resolver;
	const struct ml_frame *fr = NULL;
	size_t n = 0;
	if (!r || !r->resolve ||
	    r->resolve(r->ctx, ml_pyframe_make(code_id, -1, false, false), false, &fr, &n) < 0 ||
	    !n || !fr->function || !fr->file)
		return false;
	*name = fr->function;
	*file = fr->file;
	return true;
}

bool ml_view_is_decorated(const struct ml_agg *a, const char *name)
{
	const struct ml_profile *p = a->profile;
	for (size_t i = 0; p->has_pyprof && i < p->n_pyfuncs; i++) {
		const char *qual, *file;
		if (code_names(a, p->pyfuncs[i].code_id, &qual, &file) && ml_pyframes_name_matches(qual, name))
			return true;
	}
	return false;
}

/* Fills kf for decorated function f.  Returns 0, -ENOENT (no name: left
 * out) or -ENOMEM. */
static bool wanted(const struct ml_view_opts *o, const struct kfunc *kf);

/* kfs[0..n) are the functions kept so far: a source file they share is
 * warned about once, and only for functions shown. */
static int load(const struct ml_agg *a, const struct ml_view_opts *o,
		const struct ml_fmt_pyfunc *f, struct kfunc *kf, const struct kfunc *kfs, size_t n)
{
	const struct ml_profile *p = a->profile;
	const struct ml_pycode *pc = ml_profile_pycode(p, f->code_id);
	memset(kf, 0, sizeof(*kf));
	if (!pc || !code_names(a, f->code_id, &kf->name, &kf->file))
		return -ENOENT;
	int lo, hi;
	ml_pyline_range(pc->linetable_format, pc->linetable, pc->linetable_len, pc->firstlineno,
			&lo, &hi);
	kf->f = f;
	kf->first = pc->firstlineno < lo ? pc->firstlineno : lo;
	kf->last = hi > kf->first ? hi : kf->first;
	for (size_t i = 0; i < p->n_pylines; i++)
		if (p->pylines[i].code_id == f->code_id && p->pylines[i].line > kf->last)
			kf->last = p->pylines[i].line;
	if (kf->first < 1 || kf->last - kf->first > (1 << 20))
		return -ENOENT;
	kf->rows = calloc((size_t)(kf->last - kf->first + 1), sizeof(*kf->rows));
	if (!kf->rows)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_pylines; i++) {
		const struct ml_fmt_pyline *l = &p->pylines[i];
		if (l->code_id != f->code_id || l->line < kf->first)
			continue;
		struct krow *r = &kf->rows[l->line - kf->first];
		r->hits += l->hits;
		r->ended += l->ended;
		r->time_ns += l->time_ns;
		r->cpu_increment += l->cpu_increment;
		r->cuda_increment += l->cuda_increment;
		if (l->cpu_usage > r->cpu_usage)
			r->cpu_usage = l->cpu_usage;
		if (l->cuda_usage > r->cuda_usage)
			r->cuda_usage = l->cuda_usage;
		kf->total_ns += l->time_ns;
	}
	for (size_t i = 0; i < a->n_lines; i++) {
		const struct ml_agg_line *l = &a->lines[i];
		if (l->line < kf->first || l->line > kf->last || !l->function ||
		    strcmp(l->function, kf->name) != 0 || !ml_view_same_file(l->file, kf->file))
			continue;
		struct krow *r = &kf->rows[l->line - kf->first];
		if (ml_view_line_mem_add(&r->m, a, l, o->kind))
			r->mem = true;
	}
	kf->cuda = ml_agg_has_cuda(a) && ml_view_main_kind(o->kind);
	bool quiet = !wanted(o, kf);
	for (size_t i = 0; i < n && !quiet; i++)
		quiet = strcmp(kfs[i].file, kf->file) == 0;
	kf->have_source = ml_view_load_source(a, kf->file, kf->name, quiet, &kf->src,
					      &kf->source_modified);
	return 0;
}

static double unit_of(const struct ml_view_opts *o)
{
	return o->unit > 0 ? o->unit : 1e-6;
}

/* A signed byte count in memline's units ("-1.91 MiB"). */
static char *signed_bytes(int64_t v, char *buf, size_t len)
{
	char tmp[ML_UNITS_LEN];
	ml_units_bytes(v < 0 ? (uint64_t)-v : (uint64_t)v, tmp, sizeof(tmp));
	snprintf(buf, len, "%s%s", v < 0 ? "-" : "", tmp);
	return buf;
}

static void rule(FILE *out, int len)
{
	for (int i = 0; i < len; i++)
		fputc('=', out);
	fputc('\n', out);
}

static const char *contents(const struct kfunc *kf, int line)
{
	const char *t = kf->have_source ? ml_source_line(&kf->src, line) : NULL;
	return t ? t : "";
}

/* kernprof -l -v's table, memline's memory columns before Line Contents. */
static void kernprof_text(FILE *out, const struct ml_view_opts *o, const struct kfunc *kf)
{
	double unit = unit_of(o);
	fprintf(out, "Total time: %g s\n", (double)kf->total_ns * 1e-9);
	fprintf(out, "File: %s\n", kf->file);
	fprintf(out, "Function: %s at line %d\n\n", kf->name, kf->first);
	int len = fprintf(out, "%6s %9s %12s %8s %8s %12s %12s %12s %12s", "Line #", "Hits", "Time",
			  "Per Hit", "% Time", "Increment", "Total Alloc", "Peak", "Leaked");
	if (kf->cuda)
		len += fprintf(out, " %14s %12s %12s", "CUDA Increment", "CUDA Alloc", "CUDA Peak");
	len += fprintf(out, "  %s", "Line Contents");
	fputc('\n', out);
	rule(out, len);
	for (int line = kf->first; line <= kf->last; line++) {
		const struct krow *r = &kf->rows[line - kf->first];
		char hits[32] = "", time[32] = "", per[32] = "", pct[32] = "";
		char inc[ML_UNITS_LEN + 2] = "", total[ML_UNITS_LEN] = "", peak[ML_UNITS_LEN] = "";
		char leaked[ML_UNITS_LEN] = "";
		if (r->hits) {
			double t = (double)r->time_ns * 1e-9 / unit;
			snprintf(hits, sizeof(hits), "%llu", (unsigned long long)r->hits);
			snprintf(time, sizeof(time), "%.1f", t);
			snprintf(per, sizeof(per), "%.1f", t / (double)r->hits);
			snprintf(pct, sizeof(pct), "%.1f", kf->total_ns ?
				 100.0 * (double)r->time_ns / (double)kf->total_ns : 0.0);
			signed_bytes(r->cpu_increment, inc, sizeof(inc));
		}
		if (r->mem) {
			char *(*fmt)(uint64_t, char *, size_t) =
				r->m.estimated ? ml_units_estimate : ml_units_bytes;
			fmt(r->m.total_bytes, total, sizeof(total));
			fmt(r->m.peak_bytes, peak, sizeof(peak));
			fmt(r->m.leaked_bytes, leaked, sizeof(leaked));
		}
		fprintf(out, "%6d %9s %12s %8s %8s %12s %12s %12s %12s", line, hits, time, per, pct,
			inc, total, peak, leaked);
		if (kf->cuda) {
			char ci[ML_UNITS_LEN + 2] = "", ca[ML_UNITS_LEN] = "", cp[ML_UNITS_LEN] = "";
			if (r->hits)
				signed_bytes(r->cuda_increment, ci, sizeof(ci));
			if (r->mem) {
				ml_units_bytes(r->m.cuda_total, ca, sizeof(ca));
				ml_units_bytes(r->m.cuda_peak, cp, sizeof(cp));
			}
			fprintf(out, " %14s %12s %12s", ci, ca, cp);
		}
		fprintf(out, "  %s\n", contents(kf, line));
	}
	fputc('\n', out);
}

static void mib(double bytes, char *buf, size_t len)
{
	snprintf(buf, len, "%.3f MiB", bytes / 1048576.0);
}

/* python -m memory_profiler's table, from the exact live-byte counts. */
static void mprof_text(FILE *out, const struct kfunc *kf)
{
	fprintf(out, "Filename: %s\n\n", kf->file);
	int len = fprintf(out, "%6s %12s %12s  %10s   %s", "Line #", "Mem usage", "Increment",
			  "Occurrences", "Line Contents");
	fputc('\n', out);
	rule(out, len);
	for (int line = kf->first; line <= kf->last; line++) {
		const struct krow *r = &kf->rows[line - kf->first];
		char use[32] = "", inc[32] = "", occ[32] = "";
		if (line == kf->first && kf->f->calls) {
			/* the decorator (or def) row: the calls and the most
			 * live bytes when one began */
			mib((double)kf->f->entry_cpu, use, sizeof(use));
			snprintf(occ, sizeof(occ), "%llu", (unsigned long long)kf->f->calls);
		}
		if (r->hits) {
			mib((double)r->cpu_usage, use, sizeof(use));
			mib((double)r->cpu_increment, inc, sizeof(inc));
			snprintf(occ, sizeof(occ), "%llu", (unsigned long long)r->hits);
		}
		fprintf(out, "%6d %12s %12s  %10s   %s\n", line, use, inc, occ, contents(kf, line));
	}
	fputc('\n', out);
	if (!kf->cuda)
		return;
	fprintf(out, "%6s %17s %17s   %s\n", "Line #", "CUDA Mem usage", "CUDA Increment",
		"Line Contents");
	for (int line = kf->first; line <= kf->last; line++) {
		const struct krow *r = &kf->rows[line - kf->first];
		if (!r->hits)
			continue;
		char use[32], inc[32];
		mib((double)r->cuda_usage, use, sizeof(use));
		mib((double)r->cuda_increment, inc, sizeof(inc));
		fprintf(out, "%6d %17s %17s   %s\n", line, use, inc, contents(kf, line));
	}
	fputc('\n', out);
}

static void func_json(struct ml_json *j, const struct kfunc *kf)
{
	ml_json_object_begin(j);
	ml_json_key(j, "name");
	ml_json_string(j, kf->name);
	ml_json_key(j, "file");
	ml_json_string(j, kf->file);
	ml_json_key(j, "first_line");
	ml_json_i64(j, kf->first);
	ml_json_key(j, "last_line");
	ml_json_i64(j, kf->last);
	ml_json_key(j, "source_found");
	ml_json_bool(j, kf->have_source);
	ml_json_key(j, "source_modified");
	ml_json_bool(j, kf->source_modified);
	ml_json_key(j, "decorated");
	ml_json_bool(j, true);
	ml_json_key(j, "hits_exact");
	ml_json_bool(j, true);
	ml_json_key(j, "generator");
	ml_json_bool(j, (kf->f->flags & ML_PYFUNC_GENERATOR) != 0);
	ml_json_key(j, "calls");
	ml_json_u64(j, kf->f->calls);
	ml_json_key(j, "total_time_ns");
	ml_json_u64(j, kf->total_ns);
	ml_json_key(j, "entry_cpu_bytes");
	ml_json_u64(j, kf->f->entry_cpu);
	if (kf->cuda) {
		ml_json_key(j, "entry_cuda_bytes");
		ml_json_u64(j, kf->f->entry_cuda);
	}
	ml_json_key(j, "lines");
	ml_json_array_begin(j);
	for (int line = kf->first; line <= kf->last; line++) {
		const struct krow *r = &kf->rows[line - kf->first];
		ml_json_object_begin(j);
		ml_json_key(j, "line");
		ml_json_i64(j, line);
		ml_json_key(j, "text");
		ml_json_string(j, kf->have_source ? ml_source_line(&kf->src, line) : NULL);
		ml_json_key(j, "hits");
		ml_json_u64(j, r->hits);
		ml_json_key(j, "executions_ended");
		ml_json_u64(j, r->ended);
		ml_json_key(j, "time_ns");
		ml_json_u64(j, r->time_ns);
		ml_json_key(j, "cpu_increment_bytes");
		ml_json_i64(j, r->cpu_increment);
		ml_json_key(j, "cpu_mem_usage_bytes");
		ml_json_u64(j, r->cpu_usage);
		if (kf->cuda) {
			ml_json_key(j, "cuda_increment_bytes");
			ml_json_i64(j, r->cuda_increment);
			ml_json_key(j, "cuda_mem_usage_bytes");
			ml_json_u64(j, r->cuda_usage);
		}
		ml_view_line_mem_json(j, &r->m, kf->cuda);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_object_end(j);
}

/* By file, then by first line, then by name. */
static int cmp_kfunc(const void *x, const void *y)
{
	const struct kfunc *a = x, *b = y;
	int c = strcmp(a->file, b->file);
	if (c)
		return c;
	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	return strcmp(a->name, b->name);
}

static bool wanted(const struct ml_view_opts *o, const struct kfunc *kf)
{
	if (!o->n_functions)
		return true;
	for (size_t i = 0; i < o->n_functions; i++)
		if (ml_pyframes_name_matches(kf->name, o->functions[i]))
			return true;
	return false;
}

static const char *mechanism_name(uint32_t m)
{
	return m == ML_PYPROF_MONITORING ? "sys.monitoring" : "settrace";
}

int ml_view_lines_decorated(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
			    struct ml_json *j)
{
	const struct ml_profile *p = a->profile;
	if (!p->has_pyprof || !p->n_pyfuncs) {
		fprintf(stderr, "memline: report: lines: no function of %s is decorated with "
			"@profile; name one with --function NAME%s\n", p->exe ? p->exe : p->path,
			p->has_samples ? ", or show the sampled ones with --top N" : "");
		return -ENOENT;
	}
	for (size_t i = 0; i < o->n_functions; i++)
		if (!ml_view_is_decorated(a, o->functions[i])) {
			fprintf(stderr, "memline: report: lines: '%s' is not a function decorated "
				"with @profile (the --layout tables show only those)\n",
				o->functions[i]);
			return -ENOENT;
		}
	struct kfunc *kfs = calloc(p->n_pyfuncs + 1, sizeof(*kfs));
	if (!kfs)
		return -ENOMEM;
	size_t n = 0;
	int err = 0;
	for (size_t i = 0; i < p->n_pyfuncs; i++) {
		int rc = load(a, o, &p->pyfuncs[i], &kfs[n], kfs, n);
		if (rc == -ENOMEM) {
			err = rc;
			n++;
			goto out;
		}
		if (rc == 0 && wanted(o, &kfs[n])) {
			n++;
		} else {
			free(kfs[n].rows);
			ml_source_free(&kfs[n].src);
		}
	}
	qsort(kfs, n, sizeof(*kfs), cmp_kfunc);
	if (j) {
		ml_json_key(j, "timer");
		ml_json_object_begin(j);
		ml_json_key(j, "estimated");
		ml_json_bool(j, false);
		ml_json_key(j, "clock");
		ml_json_string(j, "monotonic");
		ml_json_key(j, "mechanism");
		ml_json_string(j, mechanism_name(p->pyprof.mechanism));
		ml_json_key(j, "events");
		ml_json_u64(j, p->pyprof.events);
		ml_json_key(j, "dropped");
		ml_json_u64(j, p->pyprof.dropped);
		ml_json_object_end(j);
		ml_json_key(j, "functions");
		ml_json_array_begin(j);
		for (size_t i = 0; i < n; i++)
			func_json(j, &kfs[i]);
		ml_json_array_end(j);
		goto out;
	}
	if (o->layout != ML_LINES_MEMORY_PROFILER)
		fprintf(out, "Timer unit: %g s\n\n", unit_of(o));
	for (size_t i = 0; i < n; i++) {
		if (o->layout == ML_LINES_MEMORY_PROFILER)
			mprof_text(out, &kfs[i]);
		else
			kernprof_text(out, o, &kfs[i]);
	}
	if (p->pyprof.dropped)
		fprintf(out, "%llu line events could not be counted (memory exhausted or a line "
			"outside its code): the hits are a lower bound\n",
			(unsigned long long)p->pyprof.dropped);
out:
	for (size_t i = 0; i < n; i++) {
		free(kfs[i].rows);
		ml_source_free(&kfs[i].src);
	}
	free(kfs);
	return err;
}
