/* tests/check_report.c - the report's own logic on a hand-built profile with a
 * fake symbolizer: units, self/inclusive/recursion attribution, JSON
 * escaping, ops sorting and layout, the lines and leaks views. */
#include "report/aggregate.h"
#include "report/flame.h"
#include "report/json.h"
#include "report/units.h"
#include "report/views.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- fake symbolizer ------------------------------------------------ */

/* A private directory per run: other test runs may go on at the same time. */
static char src_dir[] = "/tmp/check_report.XXXXXX";
static char src_path[sizeof(src_dir) + 32];
#define SRC src_path

/* Address -> frames; 0x300 is inlined code (h inlined into g). */
static const struct ml_frame F_MAIN = { "main", SRC, 10, "/bin/prog", 0x100, false, false, false, false };
static const struct ml_frame F_F20 = { "f", SRC, 20, "/bin/prog", 0x200, false, false, false, false };
static const struct ml_frame F_F21 = { "f", SRC, 21, "/bin/prog", 0x250, false, false, false, false };
static const struct ml_frame F_INL[2] = {
	{ "h", SRC, 40, "/bin/prog", 0x300, true, false, false, false },
	{ "g", SRC, 31, "/bin/prog", 0x300, false, false, false, false },
};
static const struct ml_frame F_LIBC = { "strdup", NULL, 0, "/lib/libc.so.6", 0x400, false, false, false, false };
/* In no runtime module, but the symbolizer says it is memline's own. */
static const struct ml_frame F_RTFLAG = { "ml_hook", NULL, 0, "/x/libmemline.so", 0x500, false, true, false, false };
static const struct ml_frame F_SYM1 = { "libfn+0x10", NULL, 0, "/lib/libx.so", 0x610, false, false, false, false };
static const struct ml_frame F_SYM2 = { "libfn+0x2a", NULL, 0, "/lib/libx.so", 0x62a, false, false, false, false };
static const struct ml_frame F_OPPLUS = { "operator+", NULL, 0, "/lib/libx.so", 0x700, false, false, false, false };
static const struct ml_frame F_RT = { "malloc", NULL, 0, "/x/libmemline.so", 0x900, false, true, false, false };

/* Two static helpers of one name in two files, one of them at two
 * addresses; two symbols of one name in two modules, without debug info. */
static const struct ml_frame F_HA5 = { "helper", "/src/a.c", 5, "/bin/prog", 0x800, false, false, false, false };
static const struct ml_frame F_HB7 = { "helper", "/src/b.c", 7, "/bin/prog", 0x810, false, false, false, false };
static const struct ml_frame F_HA6 = { "helper", "/src/a.c", 6, "/bin/prog", 0x820, false, false, false, false };
static const struct ml_frame F_DUPX = { "dup", NULL, 0, "/lib/libx.so", 0x830, false, false, false, false };
static const struct ml_frame F_DUPY = { "dup", NULL, 0, "/lib/liby.so", 0x840, false, false, false, false };

static int fake_calls_runtime;	/* resolves of addresses in the runtime module */

static int fake_resolve(void *ctx, uint64_t addr, bool ret, const struct ml_frame **frames, size_t *n)
{
	(void)ctx;
	(void)ret;
	*n = 1;
	switch (addr) {
	case 0x100: *frames = &F_MAIN; return 0;
	case 0x200: *frames = &F_F20; return 0;
	case 0x250: *frames = &F_F21; return 0;
	case 0x300: *frames = F_INL; *n = 2; return 0;
	case 0x400: *frames = &F_LIBC; return 0;
	case 0x500: *frames = &F_RTFLAG; return 0;
	case 0x610: *frames = &F_SYM1; return 0;
	case 0x62a: *frames = &F_SYM2; return 0;
	case 0x700: *frames = &F_OPPLUS; return 0;
	case 0x800: *frames = &F_HA5; return 0;
	case 0x810: *frames = &F_HB7; return 0;
	case 0x820: *frames = &F_HA6; return 0;
	case 0x830: *frames = &F_DUPX; return 0;
	case 0x840: *frames = &F_DUPY; return 0;
	case 0x900: fake_calls_runtime++; *frames = &F_RT; return 0;
	default: return -ENOENT;
	}
}

static int fake_source(void *ctx, const char *name, const char **file, int *first, int *last)
{
	(void)ctx;
	if (strcmp(name, "f") == 0) {
		*file = SRC;
		*first = 19;
		*last = 23;
		return 0;
	}
	return -ENOENT;
}

static const struct ml_resolver fake = { NULL, fake_resolve, fake_source, NULL, NULL, NULL };

/* ---- hand-built profile --------------------------------------------- */

static const uint64_t st1[] = { 0x900, 0x200, 0x100 };		/* main -> f */
static const uint64_t st2[] = { 0x900, 0x200, 0x250, 0x100 };	/* main -> f -> f */
static const uint64_t st3[] = { 0x900, 0x300, 0x100 };		/* main -> g -> h */
static const uint64_t st4[] = { 0x900, 0x500, 0x400, 0x200, 0x100 };	/* f -> strdup */

static struct ml_module modules[] = {
	{ 0, 0x900, 0xa00, "/x/libmemline.so", NULL, 0, ML_MOD_RUNTIME },
	{ 0, 0x100, 0x400, "/bin/prog", NULL, 0, ML_MOD_MAIN },
};

