/* report/runs.c - profiles as the processes of runs (runs.h): reading a
 * run's directory, linking each image to the one it came from, finding the
 * main program, and selecting what to report. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "report/runs.h"

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- reading ---- */

static int add_proc(struct ml_runset *rs, const char *path, size_t run, char *err, size_t errlen)
{
	char why[256] = "";
	struct ml_profile *p;
	int rc = ml_profile_load_meta(path, &p, why, sizeof(why));
	if (rc < 0)
		return fail(err, errlen, rc, "%s: %s", path, why[0] ? why : strerror(-rc));
	struct ml_proc *more = realloc(rs->procs, (rs->n + 1) * sizeof(*more));
	if (!more) {
		ml_profile_free(p);
		return fail(err, errlen, -ENOMEM, "out of memory");
	}
	rs->procs = more;
	rs->procs[rs->n] = (struct ml_proc){ .p = p, .run = run, .parent = ML_NO_PROC, .seq = rs->n };
	rs->n++;
	rs->runs[run].n_procs++;
	return 0;
}

static bool is_profile_name(const char *name)
{
	size_t len = strlen(name);
	return strncmp(name, "memline.", 8) == 0 && len > 12 && strcmp(name + len - 4, ".mlp") == 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every memline.*.mlp in dir, as one run. */
static int add_dir(struct ml_runset *rs, const char *dir, size_t run, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	if (!d)
		return fail(err, errlen, -errno, "%s: cannot open: %s", dir, strerror(errno));
	char **names = NULL;
	size_t n = 0;
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!is_profile_name(de->d_name))
			continue;
		char **more = realloc(names, (n + 1) * sizeof(*names));
		size_t len = strlen(dir) + strlen(de->d_name) + 2;
		char *path = malloc(len);
		if (!more || !path) {
			free(path);
			if (more)
				names = more;
			rc = fail(err, errlen, -ENOMEM, "out of memory");
			break;
		}
		names = more;
		snprintf(path, len, "%s/%s", dir, de->d_name);
		names[n++] = path;
	}
	closedir(d);
	if (!rc && n == 0)
		rc = fail(err, errlen, -ENOENT, "%s: no memline profile in this directory", dir);
	if (!rc)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; !rc && i < n; i++)
		rc = add_proc(rs, names[i], run, err, errlen);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* ---- linking ---- */

static uint64_t start_of(const struct ml_proc *pr)
{
	return pr->p->meta.start_realtime_ns;
}

/* The image i came from within [lo, hi): the latest earlier image of its
 * pid that ended in exec, else the latest image of its parent's pid that
 * started no later than it. */
static size_t find_parent(const struct ml_runset *rs, size_t lo, size_t hi, size_t i,
			  enum ml_proc_start *how)
{
	const struct ml_proc *me = &rs->procs[i];
	size_t best = ML_NO_PROC;
	for (size_t j = lo; j < hi; j++) {
		const struct ml_proc *o = &rs->procs[j];
		if (j != i && o->p->meta.pid == me->p->meta.pid && start_of(o) <= start_of(me) &&
		    o->p->meta.end_reason == ML_END_EXEC &&
		    (best == ML_NO_PROC || start_of(o) > start_of(&rs->procs[best])))
			best = j;
	}
	if (best != ML_NO_PROC) {
		*how = ML_START_EXEC;
		return best;
	}
	uint64_t parent_pid = me->p->process.parent_pid;
	for (size_t j = lo; j < hi; j++) {
		const struct ml_proc *o = &rs->procs[j];
		if (j != i && o->p->meta.pid == parent_pid && start_of(o) <= start_of(me) &&
		    (best == ML_NO_PROC || start_of(o) > start_of(&rs->procs[best])))
			best = j;
	}
	*how = best == ML_NO_PROC ? ML_START_ROOT :
		(me->p->meta.flags & ML_META_FORKED) ? ML_START_FORK : ML_START_SPAWN;
	return best;
}

/* By run; in a directory's run by start time, else in the order named. */
static int cmp_start(const void *a, const void *b, void *arg)
{
	const struct ml_proc *x = a, *y = b;
	const struct ml_runset *rs = arg;
	if (x->run != y->run)
		return x->run < y->run ? -1 : 1;
	if (!rs->runs[x->run].dir)
		return x->seq < y->seq ? -1 : x->seq > y->seq;
	if (start_of(x) != start_of(y))
		return start_of(x) < start_of(y) ? -1 : 1;
	return x->p->meta.pid < y->p->meta.pid ? -1 : x->p->meta.pid > y->p->meta.pid;
}

/* Tree order from image i: i, the processes it started (each with its
 * subtree, one level deeper), then the image it exec'd (same level). */
