/* report/view_ops.c - the ops view: one row per function in the PyTorch
 * profiler's key_averages().table() layout, sortable by PyTorch's keys. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/view_common.h"
#include "report/units.h"
#include "report/ops_time.h"

static const char *const key_names[ML_OPS_KEY_COUNT] = {
	[ML_OPS_SELF_CPU_MEMORY_USAGE] = "self_cpu_memory_usage",
	[ML_OPS_CPU_MEMORY_USAGE] = "cpu_memory_usage",
	[ML_OPS_COUNT] = "count",
	[ML_OPS_PEAK_CPU_MEMORY] = "peak_cpu_memory",
	[ML_OPS_LEAKED_CPU_MEMORY] = "leaked_cpu_memory",
	[ML_OPS_SELF_PEAK_CPU_MEMORY] = "self_peak_cpu_memory",
	[ML_OPS_ALLOCS] = "allocs",
	[ML_OPS_SELF_CUDA_MEMORY_USAGE] = "self_cuda_memory_usage",
	[ML_OPS_CUDA_MEMORY_USAGE] = "cuda_memory_usage",
	[ML_OPS_SELF_CPU_TIME_TOTAL] = "self_cpu_time_total",
	[ML_OPS_CPU_TIME_TOTAL] = "cpu_time_total",
};

/* The table's columns after Name.  A CUDA column is one more entry here
 * (with its own key and kind) once the counters carry CUDA kinds. */
struct ops_column {
	const char *header;
	enum ml_ops_key key;
	bool bytes;		/* shown in binary units */
	bool cuda;		/* shown only when the profile has CUDA kinds */
};

static const struct ops_column columns[] = {
	{ "CPU Mem", ML_OPS_CPU_MEMORY_USAGE, true, false },
	{ "Self CPU Mem", ML_OPS_SELF_CPU_MEMORY_USAGE, true, false },
	{ "CUDA Mem", ML_OPS_CUDA_MEMORY_USAGE, true, true },
	{ "Self CUDA Mem", ML_OPS_SELF_CUDA_MEMORY_USAGE, true, true },
	{ "Peak CPU Mem", ML_OPS_PEAK_CPU_MEMORY, true, false },
	{ "Leaked CPU Mem", ML_OPS_LEAKED_CPU_MEMORY, true, false },
	{ "# of Allocs", ML_OPS_COUNT, false, false },
};
#define N_COLUMNS (sizeof(columns) / sizeof(columns[0]))

/* PyTorch's widths: 12 per column, the name column at most 55 wide. */
#define COLUMN_WIDTH 12
#define MAX_NAME_WIDTH 55

int ml_ops_key_parse(const char *name)
{
	for (int k = 0; k < ML_OPS_KEY_COUNT; k++)
		if (strcmp(name, key_names[k]) == 0)
			return k;
	return -1;
}

const char *ml_ops_key_name(enum ml_ops_key key)
{
	return (unsigned)key < ML_OPS_KEY_COUNT ? key_names[key] : "?";
}

const char *ml_ops_key_list(void)
{
	return "self_cpu_memory_usage, cpu_memory_usage, count, peak_cpu_memory, "
	       "leaked_cpu_memory, self_peak_cpu_memory, allocs, self_cuda_memory_usage, "
	       "cuda_memory_usage, self_cpu_time_total, cpu_time_total";
}

uint64_t ml_ops_key_value(const struct ml_agg_func *f, enum ml_ops_key key, enum ml_kind kind)
{
	switch (key) {
	case ML_OPS_SELF_CPU_MEMORY_USAGE: return f->self[kind].alloc_bytes;
	case ML_OPS_CPU_MEMORY_USAGE: return f->total[kind].alloc_bytes;
	case ML_OPS_COUNT: return f->self[kind].allocs;
	case ML_OPS_PEAK_CPU_MEMORY: return f->total[kind].peak_bytes;
	case ML_OPS_LEAKED_CPU_MEMORY: return f->total[kind].live_bytes;
	case ML_OPS_SELF_PEAK_CPU_MEMORY: return f->self[kind].peak_bytes;
	case ML_OPS_ALLOCS: return f->total[kind].allocs;
	case ML_OPS_SELF_CUDA_MEMORY_USAGE: return ml_amount_gpu(f->self).alloc_bytes;
	case ML_OPS_CUDA_MEMORY_USAGE: return ml_amount_gpu(f->total).alloc_bytes;
	case ML_OPS_SELF_CPU_TIME_TOTAL: return f->self_samples;
	case ML_OPS_CPU_TIME_TOTAL: return f->total_samples;
	default: return 0;
	}
}

