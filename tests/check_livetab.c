/* tests/check_livetab.c - the live table: insert, remove, kinds, growth,
 * backward-shift deletion, reset, and 16 threads freeing each other's
 * blocks. */
#include "core/internal.h"

#include <check.h>
#include <pthread.h>
#include <string.h>

static struct ml_counter heap = { .kind = ML_KIND_HEAP, .stack_id = 1 };
static struct ml_counter dev = { .kind = ML_KIND_CUDA_DEVICE, .stack_id = 2 };

static void setup(void)
{
	ml_livetab_reset();
}

START_TEST(insert_remove)
{
	struct ml_live_block b, old;
	ck_assert_int_eq(ml_livetab_insert(0x1000, 42, &heap, &old), 0);
	ck_assert_uint_eq(old.addr, 0);
	ck_assert_int_eq(ml_livetab_insert(0x1000, 7, &dev, &old), 0);	/* same addr, other kind */
	ck_assert_uint_eq(ml_livetab_count(), 2);
	ck_assert(!ml_livetab_remove(0x2000, ML_KIND_HEAP, &b));
	ck_assert(ml_livetab_remove(0x1000, ML_KIND_HEAP, &b));
	ck_assert_uint_eq(b.addr, 0x1000);
	ck_assert_uint_eq(b.size, 42);
	ck_assert_ptr_eq(b.counter, &heap);
	ck_assert(!ml_livetab_remove(0x1000, ML_KIND_HEAP, &b));
	ck_assert(ml_livetab_remove(0x1000, ML_KIND_CUDA_DEVICE, &b));
	ck_assert_uint_eq(b.size, 7);
	ck_assert_uint_eq(ml_livetab_count(), 0);
}
END_TEST

START_TEST(insert_existing_returns_old)
{
	struct ml_live_block b, old;
	ck_assert_int_eq(ml_livetab_insert(0x3000, 10, &heap, &old), 0);
	ck_assert_int_eq(ml_livetab_insert(0x3000, 20, &heap, &old), 0);
	ck_assert_uint_eq(old.addr, 0x3000);
	ck_assert_uint_eq(old.size, 10);
	ck_assert_uint_eq(ml_livetab_count(), 1);
	ck_assert(ml_livetab_remove(0x3000, ML_KIND_HEAP, &b));
	ck_assert_uint_eq(b.size, 20);
}
END_TEST

/* Many entries (shards grow many times); remove every other one, then
 * check exactly the rest is there with its sizes. */
START_TEST(many_entries)
{
	struct ml_live_block b, old;
	const uint64_t n = 300000;
	for (uint64_t i = 1; i <= n; i++)
		ck_assert_int_eq(ml_livetab_insert(i * 16, i, &heap, &old), 0);
	ck_assert_uint_eq(ml_livetab_count(), n);
	for (uint64_t i = 1; i <= n; i += 2)
		ck_assert(ml_livetab_remove(i * 16, ML_KIND_HEAP, &b));
	ck_assert_uint_eq(ml_livetab_count(), n / 2);
	for (uint64_t i = 1; i <= n; i++) {
		bool present = ml_livetab_remove(i * 16, ML_KIND_HEAP, &b);
		ck_assert_int_eq(present, i % 2 == 0);
		if (present)
			ck_assert_uint_eq(b.size, i);
	}
	ck_assert_uint_eq(ml_livetab_count(), 0);
}
END_TEST

START_TEST(reset_forgets)
{
	struct ml_live_block b, old;
	ck_assert_int_eq(ml_livetab_insert(0x4000, 1, &heap, &old), 0);
	ml_livetab_reset();
	ck_assert_uint_eq(ml_livetab_count(), 0);
	ck_assert(!ml_livetab_remove(0x4000, ML_KIND_HEAP, &b));
	ck_assert_int_eq(ml_livetab_insert(0x4000, 2, &heap, &old), 0);
	ck_assert(ml_livetab_remove(0x4000, ML_KIND_HEAP, &b));
	ck_assert_uint_eq(b.size, 2);
}
END_TEST

/* Thread t inserts its range, then removes thread (t+1)'s range, retrying
 * until each block has been seen: every block removed exactly once. */
#define THREADS 16
#define PER_THREAD 20000
static uint64_t removed_size[THREADS];
static pthread_barrier_t barrier;

static uint64_t addr_of(int t, int i)
{
	return 0x100000000ull + ((uint64_t)t * PER_THREAD + (uint64_t)i) * 32;
}

static void *cross(void *arg)
{
	int t = (int)(intptr_t)arg, other = (t + 1) % THREADS;
	struct ml_live_block b, old;
	for (int i = 0; i < PER_THREAD; i++)
		ml_livetab_insert(addr_of(t, i), (uint64_t)i + 1, &heap, &old);
	pthread_barrier_wait(&barrier);
	for (int i = 0; i < PER_THREAD; i++)
		if (ml_livetab_remove(addr_of(other, i), ML_KIND_HEAP, &b))
			removed_size[t] += b.size;
	return NULL;
}

START_TEST(threads_free_each_other)
{
	pthread_t th[THREADS];
	memset(removed_size, 0, sizeof(removed_size));
	pthread_barrier_init(&barrier, NULL, THREADS);
	for (int t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, cross, (void *)(intptr_t)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&barrier);
	for (int t = 0; t < THREADS; t++)
		ck_assert_uint_eq(removed_size[t], (uint64_t)PER_THREAD * (PER_THREAD + 1) / 2);
	ck_assert_uint_eq(ml_livetab_count(), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("livetab");
	TCase *tc = tcase_create("livetab");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, insert_remove);
	tcase_add_test(tc, insert_existing_returns_old);
	tcase_add_test(tc, many_entries);
	tcase_add_test(tc, reset_forgets);
	tcase_add_test(tc, threads_free_each_other);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
