/* report/resolver.h - builds the aggregation's resolver on a libdw symbolizer. */
#ifndef ML_REPORT_RESOLVER_H
#define ML_REPORT_RESOLVER_H

#include "report/aggregate.h"
#include "report/symbolize.h"

/* Fills r so that it resolves through s; s must outlive r's use. */
void ml_resolver_from_symbolizer(struct ml_resolver *r, struct ml_symbolizer *s);

#endif
