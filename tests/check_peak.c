/* tests/check_peak.c - the exact peak (lazy snapshot in core/counters.c):
 * sequences with known bytes per stack at the peak, a random sequence
 * against a brute-force model, 16 threads with counters of their own
 * (summed, and folded as threads end), and the timeline. */
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
		ctr[i].stack = i + 1;
		ctr[i].kind = ML_KIND_HEAP;
	}
}

static struct ml_counter_sum sum_of(const struct ml_counter *c)
{
	struct ml_counter_sum s = { 0 };
	ml_counters_add(&s, c, ml_counters_peak(ML_KIND_HEAP));
	return s;
}

static uint64_t at_peak(int i)
{
	return (uint64_t)sum_of(&ctr[i]).peak_bytes;
}

static uint64_t at_peak_blocks(int i)
{
	return (uint64_t)sum_of(&ctr[i]).peak_blocks;
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
	ck_assert_int_eq(ctr[0].live_blocks, 0);
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

/* 16 threads, 16 stacks, each thread with counters of its own (the
 * runtime's contract: only their thread writes them).  Thread t allocates
 * on stacks t and t+1 and frees some blocks another thread allocated: the
 * per-stack bytes at the peak, summed over threads, must add up to the
 * peak, and so must those of counters folded as if their threads ended. */
#define THREADS 16
#define ROUNDS 20000
static struct ml_counter tctr[THREADS][THREADS];
struct handoff { volatile uint64_t size; volatile int stack; };
static struct handoff box[THREADS];

static void *stress(void *arg)
{
	int t = (int)(intptr_t)arg;
	struct ml_counter *mine = tctr[t];
	uint64_t sizes[32];
	int stacks[32], n = 0;
	unsigned seed = (unsigned)t * 7919u + 1;
	for (int r = 0; r < ROUNDS; r++) {
		int st = (r % 3 == 0) ? (t + 1) % THREADS : t;
		if (n < 32 && (n == 0 || rand_r(&seed) % 2)) {
			sizes[n] = (uint64_t)(rand_r(&seed) % 4096) + 1;
			stacks[n] = st;
			ml_counters_alloc(&mine[st], sizes[n]);
			n++;
		} else {
			n--;
			/* Every 8th free goes to the next thread through its box
			 * (it frees it with its own counter of that stack). */
			struct handoff *b = &box[(t + 1) % THREADS];
			if (r % 8 == 0 && !__atomic_load_n(&b->size, __ATOMIC_ACQUIRE)) {
				b->stack = stacks[n];
				__atomic_store_n(&b->size, sizes[n], __ATOMIC_RELEASE);
			} else {
				ml_counters_free(&mine[stacks[n]], sizes[n]);
			}
		}
		uint64_t got = __atomic_load_n(&box[t].size, __ATOMIC_ACQUIRE);
		if (got) {
			ml_counters_free(&mine[box[t].stack], got);
			__atomic_store_n(&box[t].size, 0, __ATOMIC_RELEASE);
		}
	}
	while (n > 0) {
		n--;
		ml_counters_free(&mine[stacks[n]], sizes[n]);
	}
	ml_counters_alloc(&mine[t], 1000);	/* one block per thread at the end */
	return NULL;
}

START_TEST(peak_threads_sum_matches)
{
	pthread_t th[THREADS];
	memset(tctr, 0, sizeof(tctr));
	memset(box, 0, sizeof(box));
	for (int t = 0; t < THREADS; t++)
		for (int k = 0; k < THREADS; k++) {
			tctr[t][k].stack = (uint32_t)k + 1;
			tctr[t][k].kind = ML_KIND_HEAP;
		}
	for (int t = 0; t < THREADS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, stress, (void *)(intptr_t)t), 0);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	/* Blocks still in a box were handed off and never freed: count them. */
	uint64_t boxed = 0;
	for (int t = 0; t < THREADS; t++)
		boxed += box[t].size;
	struct ml_kind_totals tot;
	ml_counters_totals(ML_KIND_HEAP, &tot);
	uint64_t final = ml_counters_peak(ML_KIND_HEAP);
	struct ml_counter_sum all = { 0 };
	struct ml_counter folded[THREADS];
	memset(folded, 0, sizeof(folded));
	for (int k = 0; k < THREADS; k++) {
		struct ml_counter_sum stack = { 0 };
		folded[k].stack = (uint32_t)k + 1;
		folded[k].kind = ML_KIND_HEAP;
		for (int t = 0; t < THREADS; t++) {
			ml_counters_add(&stack, &tctr[t][k], final);
			ml_counters_fold(&folded[k], &tctr[t][k]);
		}
		ck_assert_int_ge(stack.live_blocks, 1);
		ck_assert_int_ge(stack.peak_bytes, 0);
		/* a folded counter says the same */
		struct ml_counter_sum f = { 0 };
		ml_counters_add(&f, &folded[k], final);
		ck_assert_int_eq(f.peak_bytes, stack.peak_bytes);
		ck_assert_int_eq(f.live_bytes, stack.live_bytes);
		ck_assert_uint_eq(f.allocs, stack.allocs);
		all.allocs += stack.allocs;
		all.live_blocks += stack.live_blocks;
		all.live_bytes += stack.live_bytes;
		all.peak_bytes += stack.peak_bytes;
	}
	ck_assert_uint_gt(tot.peak_bytes, 0);
	ck_assert_uint_eq((uint64_t)all.peak_bytes, tot.peak_bytes);
	ck_assert_uint_eq((uint64_t)all.live_bytes, tot.live_bytes);
	ck_assert_uint_eq(tot.live_bytes, THREADS * 1000 + boxed);
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
