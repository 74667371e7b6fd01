/* tests/check_stacktab.c - stack capture (libunwind) and the stack table:
 * dedup, ids, truncation, concurrent interning, and the ml_track_* path. */
#include "core/internal.h"
#include "core/core.h"

#include <check.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
	ck_assert_int_eq(ml_core_init(0), 0);
}

START_TEST(intern_dedups)
{
	uint64_t a[3] = { 0x1000, 0x2000, 0x3000 }, b[3] = { 0x1000, 0x2000, 0x3001 };
	uint32_t before = ml_stacktab_count();
	struct ml_stack_entry *ea = ml_stacktab_intern(a, 3, 0);
	struct ml_stack_entry *ea2 = ml_stacktab_intern(a, 3, 0);
	struct ml_stack_entry *eb = ml_stacktab_intern(b, 3, 0);
	struct ml_stack_entry *ea_short = ml_stacktab_intern(a, 2, 0);
	struct ml_stack_entry *ea_trunc = ml_stacktab_intern(a, 3, ML_STACK_TRUNCATED);
	ck_assert_ptr_nonnull(ea);
	ck_assert_ptr_eq(ea, ea2);
	ck_assert_ptr_ne(ea, eb);
	ck_assert_ptr_ne(ea, ea_short);
	ck_assert_ptr_ne(ea, ea_trunc);
	ck_assert_uint_eq(ml_stacktab_count(), before + 4);
	ck_assert_uint_gt(ea->id, 0);
	ck_assert_uint_ne(ea->id, eb->id);
	ck_assert_uint_eq(ea->depth, 3);
	ck_assert_uint_eq(ea_short->depth, 2);
	ck_assert_uint_eq(ea->frames[2], 0x3000);
	ck_assert_uint_eq(ea_trunc->flags, ML_STACK_TRUNCATED);
	struct ml_counter *c = ml_stacktab_counter(ea, ML_KIND_CUDA_DEVICE);
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_eq(c, ml_stacktab_counter(ea, ML_KIND_CUDA_DEVICE));
	ck_assert_ptr_ne(c, ml_stacktab_counter(ea, ML_KIND_HEAP));
	ck_assert_uint_eq(c->kind, ML_KIND_CUDA_DEVICE);
	ck_assert_uint_eq(c->stack_id, ea->id);
}
END_TEST

/* Captures at recursion level n; returns depth, and in *ra the return
 * address of the innermost level.  frames[0] is inside ml_stacktab_capture,
 * frames[1] inside capture_at(0), frames[2] must be *ra. */
static uint32_t __attribute__((noinline)) capture_at(int n, uint64_t *frames, uint32_t max,
						      uint32_t *flags, uint64_t *ra)
{
	if (n > 0) {
		uint32_t d = capture_at(n - 1, frames, max, flags, ra);
		__asm__ volatile("" ::: "memory");	/* no tail call */
		return d;
	}
	*ra = (uint64_t)__builtin_return_address(0);
	uint32_t d = ml_stacktab_capture(frames, max, flags);
	__asm__ volatile("" ::: "memory");	/* no tail call */
	return d;
}

START_TEST(capture_follows_the_calls)
{
	uint64_t f3[ML_DEPTH_MAX], f7[ML_DEPTH_MAX], ra3, ra7;
	uint32_t fl3, fl7;
	uint32_t d3 = capture_at(3, f3, 64, &fl3, &ra3);
	uint32_t d7 = capture_at(7, f7, 64, &fl7, &ra7);
	ck_assert_uint_eq(d7, d3 + 4);
	ck_assert_uint_eq(fl3, 0);
	ck_assert_uint_eq(f3[2], ra3);
	ck_assert_uint_eq(f7[2], ra7);
	/* The outer frames are the same calls. */
	ck_assert_uint_eq(f3[d3 - 1], f7[d7 - 1]);
}
END_TEST

