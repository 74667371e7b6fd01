/* report/view_common.c - what several views share: totals of a kind, stack
 * ordering by a field, and "N bytes (1.50 KiB)" text. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/view_common.h"
#include "report/units.h"
#include "report/regfile.h"
#include "report/series.h"

struct ml_amount ml_view_totals(const struct ml_agg *a, enum ml_kind kind)
{
	const struct ml_profile *p = a->profile;
	struct ml_amount t = a->totals[kind];
	if (kind == ML_KIND_CPU) {
		/* The file's totals of heap and python; their peak is one. */
		struct ml_amount sum = { 0 };
		bool any = false;
		for (int k = 0; k < ML_KIND_COUNT; k++) {
			if (!ml_kind_in_cpu((enum ml_kind)k))
				continue;
			struct ml_amount one = ml_view_totals(a, (enum ml_kind)k);
			ml_amount_add(&sum, &one);
			if (p->kinds_present & (1u << k)) {
				sum.peak_bytes = p->totals[k].peak_bytes;
				any = true;
			}
		}
		if (!any)
			sum.peak_bytes = t.peak_bytes;
		return sum;
	}
	if (p->kinds_present & (1u << kind)) {
		const struct ml_fmt_total *ft = &p->totals[kind];
		t.allocs = ft->allocs;
		t.alloc_bytes = ft->alloc_bytes;
		t.frees = ft->frees;
		t.freed_bytes = ft->freed_bytes;
		t.live_blocks = ft->live_blocks;
		t.live_bytes = ft->live_bytes;
		/* A kind sharing its peak with another (heap and python: the
		 * CPU peak) has in the file the shared total's peak; its own
		 * peak is its part of that moment: its counters' sum. */
		if (!ml_series_peak_shared(p, kind))
			t.peak_bytes = ft->peak_bytes;
	}
	return t;
}

uint64_t ml_view_peak_time(const struct ml_agg *a, enum ml_kind kind)
{
	const struct ml_profile *p = a->profile;
	if (ml_kind_is_derived(kind))
		kind = ML_KIND_HEAP;	/* cpu's peak is the heap's (common/kinds.h) */
	if (!(p->kinds_present & (1u << kind)) && ml_kind_peak_of(kind) == ML_KIND_HEAP)
		kind = ML_KIND_PYTHON;	/* a profile with Python objects and no heap */
	return (p->kinds_present & (1u << kind)) ? p->totals[kind].peak_time_ns : 0;
}

/* What ml_view_stacks sorts by (qsort_r's context). */
struct stack_order {
	enum ml_kind kind;
	bool peak;		/* bytes live at the peak, else at exit */
};

