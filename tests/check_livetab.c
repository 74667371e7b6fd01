/* tests/check_livetab.c - the live table: insert, remove, kinds, growth
 * (cuckoo evictions in one crowded region), sizes of 4 GiB and more, the
 * memory it takes per block, reset, and 16 threads freeing each other's
 * blocks. */
#include "core/internal.h"

#include <check.h>
#include <pthread.h>
#include <string.h>

#define HEAP ML_KIND_HEAP
#define DEV ML_KIND_CUDA_DEVICE

static void setup(void)
{
	ml_livetab_reset();
}

START_TEST(insert_remove)
{
	struct ml_live_block b, old;
	ck_assert_int_eq(ml_livetab_insert(0x1000, HEAP, 42, 1, &old), 0);
	ck_assert_uint_eq(old.addr, 0);
	ck_assert_int_eq(ml_livetab_insert(0x1000, DEV, 7, 2, &old), 0);	/* same addr, other kind */
	ck_assert_uint_eq(ml_livetab_count(), 2);
	ck_assert(!ml_livetab_remove(0x2000, ML_KIND_HEAP, &b));
	ck_assert(ml_livetab_remove(0x1000, ML_KIND_HEAP, &b));
	ck_assert_uint_eq(b.addr, 0x1000);
	ck_assert_uint_eq(b.size, 42);
	ck_assert_uint_eq(b.stack, 1);
	ck_assert_uint_eq(b.kind, HEAP);
	ck_assert(!ml_livetab_remove(0x1000, ML_KIND_HEAP, &b));
	ck_assert(ml_livetab_remove(0x1000, ML_KIND_CUDA_DEVICE, &b));
	ck_assert_uint_eq(b.size, 7);
	ck_assert_uint_eq(ml_livetab_count(), 0);
}
END_TEST

START_TEST(insert_existing_returns_old)
{
	struct ml_live_block b, old;
	ck_assert_int_eq(ml_livetab_insert(0x3000, HEAP, 10, 1, &old), 0);
	ck_assert_int_eq(ml_livetab_insert(0x3000, HEAP, 20, 1, &old), 0);
	ck_assert_uint_eq(old.addr, 0x3000);
	ck_assert_uint_eq(old.size, 10);
	ck_assert_uint_eq(ml_livetab_count(), 1);
	ck_assert(ml_livetab_remove(0x3000, ML_KIND_HEAP, &b));
	ck_assert_uint_eq(b.size, 20);
}
END_TEST

/* Keys that share their low 32 bits in one bucket (addresses a multiple
 * of 4 GiB apart): the inline paths filter ways by the low halves, and
 * must take none of them for another, nor miss a reused address among
 * them.  (One address in two kinds never shares a first bucket.) */
