/* report/runs.h - profiles as the processes of runs.  `memline run` writes
 * one profile per process into a directory of its own (a run); here the
 * profiles of one or more runs (or loose profile files) are read, each
 * process is linked to the image it came from (exec) or the process that
 * started it (fork, spawn), each run's main program is found, and the
 * processes a report should show are selected. */
#ifndef ML_REPORT_RUNS_H
#define ML_REPORT_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "report/profile.h"

#define ML_NO_PROC ((size_t)-1)

/* How a process image began. */
enum ml_proc_start {
	ML_START_ROOT,		/* nothing in the set started it (the run's program) */
	ML_START_FORK,		/* a fork child of a profiled process */
	ML_START_EXEC,		/* exec'd by the image before it (same pid) */
	ML_START_SPAWN,		/* exec'd in a new process (posix_spawn, vfork + exec, ...) */
};

struct ml_proc {
	struct ml_profile *p;	/* read with ml_profile_load_meta: META, TOTALS, PROCESS, WARNINGS */
	size_t run;		/* index in ml_runset.runs */
	size_t parent;		/* the image it came from, or ML_NO_PROC */
	enum ml_proc_start start;
	unsigned depth;		/* fork and spawn levels below its run's root */
	bool main;		/* its run's main program */
	bool selected;		/* ml_runset_select chose it */
	size_t seq;		/* the order it was read in */
};

struct ml_run {
	const char *dir;	/* its directory, or NULL for profile files named one by one */
	uint64_t run_pid;	/* the pid `memline run` started (0: unknown) */
	size_t main;		/* the main program's index, or ML_NO_PROC (it left no profile) */
	size_t n_procs;
};

struct ml_runset {
	struct ml_proc *procs;	/* by run, then in tree order (parents first) */
	size_t n;
	struct ml_run *runs;
	size_t n_runs;
};

/* Reads the profiles at paths: a profile file, or a run's directory (every
 * memline.*.mlp in it).  Returns 0, or -errno after writing a one-line
 * reason, naming the path, to err. */
int ml_runset_load(struct ml_runset *rs, char *const *paths, size_t n, char *err, size_t errlen);
void ml_runset_free(struct ml_runset *rs);

/* What to report.  With no pid, rank or program, the base is each run's
 * main program (and every profile file named one by one). */
struct ml_select {
	const uint64_t *pids;	/* the last image of each pid */
	size_t n_pids;
	const int64_t *ranks;	/* the topmost process of each rank */
	size_t n_ranks;
	const char *const *programs;	/* every process running one (exe or argv[0] base name) */
	size_t n_programs;
	bool all;		/* every process */
	bool children;		/* instead of the base: every process it started, directly or not */
};

/* Marks the selected processes.  Returns how many, or 0 after writing why
 * none to err ("no process with pid 42 in ..."). */
size_t ml_runset_select(struct ml_runset *rs, const struct ml_select *sel, char *err,
			size_t errlen);

/* The base name of the program a process ran (its executable's). */
const char *ml_proc_program(const struct ml_proc *pr);

/* "fork", "exec", "spawn" or "run". */
const char *ml_proc_start_name(enum ml_proc_start s);

#endif