static int cmp_stack(const void *x, const void *y, void *ctx)
{
	const struct stack_order *o = ctx;
	const struct ml_agg_stack *a = *(const struct ml_agg_stack *const *)x;
	const struct ml_agg_stack *b = *(const struct ml_agg_stack *const *)y;
	const struct ml_amount *ma = ml_agg_stack_kind(a, o->kind), *mb = ml_agg_stack_kind(b, o->kind);
	uint64_t va = o->peak ? ma->peak_bytes : ma->live_bytes;
	uint64_t vb = o->peak ? mb->peak_bytes : mb->live_bytes;
	uint64_t ca = o->peak ? ma->peak_blocks : ma->live_blocks;
	uint64_t cb = o->peak ? mb->peak_blocks : mb->live_blocks;
	if (va != vb)
		return va > vb ? -1 : 1;
	if (ca != cb)
		return ca > cb ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

const struct ml_agg_stack **ml_view_stacks(const struct ml_agg *a, enum ml_kind kind,
					   bool peak, size_t *n)
{
	const struct ml_agg_stack **rows = calloc(a->n_stacks + 1, sizeof(*rows));
	*n = 0;
	if (!rows)
		return NULL;
	for (size_t i = 0; i < a->n_stacks; i++) {
		const struct ml_amount *m = ml_agg_stack_kind(&a->stacks[i], kind);
		if (peak ? m->peak_bytes || m->peak_blocks : m->live_bytes || m->live_blocks)
			rows[(*n)++] = &a->stacks[i];
	}
	struct stack_order order = { kind, peak };
	qsort_r(rows, *n, sizeof(*rows), cmp_stack, &order);
	return rows;
}

void ml_view_bytes(FILE *out, uint64_t bytes)
{
	char u[ML_UNITS_LEN];
	if (bytes < 1024)
		fprintf(out, "%llu bytes", (unsigned long long)bytes);
	else
		fprintf(out, "%llu bytes (%s)", (unsigned long long)bytes,
			ml_units_bytes(bytes, u, sizeof(u)));
}

void ml_view_bytes_est(FILE *out, uint64_t bytes, bool estimated, uint64_t var)
{
	char u[ML_UNITS_LEN];
	if (!estimated) {
		ml_view_bytes(out, bytes);
		return;
	}
	fputc('~', out);
	ml_view_bytes(out, bytes);
	fprintf(out, " +- %s", ml_units_bytes(ml_stddev(var), u, sizeof(u)));
}

size_t ml_view_limit(long limit, size_t n)
{
	return limit >= 0 && (size_t)limit < n ? (size_t)limit : n;
}

void ml_view_more(FILE *out, size_t more, const char *kind, long limit)
{
	fprintf(out, "%zu more %s%srecords not shown (--limit %ld; --limit all lists every one)\n\n",
		more, kind ? kind : "", kind ? " " : "", limit);
}

bool ml_view_is_torch(const struct ml_agg *a)
{
	const struct ml_profile *p = a->profile;
	for (size_t i = 0; i < p->n_modules; i++)
		if (p->modules[i].path && strstr(p->modules[i].path, "libc10_cuda"))
			return true;
	return false;
}

const char *ml_view_torch_note(const struct ml_agg *a)
{
	if (ml_agg_has_torch_blocks(a))
		return "PyTorch: its blocks, one per tensor as its caching allocator hands them out,\n"
		       "are kind torch_cuda (what torch.cuda.memory_allocated() counts); the\n"
		       "cuda_device, cuda_vmm or cuda_pool blocks are its segments (memory reserved).\n";
	return "PyTorch: unless it ran with PYTORCH_NO_CUDA_MEMORY_CACHING=1, the CUDA blocks\n"
	       "here are its caching allocator's segments (what the driver sees), not tensors.\n"
	       "For one block per tensor: `memline run --no-torch-cache` (sets it; slower).\n";
}

const char *ml_view_base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

bool ml_view_same_file(const char *a, const char *b)
{
	return strcmp(a, b) == 0 || strcmp(ml_view_base_name(a), ml_view_base_name(b)) == 0;
}

bool ml_view_line_mem_add(struct ml_view_line_mem *m, const struct ml_agg *a,
			  const struct ml_agg_line *l, enum ml_kind kind)
{
	m->self_bytes += ML_AGG_SELF(l, kind).alloc_bytes;
	m->total_bytes += ML_AGG_TOTAL(l, kind).alloc_bytes;
	m->peak_bytes += ML_AGG_TOTAL(l, kind).peak_bytes;
	m->leaked_bytes += ML_AGG_TOTAL(l, kind).live_bytes;
	m->allocs += ML_AGG_TOTAL(l, kind).allocs;
	m->estimated |= ML_AGG_TOTAL(l, kind).estimated;
	m->var_self += ML_AGG_SELF(l, kind).var_alloc_bytes;
	m->var_total += ML_AGG_TOTAL(l, kind).var_alloc_bytes;
	m->var_peak += ML_AGG_TOTAL(l, kind).var_peak_bytes;
	m->var_leaked += ML_AGG_TOTAL(l, kind).var_live_bytes;
	struct ml_amount gs = ml_agg_cuda_mem(a, ML_AGG_SELF_ALL(l)),
			 gt = ml_agg_cuda_mem(a, ML_AGG_TOTAL_ALL(l));
	m->cuda_self += gs.alloc_bytes;
	m->cuda_total += gt.alloc_bytes;
	m->cuda_peak += gt.peak_bytes;
	m->cuda_leaked += gt.live_bytes;
	m->torch = ml_agg_has_torch_blocks(a);
	const struct ml_amount *freed = &ML_AGG_TOTAL(l, ML_KIND_TORCH_CUDA_FREED);
	struct ml_amount rsvd = m->torch ? ml_amount_gpu(ML_AGG_TOTAL_ALL(l)) : (struct ml_amount){ 0 };
	if (m->torch) {
		m->cuda_net += (int64_t)(gt.alloc_bytes - freed->alloc_bytes);
		m->cuda_reserved += rsvd.alloc_bytes;
	}
	return ML_AGG_TOTAL(l, kind).allocs || ML_AGG_TOTAL(l, kind).alloc_bytes || gt.allocs ||
	       (m->torch && (freed->allocs || rsvd.allocs));
}

int ml_view_line_cuda_header(FILE *out, bool torch)
{
	if (torch)
		return fprintf(out, " %12s %12s %12s %12s %12s", "CUDA Alloc", "CUDA Net", "CUDA Peak",
			       "CUDA Leaked", "CUDA Rsvd");
	return fprintf(out, " %12s %12s %12s", "CUDA Alloc", "CUDA Peak", "CUDA Leaked");
}

void ml_view_line_cuda_cells(FILE *out, const struct ml_view_line_mem *m, bool any, bool torch)
{
	char ca[ML_UNITS_LEN] = "", cn[ML_UNITS_LEN] = "", cp[ML_UNITS_LEN] = "";
	char cl[ML_UNITS_LEN] = "", cr[ML_UNITS_LEN] = "";
	if (any) {
		ml_units_bytes(m->cuda_total, ca, sizeof(ca));
		ml_units_bytes_signed(m->cuda_net, cn, sizeof(cn));
		ml_units_bytes(m->cuda_peak, cp, sizeof(cp));
		ml_units_bytes(m->cuda_leaked, cl, sizeof(cl));
		ml_units_bytes(m->cuda_reserved, cr, sizeof(cr));
	}
	if (torch)
		fprintf(out, " %12s %12s %12s %12s %12s", ca, cn, cp, cl, cr);
	else
		fprintf(out, " %12s %12s %12s", ca, cp, cl);
}

void ml_view_line_mem_json(struct ml_json *j, const struct ml_view_line_mem *m, bool cuda)
{
	ml_json_key(j, "self_alloc_bytes");
	ml_json_u64(j, m->self_bytes);
	ml_json_key(j, "total_alloc_bytes");
	ml_json_u64(j, m->total_bytes);
	ml_json_key(j, "peak_bytes");
	ml_json_u64(j, m->peak_bytes);
	ml_json_key(j, "leaked_bytes");
	ml_json_u64(j, m->leaked_bytes);
	ml_json_key(j, "allocs");
	ml_json_u64(j, m->allocs);
	if (m->estimated) {
		ml_json_key(j, "estimated");
		ml_json_bool(j, true);
		ml_json_key(j, "self_alloc_bytes_stddev");
		ml_json_u64(j, ml_stddev(m->var_self));
		ml_json_key(j, "total_alloc_bytes_stddev");
		ml_json_u64(j, ml_stddev(m->var_total));
		ml_json_key(j, "peak_bytes_stddev");
		ml_json_u64(j, ml_stddev(m->var_peak));
		ml_json_key(j, "leaked_bytes_stddev");
		ml_json_u64(j, ml_stddev(m->var_leaked));
	}
	if (!cuda)
		return;
	ml_json_key(j, "cuda_self_alloc_bytes");
	ml_json_u64(j, m->cuda_self);
	ml_json_key(j, "cuda_total_alloc_bytes");
	ml_json_u64(j, m->cuda_total);
	ml_json_key(j, "cuda_peak_bytes");
	ml_json_u64(j, m->cuda_peak);
	ml_json_key(j, "cuda_leaked_bytes");
	ml_json_u64(j, m->cuda_leaked);
	if (!m->torch)
		return;
	ml_json_key(j, "cuda_net_bytes");
	ml_json_i64(j, m->cuda_net);
	ml_json_key(j, "cuda_reserved_bytes");
	ml_json_u64(j, m->cuda_reserved);
}

void ml_view_record_json(struct ml_json *j, const struct ml_agg_stack *st, uint64_t bytes,
			 uint64_t blocks)
{
	ml_json_key(j, "bytes");
	ml_json_u64(j, bytes);
	ml_json_key(j, "blocks");
	ml_json_u64(j, blocks);
	ml_json_key(j, "stack_id");
	ml_json_u64(j, st->id);
	ml_json_key(j, "truncated");
	ml_json_bool(j, st->truncated);
	ml_json_key(j, "frames");
	ml_stack_json(j, st);
}

size_t ml_view_function_sources(const struct ml_agg *a, const char *name,
				struct ml_sym_source *out, size_t max)
{
	const struct ml_resolver *r = a->resolver;
	struct ml_sym_source all[ML_VIEW_MAX_DEFS];
	int got = -ENOENT;
	memset(all, 0, sizeof(all));
	/* The ops table's label of a name several files define ("parse
	 * (pipeline.py)") names that one definition. */
	const struct ml_agg_func *pick = NULL;
	for (size_t i = 0; i < a->n_funcs && !pick; i++)
		if (a->funcs[i].label && strcmp(a->funcs[i].label, name) == 0)
			pick = &a->funcs[i];
	if (pick)
		name = pick->name;
	if (r->function_sources)
		got = r->function_sources(r->ctx, name, all, ML_VIEW_MAX_DEFS);
	else if (r->function_source &&
		 r->function_source(r->ctx, name, &all[0].file, &all[0].first_line,
				    &all[0].last_line) == 0)
		got = 1;
	size_t n = 0;
	for (int i = 0; i < got && n < max; i++) {
		const struct ml_sym_source *d = &all[i];
		bool dup = !d->file || d->first_line <= 0 || d->last_line < d->first_line ||
			   (pick && pick->file && !ml_view_same_file(d->file, pick->file));
		for (size_t k = 0; k < n && !dup; k++)
			dup = out[k].first_line == d->first_line && strcmp(out[k].file, d->file) == 0 &&
			      (out[k].name == d->name ||
			       (out[k].name && d->name && strcmp(out[k].name, d->name) == 0));
		if (!dup) {
			out[n] = *d;
			if (pick && !out[n].name)
				out[n].name = pick->name;
			n++;
		}
	}
	return n;
}

void ml_view_no_function(const struct ml_agg *a, const char *name)
{
	if (a->profile->n_pycodes)
		fprintf(stderr, "memline: no Python function '%s' ran in this profile, and the "
			"debug info of %s has no function of that name; check the name (see "
			"`memline report ops --by function`)\n", name, a->profile->exe);
	else
		fprintf(stderr, "memline: function '%s' not found in the debug info of %s; "
			"check the name (see `memline report ops`)\n", name, a->profile->exe);
}

bool ml_view_load_source(const struct ml_agg *a, const char *file, const char *name, bool quiet,
			 struct ml_source *src, bool *modified)
{
	uint64_t started = a->profile->meta.start_realtime_ns;
	char why[256];
	int err = ml_source_load(file, src);

	if (modified)
		*modified = false;
	if (err < 0) {
		if (quiet)
			return false;
		if (err == -ENOENT || err == -ENOTDIR)
			snprintf(why, sizeof(why), "not found");
		else
			ml_regfile_why(err, NULL, why, sizeof(why));
		fprintf(stderr, "memline: warning: source file %s: %s; printing the lines of %s "
			"without Line Contents\n", file, why, name);
		return false;
	}
	if (started && src->mtime_ns > 0 && (uint64_t)src->mtime_ns > started) {
		if (modified)
			*modified = true;
		if (!quiet)
			fprintf(stderr, "memline: warning: source file %s was modified after the "
				"profiled run started; its Line Contents may not be the lines "
				"that ran\n", src->path);
	}
	return true;
}
