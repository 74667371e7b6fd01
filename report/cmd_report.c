/* report/cmd_report.c - `memline report`: parses the view and options, loads
 * the profiles, aggregates each and hands it to the view (text or JSON). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "report/cli.h"
#include "report/coverage.h"
#include "report/resolver.h"
#include "report/views.h"

enum view { VIEW_NONE = -1, VIEW_LEAKS, VIEW_PEAK, VIEW_OPS, VIEW_LINES, VIEW_REGIONS,
	     VIEW_TIMELINE, VIEW_FLAME, VIEW_FOLDED, VIEW_HTML, VIEW_TRACE, VIEW_PPROF,
	     VIEW_COUNT };

static const char *const view_names[] = { "leaks", "peak", "ops", "lines", "regions",
					  "timeline", "flame", "folded", "html", "trace", "pprof" };
#define VIEW_LIST "leaks, peak, ops, lines, regions, timeline, flame, folded, html, trace, pprof"

typedef int (*view_fn)(const struct ml_agg *, const struct ml_view_opts *, FILE *, struct ml_json *);
static const view_fn view_fns[] = { ml_view_leaks, ml_view_peak, ml_view_ops, ml_view_lines,
				    ml_view_regions, ml_view_timeline, ml_view_flame,
				    ml_view_folded, NULL, NULL, NULL };
/* The views that write one document for all the profiles. */
static const struct ml_docview *const docviews[VIEW_COUNT] = {
	[VIEW_HTML] = &ml_docview_html, [VIEW_TRACE] = &ml_docview_trace,
	[VIEW_PPROF] = &ml_docview_pprof,
};

struct report_args {
	char **files;
	size_t n_files;
	enum view view;
	bool json;
	bool limit_set, sort_set, unit_set, value_set, fraction_set;
	const char **functions;
	const char *output;		/* -o FILE */
	struct ml_view_opts vo;
};

static int parse_view(const char *s)
{
	for (int v = 0; v < VIEW_COUNT; v++)
		if (strcmp(s, view_names[v]) == 0)
			return v;
	return VIEW_NONE;
}