static struct ml_stack stacks[] = {
	{ 1, 3, 0, st1, 0 }, { 2, 4, 0, st2, 0 }, { 3, 3, 0, st3, 0 }, { 4, 5, 0, st4, 0 },
};

/*                         stack kind allocs bytes frees freed lblk lbytes pblk pbytes */
static struct ml_fmt_counter counters[] = {
	{ 1, ML_KIND_HEAP, 2, 100, 1, 40, 1, 60, 2, 100, 0, 0, 0, 0 },
	{ 2, ML_KIND_HEAP, 1, 10, 0, 0, 1, 10, 1, 10, 0, 0, 0, 0 },
	{ 3, ML_KIND_HEAP, 4, 400, 4, 400, 0, 0, 2, 200, 0, 0, 0, 0 },
	{ 4, ML_KIND_HEAP, 3, 3000, 0, 0, 3, 3000, 0, 0, 0, 0, 0, 0 },
	{ 3, ML_KIND_CUDA_DEVICE, 1, 1 << 20, 0, 0, 1, 1 << 20, 1, 1 << 20, 0, 0, 0, 0 },
};

static struct ml_profile prof;

static void build_profile(void)
{
	static const char *argv[] = { "./prog", "x" };
	memset(&prof, 0, sizeof(prof));
	prof.path = "memline.prog.42.mlp";
	prof.meta.pid = 42;
	prof.meta.argc = 2;
	prof.exe = "/bin/prog";
	prof.argv = argv;
	prof.modules = modules;
	prof.n_modules = 2;
	prof.stacks = stacks;
	prof.n_stacks = 4;
	prof.counters = counters;
	prof.n_counters = 5;
	fake_calls_runtime = 0;
}

static struct ml_agg *agg;

static void setup(void)
{
	build_profile();
	ck_assert_int_eq(ml_agg_build(&prof, &fake, &agg), 0);
}

static void teardown(void)
{
	ml_agg_free(agg);
	agg = NULL;
}

static const struct ml_agg_line *find_line(int line, const char *fn)
{
	for (size_t i = 0; i < agg->n_lines; i++)
		if (agg->lines[i].line == line && strcmp(agg->lines[i].function, fn) == 0)
			return &agg->lines[i];
	return NULL;
}

/* Runs a view into a string (caller frees). */
static char *render(int (*view)(const struct ml_agg *, const struct ml_view_opts *, FILE *,
				struct ml_json *), const struct ml_view_opts *o, bool json, int *rc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct ml_json j;
	ml_json_init(&j, f);
	if (json)
		ml_json_object_begin(&j);
	*rc = view(agg, o, f, json ? &j : NULL);
	if (json) {
		ml_json_object_end(&j);
		ml_json_finish(&j);
	}
	fclose(f);
	return buf;
}

static struct ml_view_opts heap_opts(void)
{
	struct ml_view_opts o = { .kind = ML_KIND_HEAP, .limit = -1, .sort = ML_OPS_SELF_CPU_MEMORY_USAGE };
	return o;
}

/* ---- units ---------------------------------------------------------- */

START_TEST(units_bytes)
{
	char b[ML_UNITS_LEN];
	ck_assert_str_eq(ml_units_bytes(0, b, sizeof(b)), "0 B");
	ck_assert_str_eq(ml_units_bytes(320, b, sizeof(b)), "320 B");
	ck_assert_str_eq(ml_units_bytes(1023, b, sizeof(b)), "1023 B");
	ck_assert_str_eq(ml_units_bytes(1024, b, sizeof(b)), "1.00 KiB");
	ck_assert_str_eq(ml_units_bytes(1536, b, sizeof(b)), "1.50 KiB");
	ck_assert_str_eq(ml_units_bytes(1048575, b, sizeof(b)), "1.00 MiB");
	ck_assert_str_eq(ml_units_bytes(1572864, b, sizeof(b)), "1.50 MiB");
	ck_assert_str_eq(ml_units_bytes(3489660928ull, b, sizeof(b)), "3.25 GiB");
	ck_assert_str_eq(ml_units_bytes(5ull << 40, b, sizeof(b)), "5120.00 GiB");
	ck_assert_str_eq(ml_units_seconds(1234567890, b, sizeof(b)), "1.234 s");
}
END_TEST

/* ---- aggregation ---------------------------------------------------- */

START_TEST(agg_stacks_drop_runtime_frames)
{
	ck_assert_uint_eq(agg->n_stacks, 4);
	/* Addresses in the ML_MOD_RUNTIME module are dropped unresolved. */
	ck_assert_int_eq(fake_calls_runtime, 0);
	const struct ml_agg_stack *s1 = &agg->stacks[0], *s3 = &agg->stacks[2];
	ck_assert_uint_eq(s1->id, 1);
	ck_assert_uint_eq(s1->n_frames, 2);
	ck_assert_str_eq(s1->frames[0]->function, "f");
	ck_assert_str_eq(s1->frames[1]->function, "main");
	/* Inlined frames expanded, callee first. */
	ck_assert_uint_eq(s3->n_frames, 3);
	ck_assert_str_eq(s3->frames[0]->function, "h");
	ck_assert_str_eq(s3->frames[1]->function, "g");
	/* A frame the symbolizer marks as runtime is dropped too. */
	const struct ml_agg_stack *s4 = &agg->stacks[3];
	ck_assert_uint_eq(s4->n_frames, 3);
	ck_assert_str_eq(s4->frames[0]->function, "strdup");
	ck_assert_uint_eq(agg->totals[ML_KIND_HEAP].alloc_bytes, 3510);
	ck_assert_uint_eq(agg->totals[ML_KIND_CUDA_DEVICE].alloc_bytes, 1 << 20);
}
END_TEST

