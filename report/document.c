/* report/document.c - one profile shown as one view: symbolize, load the
 * coverage counts, aggregate, then the view as text (with a header when
 * several profiles are shown) or as a JSON document (report/report.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/coverage.h"
#include "report/report.h"
#include "report/resolver.h"

static const char *const view_names[ML_VIEW_COUNT] = { "leaks", "peak", "ops", "lines",
						       "regions" };

typedef int (*view_fn)(const struct ml_agg *, const struct ml_view_opts *, FILE *, struct ml_json *);
static const view_fn view_fns[ML_VIEW_COUNT] = { ml_view_leaks, ml_view_peak, ml_view_ops,
						  ml_view_lines, ml_view_regions };

enum ml_report_view ml_report_view_parse(const char *name)
{
	for (int v = 0; v < ML_VIEW_COUNT; v++)
		if (strcmp(name, view_names[v]) == 0)
			return (enum ml_report_view)v;
	return ML_VIEW_NONE;
}

const char *ml_report_view_name(enum ml_report_view view)
{
	return view >= 0 && view < ML_VIEW_COUNT ? view_names[view] : "none";
}

const char *ml_report_view_list(void)
{
	return "leaks, peak, ops, lines, regions";
}

static const char *end_reason_name(uint32_t r)
{
	switch (r) {
	case ML_END_EXIT: return "exit";
	case ML_END_UNDERSCORE_EXIT: return "_exit";
	case ML_END_EXEC: return "exec";
	case ML_END_SIGNAL: return "signal";
	case ML_END_THREAD_EXIT: return "thread_exit";
	default: return "unknown";
	}
}

static void profile_json(struct ml_json *j, const struct ml_profile *p)
{
	ml_json_key(j, "profile");
	ml_json_object_begin(j);
	ml_json_key(j, "path");
	ml_json_string(j, p->path);
	ml_json_key(j, "pid");
	ml_json_u64(j, p->meta.pid);
	ml_json_key(j, "ppid");
	ml_json_u64(j, p->meta.ppid);
	ml_json_key(j, "exe");
	ml_json_string(j, p->exe);
	ml_json_key(j, "argv");
	ml_json_array_begin(j);
	for (uint32_t i = 0; i < p->meta.argc; i++)
		ml_json_string(j, p->argv[i]);
	ml_json_array_end(j);
	ml_json_key(j, "forked");
	ml_json_bool(j, (p->meta.flags & ML_META_FORKED) != 0);
	ml_json_key(j, "end_reason");
	ml_json_string(j, end_reason_name(p->meta.end_reason));
	ml_json_key(j, "end_status");
	ml_json_i64(j, p->meta.end_status);
	ml_json_key(j, "duration_ns");
	ml_json_u64(j, p->meta.duration_ns);
	ml_json_key(j, "max_depth");
	ml_json_u64(j, p->meta.max_depth);
	ml_json_key(j, "degraded");
	ml_json_bool(j, (p->meta.flags & ML_META_DEGRADED) != 0);
	ml_json_object_end(j);
}

static void header_text(FILE *out, const struct ml_profile *p, bool first)
{
	if (!first)
		fputc('\n', out);
	fprintf(out, "==> %s: pid %llu, ppid %llu%s:", p->path, (unsigned long long)p->meta.pid,
		(unsigned long long)p->meta.ppid,
		(p->meta.flags & ML_META_FORKED) ? ", fork child" : "");
	for (uint32_t i = 0; i < p->meta.argc; i++)
		fprintf(out, " %s", p->argv[i]);
	if (p->meta.argc == 0)
		fprintf(out, " %s", p->exe);
	fputs(" <==\n\n", out);
}

/* Writes one profile's JSON document around the view.  The document goes
 * to a buffer first, so a failed view leaves no half document in j.
 * Returns the view's result (0 or -errno). */
static int show_json(enum ml_report_view view, const struct ml_view_opts *vo,
		     const struct ml_agg *agg, struct ml_json *j)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	if (!mem)
		return -ENOMEM;
	struct ml_json doc = *j;
	doc.out = mem;
	ml_json_object_begin(&doc);
	ml_json_key(&doc, "schema");
	ml_json_string(&doc, "memline.report");
	ml_json_key(&doc, "version");
	ml_json_u64(&doc, 1);
	ml_json_key(&doc, "view");
	ml_json_string(&doc, view_names[view]);
	ml_json_key(&doc, "kind");
	ml_json_string(&doc, ml_kind_name(vo->kind));
	profile_json(&doc, agg->profile);
	ml_json_key(&doc, view_names[view]);
	ml_json_object_begin(&doc);
	int err = view_fns[view](agg, vo, NULL, &doc);
	ml_json_object_end(&doc);
	ml_json_object_end(&doc);
	fclose(mem);
	if (err == 0) {
		fwrite(buf, 1, len, j->out);
		doc.out = j->out;
		*j = doc;
	}
	free(buf);
	return err;
}

int ml_report_show(const struct ml_profile *p, enum ml_report_view view,
		   const struct ml_view_opts *opts, bool header, bool first, struct ml_json *j)
{
	struct ml_symbolizer *sym = NULL;
	struct ml_pyframes *py = NULL;
	struct ml_agg *agg = NULL;
	struct ml_cov *cov = NULL;
	struct ml_resolver r;
	int err = ml_sym_open(p, &sym);
	if (err < 0) {
		fprintf(stderr, "memline: %s: cannot symbolize: %s\n", p->path, strerror(-err));
		goto out;
	}
	err = ml_pyframes_open(p, &py);
	if (err < 0) {
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
		goto out;
	}
	struct ml_view_opts vo = *opts;
	if (!vo.kind_set)
		vo.kind = ml_report_default_kind(p);
	struct ml_report_syms syms = { sym, py, vo.native };
	ml_resolver_init(&r, &syms);
	if (p->has_samples && (view == ML_VIEW_LINES || view == ML_VIEW_OPS) &&
	    ml_cov_load(p->exe, p->path, p->meta.start_realtime_ns, &cov) < 0)
		cov = NULL;
	vo.cov = cov;
	struct ml_agg_opts ao = { .native = vo.native };
	err = ml_agg_build_opts(p, &r, &ao, &agg);
	if (err < 0) {
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
		goto out;
	}
	if (p->meta.flags & ML_META_DEGRADED)
		fprintf(stderr, "memline: warning: %s: the runtime hit internal trouble while "
			"recording; its numbers may be incomplete\n", p->path);
	if (!j && header)
		header_text(stdout, p, first);
	err = j ? show_json(view, &vo, agg, j) : view_fns[view](agg, &vo, stdout, NULL);
	/* -ENOENT: the view has said what it could not find. */
	if (err < 0 && err != -ENOENT)
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
out:
	ml_agg_free(agg);
	ml_pyframes_close(py);
	ml_cov_free(cov);
	if (sym)
		ml_sym_close(sym);
	return err < 0 ? -1 : 0;
}


enum ml_kind ml_report_default_kind(const struct ml_profile *p)
{
	return (p->kinds_present & (1u << ML_KIND_PYTHON)) ? ML_KIND_CPU : ML_KIND_HEAP;
}
