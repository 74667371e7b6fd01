/* tests/check_merge.c - unit tests of report/merge.c: profiles of several
 * processes summed into one (`memline report --merge`). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "report/merge.h"

/* Two processes of one program: the same module at different load
 * addresses, and a library only the second loaded. */
static const uint8_t BUILD_ID[4] = { 1, 2, 3, 4 };

static struct ml_module mods_a[] = {
	{ .bias = 0x1000, .lo = 0x2000, .hi = 0x3000, .path = "/bin/prog",
	  .build_id = BUILD_ID, .build_id_len = 4, .flags = ML_MOD_MAIN },
};
static struct ml_module mods_b[] = {
	{ .bias = 0x51000, .lo = 0x52000, .hi = 0x53000, .path = "/bin/prog",
	  .build_id = BUILD_ID, .build_id_len = 4, .flags = ML_MOD_MAIN },
	{ .bias = 0x90000, .lo = 0x90000, .hi = 0x91000, .path = "/lib/libx.so" },
};

/* a: main -> f (0x2100, 0x2200), main -> g (0x2100, 0x2300)
 * b: the same main -> f (moved by 0x50000), and main -> libx */
static const uint64_t fa1[] = { 0x2200, 0x2100 }, fa2[] = { 0x2300, 0x2100 };
static const uint64_t fb1[] = { 0x52200, 0x52100 }, fb2[] = { 0x90500, 0x52100 };
static struct ml_stack stacks_a[] = { { 1, 2, 0, fa1, 0 }, { 2, 2, 0, fa2, 0 } };
static struct ml_stack stacks_b[] = { { 7, 2, 0, fb1, 0 }, { 9, 2, 0, fb2, 0 } };
static struct ml_fmt_counter counters_a[] = {
	{ .stack_id = 1, .kind = ML_KIND_HEAP, .allocs = 2, .alloc_bytes = 100, .frees = 1,
	  .freed_bytes = 40, .live_blocks = 1, .live_bytes = 60, .peak_blocks = 2, .peak_bytes = 100 },
	{ .stack_id = 2, .kind = ML_KIND_HEAP, .allocs = 1, .alloc_bytes = 8 },
};
static struct ml_fmt_counter counters_b[] = {
	{ .stack_id = 7, .kind = ML_KIND_HEAP, .allocs = 3, .alloc_bytes = 30, .live_blocks = 3,
	  .live_bytes = 30, .peak_blocks = 1, .peak_bytes = 10 },
	{ .stack_id = 9, .kind = ML_KIND_HEAP, .allocs = 1, .alloc_bytes = 5, .frees = 1,
	  .freed_bytes = 5 },
};
static struct ml_fmt_timepoint tl_a[] = { { ML_KIND_HEAP, 0, 0, 100 }, { ML_KIND_HEAP, 0, 20, 60 } };
static struct ml_fmt_timepoint tl_b[] = { { ML_KIND_HEAP, 0, 5, 10 }, { ML_KIND_HEAP, 0, 30, 30 } };
static const char *argv_a[] = { "prog" };
static struct ml_warning warn_b[] = { { "the program uses SIGPROF; line timing is off", false } };

static struct ml_profile pa, pb;

static void setup(void)
{
	memset(&pa, 0, sizeof(pa));
	memset(&pb, 0, sizeof(pb));
	pa.path = "a.mlp";
	pa.exe = "/bin/prog";
	pa.argv = argv_a;
	pa.meta.argc = 1;
	pa.meta.pid = 100;
	pa.meta.start_realtime_ns = 1000;
	pa.meta.duration_ns = 50;
	pa.modules = mods_a;
	pa.n_modules = 1;
	pa.stacks = stacks_a;
	pa.n_stacks = 2;
	pa.counters = counters_a;
	pa.n_counters = 2;
	pa.totals[ML_KIND_HEAP] = (struct ml_fmt_total){ .kind = ML_KIND_HEAP, .allocs = 3,
		.alloc_bytes = 108, .frees = 1, .freed_bytes = 40, .live_blocks = 1,
		.live_bytes = 60, .peak_bytes = 108, .peak_time_ns = 7 };
	pa.kinds_present = 1u << ML_KIND_HEAP;
	pa.timeline = tl_a;
	pa.n_timeline = 2;
	pa.process = (struct ml_process_info){ .rank = 1, .local_rank = 1, .world_size = 2,
					       .host = "h" };
	pb = pa;
	pb.path = "b.mlp";
	pb.meta.pid = 101;
	pb.meta.start_realtime_ns = 1010;	/* 10 ns after a */
	pb.modules = mods_b;
	pb.n_modules = 2;
	pb.stacks = stacks_b;
	pb.counters = counters_b;
	pb.totals[ML_KIND_HEAP] = (struct ml_fmt_total){ .kind = ML_KIND_HEAP, .allocs = 4,
		.alloc_bytes = 35, .frees = 1, .freed_bytes = 5, .live_blocks = 3,
		.live_bytes = 30, .peak_bytes = 30, .peak_time_ns = 9 };
	pb.timeline = tl_b;
	pb.process.rank = 0;
	pb.warnings = warn_b;
	pb.n_warnings = 1;
}