/* The value of an option: "--opt VALUE" or "--opt=VALUE".  NULL if absent. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *matched)
{
	size_t len = strlen(name);
	*matched = false;
	if (strncmp(argv[*i], name, len) != 0)
		return NULL;
	if (argv[*i][len] == '=') {
		*matched = true;
		return argv[*i] + len + 1;
	}
	if (argv[*i][len] != '\0')
		return NULL;
	*matched = true;
	return *i + 1 < argc ? argv[++*i] : NULL;
}

static int parse_option(int argc, char **argv, int *i, struct report_args *ra)
{
	bool m;
	const char *v;
	if (strcmp(argv[*i], "--json") == 0) {
		ra->json = true;
	} else if ((v = opt_value(argc, argv, i, "--limit", &m)), m) {
		char *end;
		errno = 0;
		long n = v ? strtol(v, &end, 10) : -1;
		if (!v || errno || *end || end == v || n < 0)
			return ml_cli_usage_error("report: --limit takes a number of rows (0 or more)");
		ra->vo.limit = n;
		ra->limit_set = true;
	} else if ((v = opt_value(argc, argv, i, "--sort", &m)), m) {
		int key = v ? ml_ops_key_parse(v) : -1;
		if (key < 0)
			return ml_cli_usage_error("report: unknown sort key '%s'; valid keys: %s",
						  v ? v : "", ml_ops_key_list());
		ra->vo.sort = (enum ml_ops_key)key;
		ra->sort_set = true;
	} else if ((v = opt_value(argc, argv, i, "--kind", &m)), m) {
		int k = v ? ml_kind_parse(v) : -1;
		if (k < 0)
			return ml_cli_usage_error("report: unknown kind '%s'; valid kinds: %s",
						  v ? v : "", ml_kind_list());
		ra->vo.kind = (enum ml_kind)k;
	} else if ((v = opt_value(argc, argv, i, "--top", &m)), m) {
		char *end;
		errno = 0;
		long n = v ? strtol(v, &end, 10) : -1;
		if (!v || errno || *end || end == v || n < 1)
			return ml_cli_usage_error("report: --top takes a number of functions (1 or more)");
		ra->vo.top = n;
	} else if (((v = opt_value(argc, argv, i, "--unit", &m)), m) ||
		   ((v = opt_value(argc, argv, i, "-u", &m)), m)) {
		char *end;
		errno = 0;
		double u = v ? strtod(v, &end) : -1;
		if (!v || errno || *end || end == v || !(u > 0) || u > 1e6)
			return ml_cli_usage_error("report: --unit takes a time unit in seconds "
						  "(e.g. 1e-6, 1e-3, 1)");
		ra->vo.unit = u;
		ra->unit_set = true;
	} else if (((v = opt_value(argc, argv, i, "--output", &m)), m) ||
		   ((v = opt_value(argc, argv, i, "-o", &m)), m)) {
		if (!v || !*v)
			return ml_cli_usage_error("report: -o needs a file name");
		ra->output = v;
	} else if ((v = opt_value(argc, argv, i, "--base", &m)), m) {
		if (!v || !*v)
			return ml_cli_usage_error("report: --base needs a profile file");
		ra->vo.base_path = v;
	} else if ((v = opt_value(argc, argv, i, "--value", &m)), m) {
		int val = v ? ml_flame_value_parse(v) : -1;
		if (val < 0)
			return ml_cli_usage_error("report: unknown value '%s'; valid values: %s",
						  v ? v : "", ml_flame_value_list());
		ra->vo.value = (enum ml_flame_value)val;
		ra->value_set = true;
	} else if ((v = opt_value(argc, argv, i, "--node-fraction", &m)), m) {
		char *end;
		errno = 0;
		double f = v ? strtod(v, &end) : -1;
		if (!v || errno || *end || end == v || !(f >= 0) || f > 1)
			return ml_cli_usage_error("report: --node-fraction takes a share of the "
						  "total from 0 to 1 (e.g. 0.01 for 1%%)");
		ra->vo.node_fraction = f;
		ra->fraction_set = true;
	} else if ((v = opt_value(argc, argv, i, "--function", &m)), m) {
		if (!v || !*v)
			return ml_cli_usage_error("report: --function needs a function name");
		ra->functions[ra->vo.n_functions++] = v;
	} else {
		return ml_cli_usage_error("report: unknown option '%s'", argv[*i]);
	}
	return 0;
}

/* Checks the options of the pictures and interchange views. */
static int check_picture_args(const struct report_args *ra)
{
	enum view v = ra->view;
	bool flame = v == VIEW_FLAME || v == VIEW_FOLDED || v == VIEW_HTML || v == VIEW_PPROF;
	if (ra->output && !docviews[v])
		return ml_cli_usage_error("report: -o only applies to the html, trace and pprof views");
	if (ra->value_set && v != VIEW_FLAME && v != VIEW_FOLDED)
		return ml_cli_usage_error("report: --value only applies to the flame and folded views");
	if (ra->fraction_set && v != VIEW_FLAME && v != VIEW_HTML)
		return ml_cli_usage_error("report: --node-fraction only applies to the flame and "
					  "html views");
	if (ra->vo.base_path && !flame && v != VIEW_OPS && v != VIEW_PEAK && v != VIEW_LEAKS)
		return ml_cli_usage_error("report: --base applies to the ops, peak, leaks, flame, "
					  "folded, html and pprof views");
	if (ra->json && (v == VIEW_FOLDED || docviews[v] || v == VIEW_FLAME))
		return ml_cli_usage_error("report: --json does not apply to the %s view",
					  view_names[v]);
	return 0;
}

/* Checks the options fit the view. */
static int check_args(const struct report_args *ra)
{
	if (ra->view == VIEW_NONE && ra->n_files &&
	    access(ra->files[ra->n_files - 1], F_OK) != 0)	/* a misspelt view, not a file */
		return ml_cli_usage_error("report: unknown view '%s' (one of " VIEW_LIST ")",
					  ra->files[ra->n_files - 1]);
	if (ra->view == VIEW_NONE)
		return ml_cli_usage_error("report: no view given (one of " VIEW_LIST ")");
	int err = check_picture_args(ra);
	if (err)
		return err;
	if (ra->sort_set && ra->view != VIEW_OPS)
		return ml_cli_usage_error("report: --sort only applies to the ops view");
	if (ra->vo.n_functions && ra->view != VIEW_LINES)
		return ml_cli_usage_error("report: --function only applies to the lines view");
	if (ra->view == VIEW_LINES && !ra->vo.n_functions && !ra->vo.top)
		return ml_cli_usage_error("report: lines needs --function NAME or --top N");
	if (ra->view == VIEW_LINES && ra->vo.n_functions && ra->vo.top)
		return ml_cli_usage_error("report: lines takes --function NAME or --top N, not both");
	if ((ra->vo.top || ra->unit_set) && ra->view != VIEW_LINES)
		return ml_cli_usage_error("report: --top and --unit only apply to the lines view");
	if (ra->limit_set && (ra->view == VIEW_LINES || ra->view == VIEW_REGIONS))
		return ml_cli_usage_error("report: --limit does not apply to the %s view",
					  view_names[ra->view]);
	return 0;
}