START_TEST(low_halves_shared)
{
	struct ml_live_block b, old;
	const uint32_t shift = 64 - 4;	/* a new shard's 16 buckets (livetab.c) */
	uint64_t x = 0, d = 0;
	for (uint64_t k = 1; k < (1u << 24) && !x; k++) {
		uint64_t g = k << 32;
		for (uint64_t a = 16; a < (16u << 12) && !x; a += 16)
			if (ml_live_shard_of(a) == ml_live_shard_of(a + g) &&
			    ml_live_shard_of(a) == ml_live_shard_of(a + 2 * g) &&
			    ml_live_b1(shift, ml_live_key(a, HEAP)) ==
			    ml_live_b1(shift, ml_live_key(a + g, HEAP)) &&
			    ml_live_b1(shift, ml_live_key(a, HEAP)) ==
			    ml_live_b1(shift, ml_live_key(a + 2 * g, HEAP)))
				x = a, d = g;
			else if (ml_live_shard_of(a) != ml_live_shard_of(a + g))
				break;	/* this k moves every address to another shard */
	}
	ck_assert_uint_ne(x, 0);
	ck_assert_int_eq(ml_livetab_insert(x + d, HEAP, 30, 3, &old), 0);
	ck_assert_uint_eq(ml_live_shard_of(x)->shift, shift);
	ck_assert_uint_eq(old.addr, 0);
	ck_assert_int_eq(ml_livetab_insert(x + 2 * d, HEAP, 20, 2, &old), 0);
	ck_assert_uint_eq(old.addr, 0);
	ck_assert_int_eq(ml_livetab_insert(x, HEAP, 10, 1, &old), 0);
	ck_assert_uint_eq(old.addr, 0);
	ck_assert_uint_eq(ml_livetab_count(), 3);
	/* a reused address among its twins: the missed free is found */
	ck_assert_int_eq(ml_livetab_insert(x, HEAP, 11, 4, &old), 0);
	ck_assert_uint_eq(old.addr, x);
	ck_assert_uint_eq(old.size, 10);
	ck_assert_uint_eq(old.stack, 1);
	ck_assert_uint_eq(ml_livetab_count(), 3);
	ck_assert(!ml_livetab_remove(x + 3 * d, HEAP, &b));
	ck_assert(!ml_livetab_remove(x + d, DEV, &b));
	ck_assert(ml_livetab_remove(x + 2 * d, HEAP, &b));
	ck_assert_uint_eq(b.size, 20);
	ck_assert_uint_eq(b.stack, 2);
	ck_assert(ml_livetab_remove(x + d, HEAP, &b));
	ck_assert_uint_eq(b.size, 30);
	ck_assert_uint_eq(b.stack, 3);
	ck_assert(ml_livetab_remove(x, HEAP, &b));
	ck_assert_uint_eq(b.size, 11);
	ck_assert_uint_eq(b.stack, 4);
	ck_assert_uint_eq(ml_livetab_count(), 0);
}
END_TEST

/* Many entries (shards grow many times); remove every other one, then
 * check exactly the rest is there with its sizes. */
