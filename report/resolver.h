/* report/resolver.h - builds the aggregation's resolver on a libdw symbolizer
 * (native frames) and, for a profile that ran Python, its Python frames. */
#ifndef ML_REPORT_RESOLVER_H
#define ML_REPORT_RESOLVER_H

#include "report/aggregate.h"
#include "report/pyframes.h"
#include "report/symbolize.h"

/* What the resolver resolves with; both must outlive its use.  py may be
 * NULL (no Python). */
struct ml_report_syms {
	struct ml_symbolizer *sym;
	struct ml_pyframes *py;
	/* Function lookup: a name that names Python functions names them
	 * alone (the interpreter's C main is not the script's main), unless
	 * native is set (report --native). */
	bool native;
};

/* Fills r so that it resolves through syms (kept by pointer). */
void ml_resolver_init(struct ml_resolver *r, struct ml_report_syms *syms);

#endif
