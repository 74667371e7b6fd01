/* tests/check_stacktab.c - stack capture (the walker, libunwind) and the
 * stack table (the call-site trie): dedup, ids, shared outer parts,
 * truncation, growth, concurrent interning, the walker's node cache against
 * libunwind, and the ml_track_* path. */
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

/* The frames of stack id, innermost first; returns the depth. */
static uint32_t frames_of(uint32_t id, uint64_t *out, uint32_t cap)
{
	uint32_t n = 0;
	while (id >= ML_NODE_FIRST && n < cap) {
		uint32_t parent;
		ml_stacktab_node(id, &parent, &out[n++]);
		id = parent;
	}
	return n;
}

static uint32_t depth_of(uint32_t id)
{
	return ml_stacktab_depth(id);
}

static struct ml_intern_cache cache_a, cache_b;

START_TEST(intern_dedups)
{
	uint64_t a[3] = { 0x1000, 0x2000, 0x3000 }, b[3] = { 0x1000, 0x2000, 0x3001 };
	uint64_t f[8];
	uint32_t ia = ml_stacktab_intern(&cache_a, a, 3, 0);
	uint32_t ia2 = ml_stacktab_intern(&cache_b, a, 3, 0);	/* another thread's cache */
	uint32_t ib = ml_stacktab_intern(&cache_a, b, 3, 0);
	uint32_t ia_outer = ml_stacktab_intern(&cache_a, a + 1, 2, 0);	/* a without its frame 0 */
	uint32_t ia_trunc = ml_stacktab_intern(&cache_a, a, 3, ML_STACK_TRUNCATED);
	uint32_t ia3 = ml_stacktab_intern(&cache_a, a, 3, 0);
	ck_assert_uint_ge(ia, ML_NODE_FIRST);
	ck_assert_uint_eq(ia, ia2);
	ck_assert_uint_eq(ia, ia3);
	ck_assert_uint_ne(ia, ib);
	ck_assert_uint_ne(ia, ia_trunc);
	/* The trie shares outer parts: a's frame 1 is a+1's frame 0 node. */
	uint32_t parent;
	uint64_t address;
	ml_stacktab_node(ia, &parent, &address);
	ck_assert_uint_eq(parent, ia_outer);
	ck_assert_uint_eq(address, 0x1000);
	ck_assert_uint_eq(ml_stacktab_depth(ia), 3);
	ck_assert_uint_eq(frames_of(ia, f, 8), 3);
	ck_assert_uint_eq(f[0], 0x1000);
	ck_assert_uint_eq(f[2], 0x3000);
	ck_assert_uint_eq(ml_stacktab_root(ia), ML_NODE_ROOT);
	ck_assert_uint_eq(ml_stacktab_root(ia_trunc), ML_NODE_ROOT_TRUNCATED);
	ck_assert_uint_eq(depth_of(ia_trunc), 3);
	/* The empty stack is the root itself. */
	ck_assert_uint_eq(ml_stacktab_intern(&cache_a, a, 0, 0), ML_NODE_ROOT);
}
END_TEST

/* Many stacks sharing outer parts: the trie grows (new indexes) and every
 * id still gives back its frames. */
START_TEST(intern_grows)
{
	static uint32_t ids[20000];
	uint64_t frames[6], f[8];
	for (uint32_t i = 0; i < 20000; i++) {
		for (uint32_t k = 0; k < 6; k++)
			frames[k] = 0x100000 + (i >> (3 * k)) % 8 * 16 + k;	/* outer frames shared */
		frames[0] = 0x900000 + i;
		ids[i] = ml_stacktab_intern(&cache_a, frames, 6, 0);
	}
	for (uint32_t i = 0; i < 20000; i += 7) {
		ck_assert_uint_eq(frames_of(ids[i], f, 8), 6);
		ck_assert_uint_eq(f[0], 0x900000 + i);
		ck_assert_uint_eq(f[5], 0x100000 + (i >> 15) % 8 * 16 + 5);
	}
	ck_assert_uint_gt(ml_stacktab_bytes(), 0);
}
END_TEST

/* The index keeps 5 bits of each key's hash beside its node id and reads
 * a node only where they agree.  Keys built to start their probes at the
 * same slot, some with the same tag (their nodes must be read and told
 * apart) and some with other tags, all under one parent: each is interned
 * once, found again as the same node, and gives back its own address;
 * enough of them to grow the index (a rehash that must keep the tags). */