/* What ml_ops_sort sorts by (qsort_r's context). */
struct func_order {
	enum ml_ops_key key;
	enum ml_kind kind;
};

static int cmp_func(const void *x, const void *y, void *ctx)
{
	const struct func_order *o = ctx;
	const struct ml_agg_func *a = *(const struct ml_agg_func *const *)x;
	const struct ml_agg_func *b = *(const struct ml_agg_func *const *)y;
	uint64_t va = ml_ops_key_value(a, o->key, o->kind);
	uint64_t vb = ml_ops_key_value(b, o->key, o->kind);
	if (va != vb)
		return va > vb ? -1 : 1;
	return strcmp(a->label, b->label);
}

void ml_ops_sort(const struct ml_agg_func **rows, size_t n, enum ml_ops_key key, enum ml_kind kind)
{
	struct func_order order = { key, kind };
	qsort_r(rows, n, sizeof(*rows), cmp_func, &order);
}

/* The layout of one ops view: which columns it shows. */
struct layout {
	bool cuda;			/* the CUDA columns */
	bool estimated;			/* a sampled profile: the Self +- column */
	struct ml_ops_time time;	/* the time columns (ops_time.h) */
};

static bool shown_column(const struct layout *l, size_t c)
{
	return !columns[c].cuda || l->cuda;
}

static int column_width(const struct ops_column *c)
{
	int len = (int)strlen(c->header);
	return len > COLUMN_WIDTH ? len : COLUMN_WIDTH;
}

static void dashes(const struct layout *l, FILE *out, int name_width)
{
	for (int i = 0; i < name_width; i++)
		fputc('-', out);
	fputs("  ", out);
	ml_ops_time_dashes(&l->time, out);
	for (size_t c = 0; c < N_COLUMNS; c++) {
		if (!shown_column(l, c))
			continue;
		for (int i = 0; i < column_width(&columns[c]); i++)
			fputc('-', out);
		fputs("  ", out);
	}
	for (int i = 0; l->estimated && i < COLUMN_WIDTH; i++)
		fputc('-', out);
	fputs(l->estimated ? "  \n" : "\n", out);
}

static void row_text(const struct layout *l, FILE *out, const struct ml_agg_func *f,
		     enum ml_kind kind, int name_width)
{
	char name[MAX_NAME_WIDTH + 1], cell[ML_UNITS_LEN];
	size_t len = strlen(f->label);
	if (len >= MAX_NAME_WIDTH - 3)	/* PyTorch cuts long names to 52 + "..." */
		snprintf(name, sizeof(name), "%.*s...", MAX_NAME_WIDTH - 3, f->label);
	else
		snprintf(name, sizeof(name), "%s", f->label);
	fprintf(out, "%*s  ", name_width, name);
	ml_ops_time_cells(&l->time, out, f);
	for (size_t c = 0; c < N_COLUMNS; c++) {
		if (!shown_column(l, c))
			continue;
		uint64_t v = ml_ops_key_value(f, columns[c].key, kind);
		bool est = f->total[kind].estimated;
		if (columns[c].bytes)
			(est ? ml_units_estimate : ml_units_bytes)(v, cell, sizeof(cell));
		else
			snprintf(cell, sizeof(cell), "%s%llu", est ? "~" : "", (unsigned long long)v);
		fprintf(out, "%*s  ", column_width(&columns[c]), cell);
	}
	if (l->estimated) {	/* one standard deviation of Self CPU Mem */
		ml_units_bytes(ml_stddev(f->self[kind].var_alloc_bytes), cell, sizeof(cell));
		fprintf(out, "%*s  ", COLUMN_WIDTH, cell);
	}
	fputc('\n', out);
}

