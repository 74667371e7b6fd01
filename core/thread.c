/* core/thread.c - the recording core's per-thread state (struct
 * ml_thread): the side stack that recording runs on, the path interned
 * last, and the thread's counters, found by (stack, kind).
 *
 * A thread gets its state at its first recorded event.  When it ends, its
 * counters are folded into the process's own table (ended threads'
 * counts, under a lock: thread exit is rare) and the state, side stack
 * included, waits on a free list for the next thread.  Every state ever
 * made stays on one list, so the profile writer can add up the counters of
 * threads still running.  Memory: the arena and mmap, never the hooked
 * malloc. */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/internal.h"

#define SIDE_STACK_SIZE (64u << 10)
#define GUARD_SIZE 4096u
#define CHUNK_COUNTERS 1023u
#define INDEX_MIN_BITS 6u

struct ml_counter_chunk {
	struct ml_counter_chunk *next;
	volatile uint32_t used;
	uint32_t pad[13];
	struct ml_counter c[CHUNK_COUNTERS];
};

/* ml_tl_thread, ml_tl_plain: fields of the TLS block (core.h) */
struct ml_thread *volatile ml_plain_owner __attribute__((aligned(64)));
static bool membarrier_ok;
/* Set when a thread records without a state (out of memory): it cannot
 * say it is in an event, so no thread may own the plain mode again. */
static volatile bool never_plain;
static ml_spin_t mode_lock;	/* who changes ml_plain_owner: one at a time */

static struct ml_thread *volatile all_threads;	/* every state, newest first */
static struct ml_thread *free_threads;
static uint64_t made;		/* states handed out, for the sampling streams */
static ml_spin_t list_lock;
/* States of threads whose end ran (threads.c, through glibc's thread-exit
 * list: no pthread key, the program's keys are all its own).  Such a
 * thread may still record (a later destructor, the program's own pthread
 * key destructors run after), so its state is given back only once the
 * kernel says the thread is gone, by the next thread that makes one. */
static struct ml_thread *ended_threads;

/* The counters of ended threads, folded (a state without a thread). */
static struct ml_thread retired;
static ml_spin_t retired_lock;

/* ---- the side stack ---- */

/* long ml_side_call3(long (*fn)(uint64_t, uint64_t, void *), uint64_t a,
 * uint64_t b, void *c, uint64_t top): calls fn(a, b, c) with the stack
 * pointer at top, then returns to the caller's stack.  The frame is
 * rbp-based, so unwinders (and the debugger) walk through it back to the
 * caller's stack.  long ml_side_call(long (*fn)(void *), void *arg,
 * uint64_t top) is the same for fn(arg): it moves top where ml_side_call3
 * wants it and jumps there (fn gets arg first, and ignores the other two
 * registers). */
__asm__(".text\n"
	".p2align 4\n"
	".globl ml_side_call3\n"
	".hidden ml_side_call3\n"
	".type ml_side_call3, @function\n"
	"ml_side_call3:\n"
	".cfi_startproc\n"
	"	push %rbp\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbp, -16\n"
	"	mov %rsp, %rbp\n"
	".cfi_def_cfa_register %rbp\n"
	"	mov %r8, %rsp\n"
	"	mov %rdi, %rax\n"
	"	mov %rsi, %rdi\n"
	"	mov %rdx, %rsi\n"
	"	mov %rcx, %rdx\n"
	"	call *%rax\n"
	"	mov %rbp, %rsp\n"
	"	pop %rbp\n"
	".cfi_def_cfa %rsp, 8\n"
	"	ret\n"
	".cfi_endproc\n"
	".size ml_side_call3, .-ml_side_call3\n"
	".p2align 4\n"
	".globl ml_side_call\n"
	".hidden ml_side_call\n"
	".type ml_side_call, @function\n"
	"ml_side_call:\n"
	".cfi_startproc\n"
	"	mov %rdx, %r8\n"
	"	jmp ml_side_call3\n"
	".cfi_endproc\n"
	".size ml_side_call, .-ml_side_call\n");