static int parse_args(int argc, char **argv, struct report_args *ra)
{
	ra->view = VIEW_NONE;
	ra->vo.kind = ML_KIND_HEAP;
	ra->vo.limit = -1;
	ra->vo.sort = ML_OPS_SELF_CPU_MEMORY_USAGE;
	ra->vo.node_fraction = -1;
	ra->files = calloc((size_t)argc + 1, sizeof(*ra->files));
	ra->functions = calloc((size_t)argc + 1, sizeof(*ra->functions));
	if (!ra->files || !ra->functions)
		return ML_EXIT_FAIL;
	ra->vo.functions = ra->functions;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] == '-' && a[1] != '\0') {
			int rc = parse_option(argc, argv, &i, ra);
			if (rc)
				return rc;
		} else if (ra->view == VIEW_NONE && parse_view(a) != VIEW_NONE) {
			ra->view = (enum view)parse_view(a);
		} else if (ra->view == VIEW_NONE) {
			ra->files[ra->n_files++] = argv[i];
		} else {
			return ml_cli_usage_error("report: unexpected argument '%s' after the view "
						  "(files come before it)", a);
		}
	}
	return check_args(ra);
}

/* The newest memline.*.mlp in the current directory, in a malloc'd string. */
static char *newest_profile(void)
{
	DIR *d = opendir(".");
	if (!d)
		return NULL;
	char *best = NULL;
	struct timespec best_t = { 0, 0 };
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		struct stat st;
		if (strncmp(de->d_name, "memline.", 8) != 0 || len <= 12 ||
		    strcmp(de->d_name + len - 4, ".mlp") != 0 || stat(de->d_name, &st) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		bool newer = !best || st.st_mtim.tv_sec > best_t.tv_sec ||
			     (st.st_mtim.tv_sec == best_t.tv_sec &&
			      (st.st_mtim.tv_nsec > best_t.tv_nsec ||
			       (st.st_mtim.tv_nsec == best_t.tv_nsec && strcmp(de->d_name, best) > 0)));
		if (newer) {
			free(best);
			best = strdup(de->d_name);
			best_t = st.st_mtim;
		}
	}
	closedir(d);
	return best;
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

/* The view function for the command line: with --base, ops, peak and
 * leaks show what changed. */
static view_fn view_for(const struct report_args *ra)
{
	if (ra->vo.base && (ra->view == VIEW_OPS || ra->view == VIEW_PEAK || ra->view == VIEW_LEAKS))
		return ml_view_diff;
	return view_fns[ra->view];
}

/* Writes one profile's JSON document around the view.  The document goes
 * to a buffer first, so a failed view leaves no half document in j.
 * Returns the view's result (0 or -errno). */
static int show_json(const struct report_args *ra, const struct ml_view_opts *vo,
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
	ml_json_string(&doc, view_names[ra->view]);
	ml_json_key(&doc, "kind");
	ml_json_string(&doc, ml_kind_name(ra->vo.kind));
	profile_json(&doc, agg->profile);
	if (vo->base) {
		ml_json_key(&doc, "base");
		ml_json_string(&doc, vo->base_path);
	}
	ml_json_key(&doc, view_names[ra->view]);
	ml_json_object_begin(&doc);
	if (vo->base) {
		ml_json_key(&doc, "diff");
		ml_json_bool(&doc, true);
	}
	int err = view_for(ra)(agg, vo, NULL, &doc);
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

/* A profile symbolized and aggregated. */
struct loaded {
	struct ml_symbolizer *sym;
	struct ml_agg *agg;
	struct ml_cov *cov;
	struct ml_resolver r;
};

static void unload(struct loaded *l)
{
	ml_agg_free(l->agg);
	ml_cov_free(l->cov);
	if (l->sym)
		ml_sym_close(l->sym);
	memset(l, 0, sizeof(*l));
}

/* Symbolizes and aggregates p into l (l->r must not move while l->agg
 * lives).  Returns 0, or -errno after one line on stderr. */
static int load_agg(const struct report_args *ra, const struct ml_profile *p, struct loaded *l)
{
	int err = ml_sym_open(p, &l->sym);
	if (err < 0) {
		fprintf(stderr, "memline: %s: cannot symbolize: %s\n", p->path, strerror(-err));
		return err;
	}
	ml_resolver_from_symbolizer(&l->r, l->sym);
	if (p->has_samples && (ra->view == VIEW_LINES || ra->view == VIEW_OPS ||
			       ra->view == VIEW_HTML) &&
	    ml_cov_load(p->exe, p->path, p->meta.start_realtime_ns, &l->cov) < 0)
		l->cov = NULL;
	err = ml_agg_build(p, &l->r, &l->agg);
	if (err < 0) {
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
		return err;
	}
	if (p->meta.flags & ML_META_DEGRADED)
		fprintf(stderr, "memline: warning: %s: the runtime hit internal trouble while "
			"recording; its numbers may be incomplete\n", p->path);
	return 0;
}

/* Symbolizes, aggregates and shows one profile (or adds it to the
 * document dv).  Returns 0 or ML_EXIT_FAIL. */
static int report_one(const struct report_args *ra, const struct ml_profile *p, bool first,
		      struct ml_json *j, const struct ml_docview *dv, void *doc)
{
	struct loaded l = { 0 };
	int err = load_agg(ra, p, &l);
	if (err < 0)
		goto out;
	struct ml_view_opts vo = ra->vo;
	vo.cov = l.cov;
	if (dv)
		err = dv->add(doc, l.agg, &vo);
	else {
		if (!j && ra->n_files > 1)
			header_text(stdout, p, first);
		err = j ? show_json(ra, &vo, l.agg, j) : view_for(ra)(l.agg, &vo, stdout, NULL);
	}
	/* -ENOENT: the view has said what it could not find. */
	if (err < 0 && err != -ENOENT)
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
out:
	unload(&l);
	return err < 0 ? ML_EXIT_FAIL : 0;
}

/* Loads every profile first, so a bad file fails before any output. */
static int load_all(const struct report_args *ra, struct ml_profile **profiles)
{
	for (size_t i = 0; i < ra->n_files; i++) {
		char err[256] = "";
		int rc = ml_profile_load(ra->files[i], &profiles[i], err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "memline: %s: %s\n", ra->files[i], err[0] ? err : strerror(-rc));
			return ML_EXIT_FAIL;
		}
	}
	return 0;
}

/* Loads, symbolizes and aggregates the --base profile.  0 or ML_EXIT_FAIL. */
static int load_base(const struct report_args *ra, struct ml_profile **p, struct loaded *l)
{
	char err[256] = "";
	int rc = ml_profile_load(ra->vo.base_path, p, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "memline: %s: %s\n", ra->vo.base_path, err[0] ? err : strerror(-rc));
		return ML_EXIT_FAIL;
	}
	return load_agg(ra, *p, l) < 0 ? ML_EXIT_FAIL : 0;
}

