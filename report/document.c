/* report/document.c - one profile shown as one view: symbolize, load the
 * coverage counts, aggregate, then the view as text (with a header when
 * several profiles are shown) or as a JSON document; or every profile as
 * one document view (html, trace, pprof) (report/report.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/coverage.h"
#include "report/report.h"
#include "report/resolver.h"

static const char *const view_names[ML_VIEW_COUNT] = {
	"leaks", "peak", "ops", "lines", "regions", "timeline", "flame", "folded", "html", "trace",
	"pprof", "processes",
};

typedef int (*view_fn)(const struct ml_agg *, const struct ml_view_opts *, FILE *, struct ml_json *);
static const view_fn view_fns[ML_VIEW_COUNT] = {
	ml_view_leaks, ml_view_peak, ml_view_ops, ml_view_lines, ml_view_regions,
	ml_view_timeline, ml_view_flame, ml_view_folded,
};

/* The views that write one document of all the profiles. */
static const struct ml_docview *const docviews[ML_VIEW_COUNT] = {
	[ML_VIEW_HTML] = &ml_docview_html, [ML_VIEW_TRACE] = &ml_docview_trace,
	[ML_VIEW_PPROF] = &ml_docview_pprof,
};

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
	return "leaks, peak, ops, lines, regions, timeline, flame, folded, html, trace, pprof, "
	       "processes";
}

bool ml_report_view_is_document(enum ml_report_view view)
{
	return view >= 0 && view < ML_VIEW_COUNT && docviews[view];
}

bool ml_report_view_is_binary(enum ml_report_view view)
{
	return ml_report_view_is_document(view) && docviews[view]->binary;
}