static void order_from(struct ml_runset *rs, size_t lo, size_t hi, size_t i, unsigned depth,
		       size_t *order, size_t *n)
{
	for (;;) {
		rs->procs[i].depth = depth;
		order[(*n)++] = i;
		size_t next = ML_NO_PROC;
		for (size_t j = lo; j < hi; j++) {
			if (rs->procs[j].parent != i)
				continue;
			if (rs->procs[j].start == ML_START_EXEC) {
				if (next == ML_NO_PROC)
					next = j;
			} else {
				order_from(rs, lo, hi, j, depth + 1, order, n);
			}
		}
		if (next == ML_NO_PROC)
			return;
		i = next;
	}
}

/* The run's pid (what most profiles say), its main program, its order. */
static int link_run(struct ml_runset *rs, size_t run, size_t lo, size_t hi)
{
	struct ml_run *r = &rs->runs[run];
	for (size_t i = lo; i < hi; i++)
		rs->procs[i].parent = find_parent(rs, lo, hi, i, &rs->procs[i].start);
	/* Parents may come later than children when clocks disagree: break
	 * any cycle so that the order below terminates. */
	for (size_t i = lo; i < hi; i++) {
		size_t steps = 0;
		for (size_t k = rs->procs[i].parent; k != ML_NO_PROC; k = rs->procs[k].parent)
			if (k == i || ++steps > hi - lo) {
				rs->procs[i].parent = ML_NO_PROC;
				rs->procs[i].start = ML_START_ROOT;
				break;
			}
	}
	r->run_pid = 0;
	for (size_t i = lo; i < hi && !r->run_pid; i++)
		r->run_pid = rs->procs[i].p->process.run_pid;
	r->main = ML_NO_PROC;
	if (!r->dir) {
		/* Profile files named one by one keep their order; no main. */
		for (size_t i = lo; i < hi; i++)
			for (size_t c = i; rs->procs[c].parent != ML_NO_PROC; c = rs->procs[c].parent)
				rs->procs[i].depth += rs->procs[c].start != ML_START_EXEC;
		return 0;
	}
	size_t *order = malloc((hi - lo) * sizeof(*order));
	if (!order)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = lo; i < hi; i++)
		if (rs->procs[i].parent == ML_NO_PROC)
			order_from(rs, lo, hi, i, 0, order, &n);
	/* Permute into tree order, remapping parent indexes. */
	size_t *where = malloc((hi - lo) * sizeof(*where));
	struct ml_proc *tmp = malloc((hi - lo) * sizeof(*tmp));
	if (!where || !tmp || n != hi - lo) {
		free(order);
		free(where);
		free(tmp);
		return n != hi - lo ? -EINVAL : -ENOMEM;
	}
	for (size_t k = 0; k < n; k++)
		where[order[k] - lo] = lo + k;
	for (size_t k = 0; k < n; k++) {
		tmp[k] = rs->procs[order[k]];
		if (tmp[k].parent != ML_NO_PROC)
			tmp[k].parent = where[tmp[k].parent - lo];
	}
	memcpy(rs->procs + lo, tmp, n * sizeof(*tmp));
	free(order);
	free(where);
	free(tmp);
	/* The main program: the last image of the run's pid; without one, of
	 * the first root's pid. */
	uint64_t pid = r->run_pid ? r->run_pid : rs->procs[lo].p->meta.pid;
	for (size_t i = lo; i < hi; i++)
		if (rs->procs[i].p->meta.pid == pid &&
		    (r->main == ML_NO_PROC || start_of(&rs->procs[i]) >= start_of(&rs->procs[r->main])))
			r->main = i;
	if (r->main != ML_NO_PROC)
		rs->procs[r->main].main = true;
	return 0;
}

int ml_runset_load(struct ml_runset *rs, char *const *paths, size_t n, char *err, size_t errlen)
{
	memset(rs, 0, sizeof(*rs));
	rs->runs = calloc(n + 1, sizeof(*rs->runs));
	if (!rs->runs)
		return fail(err, errlen, -ENOMEM, "out of memory");
	size_t loose = ML_NO_PROC;
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		struct stat st;
		if (stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			rs->runs[rs->n_runs].dir = paths[i];
			rc = add_dir(rs, paths[i], rs->n_runs++, err, errlen);
			continue;
		}
		if (loose == ML_NO_PROC)
			loose = rs->n_runs++;
		rc = add_proc(rs, paths[i], loose, err, errlen);
	}
	if (rc)
		return rc;
	qsort_r(rs->procs, rs->n, sizeof(*rs->procs), cmp_start, rs);
	for (size_t lo = 0, r = 0; r < rs->n_runs; r++) {
		size_t hi = lo + rs->runs[r].n_procs;
		rc = link_run(rs, r, lo, hi);
		if (rc)
			return fail(err, errlen, rc, "out of memory");
		lo = hi;
	}
	return 0;
}

void ml_runset_free(struct ml_runset *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		ml_profile_free(rs->procs[i].p);
	free(rs->procs);
	free(rs->runs);
	memset(rs, 0, sizeof(*rs));
}

/* ---- selecting ---- */

