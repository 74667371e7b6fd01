/* report/coverage.h - exact line and call counts of a program built with
 * gcc --coverage (read from gcov's own JSON output, gcov --json-format
 * --stdout) or clang -fprofile-instr-generate -fcoverage-mapping (llvm-profdata
 * merge, then llvm-cov export -format=lcov), never counted by us. */
#ifndef ML_REPORT_COVERAGE_H
#define ML_REPORT_COVERAGE_H

#include <stdbool.h>
#include <stdint.h>

struct ml_cov;

/* gcc: finds the .gcda files the executable at exe writes (their paths
 * are strings inside it), runs gcov on each and keeps the counts.  clang:
 * when exe carries LLVM's profile runtime, reads the raw profile named by
 * $LLVM_PROFILE_FILE (without % patterns), else default.profraw in the
 * directory of profile_path, else in the current directory.  Returns 1 and
 * *out when counts were found, 0 when the program is not instrumented (or
 * the tools or data are missing: a warning), -errno on failure.
 * data_after_ns: data older than this (CLOCK_REALTIME ns; 0: no check) is
 * from an earlier run: warn. */
int ml_cov_load(const char *exe, const char *profile_path, uint64_t data_after_ns,
		struct ml_cov **out);
void ml_cov_free(struct ml_cov *c);

/* The execution count of file:line (file compared by path, else by base
 * name).  False when gcov has no count for that line. */
bool ml_cov_line(const struct ml_cov *c, const char *file, int line, uint64_t *count);
/* How often function name was called.  False when unknown. */
bool ml_cov_calls(const struct ml_cov *c, const char *name, uint64_t *calls);
/* True when gcov knows the file. */
bool ml_cov_has_file(const struct ml_cov *c, const char *file);

#endif
