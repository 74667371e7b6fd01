/* report/view_leaks.c - the leaks view: blocks live at exit grouped by stack,
 * largest first, with a valgrind-like summary. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/view_common.h"

/* Allocations of kind counted without a stack (ML_STACK_LOST: the runtime
 * had no memory for their stacks), summed. */
static struct ml_amount lost_of(const struct ml_profile *p, enum ml_kind kind)
{
	struct ml_amount t = { 0 };
	for (size_t i = 0; i < p->n_counters; i++) {
		const struct ml_fmt_counter *c = &p->counters[i];
		const struct ml_stack *s = ml_profile_stack(p, c->stack_id);
		if (c->kind == (uint32_t)kind && s && (s->flags & ML_STACK_LOST))
			ml_amount_add_counter(&t, c);
	}
	return t;
}

/* What memline itself held, from the RUNTIME section. */
static void runtime_text(FILE *out, const struct ml_profile *p)
{
	const struct ml_fmt_runtime *r = &p->runtime;
	if (!p->has_runtime)
		return;
	fputs("  memline's own memory: ", out);
	ml_view_bytes(out, r->live_table_bytes + r->stack_bytes + r->counter_bytes);
	fputs(" (live table ", out);
	ml_view_bytes(out, r->live_table_bytes);
	fprintf(out, " for %llu blocks, call stacks ", (unsigned long long)r->live_blocks);
	ml_view_bytes(out, r->stack_bytes);
	fprintf(out, " for %llu frames, counters ", (unsigned long long)r->stack_nodes);
	ml_view_bytes(out, r->counter_bytes);
	fprintf(out, " for %llu)\n", (unsigned long long)r->counters);
}

static void summary_text(FILE *out, const struct ml_agg *a, enum ml_kind kind)
{
	struct ml_amount t = ml_view_totals(a, kind), lost = lost_of(a->profile, kind);
	const char *name = ml_kind_name(kind);
	for (const char *c = name; *c; c++)
		fputc(toupper((unsigned char)*c), out);
	fputs(" SUMMARY:\n    in use at exit: ", out);
	ml_view_bytes_est(out, t.live_bytes, t.estimated, t.var_live_bytes);
	fprintf(out, " in %s%llu blocks\n", t.estimated ? "~" : "",
		(unsigned long long)t.live_blocks);
	if (a->profile->sampled && kind == ML_KIND_HEAP) {
		const struct ml_fmt_sampled *sm = &a->profile->alloc_sampling;
		fprintf(out, "  total usage (exact, every kind): %llu allocs, ",
			(unsigned long long)sm->allocs);
		ml_view_bytes(out, sm->alloc_bytes);
		fprintf(out, " allocated; %llu of them sampled\n",
			(unsigned long long)sm->samples);
	}
	fprintf(out, "  total %s usage: %s%llu allocs, %s%llu frees, ", name,
		t.estimated ? "~" : "", (unsigned long long)t.allocs, t.estimated ? "~" : "",
		(unsigned long long)t.frees);
	ml_view_bytes_est(out, t.alloc_bytes, t.estimated, t.var_alloc_bytes);
	fputs(" allocated\n", out);
	if (lost.allocs) {
		fprintf(out, "  without a call stack: %llu allocs, ", (unsigned long long)lost.allocs);
		ml_view_bytes(out, lost.alloc_bytes);
		fputs(" (counted in the totals; memline had no memory left for their stacks)\n",
		      out);
	}
	if (kind == ML_KIND_HEAP)
		runtime_text(out, a->profile);
}

/* ---- Python: what the interpreter itself holds at exit ----
 * A Python program's leaks are mostly the interpreter's own: what it
 * allocates at start-up and never frees, and the state of the modules its
 * import system loaded (valgrind calls such blocks "still reachable").  The
 * default view lists the program's blocks and sums those in one line;
 * --native lists them all. */