long ml_thread_on_side_stack(long (*fn)(void *), void *arg)
{
	struct ml_thread *t = ml_thread_self();
	return t ? ml_thread_side_run(t, fn, arg) : fn(arg);
}

long ml_core_on_side_stack(long (*fn)(void *), void *arg)
{
	if (!ml_tl_thread)
		return fn(arg);		/* never made in a signal handler */
	return ml_thread_on_side_stack(fn, arg);
}

static void side_stack_map(struct ml_thread *t)
{
	void *p = mmap(NULL, SIDE_STACK_SIZE + GUARD_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p == MAP_FAILED)
		return;		/* recording then runs on the program's stack */
	mprotect(p, GUARD_SIZE, PROT_NONE);	/* an overflow faults, never corrupts */
	t->side_lo = (uint64_t)p + GUARD_SIZE;
	t->side_hi = t->side_lo + SIDE_STACK_SIZE;
}

/* ---- a thread's counters: an open-addressing index of pointers into
 * chunks that never move (the profile writer walks the chunks).  Counters
 * sit on 64-byte lines, so a pointer's low 6 bits are free: they hold 6
 * bits of its key's hash (the tag), and a probe reads a counter (a cache
 * miss, in python3's import torch one of ~900 k) only where the tag
 * agrees: one slot in 64 that is not the key, instead of every one. ---- */

#define TAG_MASK ((uintptr_t)63)

static inline uint64_t slot_hash(uint32_t stack, uint32_t kind)
{
	return ((uint64_t)stack << 5 | kind) * 0x9e3779b97f4a7c15ull;	/* kind < 32 */
}

/* The tag of hash h: bits below those a probe starts from (its top ones,
 * 26 or fewer of them up to 64 M slots). */
static inline uintptr_t slot_tag(uint64_t h)
{
	return (uintptr_t)(h >> 32) & TAG_MASK;
}

/* Rebuilds t's index with twice the slots.  False when out of memory. */
static bool index_grow(struct ml_thread *t)
{
	uint32_t bits = t->index_bits ? t->index_bits + 1 : INDEX_MIN_BITS;
	uintptr_t *fresh = mmap(NULL, sizeof(*fresh) << bits, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fresh == MAP_FAILED)
		return false;
	ml_want_huge_pages(fresh, sizeof(*fresh) << bits);
	uint64_t mask = (1ull << bits) - 1;
	for (struct ml_counter_chunk *ch = t->chunks; ch; ch = ch->next)
		for (uint32_t k = 0; k < ch->used; k++) {
			struct ml_counter *c = &ch->c[k];
			if (k + 16 < ch->used) {	/* overlap the stores' cache misses */
				const struct ml_counter *a = &ch->c[k + 16];
				__builtin_prefetch(&fresh[slot_hash(a->stack, a->kind) >> (64 - bits)], 1);
			}
			uint64_t h = slot_hash(c->stack, c->kind), i = h >> (64 - bits);
			while (fresh[i])
				i = (i + 1) & mask;
			fresh[i] = (uintptr_t)c | slot_tag(h);
		}
	if (t->index)
		munmap(t->index, sizeof(*t->index) << t->index_bits);
	t->index = fresh;
	t->index_bits = bits;
	return true;
}

/* A new chunk, at a cache line's start: each counter (64 bytes) then
 * sits in one line, so an allocation or a free touches one line of its
 * counter.  (The arena's 16-byte alignment, rounded up; arena memory is
 * never given back.) */
static struct ml_counter_chunk *chunk_alloc(void)
{
	_Static_assert(offsetof(struct ml_counter_chunk, c) == 64 && sizeof(struct ml_counter) == 64,
		       "counters on line boundaries");
	uint64_t p = (uint64_t)(uintptr_t)ml_arena_alloc(sizeof(struct ml_counter_chunk) + 48);
	return p ? (struct ml_counter_chunk *)(uintptr_t)((p + 63) & ~63ull) : NULL;
}