static void ops_text(const struct layout *l, const struct ml_agg *a,
		     const struct ml_view_opts *o, FILE *out, const struct ml_agg_func **rows,
		     size_t n)
{
	size_t shown = ml_view_limit(o->limit, n);
	int name_width = (int)strlen("Name");
	for (size_t i = 0; i < n; i++) {
		int len = (int)strlen(rows[i]->label) + 4;
		name_width = len > name_width ? len : name_width;
	}
	if (name_width > MAX_NAME_WIDTH)
		name_width = MAX_NAME_WIDTH;
	dashes(l, out, name_width);
	fprintf(out, "%*s  ", name_width, "Name");
	ml_ops_time_header(&l->time, out);
	for (size_t c = 0; c < N_COLUMNS; c++)
		if (shown_column(l, c))
			fprintf(out, "%*s  ", column_width(&columns[c]), columns[c].header);
	if (l->estimated)
		fprintf(out, "%*s  ", COLUMN_WIDTH, "Self +-");
	fputc('\n', out);
	dashes(l, out, name_width);
	for (size_t i = 0; i < shown; i++)
		row_text(l, out, rows[i], o->kind, name_width);
	dashes(l, out, name_width);
	char u[ML_UNITS_LEN];
	fprintf(out, "Self CPU Mem total: %s%s%s%s%s\n\n", l->estimated ? "~" : "",
		ml_units_bytes(a->totals[o->kind].alloc_bytes, u, sizeof(u)),
		o->kind == ML_KIND_HEAP ? "" : " (",
		o->kind == ML_KIND_HEAP ? "" : o->kind == ML_KIND_CPU ? "heap + Python objects" :
		ml_kind_name(o->kind), o->kind == ML_KIND_HEAP ? "" : ")");
	ml_ops_time_footer(&l->time, out);
	if (l->cuda)
		fprintf(out, "Self CUDA Mem total: %s (device, managed, pool, VMM physical, arrays)\n\n",
			ml_units_bytes(ml_amount_gpu(a->totals).alloc_bytes, u, sizeof(u)));
}

static void ops_json(const struct layout *l, const struct ml_agg *a,
		     const struct ml_view_opts *o, struct ml_json *j,
		     const struct ml_agg_func **rows, size_t n)
{
	ml_json_key(j, "sort");
	ml_json_string(j, ml_ops_key_name(o->sort));
	ml_json_key(j, "self_total_bytes");
	ml_json_u64(j, a->totals[o->kind].alloc_bytes);
	if (l->cuda) {
		ml_json_key(j, "cuda_self_total_bytes");
		ml_json_u64(j, ml_amount_gpu(a->totals).alloc_bytes);
	}
	ml_ops_time_json_totals(&l->time, j);
	ml_json_key(j, "total_functions");
	ml_json_u64(j, n);
	ml_json_key(j, "functions");
	ml_json_array_begin(j);
	for (size_t i = 0; i < ml_view_limit(o->limit, n); i++) {
		ml_json_object_begin(j);
		ml_json_key(j, "name");
		ml_json_string(j, rows[i]->name);
		ml_json_key(j, "module");
		ml_json_string(j, rows[i]->module);
		ml_json_key(j, "file");
		ml_json_string(j, rows[i]->file);
		ml_json_key(j, "label");
		ml_json_string(j, rows[i]->label);
		ml_ops_time_json(&l->time, j, rows[i]);
		ml_json_key(j, "self");
		ml_json_object_begin(j);
		ml_amount_json(j, &rows[i]->self[o->kind]);
		ml_json_object_end(j);
		ml_json_key(j, "total");
		ml_json_object_begin(j);
		ml_amount_json(j, &rows[i]->total[o->kind]);
		ml_json_object_end(j);
		if (l->cuda) {
			struct ml_amount cs = ml_amount_gpu(rows[i]->self);
			struct ml_amount ct = ml_amount_gpu(rows[i]->total);
			ml_json_key(j, "cuda_self");
			ml_json_object_begin(j);
			ml_amount_json(j, &cs);
			ml_json_object_end(j);
			ml_json_key(j, "cuda_total");
			ml_json_object_begin(j);
			ml_amount_json(j, &ct);
			ml_json_object_end(j);
		}
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
}

int ml_view_ops(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j)
{
	const struct ml_agg_func **rows = calloc(a->n_funcs + 1, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	size_t n = 0;
	struct layout l;
	l.cuda = ml_agg_has_cuda(a) && ml_view_main_kind(o->kind);	/* --kind X: plain layout */
	l.estimated = a->profile->sampled;
	bool show_time = ml_ops_time_begin(&l.time, a, o);
	for (size_t i = 0; i < a->n_funcs; i++) {
		const struct ml_amount *t = &a->funcs[i].total[o->kind];
		struct ml_amount g = l.cuda ? ml_amount_gpu(a->funcs[i].total) : (struct ml_amount){ 0 };
		if (t->allocs || t->alloc_bytes || t->frees || g.allocs ||
		    (show_time && a->funcs[i].total_samples))
			rows[n++] = &a->funcs[i];
	}
	ml_ops_sort(rows, n, o->sort, o->kind);
	if (j)
		ops_json(&l, a, o, j, rows, n);
	else
		ops_text(&l, a, o, out, rows, n);
	free(rows);
	return 0;
}