static bool has_prefix(const char *s, const char *prefix)
{
	return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether a native frame's module is the interpreter's (the module of its
 * eval loop, interp, and the python executable that runs it, launcher;
 * its standard library's extension modules in lib-dynload, as
 * report/pyframes.c counts them) or the C library and the loader beneath
 * it. */
static bool interpreter_module(const char *module, const char *const interp[2])
{
	const char *base = module ? strrchr(module, '/') : NULL;
	base = base ? base + 1 : module;
	for (int i = 0; i < 2; i++)
		if (module && interp[i] && strcmp(module, interp[i]) == 0)
			return true;
	return
	       (module && strstr(module, "/lib-dynload/")) ||
	       has_prefix(base, "libc.so") || has_prefix(base, "ld-linux");
}

/* Whether every frame of st is the interpreter's or its import system's
 * (<frozen importlib._bootstrap>, memline's own boot code). */
static bool interpreter_own(const struct ml_agg_stack *st, const char *const interp[2])
{
	if (!st->n_frames)
		return false;
	for (size_t i = 0; i < st->n_frames; i++) {
		const struct ml_frame *f = st->frames[i];
		if (f->python ? !(f->own || has_prefix(f->file, "<frozen importlib")) :
				!interpreter_module(f->module, interp))
			return false;
	}
	return true;
}

/* Moves the records the default view sums to the end of rows; returns how
 * many are left before them, their amounts summed into *held. */
static size_t program_rows(const struct ml_agg *a, const struct ml_view_opts *o,
			   const struct ml_agg_stack **rows, size_t n, struct ml_amount *held)
{
	*held = ml_amount_zero;
	if (!a->profile->has_python || o->native)
		return n;
	const struct ml_profile *p = a->profile;
	const struct ml_module *im = p->python.eval_lo ? ml_profile_module(p, p->python.eval_lo) : NULL;
	const char *interp[2] = { im ? im->path : NULL, NULL };
	for (size_t i = 0; i < p->n_modules; i++) {	/* the python3.X executable */
		const char *path = p->modules[i].path, *slash = path ? strrchr(path, '/') : NULL;
		if ((p->modules[i].flags & ML_MOD_MAIN) && has_prefix(slash ? slash + 1 : path, "python"))
			interp[1] = path;
	}
	size_t kept = 0;
	const struct ml_agg_stack **own = malloc(n * sizeof(*own));
	if (!own)
		return n;
	size_t n_own = 0;
	for (size_t i = 0; i < n; i++) {
		if (interpreter_own(rows[i], interp)) {
			ml_amount_add(held, ml_agg_stack_kind(rows[i], o->kind));
			own[n_own++] = rows[i];
		} else {
			rows[kept++] = rows[i];
		}
	}
	memcpy(rows + kept, own, n_own * sizeof(*own));
	free(own);
	return kept;
}

static void leaks_text(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		       const struct ml_agg_stack **rows, size_t all)
{
	struct ml_amount held;
	size_t n = program_rows(a, o, rows, all, &held);
	size_t shown = ml_view_limit(o->limit, n);
	for (size_t i = 0; i < shown; i++) {
		const struct ml_amount *m = ml_agg_stack_kind(rows[i], o->kind);
		ml_view_bytes_est(out, m->live_bytes, m->estimated, m->var_live_bytes);
		fprintf(out, " in %s%llu blocks were never freed (record %zu of %zu)\n",
			m->estimated ? "~" : "", (unsigned long long)m->live_blocks, i + 1, n);
		ml_stack_print(out, rows[i]);
		fputc('\n', out);
	}
	if (shown < n)
		ml_view_more(out, n - shown, NULL, o->limit);
	if (n == 0 && all == 0)
		fprintf(out, "No leaks: every %s block was freed.\n\n", ml_kind_name(o->kind));
	else if (n == 0)
		fprintf(out, "No leaks in the program's code.\n\n");
	if (all > n) {
		fprintf(out, "Not listed: %zu records, ", all - n);
		ml_view_bytes_est(out, held.live_bytes, held.estimated, held.var_live_bytes);
		fprintf(out, " in %llu blocks, that the interpreter and the modules it imported\n"
			"hold until exit (valgrind's \"still reachable\"); --native lists them.\n\n",
			(unsigned long long)held.live_blocks);
	}
	summary_text(out, a, o->kind);
}

/* The summary fields of one kind's totals, into the open JSON object. */
static void summary_json(struct ml_json *j, const struct ml_amount *t)
{
	ml_json_key(j, "in_use_bytes");
	ml_json_u64(j, t->live_bytes);
	ml_json_key(j, "in_use_blocks");
	ml_json_u64(j, t->live_blocks);
	ml_json_key(j, "allocs");
	ml_json_u64(j, t->allocs);
	ml_json_key(j, "frees");
	ml_json_u64(j, t->frees);
	ml_json_key(j, "alloc_bytes");
	ml_json_u64(j, t->alloc_bytes);
	ml_json_key(j, "freed_bytes");
	ml_json_u64(j, t->freed_bytes);
}

/* Allocations counted without a stack, into the open JSON object. */
static void lost_json(struct ml_json *j, const struct ml_profile *p, enum ml_kind kind)
{
	struct ml_amount lost = lost_of(p, kind);
	ml_json_key(j, "without_stack_allocs");
	ml_json_u64(j, lost.allocs);
	ml_json_key(j, "without_stack_bytes");
	ml_json_u64(j, lost.alloc_bytes);
}

static void leaks_json(const struct ml_agg *a, const struct ml_view_opts *o, struct ml_json *j,
		       const struct ml_agg_stack **rows, size_t all)
{
	struct ml_amount t = ml_view_totals(a, o->kind), held;
	size_t n = program_rows(a, o, rows, all, &held);
	size_t shown = ml_view_limit(o->limit, n);
	ml_json_key(j, "total_records");
	ml_json_u64(j, n);
	ml_json_key(j, "records");
	ml_json_array_begin(j);
	for (size_t i = 0; i < shown; i++) {
		const struct ml_amount *m = ml_agg_stack_kind(rows[i], o->kind);
		ml_json_object_begin(j);
		ml_view_record_json(j, rows[i], m->live_bytes, m->live_blocks);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_key(j, "summary");
	ml_json_object_begin(j);
	summary_json(j, &t);
	lost_json(j, a->profile, o->kind);
	ml_json_key(j, "interpreter_records");
	ml_json_u64(j, all - n);
	ml_json_key(j, "interpreter_bytes");
	ml_json_u64(j, held.live_bytes);
	ml_json_key(j, "interpreter_blocks");
	ml_json_u64(j, held.live_blocks);
	ml_json_object_end(j);
}

/* ---- CUDA: blocks of every CUDA kind never freed, after the heap's, in the
 * spirit of compute-sanitizer --leak-check full ---- */

static bool cuda_kind_used(const struct ml_agg *a, int k)
{
	if (k == ML_KIND_CUDA_GPU || !ml_kind_is_cuda((enum ml_kind)k) ||
	    ml_kind_is_event((enum ml_kind)k))
		return false;	/* the combined total: its blocks are listed per kind;
				 * free events hold no memory */
	struct ml_amount t = ml_view_totals(a, (enum ml_kind)k);
	return t.allocs || t.live_blocks;
}

static void cuda_leaks_text(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out)
{
	uint64_t bytes = 0, blocks = 0;
	fputs("\nCUDA (host stack at allocation; a block still allocated when the profile was "
	      "written,\nor when its context was destroyed, counts as leaked):\n\n", out);
	for (int k = 0; k < ML_KIND_COUNT; k++) {
		if (!cuda_kind_used(a, k))
			continue;
		size_t n;
		const struct ml_agg_stack **rows = ml_view_stacks(a, (enum ml_kind)k, false, &n);
		if (!rows)
			return;
		size_t shown = ml_view_limit(o->limit, n);
		for (size_t i = 0; i < shown; i++) {
			const struct ml_amount *m = ml_agg_stack_kind(rows[i], k);
			fputs("Leaked ", out);
			ml_view_bytes(out, m->live_bytes);
			fprintf(out, " in %llu %s allocations (record %zu of %zu)\n",
				(unsigned long long)m->live_blocks, ml_kind_name((enum ml_kind)k), i + 1, n);
			ml_stack_print(out, rows[i]);
			fputc('\n', out);
		}
		if (shown < n)
			ml_view_more(out, n - shown, ml_kind_name((enum ml_kind)k), o->limit);
		free(rows);
		struct ml_amount t = ml_view_totals(a, (enum ml_kind)k);
		if (ml_kind_is_gpu((enum ml_kind)k)) {
			bytes += t.live_bytes;
			blocks += t.live_blocks;
		}
		summary_text(out, a, (enum ml_kind)k);
		fputc('\n', out);
	}
	fprintf(out, "CUDA LEAK SUMMARY: %llu bytes leaked in %llu allocations "
		"(device, managed, pool, VMM physical, arrays)\n",
		(unsigned long long)bytes, (unsigned long long)blocks);
	if (ml_view_is_torch(a))
		fprintf(out, "\n%s", ml_view_torch_note(a));
}

static void cuda_leaks_json(const struct ml_agg *a, const struct ml_view_opts *o,
			    struct ml_json *j)
{
	uint64_t bytes = 0, blocks = 0;
	ml_json_key(j, "cuda");
	ml_json_object_begin(j);
	ml_json_key(j, "records");
	ml_json_array_begin(j);
	for (int k = 0; k < ML_KIND_COUNT; k++) {
		size_t n;
		if (!cuda_kind_used(a, k))
			continue;
		const struct ml_agg_stack **rows = ml_view_stacks(a, (enum ml_kind)k, false, &n);
		if (!rows)
			break;
		for (size_t i = 0; i < ml_view_limit(o->limit, n); i++) {
			const struct ml_amount *m = ml_agg_stack_kind(rows[i], k);
			ml_json_object_begin(j);
			ml_json_key(j, "kind");
			ml_json_string(j, ml_kind_name((enum ml_kind)k));
			ml_view_record_json(j, rows[i], m->live_bytes, m->live_blocks);
			ml_json_object_end(j);
		}
		free(rows);
	}
	ml_json_array_end(j);
	ml_json_key(j, "kinds");
	ml_json_array_begin(j);
	for (int k = 0; k < ML_KIND_COUNT; k++) {
		if (!cuda_kind_used(a, k))
			continue;
		struct ml_amount t = ml_view_totals(a, (enum ml_kind)k);
		if (ml_kind_is_gpu((enum ml_kind)k)) {
			bytes += t.live_bytes;
			blocks += t.live_blocks;
		}
		ml_json_object_begin(j);
		ml_json_key(j, "kind");
		ml_json_string(j, ml_kind_name((enum ml_kind)k));
		summary_json(j, &t);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
	ml_json_key(j, "leaked_bytes");
	ml_json_u64(j, bytes);
	ml_json_key(j, "leaked_blocks");
	ml_json_u64(j, blocks);
	ml_json_key(j, "pytorch_caching_allocator");
	ml_json_bool(j, ml_view_is_torch(a));
	ml_json_object_end(j);
}

int ml_view_leaks(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out, struct ml_json *j)
{
	size_t n;
	const struct ml_agg_stack **rows = ml_view_stacks(a, o->kind, false, &n);
	if (!rows)
		return -ENOMEM;
	if (j)
		leaks_json(a, o, j, rows, n);
	else
		leaks_text(a, o, out, rows, n);
	free(rows);
	if (ml_view_main_kind(o->kind) && ml_agg_has_cuda(a)) {
		if (j)
			cuda_leaks_json(a, o, j);
		else
			cuda_leaks_text(a, o, out);
	}
	return 0;
}
