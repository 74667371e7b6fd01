/* tests/check_peak.c - the exact peak (lazy snapshot in core/counters.c):
 * sequences with known bytes per stack at the peak, a random sequence
 * against a brute-force model, a 16-thread stress, and the timeline. */
#include "core/internal.h"
#include "core/core.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static struct ml_counter ctr[16];

static void setup(void)
{
	ml_counters_reset_totals();
	ml_timeline_reset(ml_clock_coarse_ns());
	memset(ctr, 0, sizeof(ctr));
	for (uint32_t i = 0; i < 16; i++) {
		ctr[i].stack_id = i + 1;
		ctr[i].kind = ML_KIND_HEAP;
	}
}

static uint64_t at_peak(int i)
{
	uint64_t bytes, blocks;
	ml_counters_at_peak(&ctr[i], &bytes, &blocks);
	return bytes;
}

static uint64_t at_peak_blocks(int i)
{
	uint64_t bytes, blocks;
	ml_counters_at_peak(&ctr[i], &bytes, &blocks);
	return blocks;
}

static uint64_t peak(void)
{
	struct ml_kind_totals t;
	ml_counters_totals(ML_KIND_HEAP, &t);
	return t.peak_bytes;
}

START_TEST(peak_later_growth)
{
	ml_counters_alloc(&ctr[0], 100);	/* A 100, total 100 */
	ml_counters_alloc(&ctr[1], 50);		/* B 50, total 150 */
	ml_counters_free(&ctr[0], 100);		/* total 50 */
	ml_counters_alloc(&ctr[1], 200);	/* B 250, total 250: the peak */
	ck_assert_uint_eq(peak(), 250);
	ck_assert_uint_eq(at_peak(0), 0);
	ck_assert_uint_eq(at_peak(1), 250);
	ck_assert_uint_eq(at_peak_blocks(1), 2);
}
END_TEST

START_TEST(peak_in_the_middle)
{
	ml_counters_alloc(&ctr[0], 100);
	ml_counters_alloc(&ctr[1], 300);	/* total 400: the peak */
	ml_counters_free(&ctr[1], 300);
	ml_counters_alloc(&ctr[0], 50);
	ml_counters_alloc(&ctr[2], 70);		/* C never saw the peak */
	ck_assert_uint_eq(peak(), 400);
	ck_assert_uint_eq(at_peak(0), 100);
	ck_assert_uint_eq(at_peak_blocks(0), 1);
	ck_assert_uint_eq(at_peak(1), 300);
	ck_assert_uint_eq(at_peak(2), 0);
	ck_assert_uint_eq(ctr[0].live_bytes, 150);
}
END_TEST

START_TEST(peak_tie_keeps_first)
{
	ml_counters_alloc(&ctr[0], 100);	/* peak 100, all A */
	ml_counters_free(&ctr[0], 100);
	ml_counters_alloc(&ctr[1], 100);	/* equal, not higher */
	ck_assert_uint_eq(peak(), 100);
	ck_assert_uint_eq(at_peak(0), 100);
	ck_assert_uint_eq(at_peak(1), 0);
}
END_TEST

START_TEST(peak_move_is_one_event)
{
	ml_counters_alloc(&ctr[0], 100);
	ml_counters_move(&ctr[0], 100, &ctr[1], 300);	/* never 400 live */
	ck_assert_uint_eq(peak(), 300);
	ck_assert_uint_eq(at_peak(0), 0);
	ck_assert_uint_eq(at_peak(1), 300);
	ck_assert_uint_eq(ctr[0].frees, 1);
	ck_assert_uint_eq(ctr[1].allocs, 1);
	ml_counters_move(&ctr[1], 300, &ctr[1], 10);	/* shrink in place */
	ck_assert_uint_eq(peak(), 300);
	ck_assert_uint_eq(at_peak(1), 300);
	ck_assert_uint_eq(ctr[1].live_bytes, 10);
	ck_assert_uint_eq(ctr[1].live_blocks, 1);
}
END_TEST

/* Random events against a model that copies every stack's live bytes each
 * time the total sets a new maximum. */
START_TEST(peak_random_vs_model)
{
	uint64_t live[8] = { 0 }, model_at_peak[8] = { 0 }, total = 0, model_peak = 0;
	uint64_t blocks[8][64];
	int n[8] = { 0 };
	srand(12345);
	for (int step = 0; step < 200000; step++) {
		int s = rand() % 8;
		if (n[s] < 64 && (n[s] == 0 || rand() % 2)) {
			uint64_t size = (uint64_t)(rand() % 1000);
			blocks[s][n[s]++] = size;
			ml_counters_alloc(&ctr[s], size);
			live[s] += size;
			total += size;
		} else {
			int k = rand() % n[s];
			uint64_t size = blocks[s][k];
			blocks[s][k] = blocks[s][--n[s]];
			ml_counters_free(&ctr[s], size);
			live[s] -= size;
			total -= size;
		}
		if (total > model_peak) {
			model_peak = total;
			memcpy(model_at_peak, live, sizeof(live));
		}
	}
	ck_assert_uint_eq(peak(), model_peak);
	for (int s = 0; s < 8; s++) {
		ck_assert_uint_eq(at_peak(s), model_at_peak[s]);
		ck_assert_uint_eq(ctr[s].live_bytes, live[s]);
	}
}
END_TEST