START_TEST(many_entries)
{
	struct ml_live_block b, old;
	const uint64_t n = 300000;
	for (uint64_t i = 1; i <= n; i++)
		ck_assert_int_eq(ml_livetab_insert(i * 16, HEAP, i, 1, &old), 0);
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

/* Every live key is found again when its address comes back (a missed
 * free), wherever cuckoo evictions put it: inserts look at a key's other
 * bucket only when the first one's spill count says some key went there,
 * so the counts must follow every move, removal and growth. */
START_TEST(missed_frees_found_everywhere)
{
	struct ml_live_block b, old;
	const uint64_t n = 200000, base = 0x7f1230000000ull;
	for (uint64_t i = 0; i < n; i++)
		ck_assert_int_eq(ml_livetab_insert(base + i * 16, HEAP, i + 1, (uint32_t)i, &old), 0);
	for (uint64_t i = 0; i < n; i += 2)	/* holes, then new keys into them */
		ck_assert(ml_livetab_remove(base + i * 16, HEAP, &b));
	for (uint64_t i = 0; i < n; i += 2) {
		ck_assert_int_eq(ml_livetab_insert(base + (n + i) * 16, HEAP, 7, 9, &old), 0);
		ck_assert_uint_eq(old.addr, 0);
	}
	for (uint64_t i = 1; i < n; i += 2) {	/* every odd key again: the old one comes out */
		ck_assert_int_eq(ml_livetab_insert(base + i * 16, HEAP, 3, (uint32_t)(i + 5), &old), 0);
		ck_assert_uint_eq(old.addr, base + i * 16);
		ck_assert_uint_eq(old.size, i + 1);
		ck_assert_uint_eq(old.stack, (uint32_t)i);
	}
	ck_assert_uint_eq(ml_livetab_count(), n);
	for (uint64_t i = 1; i < n; i += 2) {
		ck_assert(ml_livetab_remove(base + i * 16, HEAP, &b));
		ck_assert_uint_eq(b.size, 3);
		ck_assert_uint_eq(b.stack, (uint32_t)(i + 5));
	}
	for (uint64_t i = 0; i < n; i += 2) {
		ck_assert(ml_livetab_remove(base + (n + i) * 16, HEAP, &b));
		ck_assert_uint_eq(b.stack, 9);
	}
	ck_assert_uint_eq(ml_livetab_count(), 0);
}
END_TEST

/* Sizes past 32 bits go to the side list and come back whole. */
START_TEST(big_sizes)
{
	struct ml_live_block b, old;
	uint64_t big = (5ull << 32) + 123;
	ck_assert_int_eq(ml_livetab_insert(0x7000, HEAP, big, 3, &old), 0);
	ck_assert_int_eq(ml_livetab_insert(0x7010, HEAP, 0xffffffffull, 4, &old), 0);
	ck_assert_int_eq(ml_livetab_insert(0x7000, HEAP, 9, 5, &old), 0);	/* a missed free */
	ck_assert_uint_eq(old.size, big);
	ck_assert_uint_eq(old.stack, 3);
	ck_assert(ml_livetab_remove(0x7010, HEAP, &b));
	ck_assert_uint_eq(b.size, 0xffffffffull);
	ck_assert(ml_livetab_remove(0x7000, HEAP, &b));
	ck_assert_uint_eq(b.size, 9);
}
END_TEST

/* A million blocks 16 bytes apart, all in few regions (few shards): the
 * tables grow through evictions; every block is found with its size; the
 * table holds a block in at most 40 bytes (16 per slot, >= 40% full). */
START_TEST(dense_region)
{
	struct ml_live_block b, old;
	const uint64_t n = 1000000, base = 0x55550000000ull;
	for (uint64_t i = 0; i < n; i++)
		ck_assert_int_eq(ml_livetab_insert(base + i * 16, HEAP, i & 0xffff, (uint32_t)i, &old), 0);
	ck_assert_uint_eq(ml_livetab_count(), n);
	ck_assert_uint_le(ml_livetab_bytes(), n * 40);
	for (uint64_t i = 0; i < n; i += 3) {
		ck_assert(ml_livetab_remove(base + i * 16, HEAP, &b));
		ck_assert_uint_eq(b.size, i & 0xffff);
		ck_assert_uint_eq(b.stack, (uint32_t)i);
	}
	for (uint64_t i = 0; i < n; i++)
		ck_assert_int_eq(ml_livetab_remove(base + i * 16, HEAP, &b), i % 3 != 0);
	ck_assert_uint_eq(ml_livetab_count(), 0);
}
END_TEST

START_TEST(reset_forgets)
{
	struct ml_live_block b, old;
	ck_assert_int_eq(ml_livetab_insert(0x4000, HEAP, 1, 1, &old), 0);
	ml_livetab_reset();
	ck_assert_uint_eq(ml_livetab_count(), 0);
	ck_assert(!ml_livetab_remove(0x4000, ML_KIND_HEAP, &b));
	ck_assert_int_eq(ml_livetab_insert(0x4000, HEAP, 2, 1, &old), 0);
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
		ml_livetab_insert(addr_of(t, i), HEAP, (uint64_t)i + 1, (uint32_t)t, &old);
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

/* Keys that share a first bucket, in one region of a table made and left
 * at its size: the fifth goes to its other bucket (the first one full),
 * which its first bucket then counts.  Once a way of the first bucket is
 * free again, inserting the fifth anew (the allocator gave its address
 * again: we missed its free) must still find it there, and a remove must
 * find it and uncount it.  Each step is one the inline paths and the
 * slow one share. */
START_TEST(other_bucket_counted)
{
	struct ml_live_block b, old;
	const uint64_t base = 0x7f5550000000ull;
	for (uint64_t i = 0; i < 8; i++)	/* the region's table: 16 buckets */
		ck_assert_int_eq(ml_livetab_insert(base + (1000 + i) * 16, HEAP, 1, 1, &old), 0);
	struct ml_live_shard *s = ml_live_shard_of(base);
	uint32_t shift = s->shift;
	ck_assert_uint_ne(shift, 0);
	/* five more keys of one first bucket, an empty one, whose other
	 * buckets have room */
	uint64_t k[5];
	unsigned got = 0;
	for (uint64_t i = 0; got < 5 && i < 100000; i++) {
		uint64_t a = base + (2000 + i) * 16;
		uint32_t b1 = ml_live_b1(shift, ml_live_key(a, HEAP));
		if (got == 0) {
			const struct ml_live_bucket *bb = &s->b[b1];
			if (bb->key[0] || bb->key[1] || bb->key[2] || bb->key[3] ||
			    ml_live_spilled(bb))
				continue;
			const struct ml_live_bucket *b2 = &s->b[b1 ^ ml_live_alt(shift, ml_live_key(a, HEAP))];
			if (b2->key[0] && b2->key[1] && b2->key[2] && b2->key[3])
				continue;
		} else if (b1 != ml_live_b1(shift, ml_live_key(k[0], HEAP)) ||
			   ml_live_alt(shift, ml_live_key(a, HEAP)) !=
			   ml_live_alt(shift, ml_live_key(k[0], HEAP))) {
			continue;
		}
		k[got++] = a;
	}
	ck_assert_uint_eq(got, 5);
	for (unsigned i = 0; i < 5; i++) {
		ck_assert_int_eq(ml_livetab_insert(k[i], HEAP, 100 + i, 10 + i, &old), 0);
		ck_assert_uint_eq(old.addr, 0);
	}
	ck_assert_uint_eq(s->shift, shift);	/* no growth: no rehash recounted it */
	uint32_t home = ml_live_b1(shift, ml_live_key(k[0], HEAP));
	ck_assert_uint_eq(ml_live_spilled(&s->b[home]), 1);
	ck_assert(ml_livetab_remove(k[1], HEAP, &b));	/* a free way in the first */
	ck_assert_int_eq(ml_livetab_insert(k[4], HEAP, 7, 77, &old), 0);
	ck_assert_uint_eq(old.addr, k[4]);	/* found in the other bucket */
	ck_assert_uint_eq(old.size, 104);
	ck_assert_uint_eq(old.stack, 14);
	ck_assert_uint_eq(ml_live_spilled(&s->b[home]), 0);	/* it took the free way */
	ck_assert_int_eq(ml_livetab_insert(k[1], HEAP, 8, 88, &old), 0);	/* the first full again */
	ck_assert_uint_eq(old.addr, 0);
	ck_assert_uint_eq(ml_live_spilled(&s->b[home]), 1);
	ck_assert(ml_livetab_remove(k[1], HEAP, &b));	/* from the other bucket */
	ck_assert_uint_eq(b.size, 8);
	ck_assert_uint_eq(b.stack, 88);
	ck_assert_uint_eq(ml_live_spilled(&s->b[home]), 0);
	ck_assert(!ml_livetab_remove(k[1], HEAP, &b));
	ck_assert(ml_livetab_remove(k[4], HEAP, &b));
	ck_assert_uint_eq(b.size, 7);
	ck_assert_uint_eq(b.stack, 77);
	for (unsigned i = 0; i < 4; i++)
		if (i != 1)
			ck_assert(ml_livetab_remove(k[i], HEAP, &b));
	ck_assert_uint_eq(ml_livetab_count(), 8);
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
	tcase_add_test(tc, low_halves_shared);
	tcase_add_test(tc, many_entries);
	tcase_add_test(tc, big_sizes);
	tcase_add_test(tc, dense_region);
	tcase_add_test(tc, reset_forgets);
	tcase_add_test(tc, missed_frees_found_everywhere);
	tcase_add_test(tc, other_bucket_counted);
	tcase_add_test(tc, threads_free_each_other);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
