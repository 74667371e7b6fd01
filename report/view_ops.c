/* report/view_ops.c - the ops view in the PyTorch profiler's
 * key_averages().table() layout, sortable by PyTorch's keys: one row per
 * ATen operator for a program that used PyTorch (aten_ops.h: Self CPU Mem
 * is tensor storage, as torch.profiler counts it, and the op's other CPU
 * memory has columns of its own), else one row per function. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/view_common.h"
#include "report/units.h"
#include "report/ops_time.h"
#include "report/aten_ops.h"

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
	[ML_OPS_SELF_OTHER_MEMORY] = "self_other_memory_usage",
	[ML_OPS_OTHER_MEMORY] = "other_memory_usage",
	[ML_OPS_SELF_CUDA_RESERVED] = "self_cuda_reserved",
};

/* When a column is shown. */
enum shown {
	ALWAYS,
	CUDA,		/* the profile has CUDA kinds */
	TORCH_CUDA,	/* the profile has PyTorch's CUDA blocks */
};

/* The table's columns after Name (and the time columns). */
struct ops_column {
	const char *header;
	enum ml_ops_key key;
	bool bytes;		/* shown in binary units */
	enum shown shown;
};

static const struct ops_column function_columns[] = {
	{ "CPU Mem", ML_OPS_CPU_MEMORY_USAGE, true, ALWAYS },
	{ "Self CPU Mem", ML_OPS_SELF_CPU_MEMORY_USAGE, true, ALWAYS },
	{ "CUDA Mem", ML_OPS_CUDA_MEMORY_USAGE, true, CUDA },
	{ "Self CUDA Mem", ML_OPS_SELF_CUDA_MEMORY_USAGE, true, CUDA },
	{ "Self CUDA Rsvd", ML_OPS_SELF_CUDA_RESERVED, true, TORCH_CUDA },
	{ "Peak CPU Mem", ML_OPS_PEAK_CPU_MEMORY, true, ALWAYS },
	{ "Leaked CPU Mem", ML_OPS_LEAKED_CPU_MEMORY, true, ALWAYS },
	{ "# of Allocs", ML_OPS_COUNT, false, ALWAYS },
};

/* By ATen op: PyTorch's memory columns count tensor storage; the op's
 * other CPU memory follows. */
static const struct ops_column op_columns[] = {
	{ "CPU Mem", ML_OPS_CPU_MEMORY_USAGE, true, ALWAYS },
	{ "Self CPU Mem", ML_OPS_SELF_CPU_MEMORY_USAGE, true, ALWAYS },
	{ "CUDA Mem", ML_OPS_CUDA_MEMORY_USAGE, true, CUDA },
	{ "Self CUDA Mem", ML_OPS_SELF_CUDA_MEMORY_USAGE, true, CUDA },
	{ "Self CUDA Rsvd", ML_OPS_SELF_CUDA_RESERVED, true, TORCH_CUDA },
	{ "Other CPU Mem", ML_OPS_OTHER_MEMORY, true, ALWAYS },
	{ "Self Other Mem", ML_OPS_SELF_OTHER_MEMORY, true, ALWAYS },
	{ "Peak CPU Mem", ML_OPS_PEAK_CPU_MEMORY, true, ALWAYS },
	{ "# of Allocs", ML_OPS_COUNT, false, ALWAYS },
};

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
	       "cuda_memory_usage, self_cpu_time_total, cpu_time_total, "
	       "self_other_memory_usage, other_memory_usage, self_cuda_reserved";
}