/* 16 threads on 16 counters, each thread hitting its own and a shared
 * counter: the per-counter bytes at the peak must add up to the peak. */
#define THREADS 16
#define ROUNDS 20000

static void *stress(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t sizes[32];
	struct ml_counter *owner[32];
	int n = 0;
	unsigned seed = (unsigned)t * 7919u + 1;
	for (int r = 0; r < ROUNDS; r++) {
		struct ml_counter *c = (r % 3 == 0) ? &ctr[(t + 1) % THREADS] : &ctr[t];
		if (n < 32 && (n == 0 || rand_r(&seed) % 2)) {
			sizes[n] = (uint64_t)(rand_r(&seed) % 4096) + 1;
			owner[n] = c;
			ml_counters_alloc(c, sizes[n]);
			n++;
		} else {
			n--;
			ml_counters_free(owner[n], sizes[n]);
		}
	}
	/* Leave some blocks live: at the end 1 per thread on its own counter. */
	while (n > 1) {
		n--;
		ml_counters_free(owner[n], sizes[n]);
	}
	if (n == 1 && owner[0] != &ctr[t]) {
		ml_counters_free(owner[0], sizes[0]);
		n = 0;
	}
	if (n == 0)
		ml_counters_alloc(&ctr[t], 1000);
	return NULL;
}

START_TEST(peak_threads_sum_matches)
{
	pthread_t th[THREADS];
	for (int t = 0; t < THREADS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, stress, (void *)(intptr_t)t), 0);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	struct ml_kind_totals tot;
	ml_counters_totals(ML_KIND_HEAP, &tot);
	uint64_t sum_at_peak = 0, sum_live = 0, allocs = 0, frees = 0, ab = 0, fb = 0;
	for (int i = 0; i < THREADS; i++) {
		sum_at_peak += at_peak(i);
		sum_live += ctr[i].live_bytes;
		allocs += ctr[i].allocs;
		frees += ctr[i].frees;
		ab += ctr[i].alloc_bytes;
		fb += ctr[i].freed_bytes;
	}
	ck_assert_uint_gt(tot.peak_bytes, 0);
	ck_assert_uint_eq(sum_at_peak, tot.peak_bytes);
	ck_assert_uint_eq(sum_live, tot.live_bytes);
	ck_assert_uint_eq(allocs, frees + THREADS);
	ck_assert_uint_eq(ab - fb, tot.live_bytes);
	for (int i = 0; i < THREADS; i++) {
		ck_assert_uint_eq(ctr[i].live_blocks, 1);
		ck_assert_uint_le(at_peak(i), tot.peak_bytes);
	}
}
END_TEST

static uint64_t timeline_max;
static void max_point(uint32_t kind, uint64_t tsc, uint64_t live, void *arg)
{
	if (arg)
		(*(uint64_t *)arg)++;
	if (kind == ML_KIND_HEAP && live > timeline_max)
		timeline_max = live;
}

START_TEST(timeline_holds_the_peak)
{
	for (int i = 0; i < 1000; i++)
		ml_counters_alloc(&ctr[0], 10);
	for (int i = 0; i < 1000; i++)
		ml_counters_free(&ctr[0], 10);
	ml_counters_alloc(&ctr[1], 7);
	timeline_max = 0;
	ml_timeline_foreach(max_point, NULL);
	ck_assert_uint_eq(timeline_max, 10000);
	ck_assert_uint_eq(peak(), 10000);
}
END_TEST

/* Many widenings: still bounded, still holds the maximum. */
START_TEST(timeline_bounded)
{
	uint64_t t0 = 1000;
	ml_timeline_reset(t0);
	/* 100000 events 1 ms apart: 100 s, many merges. */
	for (uint64_t i = 0; i < 100000; i++)
		ml_timeline_note(ML_KIND_HEAP, t0 + i * 1000000, i == 5000 ? 999999 : i % 100);
	uint64_t count = 0;
	timeline_max = 0;
	ml_timeline_foreach(max_point, &count);
	ck_assert_uint_eq(timeline_max, 999999);
	ck_assert_uint_le(count, ML_TIMELINE_POINTS);
	ck_assert_uint_ge(count, ML_TIMELINE_POINTS / 4);
}
END_TEST

/* Debug builds (ML_DEBUG: CONFIG=debug, CONFIG=asan) check invariants:
 * freeing more than a stack holds aborts instead of wrapping around. */
START_TEST(debug_underflow_aborts)
{
	ml_counters_alloc(&ctr[0], 10);
	ml_counters_free(&ctr[0], 10);
	ml_counters_free(&ctr[0], 10);	/* one free too many */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("peak");
	TCase *tc = tcase_create("peak");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, peak_later_growth);
	tcase_add_test(tc, peak_in_the_middle);
	tcase_add_test(tc, peak_tie_keeps_first);
	tcase_add_test(tc, peak_move_is_one_event);
	tcase_add_test(tc, peak_random_vs_model);
	tcase_add_test(tc, peak_threads_sum_matches);
	tcase_add_test(tc, timeline_holds_the_peak);
	tcase_add_test(tc, timeline_bounded);
	if (ML_DEBUG)
		tcase_add_test_raise_signal(tc, debug_underflow_aborts, SIGABRT);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