/* html, trace, pprof: one document of every profile, written to -o FILE
 * under a temporary name first (a failed report leaves no half file), or
 * to standard output.  Returns 0 or ML_EXIT_FAIL. */
static int report_document(const struct report_args *ra, struct ml_profile **profiles)
{
	const struct ml_docview *dv = docviews[ra->view];
	bool to_stdout = !ra->output || strcmp(ra->output, "-") == 0;
	if (to_stdout && dv->binary && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "memline: the %s view is binary: give -o FILE\n", dv->name);
		return ML_EXIT_FAIL;
	}
	void *doc = NULL;
	int err = dv->begin(&ra->vo, &doc);
	if (err < 0) {
		fprintf(stderr, "memline: %s: %s\n", dv->name, strerror(-err));
		return ML_EXIT_FAIL;
	}
	int rc = 0;
	for (size_t i = 0; i < ra->n_files && rc == 0; i++)
		rc = report_one(ra, profiles[i], i == 0, NULL, dv, doc);
	char *tmp = NULL;
	FILE *out = stdout;
	struct stat st;
	/* A device or a pipe (/dev/stdout, a FIFO) is written as it is: only a
	 * regular file is replaced by renaming. */
	bool special = !to_stdout && stat(ra->output, &st) == 0 && !S_ISREG(st.st_mode);
	if (special && !(out = fopen(ra->output, "w"))) {
		fprintf(stderr, "memline: cannot write %s: %s\n", ra->output, strerror(errno));
		out = NULL;
		rc = ML_EXIT_FAIL;
	} else if (!to_stdout && !special &&
		   (asprintf(&tmp, "%s.tmp.%d", ra->output, (int)getpid()) < 0 ||
		    !(out = fopen(tmp, "w")))) {
		fprintf(stderr, "memline: cannot write %s: %s\n", ra->output, strerror(errno));
		free(tmp);
		tmp = NULL;
		out = NULL;
		rc = ML_EXIT_FAIL;
	}
	err = dv->end(doc, rc == 0 ? out : NULL);
	if (err < 0 && rc == 0)
		fprintf(stderr, "memline: %s: %s\n", ra->output ? ra->output : dv->name,
			strerror(-err));
	if (err < 0)
		rc = ML_EXIT_FAIL;
	if (out && out != stdout && special && fclose(out) != 0 && rc == 0) {
		fprintf(stderr, "memline: cannot write %s: %s\n", ra->output, strerror(errno));
		rc = ML_EXIT_FAIL;
	} else if (out && out != stdout && !special &&
		   (fclose(out) != 0 || rc != 0 || rename(tmp, ra->output) != 0)) {
		if (rc == 0)
			fprintf(stderr, "memline: cannot write %s: %s\n", ra->output, strerror(errno));
		unlink(tmp);
		rc = ML_EXIT_FAIL;
	}
	if (out == stdout && fflush(stdout) != 0)
		rc = ML_EXIT_FAIL;
	free(tmp);
	return rc;
}