START_TEST(agg_self_and_inclusive)
{
	const struct ml_agg_func *f = ml_agg_find_func(agg, "f");
	const struct ml_agg_func *m = ml_agg_find_func(agg, "main");
	const struct ml_agg_func *g = ml_agg_find_func(agg, "g");
	const struct ml_agg_func *h = ml_agg_find_func(agg, "h");
	const struct ml_agg_func *sd = ml_agg_find_func(agg, "strdup");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_null(ml_agg_find_func(agg, "malloc"));
	ck_assert_ptr_null(ml_agg_find_func(agg, "ml_hook"));
	/* f: innermost of stacks 1 and 2; inclusive also through strdup. */
	ck_assert_uint_eq(ML_AGG_SELF(f, ML_KIND_HEAP).alloc_bytes, 110);
	ck_assert_uint_eq(ML_AGG_SELF(f, ML_KIND_HEAP).allocs, 3);
	ck_assert_uint_eq(ML_AGG_TOTAL(f, ML_KIND_HEAP).alloc_bytes, 3110);
	ck_assert_uint_eq(ML_AGG_TOTAL(f, ML_KIND_HEAP).allocs, 6);
	ck_assert_uint_eq(ML_AGG_TOTAL(f, ML_KIND_HEAP).live_bytes, 3070);
	ck_assert_uint_eq(ML_AGG_TOTAL(f, ML_KIND_HEAP).peak_bytes, 110);
	ck_assert_uint_eq(ML_AGG_SELF(m, ML_KIND_HEAP).alloc_bytes, 0);
	ck_assert_uint_eq(ML_AGG_TOTAL(m, ML_KIND_HEAP).alloc_bytes, 3510);
	ck_assert_uint_eq(ML_AGG_TOTAL(m, ML_KIND_HEAP).frees, 5);
	ck_assert_uint_eq(ML_AGG_SELF(h, ML_KIND_HEAP).alloc_bytes, 400);
	ck_assert_uint_eq(ML_AGG_SELF(g, ML_KIND_HEAP).alloc_bytes, 0);
	ck_assert_uint_eq(ML_AGG_TOTAL(g, ML_KIND_HEAP).alloc_bytes, 400);
	ck_assert_uint_eq(ML_AGG_TOTAL(g, ML_KIND_HEAP).peak_bytes, 200);
	ck_assert_uint_eq(ML_AGG_SELF(sd, ML_KIND_HEAP).alloc_bytes, 3000);
	/* Kinds stay apart. */
	ck_assert_uint_eq(ML_AGG_TOTAL(g, ML_KIND_CUDA_DEVICE).alloc_bytes, 1 << 20);
	ck_assert_uint_eq(ML_AGG_TOTAL(f, ML_KIND_CUDA_DEVICE).alloc_bytes, 0);
}
END_TEST

START_TEST(agg_recursion_counted_once)
{
	/* Stack 2 has f twice: f's inclusive gets its 10 bytes once. */
	const struct ml_agg_func *f = ml_agg_find_func(agg, "f");
	uint64_t sum_self = 0;
	for (size_t i = 0; i < agg->n_funcs; i++)
		sum_self += ML_AGG_SELF(&agg->funcs[i], ML_KIND_HEAP).alloc_bytes;
	ck_assert_uint_eq(sum_self, 3510);	/* self adds up to the total */
	ck_assert_uint_eq(ML_AGG_TOTAL(f, ML_KIND_HEAP).alloc_bytes, 100 + 10 + 3000);
	const struct ml_agg_line *l20 = find_line(20, "f"), *l21 = find_line(21, "f");
	ck_assert_ptr_nonnull(l20);
	ck_assert_ptr_nonnull(l21);
	ck_assert_uint_eq(ML_AGG_SELF(l20, ML_KIND_HEAP).alloc_bytes, 110);
	ck_assert_uint_eq(ML_AGG_TOTAL(l20, ML_KIND_HEAP).alloc_bytes, 3110);
	ck_assert_uint_eq(ML_AGG_SELF(l21, ML_KIND_HEAP).alloc_bytes, 0);
	ck_assert_uint_eq(ML_AGG_TOTAL(l21, ML_KIND_HEAP).alloc_bytes, 10);
	ck_assert_uint_eq(ML_AGG_TOTAL(find_line(10, "main"), ML_KIND_HEAP).alloc_bytes, 3510);
	ck_assert_uint_eq(ML_AGG_SELF(find_line(40, "h"), ML_KIND_HEAP).peak_bytes, 200);
}
END_TEST

