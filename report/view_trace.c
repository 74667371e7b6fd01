/* report/view_trace.c - the Chrome trace event format (JSON), which
 * Perfetto and chrome://tracing load: per process, a counter track of live
 * bytes per kind, the regions and NVTX ranges as slices on their threads,
 * and each kind's peak as an instant event. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/json.h"
#include "report/series.h"
#include "report/spans.h"
#include "report/views.h"

struct trace_doc {
	char *buf;
	size_t len;
	FILE *mem;		/* the events, comma separated */
	size_t events;
};

static int trace_begin(const struct ml_view_opts *o, void **state)
{
	struct trace_doc *d = calloc(1, sizeof(*d));
	(void)o;
	if (!d || !(d->mem = open_memstream(&d->buf, &d->len))) {
		free(d);
		return -ENOMEM;
	}
	*state = d;
	return 0;
}

/* Starts one event object: the comma, then {"ph":..,"pid":..,"tid":.. */
static void event(struct trace_doc *d, const char *ph, uint64_t pid, uint64_t tid)
{
	fprintf(d->mem, "%s\n{\"ph\":\"%s\",\"pid\":%llu,\"tid\":%llu", d->events++ ? "," : "", ph,
		(unsigned long long)pid, (unsigned long long)tid);
}

static void ts(struct trace_doc *d, const char *key, uint64_t ns)
{
	fprintf(d->mem, ",\"%s\":%llu.%03llu", key, (unsigned long long)(ns / 1000),
		(unsigned long long)(ns % 1000));
}

static void name(struct trace_doc *d, const char *s)
{
	fputs(",\"name\":", d->mem);
	ml_json_write_escaped(d->mem, s);
}

static void metadata(struct trace_doc *d, const struct ml_profile *p)
{
	char label[512];
	const char *exe = p->meta.argc ? p->argv[0] : p->exe;
	const char *slash = strrchr(exe, '/');
	snprintf(label, sizeof(label), "%s (pid %llu)", slash ? slash + 1 : exe,
		 (unsigned long long)p->meta.pid);
	event(d, "M", p->meta.pid, p->meta.pid);
	name(d, "process_name");
	fputs(",\"args\":{\"name\":", d->mem);
	ml_json_write_escaped(d->mem, label);
	fputs("}}", d->mem);
}

static void counters(struct trace_doc *d, const struct ml_profile *p, uint64_t off,
		     const struct ml_series *s)
{
	char track[64];
	snprintf(track, sizeof(track), "%s live bytes", ml_kind_name(s->kind));
	for (size_t i = 0; i <= s->n; i++) {
		event(d, "C", p->meta.pid, p->meta.pid);
		name(d, track);
		ts(d, "ts", off + (i ? s->time_ns[i - 1] : 0));
		fprintf(d->mem, ",\"args\":{\"bytes\":%llu}}",
			(unsigned long long)(i ? s->bytes[i - 1] : 0));
	}
	char label[96];
	snprintf(label, sizeof(label), "peak %s", ml_kind_name(s->kind));
	event(d, "i", p->meta.pid, p->meta.pid);
	name(d, label);
	ts(d, "ts", off + s->peak_time_ns);
	fprintf(d->mem, ",\"s\":\"p\",\"args\":{\"bytes\":%llu}}", (unsigned long long)s->peak_bytes);
}

/* Names the threads the slices are on: "main" for the process's own
 * thread, "thread TID" for the others (each once). */
static int cmp_tid(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* Names the threads the slices are on: "main" for the process's own
 * thread, "thread TID" for the others, each once. */
static int thread_names(struct trace_doc *d, const struct ml_profile *p)
{
	uint32_t *tids = calloc(p->n_spans + 1, sizeof(*tids));
	if (!tids)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_spans; i++)
		tids[i] = p->spans[i].tid;
	qsort(tids, p->n_spans, sizeof(*tids), cmp_tid);
	for (size_t i = 0; i < p->n_spans; i++) {
		if (i && tids[i] == tids[i - 1])
			continue;
		char label[64];
		if (tids[i] == p->meta.pid)
			snprintf(label, sizeof(label), "main");
		else
			snprintf(label, sizeof(label), "thread %u", tids[i]);
		event(d, "M", p->meta.pid, tids[i]);
		name(d, "thread_name");
		fprintf(d->mem, ",\"args\":{\"name\":\"%s\"}}", label);
	}
	free(tids);
	return 0;
}

static int slices(struct trace_doc *d, const struct ml_profile *p, uint64_t off)
{
	char path[512];
	if (thread_names(d, p) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_spans; i++) {
		const struct ml_fmt_span *sp = &p->spans[i];
		const struct ml_region *r = ml_spans_region(p, sp->region);
		event(d, "X", p->meta.pid, sp->tid);
		name(d, r ? r->name : "?");
		fprintf(d->mem, ",\"cat\":\"%s\"", r && (r->flags & ML_REGION_NVTX) ? "nvtx" : "region");
		ts(d, "ts", off + sp->start_ns);
		ts(d, "dur", sp->end_ns - sp->start_ns);
		fputs(",\"args\":{\"path\":", d->mem);
		ml_json_write_escaped(d->mem, ml_spans_path(p, sp->region, path, sizeof(path)));
		fputs("}}", d->mem);
	}
	return 0;
}

static int trace_add(void *state, const struct ml_agg *a, const struct ml_view_opts *o)
{
	struct trace_doc *d = state;
	const struct ml_profile *p = a->profile;
	struct ml_series *s;
	size_t n;
	/* Processes are placed by their start times, the earliest at 0. */
	uint64_t off = p->meta.start_realtime_ns > o->t0_realtime_ns
			       ? p->meta.start_realtime_ns - o->t0_realtime_ns : 0;
	if (ml_series_build(p, &s, &n) < 0)
		return -ENOMEM;
	metadata(d, p);
	for (size_t i = 0; i < n; i++)
		counters(d, p, off, &s[i]);
	int err = slices(d, p, off);
	ml_series_free(s, n);
	return err < 0 ? err : ferror(d->mem) ? -EIO : 0;
}

static int trace_end(void *state, FILE *out)
{
	struct trace_doc *d = state;
	int err = 0;
	if (fclose(d->mem) != 0)
		err = -ENOMEM;
	if (out && err == 0) {
		fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"memline\","
		      "\"schema\":\"memline.trace\",\"version\":1},\"traceEvents\":[", out);
		fwrite(d->buf, 1, d->len, out);
		fputs("\n]}\n", out);
		if (ferror(out))
			err = -EIO;
	}
	free(d->buf);
	free(d);
	return err;
}

const struct ml_docview ml_docview_trace = {
	.name = "trace", .begin = trace_begin, .add = trace_add, .end = trace_end,
};
