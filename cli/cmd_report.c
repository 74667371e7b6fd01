/* cli/cmd_report.c - `memline report`: parses the view and options, finds
 * the runs and profiles, picks the processes (report/runs.h), loads them,
 * and has the report library (report/report.h) show each, or their sum. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "report/report.h"

struct report_args {
	char **files;
	size_t n_files;
	enum ml_report_view view;
	bool json;
	bool limit_set, sort_set, unit_set, value_set, fraction_set, by_set;
	const char **functions;
	const char *output;		/* -o FILE */
	struct ml_view_opts vo;
	/* Which processes (report/runs.h); --merge sums them. */
	struct ml_select sel;
	uint64_t *pids;
	int64_t *ranks;
	const char **programs;
	bool merge;
};

/* Adds the numbers of a comma-separated list ("3,5,7") to out[*n]. */
static int parse_numbers(const char *v, const char *what, bool is_signed, void *out, size_t *n)
{
	if (!v || !*v)
		return ml_cli_usage_error("report: %s needs a number", what);
	char *copy = strdup(v), *save = NULL;
	if (!copy)
		return ML_EXIT_FAIL;
	int rc = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		errno = 0;
		unsigned long long x = strtoull(t, &end, 10);
		if (errno || *end || end == t || t[0] == '-') {
			rc = ml_cli_usage_error("report: %s takes numbers (%s), not '%s'", what,
						is_signed ? "ranks from 0" : "process ids", t);
			break;
		}
		if (is_signed)
			((int64_t *)out)[(*n)++] = (int64_t)x;
		else
			((uint64_t *)out)[(*n)++] = (uint64_t)x;
	}
	free(copy);
	return rc;
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
		ra->vo.native = true;
	} else if ((v = opt_value(argc, argv, i, "--limit", &m)), m) {
		char *end;
		errno = 0;
		long n = v ? strtol(v, &end, 10) : -1;
		if (v && strcmp(v, "all") == 0)
			n = -1;
		else if (!v || errno || *end || end == v || n < 0)
			return ml_cli_usage_error("report: --limit takes a number of rows (0 or more) "
						  "or 'all'");
		ra->vo.limit = n;
		ra->limit_set = true;
	} else if ((v = opt_value(argc, argv, i, "--sort", &m)), m) {
		int key = v ? ml_ops_key_parse(v) : -1;
		if (key < 0)
			return ml_cli_usage_error("report: unknown sort key '%s'; valid keys: %s",
						  v ? v : "", ml_ops_key_list());
		ra->vo.sort = (enum ml_ops_key)key;
		ra->sort_set = true;
	} else if ((v = opt_value(argc, argv, i, "--by", &m)), m) {
		if (v && strcmp(v, "op") == 0)
			ra->vo.by = ML_OPS_BY_OP;
		else if (v && strcmp(v, "function") == 0)
			ra->vo.by = ML_OPS_BY_FUNCTION;
		else
			return ml_cli_usage_error("report: --by takes op (ATen operators) or function");
		ra->by_set = true;
	} else if ((v = opt_value(argc, argv, i, "--kind", &m)), m) {
		int k = v ? ml_kind_parse(v) : -1;
		if (k < 0)
			return ml_cli_usage_error("report: unknown kind '%s'; valid kinds: %s",
						  v ? v : "", ml_kind_list());
		ra->vo.kind = (enum ml_kind)k;
		ra->vo.kind_set = true;
	} else if ((v = opt_value(argc, argv, i, "--layout", &m)), m) {
		if (v && (strcmp(v, "memory_profiler") == 0 || strcmp(v, "mprof") == 0))
			ra->vo.layout = ML_LINES_MEMORY_PROFILER;
		else if (v && (strcmp(v, "line_profiler") == 0 || strcmp(v, "kernprof") == 0))
			ra->vo.layout = ML_LINES_LINE_PROFILER;
		else
			return ml_cli_usage_error("report: unknown layout '%s' (line_profiler, "
						  "kernprof, memory_profiler)", v ? v : "");
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
	} else if ((v = opt_value(argc, argv, i, "--pid", &m)), m) {
		return parse_numbers(v, "--pid", false, ra->pids, &ra->sel.n_pids);
	} else if ((v = opt_value(argc, argv, i, "--rank", &m)), m) {
		return parse_numbers(v, "--rank", true, ra->ranks, &ra->sel.n_ranks);
	} else if ((v = opt_value(argc, argv, i, "--program", &m)), m) {
		if (!v || !*v)
			return ml_cli_usage_error("report: --program needs a program name");
		ra->programs[ra->sel.n_programs++] = v;
	} else if (strcmp(argv[*i], "--all") == 0) {
		ra->sel.all = true;
	} else if (strcmp(argv[*i], "--children") == 0) {
		ra->sel.children = true;
	} else if (strcmp(argv[*i], "--merge") == 0) {
		ra->merge = true;
	} else {
		return ml_cli_usage_error("report: unknown option '%s'", argv[*i]);
	}
	return 0;
}