START_TEST(capture_truncates)
{
	uint64_t f[ML_DEPTH_MAX], ra;
	uint32_t flags;
	uint32_t d = capture_at(10, f, 5, &flags, &ra);
	ck_assert_uint_eq(d, 5);
	ck_assert_uint_eq(flags, ML_STACK_TRUNCATED);
	ck_assert_uint_eq(f[2], ra);
}
END_TEST

/* The cached walker (core/unwind.c) against libunwind from the same
 * function: past frame 0 (each call's own return address) they must agree
 * frame for frame, to the same outermost frame. */
struct both { uint64_t fast[80], slow[80]; int n_fast, n_slow; };

static int __attribute__((noinline)) both_at(int n, struct both *b)
{
	if (n > 0) {
		int r = both_at(n - 1, b) + (n & 1);
		__asm__ volatile("" ::: "memory");	/* no tail call */
		return r;
	}
	b->n_fast = ml_unwind_fast(b->fast, 80);
	b->n_slow = unw_backtrace((void **)b->slow, 80);
	__asm__ volatile("" ::: "memory");
	return 0;
}

static void check_both(int depth)
{
	struct both b;
	for (int pass = 0; pass < 3; pass++) {	/* uncached, cached, reused */
		memset(&b, 0, sizeof(b));
		both_at(depth, &b);
		ck_assert_int_gt(b.n_fast, depth + 2);
		ck_assert_int_eq(b.n_fast, b.n_slow);
		for (int i = 1; i < b.n_fast; i++)
			ck_assert_uint_eq(b.fast[i], b.slow[i]);
	}
}

static void *both_thread(void *arg)
{
	check_both(9);
	return NULL;
}

/* Two callers of the same capture with identical frames: the second walk
 * finds the first one's frame state at the same stack addresses, but a
 * return address differs: the reuse must notice and walk that part. */
static int __attribute__((noinline)) via_one(struct both *b)
{
	int r = both_at(0, b);
	__asm__ volatile("" ::: "memory");
	return r;
}

static int __attribute__((noinline)) via_two(struct both *b)
{
	int r = both_at(0, b);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

static void check_pair(struct both *b, int which)
{
	memset(b, 0, sizeof(*b));
	if (which)
		via_two(b);
	else
		via_one(b);
	ck_assert_int_gt(b->n_fast, 3);
	ck_assert_int_eq(b->n_fast, b->n_slow);
	for (int i = 1; i < b->n_fast; i++)
		ck_assert_uint_eq(b->fast[i], b->slow[i]);
}

START_TEST(fast_unwind_alternating_callers)
{
	struct both b, one;
	check_pair(&b, 0);
	check_pair(&one, 0);
	for (int k = 0; k < 6; k++)
		check_pair(&b, k & 1);
	/* via_one's and via_two's stacks differ in their second frame only */
	check_pair(&b, 1);
	ck_assert_uint_ne(b.fast[1], one.fast[1]);
	ck_assert_uint_eq(b.fast[0], one.fast[0]);
}
END_TEST

START_TEST(fast_unwind_matches_libunwind)
{
	check_both(5);
	check_both(20);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, both_thread, NULL), 0);
	pthread_join(th, NULL);
	check_both(5);	/* a shallower stack after a deeper one */
	/* the limit cuts the walk, also when it reuses a longer one */
	uint64_t f[4];
	ck_assert_int_eq(ml_unwind_fast(f, 2), 2);
	ck_assert_int_eq(ml_unwind_fast(f, 2), 2);
}
END_TEST

#define THREADS 8
#define STACKS 2000
static struct ml_stack_entry *seen[THREADS][STACKS];

static void *intern_many(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int k = 0; k < STACKS; k++) {
		int i = (k + t * 97) % STACKS;	/* different orders per thread */
		uint64_t frames[4] = { 0x5000u + (uint64_t)i, 0x6000, 0x7000, (uint64_t)i * 31 };
		seen[t][i] = ml_stacktab_intern(frames, 4, 0);
	}
	return NULL;
}

