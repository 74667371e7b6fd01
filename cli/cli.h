/* cli/cli.h - the memline command line: `run` and `report` (internal to cli/). */
#ifndef ML_CLI_CLI_H
#define ML_CLI_CLI_H

#include <stddef.h>
#include <stdio.h>

/* Exit codes besides the program's own. */
#define ML_EXIT_FAIL 1		/* a report could not be made */
#define ML_EXIT_USAGE 2		/* invalid command line */
#define ML_EXIT_CANNOT_RUN 126	/* program not executable, or not preloadable */
#define ML_EXIT_NOT_FOUND 127	/* program not found */

/* `memline run [opts] [--] PROG ARGS`: argv[0] is "run".  Returns the
 * program's exit status (128 + signal if it was killed), or an ML_EXIT_*
 * code after one line on stderr. */
int ml_cli_run(int argc, char **argv);

/* `memline report [FILE...] VIEW [opts]`: argv[0] is "report".  Returns 0,
 * ML_EXIT_FAIL or ML_EXIT_USAGE. */
int ml_cli_report(int argc, char **argv);

/* The full usage text. */
void ml_cli_usage(FILE *out);

/* Prints "memline: <message> (see `memline --help`)" on stderr and returns
 * ML_EXIT_USAGE. */
int ml_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Where PROG is: a name with a slash is taken as a path, otherwise PATH is
 * searched like execvp does.  Writes the path to out.  Returns 0, -ENOENT
 * (not found), -EACCES (found but not executable) or -EISDIR. */
int ml_prog_resolve(const char *prog, char *out, size_t len);

/* The shell that runs an executable file exec refuses (ENOEXEC: a script
 * without #!), as execvp(3) and shells do. */
#define ML_SCRIPT_SHELL "/bin/sh"

/* Checks that LD_PRELOAD can work for the program at path: a dynamically
 * linked ELF (it has PT_INTERP), not setuid/setgid, or a #! script whose
 * interpreter passes the same check, or a file without #! that /bin/sh
 * runs (when /bin/sh passes the check).  Returns 0, or -1 after writing
 * one reason line (without "memline: ") to why. */
int ml_prog_check_preloadable(const char *path, const char *shown, char *why, size_t len);

/* Makes the directory of a run of prog whose pid is pid, in out_abs:
 * memline.<prog>[.rank<N>].<pid>[.<n>] (the next n when the name is taken).
 * Writes its path to dir.  Returns 0 or -errno. */
#include <sys/types.h>
int ml_rundir_create(const char *out_abs, const char *prog, pid_t pid, char *dir, size_t len);

/* After the run: one line on stderr naming the directory (shown as shown),
 * how many profiles it holds and the main program's; the runtime's
 * warnings the program's stderr did not show; an empty directory is
 * removed. */
void ml_rundir_summarize(const char *dir, const char *shown);

#endif