int ml_cli_report(int argc, char **argv)
{
	struct report_args ra = { 0 };
	struct ml_profile **profiles = NULL;
	char *newest = NULL;
	int rc = parse_args(argc, argv, &ra);
	if (rc)
		goto out;
	if (ra.n_files == 0) {
		newest = newest_profile();
		if (!newest) {
			fprintf(stderr, "memline: no memline.*.mlp profile in the current directory; "
				"run `memline run -- PROG` first or name a profile file\n");
			rc = ML_EXIT_FAIL;
			goto out;
		}
		ra.files[ra.n_files++] = newest;
	}
	profiles = calloc(ra.n_files, sizeof(*profiles));
	rc = profiles ? load_all(&ra, profiles) : ML_EXIT_FAIL;
	if (rc)
		goto out;
	struct loaded base = { 0 };
	struct ml_profile *base_profile = NULL;
	if (ra.vo.base_path) {
		ra.vo.diff_measure = ra.view == VIEW_PEAK ? 1 : ra.view == VIEW_LEAKS ? 2 : 0;
		rc = load_base(&ra, &base_profile, &base);
		if (rc)
			goto out;
		ra.vo.base = base.agg;
	}
	ra.vo.t0_realtime_ns = UINT64_MAX;
	for (size_t i = 0; i < ra.n_files; i++)
		if (profiles[i]->meta.start_realtime_ns < ra.vo.t0_realtime_ns)
			ra.vo.t0_realtime_ns = profiles[i]->meta.start_realtime_ns;
	if (docviews[ra.view]) {
		rc = report_document(&ra, profiles);
	} else {
		struct ml_json json, *j = NULL;
		if (ra.json) {
			j = &json;
			ml_json_init(j, stdout);
			if (ra.n_files > 1)
				ml_json_array_begin(j);
		}
		for (size_t i = 0; i < ra.n_files; i++)
			if (report_one(&ra, profiles[i], i == 0, j, NULL, NULL))
				rc = ML_EXIT_FAIL;
		if (j && (rc == 0 || ra.n_files > 1)) {
			if (ra.n_files > 1)
				ml_json_array_end(j);
			ml_json_finish(j);
		}
	}
	unload(&base);
	if (base_profile)
		ml_profile_free(base_profile);
out:
	for (size_t i = 0; profiles && i < ra.n_files; i++)
		if (profiles[i])
			ml_profile_free(profiles[i]);
	free(profiles);
	free(newest);
	free(ra.files);
	free(ra.functions);
	return rc;
}
