/* report/report.h - the report library's API for its users (the memline
 * command, cli/): load a profile, then show one view of it, as text or as
 * a JSON document.  report/ reads, symbolizes, aggregates and renders; it
 * never parses a command line. */
#ifndef ML_REPORT_REPORT_H
#define ML_REPORT_REPORT_H

#include <stdbool.h>
#include <stdio.h>
#include "common/kinds.h"
#include "report/json.h"
#include "report/merge.h"	/* ml_profile_merge */
#include "report/profile.h"	/* ml_profile_load, ml_profile_free */
#include "report/runs.h"	/* runs, their processes, selections */
#include "report/views.h"	/* struct ml_view_opts, ops sort keys, ml_kind_list */

enum ml_report_view {
	ML_VIEW_NONE = -1,
	ML_VIEW_LEAKS,
	ML_VIEW_PEAK,
	ML_VIEW_OPS,
	ML_VIEW_LINES,
	ML_VIEW_REGIONS,
	ML_VIEW_TIMELINE,
	ML_VIEW_FLAME,
	ML_VIEW_FOLDED,
	ML_VIEW_HTML,		/* documents: one of every profile (below) */
	ML_VIEW_TRACE,
	ML_VIEW_PPROF,
	ML_VIEW_PROCESSES,	/* of a set of runs: ml_report_processes */
	ML_VIEW_COUNT,
};

/* The view called name, or ML_VIEW_NONE. */
enum ml_report_view ml_report_view_parse(const char *name);
/* A view's name ("leaks", ...). */
const char *ml_report_view_name(enum ml_report_view view);
/* Every view's name, separated by ", " (a static string). */
const char *ml_report_view_list(void);

/* The kind the views show of p when none is asked for: cpu (heap and
 * Python objects) for a profile with Python objects, else heap. */
enum ml_kind ml_report_default_kind(const struct ml_profile *p);

/* A profile symbolized and aggregated, to be subtracted (--base: vo->base
 * is ml_report_agg of it).  ml_report_load returns 0, or -1 after one
 * error line on stderr. */
struct ml_report_loaded;
int ml_report_load(const struct ml_profile *p, struct ml_report_loaded **out);
const struct ml_agg *ml_report_agg(const struct ml_report_loaded *l);
void ml_report_unload(struct ml_report_loaded *l);

/* Views that are one document of every profile (html, trace, pprof), and
 * which of them are binary (refuse a terminal). */
bool ml_report_view_is_document(enum ml_report_view view);
bool ml_report_view_is_binary(enum ml_report_view view);

/* Writes the document view of profiles[0..n) to out.  Returns 0, or -1
 * after one error line on stderr (out may then hold part of it). */
int ml_report_document(struct ml_profile *const *profiles, size_t n, enum ml_report_view view,
		       const struct ml_view_opts *vo, FILE *out);

/* Symbolizes and aggregates profile p, then shows view (not a document
 * view, not processes) with options vo:
 * as text on stdout when j is NULL (after a "==> file <==" header when
 * header is set; first: no blank line before it), else as one JSON
 * document appended to j (nothing appended when the view fails).  With
 * vo->base, ops, peak and leaks show what changed (view_diff.c).
 * Returns 0, or -1 after one error line on stderr. */
int ml_report_show(const struct ml_profile *p, enum ml_report_view view,
		   const struct ml_view_opts *vo, bool header, bool first, struct ml_json *j);

/* The processes view: every process of rs's runs as a tree, with how each
 * began and ended, its rank and host, and its heap totals; as text on out
 * when j is NULL, else as one JSON document (report/view_processes.c). */
void ml_report_processes(const struct ml_runset *rs, FILE *out, struct ml_json *j);

#endif