/* A zeroed counter for (stack, kind) in t's chunks; NULL if out of memory. */
static struct ml_counter *counter_new(struct ml_thread *t, uint32_t stack, uint32_t kind)
{
	struct ml_counter_chunk *ch = t->chunks;
	if (!ch || ch->used == CHUNK_COUNTERS) {
		struct ml_counter_chunk *fresh = t->spare;
		if (fresh)
			t->spare = fresh->next;
		else if (!(fresh = chunk_alloc()))
			return NULL;
		fresh->used = 0;
		fresh->next = ch;
		__atomic_store_n(&t->chunks, fresh, __ATOMIC_RELEASE);
		ch = fresh;
	}
	struct ml_counter *c = &ch->c[ch->used];
	memset(c, 0, sizeof(*c));
	c->stack = stack;
	c->kind = kind;
	__atomic_store_n(&ch->used, ch->used + 1, __ATOMIC_RELEASE);
	t->n_counters++;
	return c;
}

struct ml_counter *ml_thread_counter_slow(struct ml_thread *t, uint32_t stack, uint32_t kind)
{
	if ((uint64_t)(t->n_counters + 1) * 2 > (1ull << t->index_bits) && !index_grow(t))
		return NULL;
	uint64_t mask = (1ull << t->index_bits) - 1, h = slot_hash(stack, kind);
	uintptr_t tag = slot_tag(h);
	uint64_t i = h >> (64 - t->index_bits);
	for (;; i = (i + 1) & mask) {
		uintptr_t slot = t->index[i];
		if (!slot)
			break;
		if ((slot & TAG_MASK) != tag)
			continue;
		struct ml_counter *c = (struct ml_counter *)(slot & ~TAG_MASK);
		if (c->stack == stack && c->kind == kind)
			return c;
	}
	struct ml_counter *c = counter_new(t, stack, kind);
	if (c)
		t->index[i] = (uintptr_t)c | tag;
	return c;
}

/* Empties t's table: its chunks become spares for the next owner. */
static void counters_clear(struct ml_thread *t)
{
	struct ml_counter_chunk *ch = t->chunks;
	__atomic_store_n(&t->chunks, NULL, __ATOMIC_RELEASE);
	while (ch) {
		struct ml_counter_chunk *next = ch->next;
		ch->next = t->spare;
		t->spare = ch;
		ch = next;
	}
	if (t->index)
		memset(t->index, 0, sizeof(*t->index) << t->index_bits);
	t->n_counters = 0;
	memset(t->counter_cache, 0, sizeof(t->counter_cache));
}

/* ---- states ---- */

/* A state whose thread is gone: fold its counters into the retired table,
 * and put it on the free list. */
static void retire(struct ml_thread *t)
{
	ml_spin_lock(&retired_lock);
	for (struct ml_counter_chunk *ch = t->chunks; ch; ch = ch->next)
		for (uint32_t k = 0; k < ch->used; k++) {
			struct ml_counter *c = &ch->c[k];
			struct ml_counter *into = ml_thread_counter(&retired, c->stack, c->kind);
			if (into)
				ml_counters_fold(into, c);
		}
	retired.sample.allocs += t->sample.allocs;
	retired.sample.bytes += t->sample.bytes;
	t->sample.allocs = t->sample.bytes = 0;
	__atomic_store_n(&t->alive, 0, __ATOMIC_RELEASE);
	counters_clear(t);
	ml_spin_unlock(&retired_lock);
	ml_spin_lock(&list_lock);
	t->next_free = free_threads;
	free_threads = t;
	ml_spin_unlock(&list_lock);
}

static void add_ended(struct ml_thread *t)
{
	t->ended = 1;
	ml_spin_lock(&list_lock);
	t->next_free = ended_threads;
	ended_threads = t;
	ml_spin_unlock(&list_lock);
}