/* Checks the options of the pictures and interchange views. */
static int check_picture_args(const struct report_args *ra)
{
	enum ml_report_view v = ra->view;
	bool document = ml_report_view_is_document(v);
	bool flame = v == ML_VIEW_FLAME || v == ML_VIEW_FOLDED || v == ML_VIEW_HTML ||
		     v == ML_VIEW_PPROF;
	if (ra->output && !document)
		return ml_cli_usage_error("report: -o only applies to the html, trace and pprof views");
	if (ra->value_set && v != ML_VIEW_FLAME && v != ML_VIEW_FOLDED)
		return ml_cli_usage_error("report: --value only applies to the flame and folded views");
	if (ra->fraction_set && v != ML_VIEW_FLAME && v != ML_VIEW_HTML)
		return ml_cli_usage_error("report: --node-fraction only applies to the flame and "
					  "html views");
	if (ra->vo.base_path && !flame && v != ML_VIEW_OPS && v != ML_VIEW_PEAK && v != ML_VIEW_LEAKS)
		return ml_cli_usage_error("report: --base applies to the ops, peak, leaks, flame, "
					  "folded, html and pprof views");
	if (ra->json && (v == ML_VIEW_FOLDED || document || v == ML_VIEW_FLAME))
		return ml_cli_usage_error("report: --json does not apply to the %s view",
					  ml_report_view_name(v));
	return 0;
}

/* Checks the options fit the view. */
static int check_args(const struct report_args *ra)
{
	if (ra->view == ML_VIEW_NONE && ra->n_files &&
	    access(ra->files[ra->n_files - 1], F_OK) != 0)	/* a misspelt view, not a file */
		return ml_cli_usage_error("report: unknown view '%s' (one of %s)",
					  ra->files[ra->n_files - 1], ml_report_view_list());
	if (ra->view == ML_VIEW_NONE)
		return ml_cli_usage_error("report: no view given (one of %s)", ml_report_view_list());
	int err = check_picture_args(ra);
	if (err)
		return err;
	if (ra->sort_set && ra->view != ML_VIEW_OPS)
		return ml_cli_usage_error("report: --sort only applies to the ops view");
	if (ra->by_set && ra->view != ML_VIEW_OPS)
		return ml_cli_usage_error("report: --by only applies to the ops view");
	if (ra->vo.n_functions && ra->view != ML_VIEW_LINES)
		return ml_cli_usage_error("report: --function only applies to the lines view");
	if (ra->vo.layout && ra->view != ML_VIEW_LINES)
		return ml_cli_usage_error("report: --layout only applies to the lines view");
	if (ra->vo.layout && ra->vo.top)
		return ml_cli_usage_error("report: --layout shows @profile functions; --top shows "
					  "sampled ones");
	if (ra->view == ML_VIEW_LINES && ra->vo.n_functions && ra->vo.top)
		return ml_cli_usage_error("report: lines takes --function NAME or --top N, not both");
	if ((ra->vo.top || ra->unit_set) && ra->view != ML_VIEW_LINES)
		return ml_cli_usage_error("report: --top and --unit only apply to the lines view");
	if (ra->limit_set && (ra->view == ML_VIEW_LINES || ra->view == ML_VIEW_REGIONS ||
			      ra->view == ML_VIEW_PROCESSES))
		return ml_cli_usage_error("report: --limit does not apply to the %s view",
					  ml_report_view_name(ra->view));
	bool selects = ra->sel.n_pids || ra->sel.n_ranks || ra->sel.n_programs || ra->sel.all ||
		ra->sel.children || ra->merge;
	if (ra->view == ML_VIEW_PROCESSES && selects)
		return ml_cli_usage_error("report: the processes view lists every process; "
					  "--pid, --rank, --program, --all, --children and --merge "
					  "choose what the other views show");
	if (ra->view == ML_VIEW_PROCESSES && ra->vo.kind != ML_KIND_HEAP)
		return ml_cli_usage_error("report: --kind does not apply to the processes view");
	return 0;
}