START_TEST(agg_order_first_met)
{
	/* Functions and lines come in the order the stacks, each from its
	 * innermost frame, first meet them, though they are charged along
	 * a path from the outermost frame: stack 1 meets f before main. */
	static const char *const funcs[] = { "f", "main", "h", "g", "strdup" };
	static const struct { int line; const char *fn; } lines[] = {
		{ 20, "f" }, { 10, "main" }, { 21, "f" }, { 40, "h" }, { 31, "g" },
	};
	ck_assert_uint_eq(agg->n_funcs, 5);
	for (size_t i = 0; i < agg->n_funcs; i++)
		ck_assert_str_eq(agg->funcs[i].name, funcs[i]);
	ck_assert_uint_eq(agg->n_lines, 5);
	for (size_t i = 0; i < agg->n_lines; i++) {
		ck_assert_int_eq(agg->lines[i].line, lines[i].line);
		ck_assert_str_eq(agg->lines[i].function, lines[i].fn);
	}
	/* The index finds each where it now is. */
	ck_assert_ptr_eq(ml_agg_find_func(agg, "strdup"), &agg->funcs[4]);
}
END_TEST

START_TEST(agg_path_shared_out_of_order)
{
	/* Stacks whose outer frames recur apart (1, 3, 1's again, 4): each
	 * counts once in every total on it, as charged frame by frame. */
	static struct ml_stack st[] = {
		{ 1, 3, 0, st1, 0 }, { 3, 3, 0, st3, 0 }, { 5, 4, 0, st2, 0 }, { 7, 3, 0, st1, 0 },
		{ 9, 5, 0, st4, 0 },
	};
	static struct ml_fmt_counter c[] = {
		{ 1, ML_KIND_HEAP, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 3, ML_KIND_HEAP, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 5, ML_KIND_HEAP, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 7, ML_KIND_HEAP, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 9, ML_KIND_HEAP, 1, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	};
	struct ml_profile p = prof;
	p.stacks = st;
	p.n_stacks = 5;
	p.counters = c;
	p.n_counters = 5;
	struct ml_agg *a;
	ck_assert_int_eq(ml_agg_build(&p, &fake, &a), 0);
	const struct ml_agg_func *f = ml_agg_find_func(a, "f"), *m = ml_agg_find_func(a, "main");
	ck_assert_uint_eq(ML_AGG_TOTAL(m, ML_KIND_HEAP).alloc_bytes, 31);
	ck_assert_uint_eq(ML_AGG_SELF(m, ML_KIND_HEAP).alloc_bytes, 0);
	ck_assert_uint_eq(ML_AGG_TOTAL(f, ML_KIND_HEAP).alloc_bytes, 1 + 4 + 8 + 16);
	ck_assert_uint_eq(ML_AGG_TOTAL(f, ML_KIND_HEAP).allocs, 4);
	ck_assert_uint_eq(ML_AGG_SELF(f, ML_KIND_HEAP).alloc_bytes, 1 + 4 + 8);
	ck_assert_uint_eq(ML_AGG_TOTAL(ml_agg_find_func(a, "g"), ML_KIND_HEAP).alloc_bytes, 2);
	for (size_t i = 0; i < a->n_lines; i++) {
		const struct ml_agg_line *l = &a->lines[i];
		uint64_t want = l->line == 10 ? 31 : l->line == 20 ? 29 : l->line == 21 ? 4 : 2;
		ck_assert_uint_eq(ML_AGG_TOTAL(l, ML_KIND_HEAP).alloc_bytes, want);
	}
	ml_agg_free(a);
}
END_TEST

START_TEST(agg_empty_stack)
{
	/* A stack of no frames (depth 0, no frames array) is charged to
	 * [unknown], not an error. */
	static struct ml_stack st[] = { { 1, 0, 0, NULL, 0 }, { 2, 3, 0, st1, 0 } };
	static struct ml_fmt_counter c[] = {
		{ 1, ML_KIND_HEAP, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 2, ML_KIND_HEAP, 1, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	};
	struct ml_profile p = prof;
	p.stacks = st;
	p.n_stacks = 2;
	p.counters = c;
	p.n_counters = 2;
	struct ml_agg *a;
	ck_assert_int_eq(ml_agg_build(&p, &fake, &a), 0);
	ck_assert_uint_eq(ML_AGG_SELF(ml_agg_find_func(a, ML_AGG_UNKNOWN), ML_KIND_HEAP).alloc_bytes, 5);
	ck_assert_uint_eq(ML_AGG_TOTAL(ml_agg_find_func(a, "main"), ML_KIND_HEAP).alloc_bytes, 6);
	ml_agg_free(a);
}
END_TEST

START_TEST(agg_unknown_stack_id)
{
	/* A counter whose stack is missing is charged to [unknown], not lost. */
	static struct ml_fmt_counter c[] = { { 99, ML_KIND_HEAP, 1, 7, 0, 0, 1, 7, 1, 7, 0, 0, 0, 0 } };
	struct ml_profile p = prof;
	p.counters = c;
	p.n_counters = 1;
	struct ml_agg *a;
	ck_assert_int_eq(ml_agg_build(&p, &fake, &a), 0);
	const struct ml_agg_func *u = ml_agg_find_func(a, ML_AGG_UNKNOWN);
	ck_assert_ptr_nonnull(u);
	ck_assert_uint_eq(ML_AGG_SELF(u, ML_KIND_HEAP).alloc_bytes, 7);
	ml_agg_free(a);
}
END_TEST

START_TEST(agg_symbol_offsets_grouped)
{
	/* Frames without debug info ("sym+0x10") are one function per symbol. */
	static const uint64_t a[] = { 0x610, 0x700, 0x100 }, b[] = { 0x62a, 0x100 };
	static struct ml_stack s[] = { { 1, 3, 0, a, 0 }, { 2, 2, 0, b, 0 } };
	static struct ml_fmt_counter c[] = {
		{ 1, ML_KIND_HEAP, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 2, ML_KIND_HEAP, 2, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	};
	struct ml_profile p = prof;
	p.stacks = s;
	p.n_stacks = 2;
	p.counters = c;
	p.n_counters = 2;
	struct ml_agg *ag;
	ck_assert_int_eq(ml_agg_build(&p, &fake, &ag), 0);
	const struct ml_agg_func *f = ml_agg_find_func(ag, "libfn");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(ML_AGG_SELF(f, ML_KIND_HEAP).alloc_bytes, 11);
	ck_assert_uint_eq(ML_AGG_SELF(f, ML_KIND_HEAP).allocs, 3);
	ck_assert_ptr_nonnull(ml_agg_find_func(ag, "operator+"));
	ck_assert_ptr_null(ml_agg_find_func(ag, "libfn+0x10"));
	/* The stack itself keeps the exact frame. */
	ck_assert_str_eq(ag->stacks[0].frames[0]->function, "libfn+0x10");
	ck_assert_uint_eq(ag->n_funcs, 3);
	ml_agg_free(ag);
}
END_TEST

static const struct ml_agg_func *func_labelled(const struct ml_agg *a, const char *label)
{
	for (size_t i = 0; i < a->n_funcs; i++)
		if (strcmp(a->funcs[i].label, label) == 0)
			return &a->funcs[i];
	return NULL;
}

START_TEST(agg_same_name_kept_apart)
{
	/* Functions are (name, module, source file): helper of a.c and of b.c
	 * are two rows, labelled by file; dup of two modules by module.  A
	 * frame seen again (stack 6 repeats stack 1's frame) counts again. */
	static const uint64_t a5[] = { 0x800, 0x100 }, b7[] = { 0x810, 0x100 },
			      a6[] = { 0x820, 0x100 }, dx[] = { 0x830, 0x100 },
			      dy[] = { 0x840, 0x100 };
	static struct ml_stack s[] = {
		{ 1, 2, 0, a5, 0 }, { 2, 2, 0, b7, 0 }, { 3, 2, 0, a6, 0 },
		{ 4, 2, 0, dx, 0 }, { 5, 2, 0, dy, 0 }, { 6, 2, 0, a5, 0 },
	};
	static struct ml_fmt_counter c[] = {
		{ 1, ML_KIND_HEAP, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 2, ML_KIND_HEAP, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 3, ML_KIND_HEAP, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 4, ML_KIND_HEAP, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 5, ML_KIND_HEAP, 1, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 6, ML_KIND_HEAP, 1, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	};
	struct ml_profile p = prof;
	p.stacks = s;
	p.n_stacks = 6;
	p.counters = c;
	p.n_counters = 6;
	struct ml_agg *ag;
	ck_assert_int_eq(ml_agg_build(&p, &fake, &ag), 0);
	ck_assert_uint_eq(ag->n_funcs, 5);
	const struct ml_agg_func *ha = func_labelled(ag, "helper (a.c)");
	const struct ml_agg_func *hb = func_labelled(ag, "helper (b.c)");
	const struct ml_agg_func *dx_ = func_labelled(ag, "dup (libx.so)");
	const struct ml_agg_func *dy_ = func_labelled(ag, "dup (liby.so)");
	const struct ml_agg_func *m = func_labelled(ag, "main");
	ck_assert_ptr_nonnull(ha);
	ck_assert_ptr_nonnull(hb);
	ck_assert_ptr_nonnull(dx_);
	ck_assert_ptr_nonnull(dy_);
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(ha->name, "helper");
	ck_assert_str_eq(ha->file, "/src/a.c");
	ck_assert_uint_eq(ML_AGG_SELF(ha, ML_KIND_HEAP).alloc_bytes, 37);
	ck_assert_uint_eq(ML_AGG_SELF(ha, ML_KIND_HEAP).allocs, 3);
	ck_assert_uint_eq(ML_AGG_SELF(hb, ML_KIND_HEAP).alloc_bytes, 2);
	ck_assert_uint_eq(ML_AGG_SELF(dx_, ML_KIND_HEAP).alloc_bytes, 8);
	ck_assert_uint_eq(ML_AGG_SELF(dy_, ML_KIND_HEAP).alloc_bytes, 16);
	ck_assert_uint_eq(ML_AGG_TOTAL(m, ML_KIND_HEAP).alloc_bytes, 63);
	ck_assert_str_eq(m->label, m->name);	/* no collision: the plain name */
	ml_agg_free(ag);
}
END_TEST

/* ---- JSON ----------------------------------------------------------- */

START_TEST(json_escaping_and_layout)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct ml_json j;
	ml_json_init(&j, f);
	ml_json_object_begin(&j);
	ml_json_key(&j, "s");
	ml_json_string(&j, "a\"b\\c\n\t\x01 \xc3\xa9");
	ml_json_key(&j, "n");
	ml_json_u64(&j, 18446744073709551615ull);
	ml_json_key(&j, "a");
	ml_json_array_begin(&j);
	ml_json_i64(&j, -3);
	ml_json_null(&j);
	ml_json_string(&j, NULL);
	ml_json_array_end(&j);
	ml_json_key(&j, "e");
	ml_json_array_begin(&j);
	ml_json_array_end(&j);
	ml_json_object_end(&j);
	ml_json_finish(&j);
	fclose(f);
	ck_assert_str_eq(buf, "{\n"
			      "  \"s\": \"a\\\"b\\\\c\\n\\t\\u0001 \xc3\xa9\",\n"
			      "  \"n\": 18446744073709551615,\n"
			      "  \"a\": [\n    -3,\n    null,\n    null\n  ],\n"
			      "  \"e\": []\n"
			      "}\n");
	free(buf);
}
END_TEST

/* ---- ops ------------------------------------------------------------ */

static const char *sorted_names(enum ml_ops_key key, char *out, size_t len)
{
	const struct ml_agg_func *rows[16];
	size_t n = agg->n_funcs;
	for (size_t i = 0; i < n; i++)
		rows[i] = &agg->funcs[i];
	ml_ops_sort(rows, n, key, ML_KIND_HEAP);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "," : "", rows[i]->name);
	return out;
}

START_TEST(ops_sort_keys)
{
	char b[256];
	ck_assert_int_eq(ml_ops_key_parse("self_cpu_memory_usage"), ML_OPS_SELF_CPU_MEMORY_USAGE);
	ck_assert_int_eq(ml_ops_key_parse("allocs"), ML_OPS_ALLOCS);
	ck_assert_int_eq(ml_ops_key_parse("self_cuda_time"), -1);
	/* self bytes: strdup 3000, h 400, f 110, then zeros by name. */
	ck_assert_str_eq(sorted_names(ML_OPS_SELF_CPU_MEMORY_USAGE, b, sizeof(b)),
			 "strdup,h,f,g,main");
	ck_assert_str_eq(sorted_names(ML_OPS_CPU_MEMORY_USAGE, b, sizeof(b)),
			 "main,f,strdup,g,h");
	/* self allocations: h 4, f 3, strdup 3 (tie: by name). */
	ck_assert_str_eq(sorted_names(ML_OPS_COUNT, b, sizeof(b)), "h,f,strdup,g,main");
	ck_assert_str_eq(sorted_names(ML_OPS_PEAK_CPU_MEMORY, b, sizeof(b)),
			 "main,g,h,f,strdup");
	ck_assert_str_eq(sorted_names(ML_OPS_LEAKED_CPU_MEMORY, b, sizeof(b)),
			 "f,main,strdup,g,h");
	ck_assert_str_eq(sorted_names(ML_OPS_ALLOCS, b, sizeof(b)), "main,f,g,h,strdup");
}
END_TEST

START_TEST(ops_table_layout)
{
	struct ml_view_opts o = heap_opts();
	o.limit = 2;
	int rc;
	char *out = render(ml_view_ops, &o, false, &rc);
	ck_assert_int_eq(rc, 0);
	/* Name is 10 wide (strdup + 4); other columns 12 or their header. */
	const char *want =
/* The profile has a CUDA counter: CUDA Mem and Self CUDA Mem come after the
 * CPU columns, in PyTorch's order. */
"----------  ------------  ------------  ------------  -------------  ------------  --------------  ------------  \n"
"      Name       CPU Mem  Self CPU Mem      CUDA Mem  Self CUDA Mem  Peak CPU Mem  Leaked CPU Mem   # of Allocs  \n"
"----------  ------------  ------------  ------------  -------------  ------------  --------------  ------------  \n"
"    strdup      2.93 KiB      2.93 KiB           0 B            0 B           0 B        2.93 KiB             3  \n"
"         h         400 B         400 B      1.00 MiB       1.00 MiB         200 B             0 B             4  \n"
"----------  ------------  ------------  ------------  -------------  ------------  --------------  ------------  \n"
"Self CPU Mem total: 3.43 KiB\n\n"
"Self CUDA Mem total: 1.00 MiB (device, managed, pool, VMM physical, arrays)\n\n"
"3 more functions not shown (--limit 2; --limit all lists every one)\n";
	ck_assert_str_eq(out, want);
	free(out);
}
END_TEST

/* ---- leaks and lines views ------------------------------------------ */

START_TEST(leaks_view_text)
{
	struct ml_view_opts o = heap_opts();
	int rc;
	char *out = render(ml_view_leaks, &o, false, &rc);
	ck_assert_int_eq(rc, 0);
	const char *want =
"3000 bytes (2.93 KiB) in 3 blocks were never freed (record 1 of 3)\n"
"   at strdup (in /lib/libc.so.6)\n"
"   by f (check_report_src.c:20)\n"
"   by main (check_report_src.c:10)\n"
"\n"
"60 bytes in 1 blocks were never freed (record 2 of 3)\n"
"   at f (check_report_src.c:20)\n"
"   by main (check_report_src.c:10)\n"
"\n"
"10 bytes in 1 blocks were never freed (record 3 of 3)\n"
"   at f (check_report_src.c:20)\n"
"   by f (check_report_src.c:21)\n"
"   by main (check_report_src.c:10)\n"
"\n"
"HEAP SUMMARY:\n"
"    in use at exit: 3070 bytes (3.00 KiB) in 5 blocks\n"
"  total heap usage: 10 allocs, 5 frees, 3510 bytes (3.43 KiB) allocated\n"
"\n"
"CUDA (host stack at allocation; a block still allocated when the profile was written,\n"
"or when its context was destroyed, counts as leaked):\n"
"\n"
"Leaked 1048576 bytes (1.00 MiB) in 1 cuda_device allocations (record 1 of 1)\n"
"   at h (check_report_src.c:40) [inlined]\n"
"   by g (check_report_src.c:31)\n"
"   by main (check_report_src.c:10)\n"
"\n"
"CUDA_DEVICE SUMMARY:\n"
"    in use at exit: 1048576 bytes (1.00 MiB) in 1 blocks\n"
"  total cuda_device usage: 1 allocs, 0 frees, 1048576 bytes (1.00 MiB) allocated\n"
"\n"
"CUDA LEAK SUMMARY: 1048576 bytes leaked in 1 allocations (device, managed, pool, VMM physical, arrays)\n";
	ck_assert_str_eq(out, want);
	free(out);
}
END_TEST

START_TEST(lines_view_text)
{
	FILE *src = fopen(SRC, "w");
	for (int i = 1; i <= 30; i++)
		fprintf(src, "code %d\n", i);
	fclose(src);
	const char *fn[] = { "f" };
	struct ml_view_opts o = heap_opts();
	o.functions = fn;
	o.n_functions = 1;
	int rc;
	char *out = render(ml_view_lines, &o, false, &rc);
	unlink(SRC);
	ck_assert_int_eq(rc, 0);
	char head[256];
	snprintf(head, sizeof(head), "Filename: %s\n", SRC);
	ck_assert_int_eq(strncmp(out, head, strlen(head)), 0);
	const char *want =
"\n"
"Line #   Self Alloc  Total Alloc         Peak       Leaked      Allocs   CUDA Alloc    CUDA Peak  CUDA Leaked   Line Contents\n"
"=============================================================================================================================\n"
"    19                                                                                                          code 19\n"
"    20        110 B     3.04 KiB        110 B     3.00 KiB           6          0 B          0 B          0 B   code 20\n"
"    21          0 B         10 B         10 B         10 B           1          0 B          0 B          0 B   code 21\n"
"    22                                                                                                          code 22\n"
"    23                                                                                                          code 23\n"
"\n";
	ck_assert_str_eq(out + strlen(head), want);
	free(out);
}
END_TEST

START_TEST(lines_view_errors)
{
	const char *missing[] = { "nosuch" };
	struct ml_view_opts o = heap_opts();
	o.functions = missing;
	o.n_functions = 1;
	int rc;
	free(render(ml_view_lines, &o, false, &rc));
	ck_assert_int_eq(rc, -ENOENT);
	/* Source missing: the table still prints, without Line Contents. */
	unlink(SRC);
	const char *fn[] = { "f" };
	o.functions = fn;
	char *out = render(ml_view_lines, &o, false, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_null(strstr(out, "Line Contents"));
	ck_assert_ptr_nonnull(strstr(out, "    21          0 B         10 B         10 B         10 B           1"
					 "          0 B          0 B          0 B\n"));
	free(out);
}
END_TEST

START_TEST(peak_view_json)
{
	struct ml_view_opts o = heap_opts();
	o.limit = 1;
	int rc;
	char *out = render(ml_view_peak, &o, true, &rc);
	ck_assert_int_eq(rc, 0);
	/* Largest stack at the peak is stack 3 (200 bytes); top line is h:40. */
	ck_assert_ptr_nonnull(strstr(out, "\"total_records\": 3,"));
	ck_assert_ptr_nonnull(strstr(out, "\"bytes\": 200,\n      \"blocks\": 2,\n      \"stack_id\": 3,"));
	ck_assert_ptr_nonnull(strstr(out, "\"line\": 40,\n      \"function\": \"h\",\n      \"bytes\": 200,"));
	free(out);
}
END_TEST

/* ---- the flame tree ------------------------------------------------- */

/* The child of node n for (function, line), or 0. */
static uint32_t flame_child(const struct ml_flame *t, uint32_t n, const char *fn, int line)
{
	for (uint32_t c = t->nodes[n].first_child; c; c = t->nodes[c].next_sibling)
		if (strcmp(t->nodes[c].function, fn) == 0 && t->nodes[c].line == line)
			return c;
	return 0;
}

START_TEST(flame_tree_sums_paths)
{
	struct ml_flame *t;
	ck_assert_int_eq(ml_flame_build(agg, NULL, &t), 0);
	ck_assert_uint_eq(t->n_groups, 2);
	ck_assert_str_eq(t->groups[0].name, "heap");
	ck_assert_str_eq(t->groups[1].name, "cuda");
	ck_assert(!t->has_time);
	size_t alloc = ml_flame_vi(0, ML_FF_ALLOC_BYTES), leak = ml_flame_vi(0, ML_FF_LEAK_BYTES);
	ck_assert_int_eq(t->total[alloc], 3510);
	ck_assert_int_eq(t->total[ml_flame_vi(1, ML_FF_ALLOC_BYTES)], 1 << 20);
	/* a call site is a node: main -> f:20 (st1, st4) apart from main ->
	 * f:21 -> f:20 (st2, recursion) */
	uint32_t m = flame_child(t, 0, "main", 10), f = flame_child(t, m, "f", 20);
	uint32_t f21 = flame_child(t, m, "f", 21), f21f = flame_child(t, f21, "f", 20);
	uint32_t sd = flame_child(t, f, "strdup", 0);
	uint32_t g = flame_child(t, m, "g", 31), h = flame_child(t, g, "h", 40);
	ck_assert(m && f && f21 && f21f && sd && g && h);
	size_t nv = t->n_values;
	ck_assert_int_eq(t->total[m * nv + alloc], 3510);
	ck_assert_int_eq(t->total[f * nv + alloc], 3100);	/* st1 + st4 */
	ck_assert_int_eq(t->self[f * nv + alloc], 100);	/* st1 ends at f:20 */
	ck_assert_int_eq(t->total[f21 * nv + leak], 10);
	ck_assert_int_eq(t->self[f21f * nv + leak], 10);
	ck_assert_int_eq(t->total[sd * nv + ML_FF_ALLOCS], 3);
	ck_assert_int_eq(t->total[h * nv + alloc], 400);	/* inlined h under g */
	ck_assert_int_eq(t->total[h * nv + ml_flame_vi(1, ML_FF_PEAK_BYTES)], 1 << 20);
	/* every node: its total is its self plus its children's */
	for (uint32_t n = 0; n < t->n_nodes; n++)
		for (size_t v = 0; v < nv; v++) {
			int64_t sum = t->self[n * nv + v];
			for (uint32_t c = t->nodes[n].first_child; c; c = t->nodes[c].next_sibling)
				sum += t->total[c * nv + v];
			ck_assert_int_eq(sum, t->total[n * nv + v]);
		}
	ml_flame_free(t);
	/* against itself: nothing changed, the base's own numbers kept */
	ck_assert_int_eq(ml_flame_build(agg, agg, &t), 0);
	for (size_t i = 0; i < t->n_nodes * t->n_values; i++)
		ck_assert_int_eq(t->total[i], 0);
	ck_assert_int_eq(t->base_total[alloc], 3510);
	ml_flame_free(t);
}
END_TEST

/* Folded stacks: one line per stack, outermost first, counts summing to the total. */
START_TEST(folded_view_lines)
{
	struct ml_view_opts o = heap_opts();
	int rc;
	char *out = render(ml_view_folded, &o, false, &rc);
	ck_assert_int_eq(rc, 0);
	const char *base = strrchr(SRC, '/') + 1;
	char want[256];
	snprintf(want, sizeof(want), "main (%s:10);f (%s:20) 100\n", base, base);
	ck_assert_ptr_nonnull(strstr(out, want));
	snprintf(want, sizeof(want), "main (%s:10);f (%s:20);strdup (in libc.so.6) 3000\n", base, base);
	ck_assert_ptr_nonnull(strstr(out, want));
	long sum = 0;
	for (char *l = out; *l;) {
		char *nl = strchr(l, '\n');
		ck_assert_ptr_nonnull(nl);
		*nl = '\0';
		sum += strtol(strrchr(l, ' ') + 1, NULL, 10);
		l = nl + 1;
	}
	ck_assert_int_eq(sum, 3510);
	free(out);
}
END_TEST

static Suite *report_suite(void)
{
	Suite *s = suite_create("report");
	TCase *t = tcase_create("units");
	tcase_add_test(t, units_bytes);
	tcase_add_test(t, json_escaping_and_layout);
	suite_add_tcase(s, t);
	t = tcase_create("aggregate");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, agg_stacks_drop_runtime_frames);
	tcase_add_test(t, agg_self_and_inclusive);
	tcase_add_test(t, agg_order_first_met);
	tcase_add_test(t, agg_path_shared_out_of_order);
	tcase_add_test(t, agg_empty_stack);
	tcase_add_test(t, agg_recursion_counted_once);
	tcase_add_test(t, agg_unknown_stack_id);
	tcase_add_test(t, agg_symbol_offsets_grouped);
	tcase_add_test(t, agg_same_name_kept_apart);
	tcase_add_test(t, ops_sort_keys);
	tcase_add_test(t, ops_table_layout);
	tcase_add_test(t, leaks_view_text);
	tcase_add_test(t, lines_view_text);
	tcase_add_test(t, lines_view_errors);
	tcase_add_test(t, peak_view_json);
	tcase_add_test(t, flame_tree_sums_paths);
	tcase_add_test(t, folded_view_lines);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	if (!mkdtemp(src_dir)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	snprintf(src_path, sizeof(src_path), "%s/check_report_src.c", src_dir);
	SRunner *sr = srunner_create(report_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unlink(src_path);
	rmdir(src_dir);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
