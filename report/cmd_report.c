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
	     VIEW_COUNT };

static const char *const view_names[] = { "leaks", "peak", "ops", "lines", "regions" };

typedef int (*view_fn)(const struct ml_agg *, const struct ml_view_opts *, FILE *, struct ml_json *);
static const view_fn view_fns[] = { ml_view_leaks, ml_view_peak, ml_view_ops, ml_view_lines,
				    ml_view_regions };

struct report_args {
	char **files;
	size_t n_files;
	enum view view;
	bool json;
	bool limit_set, sort_set, unit_set;
	struct ml_agg_opts agg;
	const char **functions;
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
	} else if (strcmp(argv[*i], "--native") == 0) {
		ra->agg.native = true;
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
	} else if ((v = opt_value(argc, argv, i, "--function", &m)), m) {
		if (!v || !*v)
			return ml_cli_usage_error("report: --function needs a function name");
		ra->functions[ra->vo.n_functions++] = v;
	} else {
		return ml_cli_usage_error("report: unknown option '%s'", argv[*i]);
	}
	return 0;
}

/* Checks the options fit the view. */
static int check_args(const struct report_args *ra)
{
	if (ra->view == VIEW_NONE && ra->n_files &&
	    access(ra->files[ra->n_files - 1], F_OK) != 0)	/* a misspelt view, not a file */
		return ml_cli_usage_error("report: unknown view '%s' (one of leaks, peak, ops, "
					  "lines, regions)", ra->files[ra->n_files - 1]);
	if (ra->view == VIEW_NONE)
		return ml_cli_usage_error("report: no view given (one of leaks, peak, ops, lines, regions)");
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
	ml_json_key(&doc, view_names[ra->view]);
	ml_json_object_begin(&doc);
	int err = view_fns[ra->view](agg, vo, NULL, &doc);
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

/* Symbolizes, aggregates and shows one profile.  Returns 0 or ML_EXIT_FAIL. */
static int report_one(const struct report_args *ra, const struct ml_profile *p, bool first,
		      struct ml_json *j)
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
	struct ml_report_syms syms = { sym, py, ra->agg.native };
	ml_resolver_init(&r, &syms);
	struct ml_view_opts vo = ra->vo;
	if (p->has_samples && (ra->view == VIEW_LINES || ra->view == VIEW_OPS) &&
	    ml_cov_load(p->exe, p->path, p->meta.start_realtime_ns, &cov) < 0)
		cov = NULL;
	vo.cov = cov;
	err = ml_agg_build_opts(p, &r, &ra->agg, &agg);
	if (err < 0) {
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
		goto out;
	}
	if (p->meta.flags & ML_META_DEGRADED)
		fprintf(stderr, "memline: warning: %s: the runtime hit internal trouble while "
			"recording; its numbers may be incomplete\n", p->path);
	if (!j && ra->n_files > 1)
		header_text(stdout, p, first);
	err = j ? show_json(ra, &vo, agg, j) : view_fns[ra->view](agg, &vo, stdout, NULL);
	/* -ENOENT: the view has said what it could not find. */
	if (err < 0 && err != -ENOENT)
		fprintf(stderr, "memline: %s: %s\n", p->path, strerror(-err));
out:
	ml_agg_free(agg);
	ml_pyframes_close(py);
	ml_cov_free(cov);
	if (sym)
		ml_sym_close(sym);
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
	struct ml_json json, *j = NULL;
	if (ra.json) {
		j = &json;
		ml_json_init(j, stdout);
		if (ra.n_files > 1)
			ml_json_array_begin(j);
	}
	for (size_t i = 0; i < ra.n_files; i++)
		if (report_one(&ra, profiles[i], i == 0, j))
			rc = ML_EXIT_FAIL;
	if (j && (rc == 0 || ra.n_files > 1)) {
		if (ra.n_files > 1)
			ml_json_array_end(j);
		ml_json_finish(j);
	}
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