START_TEST(index_tags_tell_keys_apart)
{
	enum { SAME = 48, OTHER = 48, HOME_BITS = 10 };	/* the first index's size */
	const uint32_t parent = ML_NODE_ROOT;
	uint64_t want = ml_stacktab_hash(parent, 0x400000);
	uint64_t home = want & ((1u << HOME_BITS) - 1), tag = want >> 59;
	uint64_t same[SAME], other[OTHER];
	uint32_t n_same = 0, n_other = 0;
	for (uint64_t a = 0x400000; n_same < SAME || n_other < OTHER; a++) {
		uint64_t h = ml_stacktab_hash(parent, a);
		if ((h & ((1u << HOME_BITS) - 1)) != home)
			continue;
		if (h >> 59 == tag && n_same < SAME)
			same[n_same++] = a;
		else if (h >> 59 != tag && n_other < OTHER)
			other[n_other++] = a;
	}
	uint32_t ids_same[SAME], ids_other[OTHER];
	for (uint32_t i = 0; i < SAME; i++)
		ids_same[i] = ml_stacktab_child(parent, same[i]);
	for (uint32_t i = 0; i < OTHER; i++)
		ids_other[i] = ml_stacktab_child(parent, other[i]);
	uint32_t count = ml_stacktab_count();
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < SAME; i++) {
			uint32_t p;
			uint64_t a;
			ck_assert_uint_ge(ids_same[i], ML_NODE_FIRST);
			ck_assert_uint_eq(ml_stacktab_child(parent, same[i]), ids_same[i]);
			ml_stacktab_node(ids_same[i], &p, &a);
			ck_assert_uint_eq(p, parent);
			ck_assert_uint_eq(a, same[i]);
		}
		for (uint32_t i = 0; i < OTHER; i++) {
			uint32_t p;
			uint64_t a;
			ck_assert_uint_eq(ml_stacktab_child(parent, other[i]), ids_other[i]);
			ml_stacktab_node(ids_other[i], &p, &a);
			ck_assert_uint_eq(a, other[i]);
		}
		ck_assert_uint_eq(ml_stacktab_count(), count);	/* nothing interned twice */
		/* Grow the index past several rehashes, then look again. */
		for (uint32_t i = 0; pass == 0 && i < 5000; i++)
			ck_assert_uint_ge(ml_stacktab_child(ML_NODE_ROOT_TRUNCATED, 0x7000000 + i),
					  ML_NODE_FIRST);
		count = ml_stacktab_count();
	}
	/* A key that is not there, in the crowded run of slots: a miss, not
	 * one of its neighbours (the next interning makes a new node). */
	uint64_t absent = same[SAME - 1] + 1;
	while ((ml_stacktab_hash(parent, absent) & ((1u << HOME_BITS) - 1)) != home ||
	       ml_stacktab_hash(parent, absent) >> 59 != tag)
		absent++;
	uint32_t fresh = ml_stacktab_child(parent, absent);
	ck_assert_uint_eq(fresh, count + 1);
	for (uint32_t i = 0; i < SAME; i++)
		ck_assert_uint_ne(fresh, ids_same[i]);
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
static uint32_t seen[THREADS][STACKS];

static void *intern_many(void *arg)
{
	int t = (int)(intptr_t)arg;
	struct ml_intern_cache *cache = calloc(1, sizeof(*cache));
	for (int k = 0; k < STACKS; k++) {
		int i = (k + t * 97) % STACKS;	/* different orders per thread */
		uint64_t frames[4] = { 0x5000u + (uint64_t)i, 0x6000, 0x7000, (uint64_t)i * 31 };
		seen[t][i] = ml_stacktab_intern(cache, frames, 4, 0);
	}
	free(cache);
	return NULL;
}

