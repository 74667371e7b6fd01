/* report/ops_time.c - the ops view's time columns (see ops_time.h).  Times
 * are samples x the sampling period (estimates); CPU time avg needs a call
 * count, known only from gcov (--coverage builds), else blank. */
#include <string.h>
#include "report/ops_time.h"
#include "report/coverage.h"

#define WIDTH 12

static const char *const headers[] = { "Self CPU %", "Self CPU", "CPU total %", "CPU total",
				       "CPU time avg" };
#define N_HEADERS (sizeof(headers) / sizeof(headers[0]))

bool ml_ops_time_begin(struct ml_ops_time *t, const struct ml_agg *a,
		       const struct ml_view_opts *o)
{
	t->shown = a->profile->has_samples;
	t->period_ns = a->profile->sampling.period_ns;
	t->self_total = a->total_samples;
	t->cov = o->cov;
	return t->shown;
}

/* PyTorch's _format_time: us below 1 ms, ms below 1 s, else s. */
static void format_time(char *buf, size_t len, uint64_t ns)
{
	double us = (double)ns / 1e3;
	if (us >= 1e6)
		snprintf(buf, len, "%.3fs", us / 1e6);
	else if (us >= 1e3)
		snprintf(buf, len, "%.3fms", us / 1e3);
	else
		snprintf(buf, len, "%.3fus", us);
}

void ml_ops_time_dashes(const struct ml_ops_time *t, FILE *out)
{
	for (size_t c = 0; t->shown && c < N_HEADERS; c++) {
		for (int i = 0; i < WIDTH; i++)
			fputc('-', out);
		fputs("  ", out);
	}
}

void ml_ops_time_header(const struct ml_ops_time *t, FILE *out)
{
	for (size_t c = 0; t->shown && c < N_HEADERS; c++)
		fprintf(out, "%*s  ", WIDTH, headers[c]);
}

static double pct(const struct ml_ops_time *t, uint64_t part)
{
	return t->self_total ? 100.0 * (double)part / (double)t->self_total : 0.0;
}

void ml_ops_time_cells(const struct ml_ops_time *t, FILE *out, const struct ml_agg_func *f)
{
	char self[32], total[32], avg[32] = "", p1[32], p2[32];
	uint64_t calls;
	if (!t->shown)
		return;
	snprintf(p1, sizeof(p1), "%.2f%%", pct(t, f->self_samples));
	format_time(self, sizeof(self), f->self_samples * t->period_ns);
	snprintf(p2, sizeof(p2), "%.2f%%", pct(t, f->total_samples));
	format_time(total, sizeof(total), f->total_samples * t->period_ns);
	if (t->cov && ml_cov_calls(t->cov, f->name, &calls) && calls)
		format_time(avg, sizeof(avg), f->total_samples * t->period_ns / calls);
	fprintf(out, "%*s  %*s  %*s  %*s  %*s  ", WIDTH, p1, WIDTH, self, WIDTH, p2, WIDTH, total,
		WIDTH, avg);
}

void ml_ops_time_footer(const struct ml_ops_time *t, FILE *out)
{
	char total[32];
	if (!t->shown)
		return;
	format_time(total, sizeof(total), t->self_total * t->period_ns);
	fprintf(out, "Self CPU time total: %s\n", total);
	fprintf(out, "(times are estimated from %llu samples of %.3f ms)\n\n",
		(unsigned long long)t->self_total, (double)t->period_ns / 1e6);
}

void ml_ops_time_json(const struct ml_ops_time *t, struct ml_json *j,
		      const struct ml_agg_func *f)
{
	uint64_t calls;
	if (!t->shown)
		return;
	ml_json_key(j, "self_samples");
	ml_json_u64(j, f->self_samples);
	ml_json_key(j, "samples");
	ml_json_u64(j, f->total_samples);
	ml_json_key(j, "self_cpu_time_ns");
	ml_json_u64(j, f->self_samples * t->period_ns);
	ml_json_key(j, "cpu_time_ns");
	ml_json_u64(j, f->total_samples * t->period_ns);
	ml_json_key(j, "calls");
	if (t->cov && ml_cov_calls(t->cov, f->name, &calls))
		ml_json_u64(j, calls);
	else
		ml_json_null(j);
}

void ml_ops_time_json_totals(const struct ml_ops_time *t, struct ml_json *j)
{
	if (!t->shown)
		return;
	ml_json_key(j, "self_cpu_time_total_ns");
	ml_json_u64(j, t->self_total * t->period_ns);
	ml_json_key(j, "period_ns");
	ml_json_u64(j, t->period_ns);
}