START_TEST(intern_concurrent)
{
	pthread_t th[THREADS];
	uint32_t before = ml_stacktab_count();
	for (int t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, intern_many, (void *)(intptr_t)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	ck_assert_uint_eq(ml_stacktab_count(), before + STACKS);
	for (int i = 0; i < STACKS; i++) {
		ck_assert_ptr_nonnull(seen[0][i]);
		for (int t = 1; t < THREADS; t++)
			ck_assert_ptr_eq(seen[t][i], seen[0][i]);
		ck_assert_uint_eq(seen[0][i]->frames[0], 0x5000u + (uint64_t)i);
	}
}
END_TEST

static void *__attribute__((noinline)) site_a(size_t n)
{
	void *p = malloc(n);
	ml_track_alloc(p, n, ML_KIND_HEAP);
	return p;
}

static void *__attribute__((noinline)) site_b(size_t n)
{
	void *p = malloc(n);
	ml_track_alloc(p, n, ML_KIND_HEAP);
	return p;
}

static struct ml_stack_entry *found;
static uint32_t found_id;
static void find_id(struct ml_stack_entry *e, void *arg)
{
	if (e->id == found_id)
		found = e;
}

/* The counter of ptr's allocation, through the live table. */
static struct ml_counter *counter_of(void *p)
{
	struct ml_live_block b;
	ck_assert(ml_livetab_remove((uint64_t)p, ML_KIND_HEAP, &b));
	struct ml_live_block old;
	ck_assert_int_eq(ml_livetab_insert(b.addr, b.size, b.counter, &old), 0);
	return b.counter;
}

START_TEST(track_path)
{
	ck_assert(ml_guard_enter_always());	/* ml_track_*'s contract */
	void *a[2], *b1 = site_b(7);
	for (volatile int i = 0; i < 2; i++)	/* one call site, so one stack */
		a[i] = site_a(100);
	void *a1 = a[0], *a2 = a[1];
	struct ml_counter *ca = counter_of(a1), *cb = counter_of(b1);
	ck_assert_ptr_ne(ca, cb);
	ck_assert_uint_eq(ca->allocs, 2);
	ck_assert_uint_eq(ca->live_bytes, 200);
	ck_assert_uint_eq(cb->allocs, 1);
	ck_assert_uint_eq(ml_track_free(a1, ML_KIND_HEAP), 100);
	ck_assert_uint_eq(ml_track_free(a1, ML_KIND_HEAP), 0);	/* unknown now */
	ck_assert_uint_eq(ml_track_free(b1, ML_KIND_CUDA_DEVICE), 0);	/* other kind */
	ck_assert_uint_eq(ca->frees, 1);
	ck_assert_uint_eq(ca->live_bytes, 100);
	/* realloc of a2 to 300 bytes: one free, one alloc, from this stack. */
	struct ml_track_held held;
	ck_assert(ml_track_detach(a2, ML_KIND_HEAP, &held));
	void *a3 = realloc(a2, 300);
	ml_track_moved(&held, a3, 300, ML_KIND_HEAP);
	ck_assert_uint_eq(ca->frees, 2);
	ck_assert_uint_eq(ca->live_bytes, 0);
	ck_assert_uint_eq(ml_track_free(a3, ML_KIND_HEAP), 300);
	ck_assert_uint_eq(ml_track_free(b1, ML_KIND_HEAP), 7);
	/* The stack of site_a's counter is in the table with its frames. */
	found_id = ca->stack_id;
	found = NULL;
	ml_stacktab_foreach(find_id, NULL);
	ck_assert_ptr_nonnull(found);
	ck_assert_uint_ge(found->depth, 3);
	free(a1);
	free(a3);
	free(b1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stacktab");
	TCase *tc = tcase_create("stacktab");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, intern_dedups);
	tcase_add_test(tc, capture_follows_the_calls);
	tcase_add_test(tc, capture_truncates);
	tcase_add_test(tc, fast_unwind_matches_libunwind);
	tcase_add_test(tc, fast_unwind_alternating_callers);
	tcase_add_test(tc, intern_concurrent);
	tcase_add_test(tc, track_path);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