const char *ml_proc_program(const struct ml_proc *pr)
{
	const char *exe = pr->p->exe && pr->p->exe[0] ? pr->p->exe :
		pr->p->meta.argc ? pr->p->argv[0] : "";
	const char *slash = strrchr(exe, '/');
	return slash ? slash + 1 : exe;
}

const char *ml_proc_start_name(enum ml_proc_start s)
{
	switch (s) {
	case ML_START_FORK: return "fork";
	case ML_START_EXEC: return "exec";
	case ML_START_SPAWN: return "spawn";
	default: return "run";
	}
}

static bool runs_program(const struct ml_proc *pr, const char *name)
{
	if (strcmp(ml_proc_program(pr), name) == 0)
		return true;
	if (!pr->p->meta.argc)
		return false;
	const char *a0 = pr->p->argv[0], *slash = strrchr(a0, '/');
	return strcmp(slash ? slash + 1 : a0, name) == 0;
}

/* True when i is the topmost process of its rank (its parent has another
 * rank, or it has none). */
static bool rank_top(const struct ml_runset *rs, size_t i)
{
	size_t p = rs->procs[i].parent;
	return p == ML_NO_PROC || rs->procs[p].p->process.rank != rs->procs[i].p->process.rank;
}

/* Marks the base selection; returns false after an error message. */
static bool select_base(struct ml_runset *rs, const struct ml_select *sel, char *err,
			size_t errlen)
{
	bool named = sel->n_pids || sel->n_ranks || sel->n_programs;
	for (size_t i = 0; i < rs->n; i++) {
		struct ml_proc *pr = &rs->procs[i];
		bool in = sel->all;
		for (size_t k = 0; k < sel->n_ranks && !in; k++)
			in = pr->p->process.rank == sel->ranks[k] && rank_top(rs, i);
		for (size_t k = 0; k < sel->n_programs && !in; k++)
			in = runs_program(pr, sel->programs[k]);
		if (!named && !sel->all)
			in = pr->main || !rs->runs[pr->run].dir;
		pr->selected = in;
	}
	/* A pid: the last image of it in each run. */
	for (size_t k = 0; k < sel->n_pids; k++) {
		bool found = false;
		for (size_t r = 0, lo = 0; r < rs->n_runs; lo += rs->runs[r++].n_procs) {
			size_t last = ML_NO_PROC;
			for (size_t i = lo; i < lo + rs->runs[r].n_procs; i++)
				if (rs->procs[i].p->meta.pid == sel->pids[k] &&
				    (last == ML_NO_PROC || start_of(&rs->procs[i]) >= start_of(&rs->procs[last])))
					last = i;
			if (last != ML_NO_PROC)
				rs->procs[last].selected = found = true;
		}
		if (!found) {
			fail(err, errlen, -ENOENT, "no process with pid %llu in these profiles",
			     (unsigned long long)sel->pids[k]);
			return false;
		}
	}
	if (!named && !sel->all)
		for (size_t r = 0; r < rs->n_runs; r++)
			if (rs->runs[r].dir && rs->runs[r].main == ML_NO_PROC) {
				fail(err, errlen, -ENOENT, "%s: the main program (pid %llu) left no "
				     "profile; `memline report %s processes` lists the processes "
				     "that did", rs->runs[r].dir,
				     (unsigned long long)rs->runs[r].run_pid, rs->runs[r].dir);
				return false;
			}
	return true;
}

/* True when an ancestor of i, reached through at least one fork or spawn,
 * is in base. */
static bool descends(const struct ml_runset *rs, const bool *base, size_t i)
{
	bool started = false;
	for (size_t k = i; rs->procs[k].parent != ML_NO_PROC; k = rs->procs[k].parent) {
		started |= rs->procs[k].start != ML_START_EXEC;
		if (started && base[rs->procs[k].parent])
			return true;
	}
	return false;
}

size_t ml_runset_select(struct ml_runset *rs, const struct ml_select *sel, char *err,
			size_t errlen)
{
	if (!select_base(rs, sel, err, errlen))
		return 0;
	if (sel->children) {
		bool *base = calloc(rs->n + 1, sizeof(*base));
		if (!base) {
			fail(err, errlen, -ENOMEM, "out of memory");
			return 0;
		}
		for (size_t i = 0; i < rs->n; i++)
			base[i] = rs->procs[i].selected;
		for (size_t i = 0; i < rs->n; i++)
			rs->procs[i].selected = descends(rs, base, i);
		free(base);
	}
	size_t n = 0;
	for (size_t i = 0; i < rs->n; i++)
		n += rs->procs[i].selected;
	if (!n)
		fail(err, errlen, -ENOENT, "no process matches%s%s%s",
		     sel->children ? " (--children: the selected processes started none)" : "",
		     sel->n_ranks ? " (--rank: the rank of a process is read from RANK, "
		     "OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID)" : "",
		     sel->n_programs ? " (--program: an executable's base name)" : "");
	return n;
}