START_TEST(intern_concurrent)
{
	pthread_t th[THREADS];
	for (int t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, intern_many, (void *)(intptr_t)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	for (int i = 0; i < STACKS; i++) {
		uint64_t f[4];
		ck_assert_uint_ge(seen[0][i], ML_NODE_FIRST);
		for (int t = 1; t < THREADS; t++)
			ck_assert_uint_eq(seen[t][i], seen[0][i]);
		ck_assert_uint_eq(frames_of(seen[0][i], f, 4), 4);
		ck_assert_uint_eq(f[0], 0x5000u + (uint64_t)i);
		ck_assert_uint_eq(f[3], (uint64_t)i * 31);
	}
}
END_TEST

/* ml_unwind_stack (the walker's node cache) against libunwind and the
 * walker's own buffer, from the same function, several passes (cold,
 * cached, reused) and after walks of other depths. */
struct three { uint32_t stack; uint64_t slow[80]; int n_slow; };

static int __attribute__((noinline)) three_at(int n, struct three *b)
{
	if (n > 0) {
		int r = three_at(n - 1, b) + (n & 1);
		__asm__ volatile("" ::: "memory");	/* no tail call */
		return r;
	}
	b->stack = ml_unwind_stack(&cache_a);
	b->n_slow = unw_backtrace((void **)b->slow, 80);
	__asm__ volatile("" ::: "memory");
	return 0;
}

static void check_three(int depth)
{
	struct three b;
	uint64_t f[80];
	for (int pass = 0; pass < 3; pass++) {
		memset(&b, 0, sizeof(b));
		three_at(depth, &b);
		ck_assert_uint_eq(ml_stacktab_root(b.stack), ML_NODE_ROOT);
		uint32_t n = frames_of(b.stack, f, 80);
		/* libunwind's frame 0 is its caller's own return address (into
		 * three_at), as is ours: past it they agree to the end. */
		ck_assert_int_eq((int)n, b.n_slow);
		for (uint32_t i = 1; i < n; i++)
			ck_assert_uint_eq(f[i], b.slow[i]);
	}
}

/* A stack deeper than the limit (through the slow path, whose own frames
 * are not dropped here: no runtime range is set): its two innermost
 * frames below the truncated root. */
static void __attribute__((noinline)) check_cut(void)
{
	uint64_t f[4];
	uint32_t stack = ml_unwind_stack(&cache_b);
	__asm__ volatile("" ::: "memory");
	ck_assert_uint_eq(ml_stacktab_root(stack), ML_NODE_ROOT_TRUNCATED);
	ck_assert_uint_eq(frames_of(stack, f, 4), 2);
	ck_assert_uint_ne(f[0], 0);
	ck_assert_uint_ne(f[1], 0);
}

START_TEST(unwind_stack_matches_libunwind)
{
	uint32_t depth = ml_config.max_depth;
	ml_config.max_depth = 64;
	check_three(4);
	check_three(17);
	check_three(4);
	check_three(30);
	/* deeper than the limit: the slow path */
	ml_config.max_depth = 2;
	check_cut();
	ml_config.max_depth = depth;
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

/* The counter of ptr's allocation on this thread, through the live table. */
static struct ml_counter *counter_of(void *p)
{
	struct ml_live_block b, old;
	ck_assert(ml_livetab_remove((uint64_t)p, ML_KIND_HEAP, &b));
	ck_assert_int_eq(ml_livetab_insert(b.addr, b.kind, b.size, b.stack, &old), 0);
	return ml_thread_counter(ml_thread_self(), b.stack, b.kind);
}

/* A thread's counter index keeps a tag in each pointer's low bits (the
 * counters sit on 64-byte lines): through its slow path (the cache in
 * front bypassed), 24,000 keys (grown through several indexes, their
 * probes crossing slots of other keys with the same tag) each get one
 * counter of their own, the same one when asked again, at a line start. */
START_TEST(counter_index_tags)
{
	enum { N_STACKS = 8000, N_KINDS = 3 };
	static struct ml_counter *got[N_STACKS][N_KINDS];
	struct ml_thread *t = ml_thread_self();
	uint32_t before = t->n_counters;
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t s = 0; s < N_STACKS; s++)
			for (uint32_t k = 0; k < N_KINDS; k++) {
				uint32_t stack = ML_NODE_FIRST + s * 7;
				struct ml_counter *c = ml_thread_counter_slow(t, stack, k);
				ck_assert_ptr_nonnull(c);
				ck_assert_uint_eq((uintptr_t)c & 63, 0);
				ck_assert_uint_eq(c->stack, stack);
				ck_assert_uint_eq(c->kind, k);
				if (pass)
					ck_assert_ptr_eq(c, got[s][k]);
				got[s][k] = c;
			}
	ck_assert_uint_eq(t->n_counters, before + N_STACKS * N_KINDS);
}
END_TEST

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
	ck_assert_int_eq(ca->live_bytes, 200);
	ck_assert_uint_eq(cb->allocs, 1);
	ck_assert_uint_eq(ml_track_free(a1, ML_KIND_HEAP), 100);
	ck_assert_uint_eq(ml_track_free(a1, ML_KIND_HEAP), 0);	/* unknown now */
	ck_assert_uint_eq(ml_track_free(b1, ML_KIND_CUDA_DEVICE), 0);	/* other kind */
	ck_assert_int_eq(ca->live_blocks, 1);
	ck_assert_int_eq(ca->live_bytes, 100);
	/* realloc of a2 to 300 bytes: one free, one alloc, from this stack. */
	struct ml_track_held held;
	ck_assert(ml_track_detach(a2, ML_KIND_HEAP, &held));
	void *a3 = realloc(a2, 300);
	ml_track_moved(&held, a3, 300, ML_KIND_HEAP);
	ck_assert_uint_eq(ca->allocs, 2);	/* the new block is this function's */
	ck_assert_int_eq(ca->live_blocks, 0);
	ck_assert_int_eq(ca->live_bytes, 0);
	struct ml_counter *c3 = counter_of(a3);
	ck_assert_ptr_ne(c3, ca);
	ck_assert_uint_eq(c3->allocs, 1);
	ck_assert_int_eq(c3->live_bytes, 300);
	ck_assert_uint_eq(ml_track_free(a3, ML_KIND_HEAP), 300);
	ck_assert_uint_eq(ml_track_free(b1, ML_KIND_HEAP), 7);
	ck_assert_int_eq(c3->live_bytes, 0);
	/* site_a's stack is in the trie, its frames below the root. */
	ck_assert_uint_ge(depth_of(ca->stack), 3);
	ck_assert_uint_eq(ml_stacktab_root(ca->stack), ML_NODE_ROOT);
	free(a1);
	free(a3);
	free(b1);
}
END_TEST