static int parse_args(int argc, char **argv, struct report_args *ra)
{
	ra->view = ML_VIEW_NONE;
	ra->vo.kind = ML_KIND_HEAP;
	ra->vo.limit = -1;
	ra->vo.sort = ML_OPS_SELF_CPU_MEMORY_USAGE;
	ra->vo.node_fraction = -1;
	ra->files = calloc((size_t)argc + 1, sizeof(*ra->files));
	ra->functions = calloc((size_t)argc + 1, sizeof(*ra->functions));
	ra->programs = calloc((size_t)argc + 1, sizeof(*ra->programs));
	/* Each argument holds at most (len + 1) / 2 comma-separated numbers. */
	size_t numbers = 1;
	for (int i = 1; i < argc; i++)
		numbers += strlen(argv[i]) / 2 + 1;
	ra->pids = calloc(numbers, sizeof(*ra->pids));
	ra->ranks = calloc(numbers, sizeof(*ra->ranks));
	if (!ra->files || !ra->functions || !ra->programs || !ra->pids || !ra->ranks)
		return ML_EXIT_FAIL;
	ra->vo.functions = ra->functions;
	ra->sel.pids = ra->pids;
	ra->sel.ranks = ra->ranks;
	ra->sel.programs = ra->programs;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] == '-' && a[1] != '\0') {
			int rc = parse_option(argc, argv, &i, ra);
			if (rc)
				return rc;
		} else if (ra->view == ML_VIEW_NONE && ml_report_view_parse(a) != ML_VIEW_NONE) {
			ra->view = ml_report_view_parse(a);
		} else if (ra->view == ML_VIEW_NONE) {
			ra->files[ra->n_files++] = argv[i];
		} else {
			return ml_cli_usage_error("report: unexpected argument '%s' after the view "
						  "(files come before it)", a);
		}
	}
	int rc = check_args(ra);
	/* leaks, peak and ops list the largest records or rows first: a
	 * PyTorch process has hundreds of thousands (gigabytes of JSON), so a
	 * hundred unless asked (torch.profiler's table() has row_limit=100) */
	if (!ra->limit_set && !ra->vo.base_path &&
	    (ra->view == ML_VIEW_LEAKS || ra->view == ML_VIEW_PEAK || ra->view == ML_VIEW_OPS))
		ra->vo.limit = ML_VIEW_RECORDS_DEFAULT;
	return rc;
}

/* True for a run's directory: memline.* holding a memline.*.mlp. */
static bool is_run_dir(const char *name)
{
	DIR *d = opendir(name);
	if (!d)
		return false;
	bool found = false;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		found = strncmp(de->d_name, "memline.", 8) == 0 && len > 12 &&
			strcmp(de->d_name + len - 4, ".mlp") == 0;
	}
	closedir(d);
	return found;
}