uint64_t ml_ops_key_value(const struct ml_agg_func *f, enum ml_ops_key key, enum ml_kind kind)
{
	switch (key) {
	case ML_OPS_SELF_CPU_MEMORY_USAGE: return ML_AGG_SELF(f, kind).alloc_bytes;
	case ML_OPS_CPU_MEMORY_USAGE: return ML_AGG_TOTAL(f, kind).alloc_bytes;
	case ML_OPS_COUNT: return ML_AGG_SELF(f, kind).allocs;
	case ML_OPS_PEAK_CPU_MEMORY: return ML_AGG_TOTAL(f, kind).peak_bytes;
	case ML_OPS_LEAKED_CPU_MEMORY: return ML_AGG_TOTAL(f, kind).live_bytes;
	case ML_OPS_SELF_PEAK_CPU_MEMORY: return ML_AGG_SELF(f, kind).peak_bytes;
	case ML_OPS_ALLOCS: return ML_AGG_TOTAL(f, kind).allocs;
	case ML_OPS_SELF_CUDA_MEMORY_USAGE: return ml_amount_gpu(ML_AGG_SELF_ALL(f)).alloc_bytes;
	case ML_OPS_CUDA_MEMORY_USAGE: return ml_amount_gpu(ML_AGG_TOTAL_ALL(f)).alloc_bytes;
	case ML_OPS_SELF_CPU_TIME_TOTAL: return f->self_samples;
	case ML_OPS_CPU_TIME_TOTAL: return f->total_samples;
	case ML_OPS_SELF_CUDA_RESERVED: return ml_amount_gpu(ML_AGG_SELF_ALL(f)).alloc_bytes;
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

/* The layout of one ops view: its rows, which columns it shows. */
struct layout {
	const struct ml_agg *a;
	const struct ml_aten_ops *ops;	/* rows are ATen ops; NULL: functions */
	const struct ops_column *columns;
	size_t n_columns;
	bool cuda;			/* the CUDA columns */
	bool torch_blocks;		/* CUDA Mem is PyTorch's blocks */
	bool estimated;			/* a sampled profile: the Self +- column */
	bool sites;			/* by op, with Python call sites: Called From */
	struct ml_ops_time time;	/* the time columns (ops_time.h) */
};

/* By ATen op, PyTorch's memory columns are net, as torch.profiler counts
 * them: what the op allocated less what was freed while it ran (the free
 * events of aten_ops.h); an op can free more than it allocates. */
static int64_t net(const struct ml_amount *slots, const signed char *kind_slot, enum ml_kind kind,
		   enum ml_kind freed)
{
	return (int64_t)(ml_kind_slot_amount(slots, kind_slot, kind)->alloc_bytes -
			 ml_kind_slot_amount(slots, kind_slot, freed)->alloc_bytes);
}

/* A row's value for key: ml_ops_key_value, with CUDA Mem as the profile
 * defines it (ml_agg_cuda_mem) and the ATen rows' own columns. */
static int64_t value(const struct layout *l, const struct ml_agg_func *f, enum ml_ops_key key,
		     enum ml_kind kind)
{
	bool op_cpu = l->ops && ml_aten_ops_cpu_kind(kind);
	bool op_cuda = l->ops && l->torch_blocks;
	switch (key) {
	case ML_OPS_SELF_CPU_MEMORY_USAGE:
		return op_cpu ? net(f->self_slots, f->kind_slot, kind, ML_KIND_TORCH_CPU_FREED) : (int64_t)ML_AGG_SELF(f, kind).alloc_bytes;
	case ML_OPS_CPU_MEMORY_USAGE:
		return op_cpu ? net(f->total_slots, f->kind_slot, kind, ML_KIND_TORCH_CPU_FREED) : (int64_t)ML_AGG_TOTAL(f, kind).alloc_bytes;
	case ML_OPS_SELF_CUDA_MEMORY_USAGE:
		return op_cuda ? net(f->self_slots, f->kind_slot, ML_KIND_TORCH_CUDA, ML_KIND_TORCH_CUDA_FREED)
			       : (int64_t)ml_agg_cuda_mem(l->a, ML_AGG_SELF_ALL(f)).alloc_bytes;
	case ML_OPS_CUDA_MEMORY_USAGE:
		return op_cuda ? net(f->total_slots, f->kind_slot, ML_KIND_TORCH_CUDA, ML_KIND_TORCH_CUDA_FREED)
			       : (int64_t)ml_agg_cuda_mem(l->a, ML_AGG_TOTAL_ALL(f)).alloc_bytes;
	case ML_OPS_SELF_OTHER_MEMORY:
		return l->ops ? (int64_t)ml_aten_row_of(f)->other_self[kind].alloc_bytes : 0;
	case ML_OPS_OTHER_MEMORY:
		return l->ops ? (int64_t)ml_aten_row_of(f)->other_total[kind].alloc_bytes : 0;
	default: return (int64_t)ml_ops_key_value(f, key, kind);
	}
}

struct row_order {
	const struct layout *l;
	enum ml_ops_key key;
	enum ml_kind kind;
};

/* A row with its sort key's value, found once before sorting. */
struct keyed_row {
	int64_t v;
	const struct ml_agg_func *f;
};

static int cmp_row(const void *x, const void *y)
{
	const struct keyed_row *a = x, *b = y;
	if (a->v != b->v)
		return a->v > b->v ? -1 : 1;
	return strcmp(a->f->label, b->f->label);
}

/* Sorts rows[0..n) by value (largest first), then label.  0 or -ENOMEM. */
static int sort_rows(const struct row_order *o, const struct ml_agg_func **rows, size_t n)
{
	struct keyed_row *k = malloc((n + 1) * sizeof(*k));
	if (!k)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		k[i] = (struct keyed_row){ value(o->l, rows[i], o->key, o->kind), rows[i] };
	qsort(k, n, sizeof(*k), cmp_row);
	for (size_t i = 0; i < n; i++)
		rows[i] = k[i].f;
	free(k);
	return 0;
}

static bool shown_column(const struct layout *l, size_t c)
{
	switch (l->columns[c].shown) {
	case CUDA: return l->cuda;
	case TORCH_CUDA: return l->cuda && l->torch_blocks;
	default: return true;
	}
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
	for (size_t c = 0; c < l->n_columns; c++) {
		if (!shown_column(l, c))
			continue;
		for (int i = 0; i < column_width(&l->columns[c]); i++)
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
	for (size_t c = 0; c < l->n_columns; c++) {
		if (!shown_column(l, c))
			continue;
		int64_t v = value(l, f, l->columns[c].key, kind);
		bool est = ML_AGG_TOTAL(f, kind).estimated;
		if (l->columns[c].bytes && est && v >= 0)
			ml_units_estimate((uint64_t)v, cell, sizeof(cell));
		else if (l->columns[c].bytes)
			ml_units_bytes_signed(v, cell, sizeof(cell));
		else
			snprintf(cell, sizeof(cell), "%s%lld", est ? "~" : "", (long long)v);
		fprintf(out, "%*s  ", column_width(&l->columns[c]), cell);
	}
	if (l->estimated) {	/* one standard deviation of Self CPU Mem */
		ml_units_bytes(ml_stddev(ML_AGG_SELF(f, kind).var_alloc_bytes), cell, sizeof(cell));
		fprintf(out, "%*s  ", COLUMN_WIDTH, cell);
	}
	const struct ml_aten_row *r = l->ops ? ml_aten_row_of(f) : NULL;
	if (l->sites && r->n_sites) {
		fprintf(out, "%s:%d", ml_view_base_name(r->sites[0].frame->file), r->sites[0].frame->line);
		if (r->n_sites > 1)
			fprintf(out, " (+%zu more)", r->n_sites - 1);
	}
	fputc('\n', out);
}

/* The footer of the table by function. */
static void function_footer(const struct layout *l, const struct ml_view_opts *o, FILE *out)
{
	const struct ml_agg *a = l->a;
	char u[ML_UNITS_LEN];
	fprintf(out, "Self CPU Mem total: %s%s%s%s%s\n\n", l->estimated ? "~" : "",
		ml_units_bytes(a->totals[o->kind].alloc_bytes, u, sizeof(u)),
		o->kind == ML_KIND_HEAP ? "" : " (",
		o->kind == ML_KIND_HEAP ? "" : o->kind == ML_KIND_CPU ? "heap + Python objects" :
		ml_kind_name(o->kind), o->kind == ML_KIND_HEAP ? "" : ")");
	ml_ops_time_footer(&l->time, out);
	if (l->cuda && l->torch_blocks)
		fprintf(out, "Self CUDA Mem total: %s (PyTorch's CUDA blocks)\n\n",
			ml_units_bytes(ml_agg_cuda_mem(a, a->totals).alloc_bytes, u, sizeof(u)));
	else if (l->cuda)
		fprintf(out, "Self CUDA Mem total: %s (device, managed, pool, VMM physical, arrays)\n\n",
			ml_units_bytes(ml_amount_gpu(a->totals).alloc_bytes, u, sizeof(u)));
}

/* The footer of the table by ATen op: where the rest of the memory went,
 * and what the columns mean where they differ from torch.profiler's. */
static void op_footer(const struct layout *l, enum ml_kind kind, FILE *out)
{
	const struct ml_aten_ops *ops = l->ops;
	struct ml_amount self = { 0 }, other = { 0 }, outside = { 0 };
	char u1[ML_UNITS_LEN], u2[ML_UNITS_LEN], u3[ML_UNITS_LEN];
	int64_t net_self = 0;
	for (size_t i = 0; i < ops->n_rows; i++) {
		ml_amount_add(&self, &ML_AGG_SELF(&ops->rows[i].f, kind));
		if (ml_aten_ops_cpu_kind(kind))
			net_self -= (int64_t)ML_AGG_SELF(&ops->rows[i].f, ML_KIND_TORCH_CPU_FREED).alloc_bytes;
		ml_amount_add(&other, &ops->rows[i].other_self[kind]);
	}
	net_self += (int64_t)self.alloc_bytes;
	ml_amount_add(&outside, &ops->outside[kind]);
	fprintf(out, "Self CPU Mem total: %s of tensor storage allocated in ops, %s net of what "
		"they freed (%s in %llu blocks in all)\n",
		ml_units_bytes(self.alloc_bytes, u1, sizeof(u1)),
		ml_units_bytes_signed(net_self, u3, sizeof(u3)),
		ml_units_bytes(ops->tensor_total.alloc_bytes, u2, sizeof(u2)),
		(unsigned long long)ops->tensor_total.allocs);
	fprintf(out, "Self Other Mem total: %s of other CPU memory in ops; outside any op: %s\n",
		ml_units_bytes(other.alloc_bytes, u1, sizeof(u1)),
		ml_units_bytes(outside.alloc_bytes, u3, sizeof(u3)));
	if (l->cuda) {
		struct ml_amount c = ml_agg_cuda_mem(l->a, l->a->totals);
		fprintf(out, "Self CUDA Mem total: %s (%s)", ml_units_bytes(c.alloc_bytes, u1, sizeof(u1)),
			l->torch_blocks ? "PyTorch's CUDA blocks" : "device, managed, pool, VMM physical, arrays");
		if (l->torch_blocks)
			fprintf(out, "; reserved (segments): %s",
				ml_units_bytes(ml_amount_gpu(l->a->totals).alloc_bytes, u2, sizeof(u2)));
		fputc('\n', out);
	}
	fputc('\n', out);
	ml_ops_time_footer(&l->time, out);
	fprintf(out, "Op names: %s.  # of Calls is not shown: memline counts allocations (# of "
		"Allocs: tensor storage blocks), not calls.\n\n",
		ops->exact ? "from PyTorch's operator schemas"
			   : "C++ ids (the profile has no operator schemas: name_overload)");
}

static void ops_text(const struct layout *l, const struct ml_view_opts *o, FILE *out,
		     const struct ml_agg_func **rows, size_t n)
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
	for (size_t c = 0; c < l->n_columns; c++)
		if (shown_column(l, c))
			fprintf(out, "%*s  ", column_width(&l->columns[c]), l->columns[c].header);
	if (l->estimated)
		fprintf(out, "%*s  ", COLUMN_WIDTH, "Self +-");
	if (l->sites)
		fputs("Called From", out);
	fputc('\n', out);
	dashes(l, out, name_width);
	for (size_t i = 0; i < shown; i++)
		row_text(l, out, rows[i], o->kind, name_width);
	dashes(l, out, name_width);
	if (l->ops)
		op_footer(l, o->kind, out);
	else
		function_footer(l, o, out);
	if (shown < n)
		fprintf(out, "%zu more %s not shown (--limit %ld; --limit all lists every one)\n",
			n - shown, l->ops ? "ops" : "functions", o->limit);
}

static void amount_field(struct ml_json *j, const char *key, const struct ml_amount *m)
{
	ml_json_key(j, key);
	ml_json_object_begin(j);
	ml_amount_json(j, m);
	ml_json_object_end(j);
}

/* The op's Python call sites (aten_ops.h), the most bytes first. */
static void sites_json(struct ml_json *j, const struct ml_aten_row *r)
{
	ml_json_key(j, "called_from");
	ml_json_array_begin(j);
	for (size_t i = 0; i < r->n_sites; i++) {
		const struct ml_aten_site *s = &r->sites[i];
		ml_json_object_begin(j);
		ml_json_key(j, "function");
		ml_json_string(j, s->frame->function);
		ml_json_key(j, "file");
		ml_json_string(j, s->frame->file);
		ml_json_key(j, "line");
		ml_json_u64(j, (uint64_t)s->frame->line);
		ml_json_key(j, "cpu_bytes");
		ml_json_u64(j, s->cpu_bytes);
		ml_json_key(j, "cuda_bytes");
		ml_json_u64(j, s->cuda_bytes);
		ml_json_key(j, "allocs");
		ml_json_u64(j, s->allocs);
		ml_json_key(j, "samples");
		ml_json_u64(j, s->samples);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
}

static void row_json(const struct layout *l, const struct ml_view_opts *o, struct ml_json *j,
		     const struct ml_agg_func *f)
{
	ml_json_object_begin(j);
	ml_json_key(j, "name");
	ml_json_string(j, f->name);
	if (!l->ops) {
		ml_json_key(j, "module");
		ml_json_string(j, f->module);
		ml_json_key(j, "file");
		ml_json_string(j, f->file);
	}
	ml_json_key(j, "label");
	ml_json_string(j, f->label);
	ml_ops_time_json(&l->time, j, f);
	amount_field(j, "self", &ML_AGG_SELF(f, o->kind));
	amount_field(j, "total", &ML_AGG_TOTAL(f, o->kind));
	if (l->ops) {
		/* torch.profiler's numbers, under its names: net, signed. */
		static const enum ml_ops_key torch_keys[] = {
			ML_OPS_SELF_CPU_MEMORY_USAGE, ML_OPS_CPU_MEMORY_USAGE,
			ML_OPS_SELF_CUDA_MEMORY_USAGE, ML_OPS_CUDA_MEMORY_USAGE,
		};
		for (size_t k = 0; k < sizeof(torch_keys) / sizeof(torch_keys[0]); k++) {
			if (k >= 2 && !l->cuda)
				break;
			ml_json_key(j, ml_ops_key_name(torch_keys[k]));
			ml_json_i64(j, value(l, f, torch_keys[k], o->kind));
		}
		amount_field(j, "other_self", &ml_aten_row_of(f)->other_self[o->kind]);
		amount_field(j, "other_total", &ml_aten_row_of(f)->other_total[o->kind]);
		amount_field(j, "freed_self", &ML_AGG_SELF(f, ML_KIND_TORCH_CPU_FREED));
		amount_field(j, "freed_total", &ML_AGG_TOTAL(f, ML_KIND_TORCH_CPU_FREED));
		sites_json(j, ml_aten_row_of(f));
	}
	if (l->cuda) {
		struct ml_amount cs = ml_agg_cuda_mem(l->a, ML_AGG_SELF_ALL(f));
		struct ml_amount ct = ml_agg_cuda_mem(l->a, ML_AGG_TOTAL_ALL(f));
		amount_field(j, "cuda_self", &cs);
		amount_field(j, "cuda_total", &ct);
		if (l->torch_blocks) {
			struct ml_amount rs = ml_amount_gpu(ML_AGG_SELF_ALL(f));
			amount_field(j, "cuda_reserved_self", &rs);
			amount_field(j, "cuda_freed_self", &ML_AGG_SELF(f, ML_KIND_TORCH_CUDA_FREED));
			amount_field(j, "cuda_freed_total", &ML_AGG_TOTAL(f, ML_KIND_TORCH_CUDA_FREED));
		}
	}
	ml_json_object_end(j);
}

static void ops_json(const struct layout *l, const struct ml_view_opts *o, struct ml_json *j,
		     const struct ml_agg_func **rows, size_t n)
{
	const struct ml_agg *a = l->a;
	ml_json_key(j, "sort");
	ml_json_string(j, ml_ops_key_name(o->sort));
	ml_json_key(j, "by");
	ml_json_string(j, l->ops ? "op" : "function");
	ml_json_key(j, "self_total_bytes");
	ml_json_u64(j, a->totals[o->kind].alloc_bytes);
	if (l->ops) {
		ml_json_key(j, "op_names_exact");
		ml_json_bool(j, l->ops->exact);
		amount_field(j, "tensor_storage", &l->ops->tensor_total);
		ml_json_key(j, "outside_ops_samples");
		ml_json_u64(j, l->ops->outside_samples);
	}
	if (l->cuda) {
		ml_json_key(j, "cuda_self_total_bytes");
		ml_json_u64(j, ml_agg_cuda_mem(a, a->totals).alloc_bytes);
		ml_json_key(j, "cuda_torch_blocks");
		ml_json_bool(j, l->torch_blocks);
		ml_json_key(j, "cuda_reserved_total_bytes");
		ml_json_u64(j, ml_amount_gpu(a->totals).alloc_bytes);
	}
	ml_ops_time_json_totals(&l->time, j);
	ml_json_key(j, l->ops ? "total_ops" : "total_functions");
	ml_json_u64(j, n);
	ml_json_key(j, l->ops ? "ops" : "functions");
	ml_json_array_begin(j);
	for (size_t i = 0; i < ml_view_limit(o->limit, n); i++)
		row_json(l, o, j, rows[i]);
	ml_json_array_end(j);
}

/* Whether f is a row worth showing. */
static bool row_shown(const struct layout *l, const struct ml_agg_func *f, enum ml_kind kind)
{
	const struct ml_amount *t = &ML_AGG_TOTAL(f, kind);
	struct ml_amount g = l->cuda ? ml_agg_cuda_mem(l->a, ML_AGG_TOTAL_ALL(f)) : (struct ml_amount){ 0 };
	struct ml_amount r = l->cuda ? ml_amount_gpu(ML_AGG_TOTAL_ALL(f)) : (struct ml_amount){ 0 };
	bool other = l->ops && ml_aten_row_of(f)->other_total[kind].allocs;
	bool freed = l->ops && (ML_AGG_TOTAL(f, ML_KIND_TORCH_CPU_FREED).allocs ||
				ML_AGG_TOTAL(f, ML_KIND_TORCH_CUDA_FREED).allocs);
	return t->allocs || t->alloc_bytes || t->frees || g.allocs || r.allocs || other || freed ||
	       (l->time.shown && f->total_samples);
}

static int show(struct layout *l, const struct ml_view_opts *o, FILE *out, struct ml_json *j)
{
	const struct ml_agg *a = l->a;
	size_t n_all = l->ops ? l->ops->n_rows : a->n_funcs, n = 0;
	const struct ml_agg_func **rows = calloc(n_all + 1, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	l->cuda = ml_agg_has_cuda(a) && ml_view_main_kind(o->kind);	/* --kind X: plain layout */
	l->torch_blocks = ml_agg_has_torch_blocks(a);
	l->estimated = a->profile->sampled;
	ml_ops_time_begin(&l->time, a, o);
	for (size_t i = 0; i < n_all; i++) {
		const struct ml_agg_func *f = l->ops ? &l->ops->rows[i].f : &a->funcs[i];
		if (row_shown(l, f, o->kind))
			rows[n++] = f;
	}
	for (size_t i = 0; l->ops && i < n && !l->sites; i++)
		l->sites = ml_aten_row_of(rows[i])->n_sites > 0;
	struct row_order order = { l, o->sort, o->kind };
	if (sort_rows(&order, rows, n) < 0) {
		free(rows);
		return -ENOMEM;
	}
	if (j)
		ops_json(l, o, j, rows, n);
	else
		ops_text(l, o, out, rows, n);
	free(rows);
	return 0;
}

int ml_view_ops(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j)
{
	struct layout l = { .a = a, .columns = function_columns,
			    .n_columns = sizeof(function_columns) / sizeof(function_columns[0]) };
	struct ml_aten_ops *ops = NULL;
	if (o->by == ML_OPS_BY_OP || (o->by == ML_OPS_BY_AUTO && ml_view_main_kind(o->kind))) {
		int err = ml_aten_ops_build(a, &ops);
		if (err < 0)
			return err;
		if (ops->n_rows || o->by == ML_OPS_BY_OP) {
			l.ops = ops;
			l.columns = op_columns;
			l.n_columns = sizeof(op_columns) / sizeof(op_columns[0]);
		}
	}
	int err = show(&l, o, out, j);
	ml_aten_ops_free(ops);
	return err;
}