/* Blocks of 0 bytes whose frees go to the live table's slow path (eight
 * keys of one first bucket: some live away from it), by a thread that
 * owns the plain mode after ML_TAKE_EVERY events alone (where membarrier
 * works), each counted: a block of 0 bytes is a block. */
static void __attribute__((noinline)) site_zero(uint64_t addr)
{
	ml_track_alloc((void *)(uintptr_t)addr, 0, ML_KIND_HEAP);
}

START_TEST(track_free_zero_bytes_away)
{
	ck_assert(ml_guard_enter_always());
	for (uint32_t i = 0; i < 2 * ML_TAKE_EVERY; i++) {
		void *p = malloc(16);
		ml_track_alloc(p, 16, ML_KIND_HEAP);
		ck_assert_uint_eq(ml_track_free_heap(p), 16);
		free(p);
	}
	uint64_t addr[8], base = 0x7e5500000000ull;
	struct ml_live_block b, old;
	ck_assert_int_eq(ml_livetab_insert(base, ML_KIND_HEAP, 1, 1, &old), 0);	/* a table */
	ck_assert(ml_livetab_remove(base, ML_KIND_HEAP, &b));
	struct ml_live_shard *s = ml_live_shard_of(base);
	uint32_t first = ml_live_b1(s->shift, ml_live_key(base, ML_KIND_HEAP)), n = 0;
	for (uint64_t a = base; n < 8; a += 16)
		if (ml_live_shard_of(a) == s &&
		    ml_live_b1(s->shift, ml_live_key(a, ML_KIND_HEAP)) == first)
			addr[n++] = a;
	for (uint32_t i = 0; i < 8; i++)
		site_zero(addr[i]);
	struct ml_counter *c = counter_of((void *)(uintptr_t)addr[0]);
	ck_assert_int_eq(c->live_blocks, 8);
	for (uint32_t i = 0; i < 8; i++)
		ck_assert_uint_eq(ml_track_free_heap((void *)(uintptr_t)addr[i]), 0);
	ck_assert_int_eq(c->live_blocks, 0);
	ck_assert_int_eq(c->live_bytes, 0);
	for (uint32_t i = 0; i < 8; i++)
		ck_assert(!ml_livetab_remove(addr[i], ML_KIND_HEAP, &b));
	ml_guard_exit();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stacktab");
	TCase *tc = tcase_create("stacktab");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, intern_dedups);
	tcase_add_test(tc, intern_grows);
	tcase_add_test(tc, index_tags_tell_keys_apart);
	tcase_add_test(tc, unwind_stack_matches_libunwind);
	tcase_add_test(tc, capture_follows_the_calls);
	tcase_add_test(tc, capture_truncates);
	tcase_add_test(tc, fast_unwind_matches_libunwind);
	tcase_add_test(tc, fast_unwind_alternating_callers);
	tcase_add_test(tc, intern_concurrent);
	tcase_add_test(tc, counter_index_tags);
	tcase_add_test(tc, track_path);
	tcase_add_test(tc, track_free_zero_bytes_away);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