/* The newest run directory (memline.*) or profile (memline.*.mlp) in
 * directory dir ("." gives a bare name), in a malloc'd string, or NULL. */
static char *newest_profile(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	char *best = NULL, *path = NULL;
	struct timespec best_t = { 0, 0 };
	struct dirent *de;
	bool here = strcmp(dir, ".") == 0;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		struct stat st;
		if (strncmp(de->d_name, "memline.", 8) != 0)
			continue;
		free(path);
		if (here ? !(path = strdup(de->d_name))
			 : asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
			path = NULL;
			continue;
		}
		if (stat(path, &st) < 0)
			continue;
		bool file = S_ISREG(st.st_mode) && len > 12 && strcmp(de->d_name + len - 4, ".mlp") == 0;
		if (!file && !(S_ISDIR(st.st_mode) && is_run_dir(path)))
			continue;
		bool newer = !best || st.st_mtim.tv_sec > best_t.tv_sec ||
			     (st.st_mtim.tv_sec == best_t.tv_sec &&
			      (st.st_mtim.tv_nsec > best_t.tv_nsec ||
			       (st.st_mtim.tv_nsec == best_t.tv_nsec && strcmp(path, best) > 0)));
		if (newer) {
			free(best);
			best = path;
			path = NULL;
			best_t = st.st_mtim;
		}
	}
	free(path);
	closedir(d);
	return best;
}

/* Says, once, which process of a run with several the report shows. */
static void note_main(const struct ml_runset *rs, const struct report_args *ra)
{
	if (ra->sel.n_pids || ra->sel.n_ranks || ra->sel.n_programs || ra->sel.all ||
	    ra->sel.children)
		return;
	for (size_t r = 0; r < rs->n_runs; r++) {
		const struct ml_run *run = &rs->runs[r];
		if (!run->dir || run->n_procs < 2 || run->main == ML_NO_PROC)
			continue;
		fprintf(stderr, "memline: %s: the main program, %s (pid %llu), of %zu processes; "
			"`memline report %s processes` lists them, --pid, --rank, --program, "
			"--children or --all choose others, --merge sums them\n", run->dir,
			ml_proc_program(&rs->procs[run->main]),
			(unsigned long long)rs->procs[run->main].p->meta.pid, run->n_procs, run->dir);
	}
}

/* Loads the selected processes' whole profiles, in order, into profiles
 * (one slot per process).  A bad file fails before any output. */
static int load_selected(const struct ml_runset *rs, struct ml_profile **profiles, size_t *n)
{
	*n = 0;
	for (size_t i = 0; i < rs->n; i++) {
		if (!rs->procs[i].selected)
			continue;
		char err[256] = "";
		const char *path = rs->procs[i].p->path;
		int rc = ml_profile_load(path, &profiles[*n], err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "memline: %s: %s\n", path, err[0] ? err : strerror(-rc));
			return ML_EXIT_FAIL;
		}
		(*n)++;
	}
	return 0;
}

/* html, trace, pprof: one document of every profile, written to -o FILE
 * under a temporary name first (a failed report leaves no half file), or
 * to standard output.  A device or a pipe (/dev/stdout, a FIFO) is written
 * as it is: only a regular file is replaced by renaming.  Returns 0 or
 * ML_EXIT_FAIL. */