void ml_thread_state_ending(void)
{
	struct ml_thread *t = ml_tl_thread;
	if (t && !t->ended)
		add_ended(t);
}

/* Gives back the states of ended threads that are gone (tgkill: ESRCH).
 * A thread id reused meanwhile only delays it. */
static void reap_ended(void)
{
	if (!__atomic_load_n(&ended_threads, __ATOMIC_RELAXED))
		return;
	struct ml_thread *gone = NULL;
	pid_t pid = getpid();
	ml_spin_lock(&list_lock);
	for (struct ml_thread **pp = &ended_threads; *pp;) {
		struct ml_thread *t = *pp;
		if (syscall(SYS_tgkill, pid, t->tid, 0) != 0 && errno == ESRCH) {
			*pp = t->next_free;
			t->next_free = gone;
			gone = t;
		} else {
			pp = &t->next_free;
		}
	}
	ml_spin_unlock(&list_lock);
	while (gone) {
		struct ml_thread *t = gone;
		gone = t->next_free;
		struct ml_thread *expect = t;	/* a thread gone owns nothing */
		__atomic_compare_exchange_n(&ml_plain_owner, &expect, NULL, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
		retire(t);
	}
}

void ml_thread_mode_init(void)
{
	membarrier_ok = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	if (!membarrier_ok)
		never_plain = true;
}

/* A full memory barrier on every running thread of the process: after it,
 * a thread's store before its load of ml_plain_owner is seen here, or its
 * load sees the store made here before this call. */
static void barrier_everywhere(void)
{
	syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

/* Another thread (o) owns the plain mode and the caller (not in an event)
 * is about to record: atomics from now on, once o has left its event.  o
 * never waits on anything the caller may hold: an owner's event takes no
 * lock, and mode_lock is not taken inside an event. */
static void revoke_owner(struct ml_thread *o)
{
	ml_spin_lock(&mode_lock);
	if (__atomic_load_n(&ml_plain_owner, __ATOMIC_RELAXED) == o) {
		__atomic_store_n(&ml_plain_owner, NULL, __ATOMIC_SEQ_CST);
		barrier_everywhere();
		while (__atomic_load_n(&o->in_event, __ATOMIC_ACQUIRE))
			sched_yield();
	}
	ml_spin_unlock(&mode_lock);
}

/* The caller t (between events, no owner) takes the plain mode
 * if no other thread recorded since its last look, ML_TAKE_EVERY events
 * ago.  Every other thread is then out of its event, or will see t own
 * the mode at its next one (and revoke it).  A thread that stays in an
 * event (preempted, or waiting for a lock of the program's) makes t give
 * up: nobody has recorded plainly meanwhile, so nothing is to undo. */
static void try_take(struct ml_thread *t)
{
	if (never_plain)
		return;
	uint64_t others = 0;
	for (struct ml_thread *x = __atomic_load_n(&all_threads, __ATOMIC_ACQUIRE); x; x = x->next)
		if (x != t)
			others += __atomic_load_n(&x->events, __ATOMIC_RELAXED);
	bool quiet = others == t->others_seen;
	t->others_seen = others;
	if (!quiet)
		return;
	bool took = false;
	ml_spin_lock(&mode_lock);
	if (!__atomic_load_n(&ml_plain_owner, __ATOMIC_RELAXED) && !never_plain) {
		__atomic_store_n(&ml_plain_owner, t, __ATOMIC_SEQ_CST);
		barrier_everywhere();
		took = true;
		for (struct ml_thread *x = __atomic_load_n(&all_threads, __ATOMIC_ACQUIRE);
		     x && took; x = x->next) {
			unsigned waits = 0;
			while (__atomic_load_n(&x->in_event, __ATOMIC_ACQUIRE))
				if (++waits > 64) {
					took = false;
					break;
				} else {
					sched_yield();
				}
		}
		if (!took)
			__atomic_store_n(&ml_plain_owner, NULL, __ATOMIC_SEQ_CST);
	}
	ml_spin_unlock(&mode_lock);
}

/* A thread records without a state: no plain mode, now or later. */
static void stateless(void)
{
	ml_spin_lock(&mode_lock);
	never_plain = true;
	struct ml_thread *o = __atomic_load_n(&ml_plain_owner, __ATOMIC_RELAXED);
	ml_spin_unlock(&mode_lock);
	if (o)
		revoke_owner(o);
}

void ml_event_begin_slow(void)
{
	struct ml_thread *t = ml_tl_thread;
	if (!t && !(t = ml_thread_make())) {
		stateless();
		return;
	}
	/* Due for a look when ml_event_begin counted the ML_TAKE_EVERY-th
	 * event with atomics (not at a thread's first event: it would take
	 * from an owner it has just revoked, before that one records again). */
	bool due = t->events && !(t->events & (ML_TAKE_EVERY - 1));
	/* Changing the owner waits for other threads' events: never inside
	 * one's own, since another may be waiting for it to end. */
	for (;;) {
		t->in_event = 1;
		__asm__ volatile("" ::: "memory");	/* (see ml_event_begin) */
		struct ml_thread *o = __atomic_load_n(&ml_plain_owner, __ATOMIC_RELAXED);
		if (o == t) {
			ml_tl_plain = 1;
			return;
		}
		if (!o && !due)
			return;
		__atomic_store_n(&t->in_event, 0, __ATOMIC_RELEASE);
		if (o) {
			revoke_owner(o);
			due = false;	/* (not right after a revoke: see above) */
		} else {
			due = false;
			try_take(t);
		}
	}
}

/* A new state's thread: watched for its end (else ended at once), and
 * the states of threads gone since given back. */
static long first_steps(void *arg)
{
	struct ml_thread *t = arg;
	int saved_errno = errno;
	if (!ml_thread_watch())		/* ending already, or no way to see it */
		add_ended(t);
	reap_ended();
	errno = saved_errno;
	return 0;
}

struct ml_thread *ml_thread_make(void)
{
	bool first = false;
	ml_spin_lock(&list_lock);
	struct ml_thread *t = free_threads;
	if (t)
		free_threads = t->next_free;
	ml_spin_unlock(&list_lock);
	if (!t) {
		if (!(t = ml_arena_alloc(sizeof(*t))))
			return NULL;	/* (ml_event_begin_slow: stateless) */
		side_stack_map(t);
		ml_spin_lock(&list_lock);
		first = !all_threads;
		t->next = all_threads;
		__atomic_store_n(&all_threads, t, __ATOMIC_RELEASE);
		ml_spin_unlock(&list_lock);
	}
	t->next_free = NULL;
	if (ml_config.sample_bytes)
		ml_sampling_thread_start(t, __atomic_fetch_add(&made, 1, __ATOMIC_RELAXED));
	ml_unwind_thread_reset(t->walk);
	ml_rooms_memo_reset(t->room_memo);
	ml_unwind_until_reset(t->until);
	t->intern.depth = 0;
	t->intern.root = 0;
	t->alive = 1;
	t->in_event = 0;
	t->ended = 0;
	t->tid = (int32_t)syscall(SYS_gettid);
	t->errno_at = &errno;
	ml_tl_thread = t;
	ml_tl.sample = &t->sample;
	/* On the side stack: registering for the thread's end goes through
	 * glibc (and its calloc), and this may run on a coroutine's few KiB. */
	if (t->side_hi)
		ml_side_call(first_steps, t, t->side_hi);
	else
		first_steps(t);
	/* The first state's thread owns the plain mode from the start;
	 * another takes it only by ml_event_begin_slow's rules. */
	if (first) {
		ml_spin_lock(&mode_lock);
		if (!never_plain && !__atomic_load_n(&ml_plain_owner, __ATOMIC_RELAXED))
			__atomic_store_n(&ml_plain_owner, t, __ATOMIC_SEQ_CST);
		ml_spin_unlock(&mode_lock);
	}
	return t;
}

static void visit(struct ml_thread *t, void (*fn)(const struct ml_counter *c, void *arg),
		  void *arg)
{
	for (struct ml_counter_chunk *ch = __atomic_load_n(&t->chunks, __ATOMIC_ACQUIRE); ch;
	     ch = ch->next) {
		uint32_t used = __atomic_load_n(&ch->used, __ATOMIC_ACQUIRE);
		for (uint32_t k = 0; k < used; k++)
			fn(&ch->c[k], arg);
	}
}

void ml_thread_foreach_counter(void (*fn)(const struct ml_counter *c, void *arg), void *arg)
{
	/* A thread folding its counters right now is skipped or seen twice
	 * at worst for that moment; the retired table is read under its lock
	 * only when that is safe (not from a signal handler that interrupted
	 * a fold: then try once, and read it as it is). */
	bool locked = __atomic_exchange_n(&retired_lock.locked, 1, __ATOMIC_ACQUIRE) == 0;
	for (struct ml_thread *t = __atomic_load_n(&all_threads, __ATOMIC_ACQUIRE); t;
	     t = t->next)
		if (__atomic_load_n(&t->alive, __ATOMIC_ACQUIRE))
			visit(t, fn, arg);
	visit(&retired, fn, arg);
	if (locked)
		ml_spin_unlock(&retired_lock);
}

uint64_t ml_thread_counter_count(void)
{
	uint64_t n = retired.n_counters;
	for (struct ml_thread *t = __atomic_load_n(&all_threads, __ATOMIC_ACQUIRE); t;
	     t = t->next)
		n += t->n_counters;
	return n;
}

uint64_t ml_thread_bytes(void)
{
	uint64_t n = 0;
	for (struct ml_thread *t = &retired; t; t = t == &retired ? all_threads : t->next) {
		for (struct ml_counter_chunk *ch = t->chunks; ch; ch = ch->next)
			n += sizeof(*ch);
		for (struct ml_counter_chunk *ch = t->spare; ch; ch = ch->next)
			n += sizeof(*ch);
		if (t->index)
			n += sizeof(*t->index) << t->index_bits;
		if (t != &retired)
			n += sizeof(*t);
	}
	return n;
}

void ml_thread_all_allocs(uint64_t *allocs, uint64_t *bytes)
{
	*allocs = retired.sample.allocs;
	*bytes = retired.sample.bytes;
	for (struct ml_thread *t = __atomic_load_n(&all_threads, __ATOMIC_ACQUIRE); t; t = t->next)
		if (__atomic_load_n(&t->alive, __ATOMIC_ACQUIRE)) {
			*allocs += t->sample.allocs;
			*bytes += t->sample.bytes;
		}
}

uint64_t ml_thread_count(void)
{
	uint64_t n = 0;
	for (struct ml_thread *t = __atomic_load_n(&all_threads, __ATOMIC_ACQUIRE); t; t = t->next)
		n++;
	return n;
}

void ml_thread_after_fork(void)
{
	list_lock.locked = 0;
	retired_lock.locked = 0;
	struct ml_thread *me = ml_tl_thread;
	/* One thread again: its own, plain if membarrier works here too. */
	mode_lock.locked = 0;
	ml_tl_plain = 0;
	if (me)
		me->in_event = 0;
	never_plain = false;
	ml_plain_owner = NULL;
	ml_thread_mode_init();
	if (!never_plain)
		ml_plain_owner = me;
	free_threads = NULL;
	ended_threads = NULL;
	if (me)
		me->ended = 0;
	retired.sample.allocs = retired.sample.bytes = 0;
	for (struct ml_thread *t = all_threads; t; t = t->next) {
		counters_clear(t);
		t->sample.allocs = t->sample.bytes = 0;
		if (t != me) {
			t->alive = 0;
			t->next_free = free_threads;
			free_threads = t;
		}
	}
	counters_clear(&retired);
}
