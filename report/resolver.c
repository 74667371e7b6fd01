/* report/resolver.c - the real struct ml_resolver: the libdw symbolizer for
 * native frames and report/pyframes.h for Python frames, behind the
 * aggregation's seam (tests use a fake one instead). */
#include <errno.h>
#include "report/resolver.h"

static int resolve(void *ctx, uint64_t addr, bool return_address,
		   const struct ml_frame **frames, size_t *n)
{
	struct ml_report_syms *s = ctx;
	if (ml_pyframe_is(addr)) {
		*frames = ml_pyframes_resolve(s->py, addr);
		*n = *frames ? 1 : 0;
		return *frames ? 0 : -ENOENT;
	}
	return ml_sym_resolve(s->sym, addr, return_address, frames, n);
}

static int function_source(void *ctx, const char *name, const char **file,
			   int *first_line, int *last_line)
{
	struct ml_report_syms *s = ctx;
	return ml_sym_function_source(s->sym, name, file, first_line, last_line);
}

/* Python definitions first; native ones when there is none (or with
 * --native). */
static int function_sources(void *ctx, const char *name, struct ml_sym_source *out, size_t max)
{
	struct ml_report_syms *s = ctx;
	int py = ml_pyframes_function_sources(s->py, name, out, max);
	size_t n = py > 0 ? (size_t)py : 0;
	if (n && !s->native)
		return (int)n;
	int native = n < max ? ml_sym_function_sources(s->sym, name, out + n, max - n) : -ENOENT;
	n += native > 0 ? (size_t)native : 0;
	return n ? (int)n : -ENOENT;
}

static bool py_is_eval(void *ctx, uint64_t addr, bool exact, const char *fn)
{
	struct ml_report_syms *s = ctx;
	return ml_pyframes_is_eval(s->py, addr, exact, fn);
}

static bool py_in_interpreter(void *ctx, uint64_t addr)
{
	struct ml_report_syms *s = ctx;
	return ml_pyframes_in_interpreter(s->py, addr);
}

void ml_resolver_init(struct ml_resolver *r, struct ml_report_syms *syms)
{
	r->ctx = syms;
	r->resolve = resolve;
	r->function_source = function_source;
	r->function_sources = function_sources;
	r->py_is_eval = syms->py ? py_is_eval : NULL;
	r->py_in_interpreter = syms->py ? py_in_interpreter : NULL;
}
