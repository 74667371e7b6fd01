/* report/resolver.c - the real struct ml_resolver: the libdw symbolizer behind
 * the aggregation's seam (tests use a fake one instead). */
#include "report/resolver.h"

static int resolve(void *ctx, uint64_t addr, bool return_address,
		   const struct ml_frame **frames, size_t *n)
{
	return ml_sym_resolve(ctx, addr, return_address, frames, n);
}

static int function_source(void *ctx, const char *name, const char **file,
			   int *first_line, int *last_line)
{
	return ml_sym_function_source(ctx, name, file, first_line, last_line);
}

static int function_sources(void *ctx, const char *name, struct ml_sym_source *out, size_t max)
{
	return ml_sym_function_sources(ctx, name, out, max);
}

void ml_resolver_from_symbolizer(struct ml_resolver *r, struct ml_symbolizer *s)
{
	r->ctx = s;
	r->resolve = resolve;
	r->function_source = function_source;
	r->function_sources = function_sources;
}
