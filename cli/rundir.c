/* cli/rundir.c - a run's directory: `memline run` makes one per run, before
 * the program starts, and every process of the run writes its profile in
 * it; when the program has ended, one line says what is there (and the
 * runtime's warnings that the program's stderr could not show). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "report/report.h"

/* name with anything but [A-Za-z0-9._+-] replaced by '_' (as the runtime
 * names profiles). */
static void clean_name(const char *name, char *out, size_t cap)
{
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	size_t n = 0;
	for (; *base && n + 1 < cap && n < 64; base++, n++) {
		char c = *base;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '.' || c == '_' || c == '+' || c == '-';
		out[n] = ok ? c : '_';
	}
	if (!n)
		n = (size_t)snprintf(out, cap, "prog");
	out[n] = '\0';
}

/* The rank the environment gives this job's process (as the runtime reads
 * it, core/procinfo.c), or NULL. */
static const char *env_rank(void)
{
	static const char *const vars[] = { "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
					    "PMIX_RANK", "SLURM_PROCID" };
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v && *v && strspn(v, "0123456789") == strlen(v))
			return v;
	}
	return NULL;
}

int ml_rundir_create(const char *out_abs, const char *prog, pid_t pid, char *dir, size_t len)
{
	char name[80];
	const char *rank = env_rank();
	clean_name(prog, name, sizeof(name));
	for (unsigned n = 0; n < 1000; n++) {
		char suffix[24] = "";
		if (n)
			snprintf(suffix, sizeof(suffix), ".%u", n);
		int w = snprintf(dir, len, "%s/memline.%s%s%s.%d%s", out_abs, name, rank ? ".rank" : "",
				 rank ? rank : "", (int)pid, suffix);
		if (w < 0 || (size_t)w >= len)
			return -ENAMETOOLONG;
		/* A directory of a run on another host (a shared file system) or
		 * of an earlier run whose pid was the same: take the next name. */
		if (mkdir(dir, 0777) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Profiles (memline.*.mlp) in dir, and half-written ones (.tmp.). */
static size_t count_files(const char *dir, size_t *partial)
{
	DIR *d = opendir(dir);
	size_t n = 0;
	*partial = 0;
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (strncmp(de->d_name, "memline.", 8) != 0)
			continue;
		if (l > 4 && strcmp(de->d_name + l - 4, ".mlp") == 0)
			n++;
		else if (strstr(de->d_name, ".mlp.tmp."))
			(*partial)++;
	}
	closedir(d);
	return n;
}

/* Prints the runtime's warnings the program's stderr did not show. */
static void unshown_warnings(const struct ml_runset *rs)
{
	for (size_t i = 0; i < rs->n; i++) {
		const struct ml_profile *p = rs->procs[i].p;
		for (size_t w = 0; w < p->n_warnings; w++)
			if (!p->warnings[w].shown)
				fprintf(stderr, "memline: %s (pid %llu): %s\n",
					ml_proc_program(&rs->procs[i]),
					(unsigned long long)p->meta.pid, p->warnings[w].text);
	}
}

void ml_rundir_summarize(const char *dir, const char *shown)
{
	size_t partial;
	size_t n = count_files(dir, &partial);
	if (n == 0 && partial == 0) {
		fprintf(stderr, "memline: no profile was written to %s/\n", shown);
		rmdir(dir);	/* nothing to keep */
		return;
	}
	char *paths[1] = { (char *)dir };
	struct ml_runset rs = { 0 };
	char err[512] = "";
	if (n && ml_runset_load(&rs, paths, 1, err, sizeof(err)) < 0) {
		fprintf(stderr, "memline: wrote %s/ (%zu profile%s; %s)\n", shown, n,
			n == 1 ? "" : "s", err);
		ml_runset_free(&rs);
		return;
	}
	const struct ml_run *run = rs.n_runs ? &rs.runs[0] : NULL;
	if (run && run->main != ML_NO_PROC) {
		const struct ml_proc *m = &rs.procs[run->main];
		fprintf(stderr, "memline: wrote %s/ (%zu profile%s: %s, pid %llu", shown, n,
			n == 1 ? "" : "s", ml_proc_program(m), (unsigned long long)m->p->meta.pid);
		if (n > 1)
			fprintf(stderr, ", and %zu other process%s", n - 1, n == 2 ? "" : "es");
		fputs(")\n", stderr);
	} else {
		fprintf(stderr, "memline: wrote %s/ (%zu profile%s; none of the main program)\n",
			shown, n, n == 1 ? "" : "s");
	}
	if (partial)
		fprintf(stderr, "memline: %zu process%s died while writing %s profile (%s/*.tmp.*)\n",
			partial, partial == 1 ? "" : "es", partial == 1 ? "its" : "their", shown);
	unshown_warnings(&rs);
	ml_runset_free(&rs);
}
