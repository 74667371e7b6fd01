/* report/symbolize.h - addresses to functions, files and lines, with libdw. */
#ifndef ML_REPORT_SYMBOLIZE_H
#define ML_REPORT_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "report/profile.h"

/* One source-level frame.  An address in inlined code yields several: the
 * inlined callee first, its callers after, the outermost (real) function
 * last.  Strings live as long as the symbolizer. */
struct ml_frame {
	const char *function;	/* demangled; "0x1234" style when unknown */
	const char *file;	/* source path as in DWARF, NULL if unknown */
	int line;		/* 0 if unknown */
	const char *module;	/* module path */
	uint64_t module_offset;	/* address - bias */
	bool inlined;		/* an inlined call, not a real frame */
	bool runtime;		/* in libmemline itself */
	bool python;		/* a Python frame (report/pyframes.h) */
	bool own;		/* a Python frame of memline's boot code or of runpy */
};

struct ml_symbolizer;

/* Creates a symbolizer for the modules of p.  Warns once on stderr per
 * module whose build-id differs from the file on disk, or that is missing.
 * Returns 0 or -errno. */
int ml_sym_open(const struct ml_profile *p, struct ml_symbolizer **out);
void ml_sym_close(struct ml_symbolizer *s);

/* Resolves addr.  A return address is looked up at addr - 1.  Sets *frames
 * to an array of *n >= 1 frames (owned by s, valid until ml_sym_close).
 * Returns 0 or -errno. */
int ml_sym_resolve(struct ml_symbolizer *s, uint64_t addr, bool return_address,
		   const struct ml_frame **frames, size_t *n);

/* Whether the demangled function name full is want: equal, or equal
 * without its parameter list ("ns::f" for "ns::f(int) const"), or without
 * its return type and parameters ("f<int>" for "void f<int>(int)", as
 * template functions demangle).  The rule ml_sym_function_source uses. */
bool ml_sym_name_matches(const char *full, const char *want);

/* Where a function lives in the source: its file, its first line (decl line)
 * and its last line (highest line in its line table).  Functions are matched
 * as ml_sym_name_matches says.  Returns 0, -ENOENT if no module has it. */
int ml_sym_function_source(struct ml_symbolizer *s, const char *name,
			   const char **file, int *first_line, int *last_line);
/* One definition of a function in the source, as ml_sym_function_source
 * gives it. */
struct ml_sym_source {
	const char *file;
	int first_line, last_line;
	/* The function's full name where it differs from the name asked for
	 * (a Python function asked for by its plain name); NULL otherwise. */
	const char *name;
};

/* Every definition whose name matches, in module and CU order, in one walk:
 * two static functions of one name in two files are two (a header's
 * function may also be one per CU that has it).  Fills out[0..max) and
 * returns how many it filled, or -ENOENT if none. */
int ml_sym_function_sources(struct ml_symbolizer *s, const char *name,
			    struct ml_sym_source *out, size_t max);

#endif