/* The view function: with a base, ops, peak and leaks show what changed. */
static view_fn view_for(enum ml_report_view view, const struct ml_view_opts *vo)
{
	if (vo->base && (view == ML_VIEW_OPS || view == ML_VIEW_PEAK || view == ML_VIEW_LEAKS))
		return ml_view_diff;
	return view_fns[view];
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

/* memline's own memory when the profile was written (RUNTIME section). */
static void runtime_json(struct ml_json *j, const struct ml_fmt_runtime *r)
{
	ml_json_key(j, "runtime");
	ml_json_object_begin(j);
	ml_json_key(j, "live_table_bytes");
	ml_json_u64(j, r->live_table_bytes);
	ml_json_key(j, "live_blocks");
	ml_json_u64(j, r->live_blocks);
	ml_json_key(j, "stack_bytes");
	ml_json_u64(j, r->stack_bytes);
	ml_json_key(j, "stack_nodes");
	ml_json_u64(j, r->stack_nodes);
	ml_json_key(j, "counter_bytes");
	ml_json_u64(j, r->counter_bytes);
	ml_json_key(j, "counters");
	ml_json_u64(j, r->counters);
	ml_json_key(j, "arena_bytes");
	ml_json_u64(j, r->arena_bytes);
	ml_json_key(j, "threads");
	ml_json_u64(j, r->threads);
	ml_json_object_end(j);
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
	ml_json_key(j, "argv_cut");
	ml_json_bool(j, (p->meta.flags & ML_META_ARGV_CUT) != 0);
	ml_json_key(j, "allocator_shadowed");
	ml_json_bool(j, (p->meta.flags & ML_META_ALLOC_SHADOWED) != 0);
	ml_json_key(j, "notes");
	ml_json_array_begin(j);
	for (size_t i = 0; i < p->n_notes; i++)
		ml_json_string(j, p->notes[i]);
	ml_json_array_end(j);
	if (p->has_runtime)
		runtime_json(j, &p->runtime);
	if (p->sampled) {
		ml_json_key(j, "sampled");
		ml_json_object_begin(j);
		ml_json_key(j, "rate_bytes");
		ml_json_u64(j, p->alloc_sampling.rate_bytes);
		ml_json_key(j, "seed");
		ml_json_u64(j, p->alloc_sampling.seed);
		ml_json_key(j, "samples");
		ml_json_u64(j, p->alloc_sampling.samples);
		ml_json_key(j, "allocs");
		ml_json_u64(j, p->alloc_sampling.allocs);
		ml_json_key(j, "alloc_bytes");
		ml_json_u64(j, p->alloc_sampling.alloc_bytes);
		ml_json_object_end(j);
	}
	ml_json_key(j, "rank");
	ml_json_i64(j, p->process.rank);
	ml_json_key(j, "world_size");
	ml_json_i64(j, p->process.world_size);
	ml_json_key(j, "host");
	ml_json_string(j, p->process.host);
	if (p->n_merged) {
		/* A merged profile: the processes it sums. */
		ml_json_key(j, "merged");
		ml_json_array_begin(j);
		for (size_t i = 0; i < p->n_merged; i++) {
			ml_json_object_begin(j);
			ml_json_key(j, "path");
			ml_json_string(j, p->merged[i]->path);
			ml_json_key(j, "pid");
			ml_json_u64(j, p->merged[i]->meta.pid);
			ml_json_object_end(j);
		}
		ml_json_array_end(j);
	}
	ml_json_object_end(j);
}

/* The notice every text view of a sampled profile starts with. */
static void sampled_text(FILE *out, const struct ml_profile *p)
{
	const struct ml_fmt_sampled *s = &p->alloc_sampling;
	fprintf(out, "SAMPLED (memline run --sample %llu): amounts marked ~ are estimates from "
		"%llu sampled allocations of %llu (one every %llu bytes on average);\n"
		"+- is one standard deviation.  Exact: %llu allocations, %llu bytes.\n\n",
		(unsigned long long)s->rate_bytes, (unsigned long long)s->samples,
		(unsigned long long)s->allocs, (unsigned long long)s->rate_bytes,
		(unsigned long long)s->allocs, (unsigned long long)s->alloc_bytes);
}

/* What the profile itself says the report must not hide, on stderr. */
static void warn_profile(const struct ml_profile *p)
{
	if (p->meta.flags & ML_META_DEGRADED)
		fprintf(stderr, "memline: warning: %s: the runtime hit internal trouble while "
			"recording; its numbers may be incomplete\n", p->path);
	if (p->meta.flags & ML_META_ARGV_CUT)
		fprintf(stderr, "memline: warning: %s: the command line was longer than the "
			"profile keeps; only its first %u arguments are shown\n", p->path,
			p->meta.argc);
	for (size_t i = 0; i < p->n_notes; i++)
		fprintf(stderr, "memline: warning: %s: %s\n", p->path, p->notes[i]);
}

static void header_text(FILE *out, const struct ml_profile *p, bool first)
{
	if (!first)
		fputc('\n', out);
	if (p->n_merged) {
		fprintf(out, "==> %zu processes summed (pid", p->n_merged);
		size_t shown = 0;
		for (size_t i = 0; i < p->n_merged && shown < 16; i++) {
			uint64_t pid = p->merged[i]->meta.pid;
			if (i && pid == p->merged[i - 1]->meta.pid)
				continue;	/* exec'd images of one process */
			fprintf(out, "%s %llu", shown++ ? "," : "", (unsigned long long)pid);
		}
		fprintf(out, "%s):", shown == 16 ? ", ..." : "");
	} else {
		fprintf(out, "==> %s: pid %llu, ppid %llu%s", p->path,
			(unsigned long long)p->meta.pid, (unsigned long long)p->meta.ppid,
			(p->meta.flags & ML_META_FORKED) ? ", fork child" : "");
		if (p->process.rank >= 0)
			fprintf(out, ", rank %lld", (long long)p->process.rank);
		fputc(':', out);
	}
	for (uint32_t i = 0; i < p->meta.argc; i++)
		fprintf(out, " %s", p->argv[i]);
	if (p->meta.argc == 0)
		fprintf(out, " %s", p->exe);
	if (p->meta.flags & ML_META_ARGV_CUT)
		fputs(" [...]", out);
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
	if (vo->base) {
		ml_json_key(&doc, "base");
		ml_json_string(&doc, vo->base_path);
	}
	ml_json_key(&doc, view_names[view]);
	ml_json_object_begin(&doc);
	if (vo->base) {
		ml_json_key(&doc, "diff");
		ml_json_bool(&doc, true);
	}
	int err = view_for(view, vo)(agg, vo, NULL, &doc);
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

struct ml_report_loaded {
	struct ml_symbolizer *sym;
	struct ml_pyframes *py;	/* the profile's Python frames, NULL if none */
	struct ml_agg *agg;
	struct ml_cov *cov;
	struct ml_report_syms syms;	/* the resolver points here */
	struct ml_resolver r;	/* the aggregation points here: never moves */
};

void ml_report_unload(struct ml_report_loaded *l)
{
	if (!l)
		return;
	ml_agg_free(l->agg);
	ml_pyframes_close(l->py);
	ml_cov_free(l->cov);
	if (l->sym)
		ml_sym_close(l->sym);
	free(l);
}

const struct ml_agg *ml_report_agg(const struct ml_report_loaded *l)
{
	return l->agg;
}

/* Symbolizes p, loads its coverage counts when cov is set and it has
 * samples, and aggregates it.  0, or -1 after one error line. */
/* native: report --native (ml_agg_opts). */
static int load(const struct ml_profile *p, bool cov, bool native, struct ml_report_loaded **out)
{
	struct ml_report_loaded *l = calloc(1, sizeof(*l));
	if (!l) {
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(ENOMEM));
		return -1;
	}
	int err = ml_sym_open(p, &l->sym);
	if (err < 0) {
		fprintf(stderr, "memline: %s: cannot symbolize: %s\n", p->path, strerror(-err));
		ml_report_unload(l);
		return -1;
	}
	err = ml_pyframes_open(p, &l->py);
	if (err < 0) {
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
		ml_report_unload(l);
		return -1;
	}
	l->syms = (struct ml_report_syms){ l->sym, l->py, native };
	ml_resolver_init(&l->r, &l->syms);
	if (cov && p->has_samples && ml_cov_load(p->exe, p->path, p->meta.start_realtime_ns, &l->cov) < 0)
		l->cov = NULL;
	struct ml_agg_opts ao = { .native = native };
	err = ml_agg_build_opts(p, &l->r, &ao, &l->agg);
	if (err < 0) {
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
		ml_report_unload(l);
		return -1;
	}
	warn_profile(p);
	if (native && p->has_python && (p->python.flags & ML_PY_INTERP_CUT))
		fprintf(stderr, "memline: note: %s: Python objects' stacks were recorded without "
			"the interpreter's own frames below their lines (memline run --native "
			"records them)\n", p->path);
	*out = l;
	return 0;
}

int ml_report_load(const struct ml_profile *p, struct ml_report_loaded **out)
{
	return load(p, false, false, out);
}

int ml_report_show(const struct ml_profile *p, enum ml_report_view view,
		   const struct ml_view_opts *opts, bool header, bool first, struct ml_json *j)
{
	struct ml_report_loaded *l = NULL;
	if (load(p, view == ML_VIEW_LINES || view == ML_VIEW_OPS, opts->native, &l) < 0)
		return -1;
	struct ml_view_opts vo = *opts;
	vo.cov = l->cov;
	if (!vo.kind_set)
		vo.kind = ml_report_default_kind(p);
	if (!j && header)
		header_text(stdout, p, first);
	if (!j && p->sampled)
		sampled_text(stdout, p);
	int err = j ? show_json(view, &vo, l->agg, j) : view_for(view, &vo)(l->agg, &vo, stdout, NULL);
	/* -ENOENT: the view has said what it could not find. */
	if (err < 0 && err != -ENOENT)
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
	ml_report_unload(l);
	return err < 0 ? -1 : 0;
}

int ml_report_document(struct ml_profile *const *profiles, size_t n, enum ml_report_view view,
		       const struct ml_view_opts *opts, FILE *out)
{
	const struct ml_docview *dv = docviews[view];
	struct ml_view_opts vo = *opts;
	vo.t0_realtime_ns = UINT64_MAX;	/* processes line up by their start times */
	for (size_t i = 0; i < n && !vo.kind_set; i++)
		if (ml_report_default_kind(profiles[i]) == ML_KIND_CPU)
			vo.kind = ML_KIND_CPU;	/* a Python program's: heap + Python objects */
	for (size_t i = 0; i < n; i++)
		if (profiles[i]->meta.start_realtime_ns < vo.t0_realtime_ns)
			vo.t0_realtime_ns = profiles[i]->meta.start_realtime_ns;
	void *doc = NULL;
	int err = dv->begin(&vo, &doc);
	if (err < 0) {
		fprintf(stderr, "memline: %s: %s\n", dv->name, strerror(-err));
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct ml_report_loaded *l = NULL;
		if (load(profiles[i], view == ML_VIEW_HTML, vo.native, &l) < 0) {
			rc = -1;
			break;
		}
		vo.cov = l->cov;
		err = dv->add(doc, l->agg, &vo);
		if (err < 0) {
			if (err != -ENOENT)
				fprintf(stderr, "memline: %s: %s\n", profiles[i]->path, strerror(-err));
			rc = -1;
		}
		ml_report_unload(l);
	}
	err = dv->end(doc, rc == 0 ? out : NULL);
	if (err < 0 && rc == 0) {
		fprintf(stderr, "memline: %s: %s\n", dv->name, strerror(-err));
		rc = -1;
	}
	return rc;
}

enum ml_kind ml_report_default_kind(const struct ml_profile *p)
{
	return (p->kinds_present & (1u << ML_KIND_PYTHON)) ? ML_KIND_CPU : ML_KIND_HEAP;
}