static int report_document(const struct report_args *ra, struct ml_profile **profiles,
			   size_t n)
{
	const char *name = ml_report_view_name(ra->view);
	bool to_stdout = !ra->output || strcmp(ra->output, "-") == 0;
	if (to_stdout && ml_report_view_is_binary(ra->view) && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "memline: the %s view is binary: give -o FILE\n", name);
		return ML_EXIT_FAIL;
	}
	struct stat st;
	bool special = !to_stdout && stat(ra->output, &st) == 0 && !S_ISREG(st.st_mode);
	char *tmp = NULL;
	FILE *out = stdout;
	if (!to_stdout) {
		if (!special && asprintf(&tmp, "%s.tmp.%d", ra->output, (int)getpid()) < 0)
			tmp = NULL;
		out = special ? fopen(ra->output, "w") : tmp ? fopen(tmp, "w") : NULL;
		if (!out) {
			fprintf(stderr, "memline: cannot write %s: %s\n", ra->output, strerror(errno));
			free(tmp);
			return ML_EXIT_FAIL;
		}
	}
	int rc = ml_report_document(profiles, n, ra->view, &ra->vo, out) < 0
		 ? ML_EXIT_FAIL : 0;
	if (to_stdout)
		return fflush(stdout) != 0 ? ML_EXIT_FAIL : rc;
	if (fclose(out) != 0 && rc == 0) {
		fprintf(stderr, "memline: cannot write %s: %s\n", ra->output, strerror(errno));
		rc = ML_EXIT_FAIL;
	}
	if (!special && rc == 0 && rename(tmp, ra->output) != 0) {
		fprintf(stderr, "memline: cannot write %s: %s\n", ra->output, strerror(errno));
		rc = ML_EXIT_FAIL;
	}
	if (!special && rc != 0)
		unlink(tmp);
	free(tmp);
	return rc;
}

/* Shows each profile in turn (text, or a JSON document each); a header
 * line names each when there are several, or when one sums several. */
static int report_each(const struct report_args *ra, struct ml_profile **profiles, size_t n)
{
	int rc = 0;
	struct ml_json json, *j = NULL;
	if (ra->json) {
		j = &json;
		ml_json_init(j, stdout);
		if (n > 1)
			ml_json_array_begin(j);
	}
	for (size_t i = 0; i < n; i++)
		if (ml_report_show(profiles[i], ra->view, &ra->vo, n > 1 || profiles[i]->n_merged,
				   i == 0, j) < 0)
			rc = ML_EXIT_FAIL;
	if (j && (rc == 0 || n > 1)) {
		if (n > 1)
			ml_json_array_end(j);
		ml_json_finish(j);
	}
	return rc;
}

/* Shows the n profiles: one by one, summed first with --merge. */
static int show_all(const struct report_args *ra, struct ml_profile **profiles, size_t n)
{
	struct ml_profile *merged = NULL;
	char name[64];
	if (ra->merge && n > 1) {
		char err[512] = "";
		snprintf(name, sizeof(name), "(%zu processes summed)", n);
		if (ml_profile_merge((const struct ml_profile *const *)profiles, n, name, &merged,
				     err, sizeof(err)) < 0) {
			fprintf(stderr, "memline: cannot merge: %s\n", err);
			return ML_EXIT_FAIL;
		}
		profiles = &merged;
		n = 1;
	}
	int rc = ml_report_view_is_document(ra->view) ? report_document(ra, profiles, n)
						       : report_each(ra, profiles, n);
	ml_profile_free(merged);
	return rc;
}

/* Loads the --base profile and points ra->vo.base at its aggregation.
 * 0 or ML_EXIT_FAIL. */