static struct ml_profile *merge_ab(void)
{
	const struct ml_profile *in[] = { &pa, &pb };
	struct ml_profile *m = NULL;
	char err[128] = "";
	ck_assert_int_eq(ml_profile_merge(in, 2, "merged", &m, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(m);
	return m;
}

/* The merged module holding addr, and the file address there. */
static const struct ml_module *module_of(const struct ml_profile *m, uint64_t addr)
{
	const struct ml_module *mod = ml_profile_module(m, addr);
	ck_assert_ptr_nonnull(mod);
	return mod;
}

START_TEST(merge_modules_once_file_addresses_kept)
{
	struct ml_profile *m = merge_ab();
	ck_assert_uint_eq(m->n_modules, 2);	/* /bin/prog once, libx */
	for (size_t s = 0; s < m->n_stacks; s++)
		for (uint32_t d = 0; d < m->stacks[s].depth; d++) {
			uint64_t a = m->stacks[s].frames[d];
			const struct ml_module *mod = module_of(m, a);
			uint64_t off = a - mod->bias;
			/* 0x2200 - 0x1000 = 0x1200 in a; 0x52200 - 0x51000 in b; libx 0x500 */
			ck_assert(off == 0x1100 || off == 0x1200 || off == 0x1300 || off == 0x500);
		}
	ck_assert_int_eq(strcmp(m->path, "merged"), 0);
	ml_profile_free(m);
}
END_TEST

START_TEST(merge_equal_stacks_become_one)
{
	struct ml_profile *m = merge_ab();
	/* main -> f of both processes is one stack: 3 stacks in all. */
	ck_assert_uint_eq(m->n_stacks, 3);
	ck_assert_uint_eq(m->n_counters, 3);
	const struct ml_fmt_counter *f = NULL;
	for (size_t i = 0; i < m->n_counters; i++)
		if (m->counters[i].allocs == 5)
			f = &m->counters[i];
	ck_assert_ptr_nonnull(f);	/* 2 + 3 */
	ck_assert_uint_eq(f->alloc_bytes, 130);
	ck_assert_uint_eq(f->live_bytes, 90);
	ck_assert_uint_eq(f->peak_bytes, 110);	/* each process's own peak, summed */
	ck_assert_uint_eq(f->frees, 1);
	const struct ml_stack *st = ml_profile_stack(m, f->stack_id);
	ck_assert_ptr_nonnull(st);
	ck_assert_uint_eq(st->depth, 2);
	ml_profile_free(m);
}
END_TEST

START_TEST(merge_totals_timeline_meta)
{
	struct ml_profile *m = merge_ab();
	const struct ml_fmt_total *t = &m->totals[ML_KIND_HEAP];
	ck_assert_uint_eq(t->allocs, 7);
	ck_assert_uint_eq(t->alloc_bytes, 143);
	ck_assert_uint_eq(t->live_bytes, 90);
	ck_assert_uint_eq(t->peak_bytes, 138);
	ck_assert_uint_eq(m->kinds_present, 1u << ML_KIND_HEAP);
	/* Wall-clock sum: a 100 at 0, b 10 at 15, a 60 at 20, b 30 at 40. */
	ck_assert_uint_eq(m->n_timeline, 4);
	const uint64_t when[] = { 0, 15, 20, 40 }, live[] = { 100, 110, 70, 90 };
	for (size_t i = 0; i < 4; i++) {
		ck_assert_uint_eq(m->timeline[i].time_ns, when[i]);
		ck_assert_uint_eq(m->timeline[i].live_bytes, live[i]);
	}
	ck_assert_uint_eq(m->meta.pid, 0);
	ck_assert_uint_eq(m->meta.start_realtime_ns, 1000);
	ck_assert_uint_eq(m->meta.duration_ns, 60);
	ck_assert_int_eq(m->process.rank, -1);	/* ranks differ */
	ck_assert_str_eq(m->process.host, "h");
	ck_assert_uint_eq(m->n_merged, 2);
	ck_assert_uint_eq(m->n_warnings, 1);
	ml_profile_free(m);
}
END_TEST

START_TEST(merge_samples_of_two_clocks_refused)
{
	struct ml_sample sa = { 1, 2, 0, 4, fa1 }, sb = { 2, 2, 0, 6, fb1 };
	pa.has_samples = pb.has_samples = true;
	pa.sampling = (struct ml_fmt_sampling){ .period_ns = 1000, .samples = 4,
						.clock = ML_CLOCK_CPU, .threads = 1 };
	pb.sampling = pa.sampling;
	pb.sampling.period_ns = 2000;	/* half the rate: counts double */
	pb.sampling.samples = 6;
	pa.samples = &sa;
	pb.samples = &sb;
	pa.n_samples = pb.n_samples = 1;
	struct ml_profile *m = merge_ab();
	ck_assert_uint_eq(m->sampling.samples, 4 + 12);
	ck_assert_uint_eq(m->n_samples, 2);
	ck_assert_uint_eq(m->sampling.threads, 2);
	ml_profile_free(m);
	pb.sampling.clock = ML_CLOCK_WALL;
	const struct ml_profile *in[] = { &pa, &pb };
	char err[256] = "";
	ck_assert_int_lt(ml_profile_merge(in, 2, "merged", &m, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "wall clock"));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("merge");
	TCase *tc = tcase_create("merge");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, merge_modules_once_file_addresses_kept);
	tcase_add_test(tc, merge_equal_stacks_become_one);
	tcase_add_test(tc, merge_totals_timeline_meta);
	tcase_add_test(tc, merge_samples_of_two_clocks_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