static int load_base(struct report_args *ra, struct ml_profile **p, struct ml_report_loaded **l)
{
	char err[512] = "";
	const char *path = ra->vo.base_path;
	struct ml_runset rs = { 0 };
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		/* A run: its main program. */
		char *paths[1] = { (char *)path };
		struct ml_select none = { 0 };
		if (ml_runset_load(&rs, paths, 1, err, sizeof(err)) < 0 ||
		    !ml_runset_select(&rs, &none, err, sizeof(err))) {
			fprintf(stderr, "memline: --base: %s\n", err);
			ml_runset_free(&rs);
			return ML_EXIT_FAIL;
		}
		for (size_t i = 0; i < rs.n; i++)
			if (rs.procs[i].selected)
				path = rs.procs[i].p->path;
	}
	int rc = ml_profile_load(path, p, err, sizeof(err));
	ml_runset_free(&rs);
	if (rc < 0) {
		fprintf(stderr, "memline: %s: %s\n", ra->vo.base_path, err[0] ? err : strerror(-rc));
		return ML_EXIT_FAIL;
	}
	if (ml_report_load(*p, l) < 0)
		return ML_EXIT_FAIL;
	ra->vo.base = ml_report_agg(*l);
	ra->vo.diff_measure = ra->view == ML_VIEW_PEAK ? 1 : ra->view == ML_VIEW_LEAKS ? 2 : 0;
	return 0;
}

int ml_cli_report(int argc, char **argv)
{
	struct report_args ra = { 0 };
	struct ml_runset rs = { 0 };
	struct ml_profile **profiles = NULL, *base_profile = NULL;
	struct ml_report_loaded *base = NULL;
	size_t n = 0;
	char *newest = NULL, **newest_of = NULL;
	int rc = parse_args(argc, argv, &ra);
	if (rc)
		goto out;
	/* A directory that holds runs (memline run -o DIR) stands for the
	 * newest of them, as the current directory does. */
	newest_of = calloc(ra.n_files + 1, sizeof(*newest_of));
	if (!newest_of) {
		fprintf(stderr, "memline: out of memory\n");
		rc = ML_EXIT_FAIL;
		goto out;
	}
	for (size_t i = 0; i < ra.n_files; i++) {
		struct stat st;
		if (stat(ra.files[i], &st) == 0 && S_ISDIR(st.st_mode) && !is_run_dir(ra.files[i]) &&
		    (newest_of[i] = newest_profile(ra.files[i])))
			ra.files[i] = newest_of[i];
	}
	if (ra.n_files == 0) {
		newest = newest_profile(".");
		if (!newest) {
			fprintf(stderr, "memline: no memline.* run or profile in the current directory; "
				"run `memline run -- PROG` first or name a profile file or run directory\n");
			rc = ML_EXIT_FAIL;
			goto out;
		}
		ra.files[ra.n_files++] = newest;
	}
	char err[1024] = "";
	if (ml_runset_load(&rs, ra.files, ra.n_files, err, sizeof(err)) < 0) {
		fprintf(stderr, "memline: %s\n", err);
		rc = ML_EXIT_FAIL;
		goto out;
	}
	if (ra.view == ML_VIEW_PROCESSES) {
		struct ml_json json;
		if (ra.json)
			ml_json_init(&json, stdout);
		ml_report_processes(&rs, stdout, ra.json ? &json : NULL);
		goto out;
	}
	if (!ml_runset_select(&rs, &ra.sel, err, sizeof(err))) {
		fprintf(stderr, "memline: %s\n", err);
		rc = ML_EXIT_FAIL;
		goto out;
	}
	note_main(&rs, &ra);
	profiles = calloc(rs.n + 1, sizeof(*profiles));
	rc = profiles ? load_selected(&rs, profiles, &n) : ML_EXIT_FAIL;
	if (rc == 0 && ra.vo.base_path)
		rc = load_base(&ra, &base_profile, &base);
	if (rc == 0)
		rc = show_all(&ra, profiles, n);
out:
	for (size_t i = 0; profiles && i < n; i++)
		ml_profile_free(profiles[i]);
	free(profiles);
	ml_runset_free(&rs);
	ml_report_unload(base);
	if (base_profile)
		ml_profile_free(base_profile);
	free(newest);
	for (size_t i = 0; newest_of && i < ra.n_files; i++)
		free(newest_of[i]);
	free(newest_of);
	free(ra.files);
	free(ra.functions);
	free(ra.programs);
	free(ra.pids);
	free(ra.ranks);
	return rc;
}
