/* core/internal.h - private interfaces between the recording core's files
 * (arena, config, stacktab, livetab, counters, timeline, modules, dump,
 * lifecycle, signals, rooms).  Only core/ (and white-box unit tests)
 * include it; hook rooms use core/core.h, which this header extends. */
#ifndef ML_CORE_INTERNAL_H
#define ML_CORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <time.h>
#include <bits/types/sigset_t.h>	/* sigset_t, without all of signal.h */
#include <emmintrin.h>		/* SSE2: the live table compares four keys at once */
#include "core/core.h"

/* ---- config.c: the environment, read once at start-up (struct ml_config:
 * core.h). ---- */
/* Reads the environment into ml_config.  Not async-signal-safe (getenv);
 * call at start-up only.  Safe to call again (re-reads). */
void ml_config_load(void);

/* Removes every LD_PRELOAD entry naming libmemline from the environment, in
 * place (no allocation), so exec'd programs are not profiled. */
void ml_config_unpreload(void);

/* ---- warn.c (ml_warn, ml_warn_once: core.h) ---- */
/* Notes what descriptor 2 is (start-up): warnings are printed only while
 * it stays that stream. */
void ml_warn_init(void);
/* Writes the WARNINGS section (the warnings of this process, and whether
 * each was printed).  Async-signal-safe. */
void ml_warn_put_section(struct ml_writer *w);
/* In a fork child: the parent's warnings are not the child's. */
void ml_warn_after_fork(void);
/* Marks the run degraded (ML_META_DEGRADED) and warns once per process;
 * allocations are no longer recorded. */
void ml_degrade(const char *msg);
extern volatile int ml_degraded;

/* ---- arena.c (ml_arena_alloc: core.h) ---- */
/* Bytes handed out so far. */
size_t ml_arena_used(void);
/* After fork in the child: reset the lock (memory stays). */
void ml_arena_after_fork(void);
/* Asks for transparent huge pages (madvise) over a mapping of size bytes
 * that is read at random (the stack and counter indexes, a big run's
 * arena chunks): from 4 MiB on,
 * where a 4 KiB page's TLB miss comes with almost every lookup.  Nothing
 * changes where the system gives none (THP off). */
void ml_want_huge_pages(void *p, size_t size);

/* ---- stacktab.c: call stacks as paths of one call-site trie ---- */
/* Stack ids are trie node ids.  Three roots, none of them a frame: */
#define ML_NODE_ROOT 1u		/* whole stacks hang below it (the empty stack) */
#define ML_NODE_ROOT_TRUNCATED 2u	/* stacks cut at the depth limit */
#define ML_NODE_LOST 3u		/* the stack of allocations whose stack could not
					 * be kept (no memory for it): counted, no frames */
#define ML_NODE_FIRST 4u		/* the first node that is a frame */
/* 134 M nodes (1.5 GiB of them): the index's slots keep a node id in
 * their low 27 bits and 5 bits of its key's hash above. */
#define ML_NODES_MAX (1u << 27)
/* The hash of a node's key (parent, address): its low bits pick the index
 * slot a probe starts at, its top 5 bits are the tag kept beside the id
 * (exposed for the unit tests, which build colliding keys with it). */
uint64_t ml_stacktab_hash(uint32_t parent, uint64_t address);

/* Per thread: the path interned last, outermost frame first, so the next
 * stack looks up only the frames in which it differs; and copies of the
 * (parent, address) -> node lookups it made: a direct-mapped one of 4 Ki
 * entries (64 KiB: one probe, inline, holds the call paths of a loop
 * nest; 256 entries missed 89% of the time on bench/alloc_bench's ~1,400
 * hot paths; the stack walker picks its slots by a hash of the whole path,
 * see ml_stacktab_child_at), in front of a two-way set associative one
 * (node ids never change, so entries never go stale). */
#define ML_CHILD_L0 4096u
#define ML_CHILD_SETS 2048u
struct ml_child_slot {
	uint64_t address;
	uint32_t parent, node;
};
struct ml_intern_cache {
	uint32_t depth;			/* valid entries */
	uint32_t root;			/* ML_NODE_ROOT* they hang below; 0: none */
	uint64_t frames[ML_DEPTH_MAX];
	uint32_t nodes[ML_DEPTH_MAX];
	struct ml_child_slot l0[ML_CHILD_L0];
	struct ml_child_slot child[ML_CHILD_SETS][2];	/* [0]: the newer */
};

/* Creates the trie (idempotent).  Returns 0 or -ENOMEM. */
int ml_stacktab_init(void);
/* The stack id of frames[0..depth) (innermost first; depth <= ML_DEPTH_MAX),
 * below ML_NODE_ROOT_TRUNCATED when flags has ML_STACK_TRUNCATED, else
 * ML_NODE_ROOT; ML_NODE_LOST when there is no memory for its new nodes.
 * cache is the calling thread's.  Thread-safe; lock-free unless a node is
 * new; never allocates through malloc. */
uint32_t ml_stacktab_intern(struct ml_intern_cache *cache, const uint64_t *frames,
			    uint32_t depth, uint32_t flags);
/* The node (parent, address), made if new; 0 when there is no room.
 * Thread-safe; lock-free unless new. */
uint32_t ml_stacktab_child(uint32_t parent, uint64_t address);
uint32_t ml_stacktab_child_l1(struct ml_intern_cache *c, uint32_t parent, uint64_t address);
/* The same through the thread's caches c. */
static inline uint32_t ml_stacktab_child_cached(struct ml_intern_cache *c, uint32_t parent,
						uint64_t address)
{
	uint64_t h = (address ^ parent) * 0x9e3779b97f4a7c15ull;
	struct ml_child_slot *s = &c->l0[h >> (64 - 12)];
	_Static_assert(ML_CHILD_L0 == 1u << 12, "12 bits");
	if (__builtin_expect(s->address == address && s->parent == parent, 1))
		return s->node;
	uint32_t node = ml_stacktab_child_l1(c, parent, address);
	if (node)
		*s = (struct ml_child_slot){ address, parent, node };
	return node;
}
/* The same, through the slot of c's direct-mapped copy that h picks (its
 * top 12 bits): any hash, of the whole path say, so that the slots of a
 * path's frames are known before their parents are; an entry is checked
 * whole, so where it is kept decides only whether it is found. */
static inline uint32_t ml_stacktab_child_at(struct ml_intern_cache *c, uint64_t h,
					    uint32_t parent, uint64_t address)
{
	struct ml_child_slot *s = &c->l0[h >> (64 - 12)];
	if (__builtin_expect(s->address == address && s->parent == parent, 1))
		return s->node;
	uint32_t node = ml_stacktab_child_l1(c, parent, address);
	if (node)
		*s = (struct ml_child_slot){ address, parent, node };
	return node;
}
/* The stack id of the calling thread's stack, captured and interned with
 * the thread's cache (cache): the walker's own node cache when it can
 * (ml_unwind_stack, entered directly), else ml_stacktab_here_slow. */
uint32_t ml_unwind_stack(struct ml_intern_cache *cache);
static inline uint32_t ml_stacktab_here(struct ml_intern_cache *cache)
{
	return ml_unwind_stack(cache);
}
/* The common heap allocation on the side stack (ml_side_call3's fn; t the
 * calling thread's state, the hook's mark set): its stack id (the walker
 * inline, else as ml_unwind_stack), then ml_track_heap_stack (track.c),
 * errno kept around both. */
struct ml_thread;
long ml_unwind_heap_event(uint64_t ptr, uint64_t size, void *t);
long ml_track_heap_stack(uint64_t ptr, uint64_t size, struct ml_thread *t, uint32_t stack,
			 int saved_errno);
/* The same by a capture into a buffer (libunwind where the walker
 * declines), the rooms' decorations and ml_stacktab_intern. */
uint32_t ml_stacktab_here_slow(struct ml_intern_cache *cache);
/* The same where rooms decorate: the decorating room's own stack id
 * (struct ml_room's stack_id) when it gives one, else here_slow; with
 * MEMLINE_VERIFY_UNWIND the room's answer is checked against libunwind's
 * capture decorated as here_slow decorates it. */
uint32_t ml_stacktab_here_rooms(struct ml_intern_cache *cache);
/* MEMLINE_VERIFY_UNWIND: compares stack with libunwind's capture from the
 * caller (the runtime's frames dropped); counts and says a difference. */
void ml_stacktab_verify(uint32_t stack);
/* The runtime's own code, [lo, lo + range): frames there at a stack's
 * innermost end are dropped (see ml_stacktab_set_skip). */
struct ml_skip { uint64_t lo, range; };
extern struct ml_skip ml_skip;
/* Whether ml_unwind_stack may answer by itself alone: the walker is on, no
 * stack is to be checked against libunwind (MEMLINE_VERIFY_UNWIND) and no
 * room decorates stacks (ml_rooms_decorating): set by ml_stacktab_set_mode
 * (ml_stacktab_init and ml_rooms_start call it), so that the hot path
 * tests one word. */
extern int ml_capture_fast;
void ml_stacktab_set_mode(void);
/* MEMLINE_VERIFY_UNWIND: one line on stderr, how many stacks were checked
 * and how many differed (at each profile write). */
void ml_stacktab_verify_report(void);
/* The highest node id so far (ids are dense from 1, parents before their
 * children). */
uint32_t ml_stacktab_count(void);
/* Node id's caller (0 for a root) and frame address. */
void ml_stacktab_node(uint32_t id, uint32_t *parent, uint64_t *address);
/* The frames from node id up to its root (0 for a root). */
uint32_t ml_stacktab_depth(uint32_t id);
/* The root id hangs below (ML_NODE_ROOT, _TRUNCATED or _LOST). */
uint32_t ml_stacktab_root(uint32_t id);
/* Bytes of memory the trie holds (nodes and indexes). */
uint64_t ml_stacktab_bytes(void);
/* In a fork child: release the insert lock. */
void ml_stacktab_after_fork(void);
/* Captures the calling thread's stack (the fast walker, else libunwind),
 * dropping frames inside [skip_lo, skip_hi) at the innermost end, at most
 * max_depth frames.  Returns the depth; *flags gets ML_STACK_TRUNCATED if
 * cut.  Used only by the unit tests: the runtime uses _raw below. */
uint32_t ml_stacktab_capture(uint64_t *frames, uint32_t max_depth, uint32_t *flags);
/* The same without a copy: unwinds into buf (ML_CAPTURE_BUF slots); the
 * stack is buf[*skip .. *skip + depth). */
#define CAPTURE_SLACK 16u		/* room for the runtime's own frames */
#define ML_CAPTURE_BUF (ML_DEPTH_MAX + CAPTURE_SLACK + 1)
uint32_t ml_stacktab_capture_raw(uint64_t *buf, uint32_t max_depth, uint32_t *flags,
				 uint32_t *skip);
/* The address range whose innermost frames capture drops (libmemline). */
void ml_stacktab_set_skip(uint64_t lo, uint64_t hi);

struct ml_sample_weight;
/* ---- counters.c: counters per (stack, kind), per thread, and the exact
 * peak.  ---- */
/* One thread's counts for one (stack, kind): 64 bytes.  Only its thread
 * writes it (or, after the thread ended, the fold).  Live values may be
 * negative in one thread's counter (a block freed by another thread than
 * the one that allocated it); sums over threads are not. */
struct ml_counter {
	union {
		struct {
			uint32_t stack;
			uint32_t kind;
		};
		uint64_t key;		/* stack | kind << 32: one compare (ml_counter_key) */
	};
	uint64_t allocs, alloc_bytes;
	int64_t live_blocks, live_bytes;
	int64_t at_peak_blocks, at_peak_bytes;	/* valid when epoch == final peak + 1 */
	uint64_t epoch;			/* the kind's peak + 1 when at_peak_* was taken; 0: never */
};

/* A (stack, kind)'s counters summed over threads, at the end. */
struct ml_counter_sum {
	uint64_t allocs, alloc_bytes;
	int64_t live_blocks, live_bytes;
	int64_t peak_blocks, peak_bytes;
};

/* A snapshot of a kind's running totals (kept in counters.c as 16-byte
 * words updated with cmpxchg16b). */
struct ml_kind_totals {
	uint64_t live_bytes;
	uint64_t peak_bytes;
	uint64_t peak_ns;		/* when peak_bytes was set (the coarse monotonic
					 * clock, ml_clock_coarse_ns), 0 if never */
};

/* Each kind's running {live, peak}, one 16-byte word moved together (the
 * peak value is the epoch of the lazy snapshot), and {peak, its time}. */
union ml_kind_word {
	unsigned __int128 word;
	struct {
		uint64_t live;
		uint64_t peak;
	};
};
struct ml_kind_state {
	union ml_kind_word total __attribute__((aligned(16)));
	union ml_kind_word peak_time __attribute__((aligned(16)));	/* .live = peak, .peak = its time */
} __attribute__((aligned(64)));
extern struct ml_kind_state ml_kinds[ML_KIND_COUNT];
/* The kind's total reached the new peak: keep its time. */
void ml_counters_note_peak_time(uint32_t kind, uint64_t peak);

/* A move (realloc): the free of old_size from from and the allocation of
 * new_size to to, as one event for the kind's peak.  Both are the calling
 * thread's, of the same kind; they may be the same counter. */
void ml_counters_move(struct ml_counter *from, uint64_t old_size,
		      struct ml_counter *to, uint64_t new_size);
/* The kind's peak so far (its highest total of live bytes). */
uint64_t ml_counters_peak(uint32_t kind);
/* Adds c's values to sum, its bytes at the peak as of final_peak. */
void ml_counters_add(struct ml_counter_sum *sum, const struct ml_counter *c,
		     uint64_t final_peak);
/* A sampled block (weight w) allocated under c, its variance under v (the
 * variance counter of the same stack and kind): one event for the peak. */
void ml_counters_alloc_sampled(struct ml_counter *c, struct ml_counter *v,
			       const struct ml_sample_weight *w);
/* Its free. */
void ml_counters_free_sampled(struct ml_counter *c, struct ml_counter *v,
			      const struct ml_sample_weight *w);
/* Folds c (an ended thread's) into into (same stack and kind). */
void ml_counters_fold(struct ml_counter *into, struct ml_counter *c);
/* A snapshot of the kind's totals: of its peak group (ml_kind_peak_of) for
 * a kind that shares another's peak. */
void ml_counters_totals(uint32_t kind, struct ml_kind_totals *out);
/* Zeroes the kind totals (start-up, fork child). */
void ml_counters_reset_totals(void);

/* ---- thread.c: the per-thread state, and the side stack ---- */
struct ml_counter_chunk;
#define ML_COUNTER_CACHE 4096u
struct ml_thread {
	struct ml_sample_count sample;	/* --sample (core.h: ml_tl.sample) */
	struct ml_thread *next;		/* every state ever made */
	struct ml_thread *next_free;	/* free list, or the ended threads' list */
	int32_t tid;			/* the kernel thread using it */
	int ended;			/* its thread's end ran: given back once it is gone */
	uint64_t side_lo, side_hi;	/* the side stack (0, 0: none) */
	int *errno_at;			/* its thread's errno (the core keeps it) */
	uintptr_t *index;		/* (stack, kind) -> counter | tag, open addressing */
	uint32_t index_bits;
	uint32_t n_counters;
	struct ml_counter_chunk *volatile chunks;	/* the counters, newest chunk first */
	struct ml_counter_chunk *spare;	/* chunks of an earlier thread, to reuse */
	volatile int alive;		/* a thread runs with this state */
	volatile int in_event;		/* inside an event (ml_event_begin .. end) */
	uint64_t events;		/* its events with atomics (ML_TAKE_EVERY) */
	uint64_t others_seen;		/* other threads' events at its last look */
	uint64_t rng;			/* --sample: the thread's random stream */
	struct ml_counter *counter_cache[ML_COUNTER_CACHE];	/* direct-mapped */
	void *walk;			/* unwind.c's record of the last walk */
	void *room_memo;		/* the stack-id room's (rooms.c), or NULL */
	void *until;			/* unwind.c's walks to a range (rooms' stack ids) */
	struct ml_intern_cache intern;
};

/* The calling thread's state, made on first use; NULL when out of memory.
 * Async-signal-safe (mmap). */
struct ml_thread *ml_thread_make(void);
static inline struct ml_thread *ml_thread_self(void)
{
	struct ml_thread *t = ml_tl_thread;
	return __builtin_expect(t != NULL, 1) ? t : ml_thread_make();
}
/* (stack, kind) as struct ml_counter's key word. */
static inline uint64_t ml_counter_key(uint32_t stack, uint32_t kind)
{
	return (uint64_t)stack | (uint64_t)kind << 32;
}
struct ml_counter *ml_thread_counter_slow(struct ml_thread *t, uint32_t stack, uint32_t kind);
/* The calling thread's counter for (stack, kind), made on first use; NULL
 * when out of memory.  t is ml_thread_self(). */
/* The counter cache's slot of (stack, kind): by the stack id itself (ids
 * are dense and given in the order stacks are first seen, so the slots of
 * a program's hot stacks share cache lines; a hash spread them one to a
 * line), the kind (below 32, sampling's variance kinds included) in bits
 * 7..11. */
static inline struct ml_counter **ml_counter_slot(struct ml_thread *t, uint32_t stack,
						  uint32_t kind)
{
	_Static_assert(ML_COUNTER_CACHE == 4096u && ML_KIND_COUNT <= 16u, "kinds in bits 7..11");
	return &t->counter_cache[(stack ^ kind << 7) & (ML_COUNTER_CACHE - 1)];
}
/* The calling thread's counter for (stack, kind) if its cache has it, else
 * NULL. */
static inline struct ml_counter *ml_thread_counter_cached(struct ml_thread *t, uint32_t stack,
							 uint32_t kind)
{
	struct ml_counter *c = *ml_counter_slot(t, stack, kind);
	return __builtin_expect(c && c->key == ml_counter_key(stack, kind), 1) ? c : NULL;
}
static inline struct ml_counter *ml_thread_counter(struct ml_thread *t, uint32_t stack,
						  uint32_t kind)
{
	struct ml_counter *c = ml_thread_counter_cached(t, stack, kind);
	if (__builtin_expect(c != NULL, 1))
		return c;
	c = ml_thread_counter_slow(t, stack, kind);
	*ml_counter_slot(t, stack, kind) = c;
	return c;
}
/* Calls fn for every counter of every thread, ended ones included (their
 * folded counts).  Safe while other threads record (they may be counted
 * a moment apart); async-signal-safe. */
void ml_thread_foreach_counter(void (*fn)(const struct ml_counter *c, void *arg), void *arg);
/* The number of counters in all threads' tables, an upper bound of what
 * ml_thread_foreach_counter visits (plus those made meanwhile). */
uint64_t ml_thread_counter_count(void);
/* Bytes of memory held by per-thread state (counters and their indexes,
 * the states themselves; not the side stacks). */
uint64_t ml_thread_bytes(void);
/* --sample: every allocation of every thread (ended ones too), exactly. */
void ml_thread_all_allocs(uint64_t *allocs, uint64_t *bytes);
/* Thread states made so far (each with a side stack). */
uint64_t ml_thread_count(void);
/* In a fork child: only the calling thread remains; forget every count. */
void ml_thread_after_fork(void);
/* One recording thread, no atomics.  While one thread is the only one
 * recording (the owner, ml_plain_owner), its events update the live table
 * and the totals with plain loads and stores: no lock, no cmpxchg16b.
 * The owner changes hands (thread.c):
 *  - a thread that records while another owns revokes the ownership: it
 *    clears ml_plain_owner, forces a memory barrier on every thread of the
 *    process (membarrier(2), private expedited) and waits for the owner to
 *    leave the event it may be in; from then on all record with atomics;
 *  - a thread recording with atomics that sees no other thread record for
 *    ML_TAKE_EVERY of its events takes the ownership: it sets
 *    ml_plain_owner to itself, forces the barrier, and waits for every
 *    other thread to leave the event it may be in (or gives up).
 * So a program whose threads take turns (a worker while main waits in
 * pthread_join, Python threads under the GIL) records without atomics.
 * Every event says it is under way (in_event) before it looks at the
 * owner, so whoever changes the owner can wait for the events that did
 * not see the change.  Where membarrier is not available there is no
 * owner. */
#define ML_TAKE_EVERY 4096u
extern struct ml_thread *volatile ml_plain_owner;
void ml_event_begin_slow(void);
/* Around one recording event of the calling thread: plain mode when it is
 * the owner.  A thread's first event makes its state first: its events
 * must be seen (in_event) before this one touches a shared table (a first
 * event may be a free, which takes the block out of the live table before
 * it looks for a counter). */
static inline void ml_event_begin(void)
{
	struct ml_thread *t = ml_tl_thread;
	if (__builtin_expect(t != NULL, 1)) {
		t->in_event = 1;
		/* (x86 may let this load pass the store above: the changing
		 * thread's membarrier closes that gap) */
		__asm__ volatile("" ::: "memory");
		struct ml_thread *o = __atomic_load_n(&ml_plain_owner, __ATOMIC_RELAXED);
		if (__builtin_expect(o == t, 1)) {
			ml_tl_plain = 1;
			return;
		}
		if (!o && (++t->events & (ML_TAKE_EVERY - 1)))
			return;		/* atomics, as every thread now */
	}
	ml_event_begin_slow();
}
/* ml_event_begin for the owner of the plain mode only: true when the
 * calling thread (state t) owns it (its event begun, plain); false when
 * it does not (nothing begun: the caller goes through ml_event_begin).
 * (A begin given up at once, as ml_event_begin_slow does too.) */
static inline __attribute__((always_inline)) bool ml_event_begin_plain(struct ml_thread *t)
{
	t->in_event = 1;
	__asm__ volatile("" ::: "memory");	/* (see ml_event_begin) */
	if (__builtin_expect(__atomic_load_n(&ml_plain_owner, __ATOMIC_RELAXED) == t, 1)) {
		ml_tl_plain = 1;
		return true;
	}
	__atomic_store_n(&t->in_event, 0, __ATOMIC_RELEASE);
	return false;
}
static inline void ml_event_end(void)
{
	struct ml_thread *t = ml_tl_thread;
	ml_tl_plain = 0;
	__asm__ volatile("" ::: "memory");
	if (__builtin_expect(t != NULL, 1))
		__atomic_store_n(&t->in_event, 0, __ATOMIC_RELEASE);
}
/* ml_event_end for an event ml_event_begin_plain began (t: its state). */
static inline void ml_event_end_plain(struct ml_thread *t)
{
	ml_tl_plain = 0;
	__asm__ volatile("" ::: "memory");
	__atomic_store_n(&t->in_event, 0, __ATOMIC_RELEASE);
}
/* At start-up: registers for membarrier (without it, no owner ever). */
void ml_thread_mode_init(void);

/* The calling thread ends (threads.c): its state, which its last events
 * (later thread-exit destructors, the program's pthread key destructors)
 * still use, is given back for another thread once the thread is gone. */
void ml_thread_state_ending(void);

/* Runs fn(arg) on the calling thread's side stack (when it is not on it
 * already and has one; else right here) and returns its result. */
long ml_thread_on_side_stack(long (*fn)(void *), void *arg);
/* Calls fn(arg) with the stack pointer at top (thread.c). */
long ml_side_call(long (*fn)(void *), void *arg, uint64_t top);
/* fn(a, b, c) with the stack pointer at top (thread.c). */
long ml_side_call3(long (*fn)(uint64_t, uint64_t, void *), uint64_t a, uint64_t b, void *c,
		   uint64_t top);
/* Whether the calling thread, whose state is t, runs its recording right
 * here: it has no side stack, or is on it already. */
static inline __attribute__((always_inline)) bool ml_thread_side_here(const struct ml_thread *t)
{
	uint64_t sp;	/* the stack pointer (any address in this frame would do) */
	__asm__("mov %%rsp, %0" : "=r"(sp));
	return !t->side_hi || sp - t->side_lo < t->side_hi - t->side_lo;
}
/* ml_thread_side_run for fn(a, b, c): no argument block in memory. */
static inline __attribute__((always_inline)) long
ml_thread_side_run3(struct ml_thread *t, long (*fn)(uint64_t, uint64_t, void *), uint64_t a,
		    uint64_t b, void *c)
{
	if (__builtin_expect(ml_thread_side_here(t), 0))
		return fn(a, b, c);
	if (__builtin_expect(ml_tl_mark.sp != 0, 1))
		return ml_side_call3(fn, a, b, c, t->side_hi);
	ML_UNWIND_MARK();
	long r = ml_side_call3(fn, a, b, c, t->side_hi);
	ml_unwind_unmark();
	return r;
}
/* ml_thread_on_side_stack, inline, for t = the calling thread's state.  A
 * walk from the side stack starts at the hook's mark, or else at the frame
 * this is inlined into (marked here: its caller is where the walk goes
 * on). */
static inline __attribute__((always_inline)) long
ml_thread_side_run(struct ml_thread *t, long (*fn)(void *), void *arg)
{
	if (__builtin_expect(ml_thread_side_here(t), 0))
		return fn(arg);		/* no side stack, or already on it */
	if (__builtin_expect(ml_tl_mark.sp != 0, 1))
		return ml_side_call(fn, arg, t->side_hi);
	ML_UNWIND_MARK();
	long r = ml_side_call(fn, arg, t->side_hi);
	ml_unwind_unmark();
	return r;
}

/* ---- sampling.c: --sample BYTES (see the file comment) ---- */
/* Blocks counts of sampled profiles are fixed point: 1 block = this. */
#define ML_SAMPLE_UNIT 1024u
/* The variance counter of (stack, kind) is the counter (stack, kind +
 * ML_VAR_KIND): its bytes are variances (bytes^2), its blocks samples. */
#define ML_VAR_KIND 16u
struct ml_sample_weight {
	uint64_t bytes;		/* s / p, rounded */
	uint64_t blocks;	/* ML_SAMPLE_UNIT / p, rounded */
	uint64_t var;		/* (s/p) (s/p - s): its share of the variance */
};
/* At start-up (config read). */
void ml_sampling_init(void);
/* The seed the run used (MEMLINE_SAMPLE_SEED, or one from the clock). */
uint64_t ml_sampling_seed(void);
/* A new thread state's stream and first gap; index: the how-manieth state. */
void ml_sampling_thread_start(struct ml_thread *t, uint64_t index);
/* An exponential gap of mean sample_bytes, from t's stream. */
int64_t ml_sampling_gap(struct ml_thread *t);
/* What a sampled block of size bytes counts for. */
struct ml_sample_weight ml_sampling_weight(uint64_t size);
/* The filter of sampled blocks' addresses (frees of others stop there). */
void ml_sampling_filter_add(uint64_t addr);
void ml_sampling_filter_remove(uint64_t addr);
/* (The filter itself, ml_sampling_maybe: core.h.) */
/* In a fork child: the live table is empty, so is the filter. */
void ml_sampling_after_fork(void);

/* ---- livetab.c: live blocks, (address, kind) -> (size, stack).  The
 * common paths are inline here; see livetab.c for the design. ---- */
struct ml_live_block {
	uint64_t addr;		/* 0: none */
	uint64_t size;
	uint32_t stack;
	uint32_t kind;
};

#define ML_LIVE_SHARDS 256u
#define ML_LIVE_REGION_SHIFT 20u	/* a shard per 1 MiB region (hashed) */
#define ML_LIVE_WAYS 4u
#define ML_LIVE_BIG 0xffffffffu		/* size escape: in the shard's side list */
struct ml_live_bucket {
	uint64_t key[ML_LIVE_WAYS];	/* address | kind << 60; 0: empty */
	uint32_t stack[ML_LIVE_WAYS];
	uint32_t size[ML_LIVE_WAYS];
} __attribute__((aligned(64)));
/* Spill counts.  An insert must see that its key is in neither of its
 * buckets (else the allocator reused an address whose free we missed),
 * but a key is away from its first bucket only when that one was full
 * when it came (or an eviction moved it): each bucket counts the entries
 * whose first bucket it is that live in their other one, and an insert
 * reads the other bucket only when that count is not 0.  The count's
 * four bits are the top bits of the bucket's four stack words, whichever
 * ways are in use (stack ids never reach that bit). */
#define ML_LIVE_SPILL 0x80000000u
_Static_assert(ML_NODES_MAX <= ML_LIVE_SPILL, "stack ids leave the spill bit free");
static inline uint32_t ml_live_spilled(const struct ml_live_bucket *b)
{
	return (uint32_t)_mm_movemask_ps(_mm_load_ps((const float *)(const void *)b->stack));
}
struct ml_live_big;
struct ml_live_shard {
	ml_spin_t lock;
	uint32_t count;
	uint32_t shift;		/* 64 - log2(buckets); 0 before the first insert */
	uint32_t grow_at;	/* 0 before the first insert */
	uint32_t rng;		/* picks the slot a kick evicts */
	struct ml_live_bucket *b;
	struct ml_live_big *big;
	uint32_t n_big, big_cap;
} __attribute__((aligned(64)));
extern struct ml_live_shard ml_live_shards[ML_LIVE_SHARDS];

/* A shard's lock (atomic mode): ml_spin_lock's one exchange inline, its
 * wait out of line. */
static inline __attribute__((always_inline)) void ml_live_lock(struct ml_live_shard *s)
{
	ml_spin_lock(&s->lock);
}

static inline uint64_t ml_live_key(uint64_t addr, uint32_t kind)
{
	return addr | (uint64_t)kind << 60;
}
static inline struct ml_live_shard *ml_live_shard_of(uint64_t addr)
{
	return &ml_live_shards[((addr >> ML_LIVE_REGION_SHIFT) * 0x9e3779b97f4a7c15ull) >> 56];
}
/* A key's first bucket, and the mask to its other one (never 0). */
static inline uint32_t ml_live_b1(uint32_t shift, uint64_t key)
{
	return (uint32_t)((key * 0xd6e8feb86659fd93ull) >> shift);
}
static inline uint32_t ml_live_alt(uint32_t shift, uint64_t key)
{
	return (uint32_t)((key * 0x9fb21c651e98df25ull) >> shift) | 1u;
}
/* The ways of b whose key is k's (k: the key in both halves), as bits
 * 0, 2, 4, 6; no branch (which way holds a key is random). */
static inline uint32_t ml_live_match(const struct ml_live_bucket *b, __m128i k)
{
	__m128i lo = _mm_load_si128((const __m128i *)(const void *)&b->key[0]);
	__m128i hi = _mm_load_si128((const __m128i *)(const void *)&b->key[2]);
	uint32_t m = (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(lo, k))) |
		(uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(hi, k))) << 4;
	return m & (m >> 1) & 0x55u;
}
#define ML_LIVE_WAY(m) ((unsigned)__builtin_ctz(m) >> 1)
/* The hot paths' filter: the low 32 bits of b's four keys in one vector
 * (one shuffle), and the ways whose low half is k32's (k32 in every
 * lane), as bits 0..3.  A superset of the ways holding a whole key (two
 * keys of a bucket rarely share their low halves: addresses 4 GiB apart),
 * so a caller takes a way only after comparing its whole key, and leaves
 * any other case to the slow path, which compares whole keys. */
static inline __m128i ml_live_lows(const struct ml_live_bucket *b)
{
	__m128 lo = _mm_load_ps((const float *)(const void *)&b->key[0]);
	__m128 hi = _mm_load_ps((const float *)(const void *)&b->key[2]);
	return _mm_castps_si128(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
}
static inline uint32_t ml_live_lanes(__m128i lows, __m128i k32)
{
	return (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(lows, k32)));
}

/* The whole of insert and remove (growth, evictions, missed frees, big
 * sizes); the inline versions below call them when they must. */
int ml_livetab_insert_slow(uint64_t addr, uint32_t kind, uint64_t size, uint32_t stack,
			   struct ml_live_block *old);

/* The common insert alone: the key in neither of its buckets, a free way
 * in its first, a size below 4 GiB, no growth due: true when it added
 * (addr, kind) -> (size, stack), false when it did nothing.  plain: the
 * event's ml_tl_plain, read once by the caller. */
static inline __attribute__((always_inline)) bool
ml_livetab_insert_quick(uint64_t addr, uint32_t kind, uint64_t size, uint32_t stack, bool plain)
{
	uint64_t key = ml_live_key(addr, kind);
	struct ml_live_shard *s = ml_live_shard_of(addr);
	if (!plain)
		ml_live_lock(s);
	/* The key in neither bucket (else the allocator reused an address
	 * whose free we missed) and a free way in the first.  A table not
	 * made yet has count = grow_at = 0. */
	if (__builtin_expect(s->count < s->grow_at && size < ML_LIVE_BIG, 1)) {
		uint32_t i = ml_live_b1(s->shift, key);
		struct ml_live_bucket *b1 = &s->b[i];
		__m128i k32 = _mm_set1_epi32((int)(uint32_t)key), lows = ml_live_lows(b1);
		uint32_t empty = ml_live_lanes(lows, _mm_setzero_si128());
		uint32_t seen = ml_live_lanes(lows, k32);
		/* The other bucket only if some key of b1 went there. */
		if (__builtin_expect(ml_live_spilled(b1) != 0, 0))
			seen |= ml_live_lanes(ml_live_lows(&s->b[i ^ ml_live_alt(s->shift, key)]),
					      k32);
		unsigned w = (unsigned)__builtin_ctz(empty | 16u);
		if (__builtin_expect(!seen && w < ML_LIVE_WAYS && b1->key[w] == 0, 1)) {
			b1->key[w] = key;
			b1->stack[w] = stack | (b1->stack[w] & ML_LIVE_SPILL);
			b1->size[w] = (uint32_t)size;
			s->count++;
			if (!plain)
				ml_spin_unlock(&s->lock);
			return true;
		}
	}
	if (!plain)
		ml_spin_unlock(&s->lock);
	return false;
}

/* Adds (addr, kind) -> (size, stack).  Returns 0, or -ENOMEM (not added).
 * An existing entry for the same (addr, kind) is removed first and
 * returned in *old (old->addr = 0 if none).  Thread-safe. */
static inline __attribute__((always_inline)) int
ml_livetab_insert_in(uint64_t addr, uint32_t kind, uint64_t size, uint32_t stack,
		     struct ml_live_block *old, bool plain)
{
	if (__builtin_expect(ml_livetab_insert_quick(addr, kind, size, stack, plain), 1)) {
		old->addr = 0;
		return 0;
	}
	return ml_livetab_insert_slow(addr, kind, size, stack, old);
}
static inline __attribute__((always_inline)) int
ml_livetab_insert(uint64_t addr, uint32_t kind, uint64_t size, uint32_t stack,
		  struct ml_live_block *old)
{
	return ml_livetab_insert_in(addr, kind, size, stack, old, ml_tl_plain);
}

/* What a remove found: in registers, not through memory. */
struct ml_live_val {
	uint64_t size;
	uint32_t stack;
	uint32_t found;		/* 0: (addr, kind) was not live */
};
/* ml_livetab_remove's whole path, by value (livetab.c). */
struct ml_live_val ml_livetab_take_slow(uint64_t addr, uint32_t kind);

/* ml_livetab_take_in takes (addr, kind) out of the table and returns its
 * size and stack (found = 0 if unknown).  Thread-safe.  Inline: the key in
 * its first bucket, of a size below 4 GiB (ml_livetab_take_quick, alone:
 * true when it took the key into *v, false when it did nothing); else the
 * slow path.  The _in forms take the event's ml_tl_plain, read once by
 * the caller (ml_livetab_insert_in too). */
static inline __attribute__((always_inline)) bool
ml_livetab_take_quick(uint64_t addr, uint32_t kind, bool plain, struct ml_live_val *v)
{
	uint64_t key = ml_live_key(addr, kind);
	struct ml_live_shard *s = ml_live_shard_of(addr);
	if (!plain)
		ml_live_lock(s);
	if (__builtin_expect(s->shift != 0, 1)) {
		struct ml_live_bucket *b = &s->b[ml_live_b1(s->shift, key)];
		uint32_t m = ml_live_lanes(ml_live_lows(b), _mm_set1_epi32((int)(uint32_t)key));
		unsigned w = (unsigned)__builtin_ctz(m | 16u);
		if (__builtin_expect(w < ML_LIVE_WAYS && b->key[w] == key, 1)) {
			uint32_t size = b->size[w];
			if (__builtin_expect(size != ML_LIVE_BIG, 1)) {
				*v = (struct ml_live_val){ size, b->stack[w] & ~ML_LIVE_SPILL, 1 };
				b->key[w] = 0;
				s->count--;
				if (!plain)
					ml_spin_unlock(&s->lock);
				return true;
			}
		}
	}
	if (!plain)
		ml_spin_unlock(&s->lock);
	return false;
}
static inline __attribute__((always_inline)) struct ml_live_val
ml_livetab_take_in(uint64_t addr, uint32_t kind, bool plain)
{
	struct ml_live_val v;
	if (__builtin_expect(ml_livetab_take_quick(addr, kind, plain, &v), 1))
		return v;
	return ml_livetab_take_slow(addr, kind);
}
static inline __attribute__((always_inline)) struct ml_live_val
ml_livetab_take(uint64_t addr, uint32_t kind)
{
	return ml_livetab_take_in(addr, kind, ml_tl_plain);
}

/* Removes (addr, kind) and returns it in *out.  Returns false if unknown.
 * Thread-safe. */
static inline __attribute__((always_inline)) bool
ml_livetab_remove(uint64_t addr, uint32_t kind, struct ml_live_block *out)
{
	struct ml_live_val v = ml_livetab_take(addr, kind);
	out->addr = addr;
	out->kind = kind;
	out->size = v.size;
	out->stack = v.stack;
	return v.found;
}
/* The size of (addr, kind) if live, else 0. */
uint64_t ml_livetab_size(uint64_t addr, uint32_t kind);
/* Live entries now (all kinds). */
uint64_t ml_livetab_count(void);
/* Bytes of memory the tables hold. */
uint64_t ml_livetab_bytes(void);
/* Forgets every entry and resets locks (fork child). */
void ml_livetab_reset(void);

/* ---- unwind_rules.c: the unwind rule of a code address, from .eh_frame
 * (see the file comment for the forms it represents). ---- */
/* A rule packed in 64 bits, laid out as struct ml_unwind_rule on this
 * little-endian target: the CFA's offset from rsp or rbp, the caller's rbp
 * slot's and the return address's offsets from the CFA, flags.  Never 0
 * (ML_RULE_VALID is always set). */
struct ml_unwind_rule {
	int32_t cfa_off;
	int16_t bp_off;
	int8_t ra_off;
	uint8_t flags;
};
#define ML_RULE_CFA_RBP 0x01u	/* CFA is rbp-based (else rsp-based) */
#define ML_RULE_RBP_SAVED 0x02u	/* caller's rbp is at CFA + bp_off */
#define ML_RULE_RBP_UNDEF 0x04u	/* caller's rbp is unknown */
#define ML_RULE_RA_UNDEF 0x08u	/* no caller: the outermost frame */
#define ML_RULE_BAD 0x10u	/* not representable: use libunwind */
#define ML_RULE_VALID 0x80u
/* Creates the shared rule cache (idempotent).  Returns 0 or -ENOMEM. */
int ml_unwind_init(void);
/* The packed rule of code address target (the instruction's, or for a
 * return address ra, of ra - 1), cached.  ml_unwind_init must have
 * succeeded.  Thread-safe, lock-free when cached; never allocates through
 * malloc. */
uint64_t ml_unwind_rule(uint64_t target);
/* 0 before ml_unwind_init; bumped by every flush, so that copies of
 * rules (the threads' first-level caches, their previous walks) made
 * under an older value are dropped. */
extern volatile uint32_t ml_unwind_gen;
/* Forgets every cached rule (after dlclose: the address may be reused). */
void ml_unwind_flush(void);
/* In a fork child: release the insert lock. */
void ml_unwind_after_fork(void);

/* ---- unwind.c: the walker for x86-64 with those rules, reusing the
 * thread's previous walk; libunwind is its fallback. ---- */
/* Stores the calling thread's return addresses, innermost first, into
 * buf[0..limit) (limit <= ML_CAPTURE_BUF), as unw_backtrace() would:
 * buf[0] is a return address into the caller of ml_unwind_fast, the last
 * one the outermost frame's, or the limit's.  Returns the count, or -1
 * when some frame's rule is not one it handles (then use libunwind).
 * Never allocates through malloc; not for signal handlers that may
 * interrupt a walk on the same thread (they get -1). */
int ml_unwind_fast(uint64_t *buf, uint32_t limit);
/* ml_core_native_stack's walk (core.h). */
uint32_t ml_unwind_native_stack(struct ml_intern_cache *ic);
/* ml_unwind_stack (declared with the stack table): the stack id from the
 * walker's record of nodes, only frames that changed since the thread's
 * previous walk walked and looked up; ml_stacktab_here_slow where it
 * cannot (rooms decorating, a frame it does not handle, more than
 * ml_config.max_depth frames, no room for a node). */
/* Forgets the previous walk kept in walk (a thread state's, handed to a
 * new thread). */
void ml_unwind_thread_reset(void *walk);
/* ml_core_native_until (core.h), from the hook's mark: the addresses a
 * full walk would find first, up to the first in the range; through the
 * thread's cache of such walks (its ml_thread's until). */
int ml_unwind_until(struct ml_native_path *out, uint64_t *buf, uint32_t max, uint64_t lo,
		    uint64_t span);
/* Empties a thread state's cache of those walks (a new thread's). */
void ml_unwind_until_reset(void *cache);

/* ---- libunwind.c: libunwind loaded locally, without descriptors or
 * pthread keys ---- */
/* Loads libunwind (dlopen, RTLD_LOCAL) and sets it up: its memory accessor
 * replaced, the pipe it opened closed.  Once: later calls return the first
 * one's result.  Unless anytime (the constructor), it declines while the
 * loader is adding or removing modules: -EAGAIN, nothing done.  Call at
 * start-up, the guard held.  Returns 0, -ENOENT (not loaded: warned once;
 * captures by libunwind then find nothing) or -ENOSYS (loaded, untamed). */
int ml_libunwind_init(bool anytime);
/* True once libunwind is loaded: captures by it can find frames. */
bool ml_libunwind_ready(void);
/* Stores the calling thread's stack into frames[0..max), innermost first,
 * with libunwind: frame 0 is inside ml_libunwind_capture, frame 1 the
 * return into its caller.  Returns the count (0 on failure, or before
 * libunwind is loaded).  Never allocates through malloc. */
uint32_t ml_libunwind_capture(uint64_t *frames, uint32_t max);

/* ---- timeline.c: total live bytes per kind over time, bounded. ---- */
#define ML_TIMELINE_POINTS 2048u
/* Notes that kind's total is now live_bytes at now_ns (ml_clock_coarse_ns).
 * Thread-safe, lock-free except while buckets merge. */
void ml_timeline_note(uint32_t kind, uint64_t now_ns, uint64_t live_bytes);
/* What a thread knows of kind's timeline (see timeline.c). */
#define ML_TIMELINE_EVERY 64u
/* (struct ml_timeline_thread, ml_tl_timeline: core.h, the TLS block) */
void ml_timeline_slow(uint32_t kind, uint64_t live_bytes);
/* The hot path's note: kind's total is now live_bytes.  Reads the clock
 * only when the value may raise the bucket the thread last saw, or every
 * ML_TIMELINE_EVERY events (timeline.c).  Thread-safe. */
static inline bool ml_timeline_due(uint32_t kind, uint64_t live_bytes)
{
	struct ml_timeline_thread *t = &ml_tl_timeline[kind];
	return !__builtin_expect(--t->countdown != 0 && live_bytes < t->known, 1);
}
static inline void ml_timeline_event(uint32_t kind, uint64_t live_bytes)
{
	if (ml_timeline_due(kind, live_bytes))
		ml_timeline_slow(kind, live_bytes);
}
/* The coarse clock (ns) this thread's last ml_timeline_event for kind
 * read: right after an event that raised the kind's peak, that event's
 * time. */
static inline uint64_t ml_timeline_last_ns(uint32_t kind)
{
	return ml_tl_timeline[kind].now_ns;
}
/* Calls fn(kind, ns_since_start, max_live_in_bucket) for every non-empty
 * bucket in time order, per kind. */
void ml_timeline_foreach(void (*fn)(uint32_t kind, uint64_t ns, uint64_t live, void *arg),
			 void *arg);
/* Clears everything; times are measured from now_ns. */
void ml_timeline_reset(uint64_t now_ns);

/* ---- clock.c: timestamps (the coarse clock on the hot path). ---- */
/* Start-up clocks (set by ml_clock_start). */
void ml_clock_start(void);
/* CLOCK_MONOTONIC_COARSE in ns (a few ns to read; resolution ~4 ms). */
static inline uint64_t ml_clock_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
uint64_t ml_clock_start_realtime_ns(void);
/* Monotonic nanoseconds since start. */
uint64_t ml_clock_elapsed_ns(void);

/* ---- modules.c: the module map. ---- */
/* Refreshes the map from dl_iterate_phdr, keeping modules seen before and
 * flagging those gone as ML_MOD_UNLOADED.  Not async-signal-safe in a
 * strict sense (takes the loader lock); best effort in signal handlers. */
void ml_modules_refresh(void);
/* Adds the modules holding any of addrs that the map lacks (dlopen'd
 * since the last refresh), without the loader lock: for writes from
 * signal handlers, where ml_modules_refresh must not run. */
void ml_modules_add_missing(const uint64_t *addrs, uint32_t n);
/* Marks the module holding addr as the runtime (libmemline). */
void ml_modules_set_runtime(uint64_t addr);
/* In a fork child: release the lock another thread may have held. */
void ml_modules_after_fork(void);
struct ml_module_rec {
	uint64_t bias, lo, hi;
	uint32_t flags;
	uint32_t path_len;
	uint32_t build_id_len;
	uint32_t seen;			/* refresh generation that last saw it */
	uint8_t build_id[40];
	char path[];			/* path_len bytes + NUL */
};
/* Calls fn for every module known. */
void ml_modules_foreach(void (*fn)(const struct ml_module_rec *m, void *arg), void *arg);

/* ---- dump_stacks.c ---- */
/* Writes FRAMES, STACKS and COUNTERS (every thread's counters summed) and
 * adds each kind's sums into totals[kind] (reserved = 1 for kinds seen).
 * Returns 0 or -ENOMEM.  Async-signal-safe. */
int ml_dump_stacks(struct ml_writer *w, struct ml_fmt_total *totals);
/* Adds to the module map the modules of every frame (signal handlers,
 * where ml_modules_refresh must not run). */
void ml_dump_modules_of_stacks(void);

/* ---- ownstack.c: a stack of the runtime's own for writing the profile ---- */
/* Maps it (start-up).  Returns 0 or -ENOMEM (then the caller's stack is
 * used). */
int ml_ownstack_init(void);
/* Runs fn(arg) on the runtime's own stack and returns its result (on the
 * caller's when there is none, or when already on it).  One caller at a
 * time (the profile writer is serialised).  Async-signal-safe. */
int ml_ownstack_run(int (*fn)(void *), void *arg);

/* ---- procinfo.c: the process in its run and its job ---- */
/* Reads MEMLINE_RUN_PID, the rank variables and the host name (start-up). */
void ml_procinfo_init(void);
/* Writes the PROCESS section.  Async-signal-safe. */
void ml_procinfo_put_section(struct ml_writer *w);
/* In a fork child: its parent is the process that forked it. */
void ml_procinfo_after_fork(void);

/* ---- dump.c ---- */
/* Reads the executable's path and command line (start-up; the main thread
 * may be gone when the profile is written). */
void ml_dump_init(void);
/* In a fork child: forget a write another thread had in progress. */
void ml_dump_after_fork(void);
/* Waits while another thread writes the profile (a signal handler that
 * must not let the process die mid-write).  Async-signal-safe. */
void ml_dump_wait_other(void);

/* ---- lifecycle.c (libmemline.so only; the rest of its API: core.h) ---- */
/* Writes the profile unless this process must not (a vfork child, a fork
 * child with MEMLINE_FOLLOW=0, recording off).  Returns ml_dump_write's
 * result, or 0 when nothing is written. */
int ml_lifecycle_write(uint32_t reason, int32_t status);
/* The exit-time profile is out: nothing else is written. */
bool ml_lifecycle_final_written(void);
/* False in a vfork or clone(CLONE_VM) child that shares this memory: it
 * must neither write the profile nor change what is written. */
bool ml_lifecycle_is_profiled_process(void);

/* ---- signals.c: the fatal-signal handler (the program-facing sigaction
 * and signal: core.h) ---- */
/* Installs the handler where the program left the default action.  Call
 * once from the constructor. */
void ml_signals_install(void);
/* Whether sig's default action ends the process, so that memline's handler
 * writes the profile (core/fatalsigs.c).  line_timer: SIGPROF is the line
 * timer's (ml_signals_line_timer(), MEMLINE_LINES=1). */
bool ml_signals_end_process(int sig, bool line_timer);
bool ml_signals_line_timer(void);
/* Adds to set the signals that end the process and arrive from outside
 * the thread (SIGTERM, SIGINT, SIGALRM, SIGUSR1, real-time signals, ...;
 * not faults, abort or SIGXFSZ).  Async-signal-safe. */
void ml_signals_add_async(sigset_t *set, bool line_timer);

/* ---- threads.c (ml_thread_watch, ml_thread_ended: core.h) ---- */
/* Runs this thread's thread_end callbacks now (the main thread's
 * pthread_exit, which glibc's thread-exit destructors do not see). */
void ml_thread_end_now(void);

/* ---- sigclaim.c (ml_signals_claim, ml_signals_release: core.h) ---- */
/* True when a room has claimed sig; *view is then the action the program
 * reads back. */
bool ml_signals_claimed(int sig, struct sigaction *view);

/* ---- rooms.c: the registry (struct ml_room: core.h) ---- */
void ml_rooms_start(void);
void ml_rooms_fork_child(void);
void ml_rooms_signal_taken(int sig);
void ml_rooms_thread_end(void);
void ml_rooms_write_sections(struct ml_writer *w);
/* Rooms' decorate_stack callbacks, in order (ml_core_decorate_stack). */
uint32_t ml_rooms_decorate(uint64_t *frames, uint32_t depth, uint32_t cap, uint32_t *flags);
/* The stack id the one decorating room gives for this allocation (struct
 * ml_room's stack_id, with the thread's memo), or 0: capture and decorate. */
uint32_t ml_rooms_stack_id(struct ml_intern_cache *ic);
/* A thread state handed to a new thread: its room memo starts empty. */
void ml_rooms_memo_reset(void *memo);
/* Whether any room decorates stacks (the hot path's test). */
extern volatile int ml_rooms_decorating;

/* ---- track.c: state shared by the whole core (ml_core_active: core.h) ---- */
extern volatile uint32_t ml_core_flags;	/* ML_META_* */
/* Turns recording on or off: ml_core_active, and ml_pass_stop's
 * ML_PASS_OFF. */
void ml_core_set_active(bool on);
/* The notes section (notes.c): written after the rooms' sections;
 * async-signal-safe.  The lock is reset in a fork child. */
void ml_notes_write(struct ml_writer *w);
void ml_notes_after_fork(void);

/* Initialises the core: reads the environment, starts the clocks, creates
 * the tables and turns recording on.  self_addr is an address inside
 * libmemline (its frames are dropped from captured stacks), 0 when the core
 * is linked into a test.  Idempotent; returns 0 or -errno.  Not
 * async-signal-safe. */
int ml_core_init(uint64_t self_addr);

/* In a fork child: forget the parent's live blocks and counters (stack ids
 * stay), restart clocks, flag the profile ML_META_FORKED. */
void ml_core_after_fork(void);

/* Writes the profile now (see core/dump.c for the file name).  reason is
 * enum ml_fmt_end_reason.  Returns 0 or -errno.  Async-signal-safe except for
 * refreshing the module map; serialised: a second concurrent call returns
 * -EBUSY. */
int ml_dump_write(uint32_t reason, int32_t status);

/* ---- counters.c's hot paths, inline (here: they use the thread and
 * timeline declarations above) ---- */
/* Adds delta to the kind's live total, its peak group's (ml_kind_peak_of:
 * python shares the heap's) (plain stores while one thread records, else
 * cmpxchg16b); returns the peak after it, the peak before it
 * in *before. */
static inline __attribute__((always_inline)) uint64_t
ml_counters_apply_in(uint32_t kind, int64_t delta, uint64_t *before, bool plain)
{
	union ml_kind_word old, new;
	kind = ml_kind_peak_of((enum ml_kind)kind);	/* python: the heap's total */
	if (__builtin_expect(plain, 1)) {	/* the one recording thread */
		old.live = ml_kinds[kind].total.live;
		old.peak = ml_kinds[kind].total.peak;
		new.live = old.live + (uint64_t)delta;
		new.peak = new.live > old.peak ? new.live : old.peak;
		ml_kinds[kind].total.live = new.live;
		ml_kinds[kind].total.peak = new.peak;
	} else {
		old.word = ml_kinds[kind].total.word;	/* may tear; the CAS corrects it */
		for (;;) {
			new.live = old.live + (uint64_t)delta;
			new.peak = new.live > old.peak ? new.live : old.peak;
			unsigned __int128 seen = __sync_val_compare_and_swap(
				&ml_kinds[kind].total.word, old.word, new.word);
			if (__builtin_expect(seen == old.word, 1))
				break;
			old.word = seen;
		}
	}
	ML_ASSERT(delta >= 0 || old.live >= (uint64_t)-delta);	/* never below 0 */
	ML_ASSERT(new.peak >= new.live && new.peak >= old.peak);
	*before = old.peak;
	ml_timeline_event(kind, new.live);
	if (__builtin_expect(new.peak > old.peak, 0))
		ml_counters_note_peak_time(kind, new.peak);
	return new.peak;
}
static inline uint64_t ml_counters_apply(uint32_t kind, int64_t delta, uint64_t *before)
{
	return ml_counters_apply_in(kind, delta, before, ml_tl_plain);
}

/* Before c changes: if the kind reached a peak since c last changed, c's
 * live values now are its values at that peak.  epoch is peak + 1 (0:
 * never taken; a peak of 0 bytes is a value too). */
static inline void ml_counters_before(struct ml_counter *c, uint64_t peak_before)
{
	if (c->epoch <= peak_before) {
		c->at_peak_bytes = c->live_bytes;
		c->at_peak_blocks = c->live_blocks;
		c->epoch = peak_before + 1;
	}
}

/* After c changed: if this very event set a new peak, c's live is at it. */
static inline void ml_counters_after(struct ml_counter *c, uint64_t peak_before,
				     uint64_t peak_after)
{
	if (peak_after > peak_before) {
		c->at_peak_bytes = c->live_bytes;
		c->at_peak_blocks = c->live_blocks;
		c->epoch = peak_after + 1;
	}
}

/* The kind's total falls by size (a free: its peak cannot rise), as
 * ml_counters_apply; returns the peak, the same before and after. */
static inline __attribute__((always_inline)) uint64_t
ml_counters_total_down(uint32_t kind, uint64_t size, bool plain, uint64_t *live)
{
	union ml_kind_word old, new;
	kind = ml_kind_peak_of((enum ml_kind)kind);
	if (__builtin_expect(plain, 1)) {
		old.peak = ml_kinds[kind].total.peak;
		old.live = ml_kinds[kind].total.live;
		new.live = old.live - size;
		ml_kinds[kind].total.live = new.live;
	} else {
		/* The whole word still: a free must see the peak of its own
		 * moment in the total's order (the lazy snapshot's epoch). */
		old.word = ml_kinds[kind].total.word;
		for (;;) {
			new.live = old.live - size;
			new.peak = old.peak;
			unsigned __int128 seen = __sync_val_compare_and_swap(
				&ml_kinds[kind].total.word, old.word, new.word);
			if (__builtin_expect(seen == old.word, 1))
				break;
			old.word = seen;
		}
	}
	ML_ASSERT(old.live >= size);	/* never below 0 */
	*live = new.live;
	return old.peak;
}
/* The same with the timeline's note (ml_counters_total_down leaves it to
 * the caller: kind's total is now *live). */
static inline __attribute__((always_inline)) uint64_t
ml_counters_apply_down(uint32_t kind, uint64_t size, bool plain)
{
	uint64_t live, peak = ml_counters_total_down(kind, size, plain, &live);
	ml_timeline_event(ml_kind_peak_of((enum ml_kind)kind), live);
	return peak;
}

/* c's part of one allocation (+size), the kind's peak before and after it
 * given; then the whole of it: applies one allocation (+size) to c, the
 * calling thread's counter of kind (c->kind: a constant here folds the
 * kind's look-ups away).  Exact under any interleaving of threads (see
 * counters.c).  plain: the event's ml_tl_plain. */
static inline __attribute__((always_inline)) void
ml_counter_add(struct ml_counter *c, uint64_t size, uint64_t before, uint64_t after)
{
	ml_counters_before(c, before);
	c->allocs++;
	c->alloc_bytes += size;
	c->live_blocks++;
	c->live_bytes += (int64_t)size;
	ml_counters_after(c, before, after);
}
static inline __attribute__((always_inline)) void
ml_counters_alloc_in(struct ml_counter *c, uint32_t kind, uint64_t size, bool plain)
{
	uint64_t before, after = ml_counters_apply_in(kind, (int64_t)size, &before, plain);
	ml_counter_add(c, size, before, after);
}

static inline __attribute__((always_inline)) void ml_counters_alloc_k(struct ml_counter *c,
								      uint32_t kind, uint64_t size)
{
	ml_counters_alloc_in(c, kind, size, ml_tl_plain);
}

/* Applies one free of size bytes to c (the calling thread's, of kind). */
static inline __attribute__((always_inline)) void
ml_counters_free_in(struct ml_counter *c, uint32_t kind, uint64_t size, bool plain)
{
	/* A free never sets a new peak: nothing to note after it. */
	ml_counters_before(c, ml_counters_apply_down(kind, size, plain));
	c->live_blocks--;
	c->live_bytes -= (int64_t)size;
}
static inline __attribute__((always_inline)) void ml_counters_free_k(struct ml_counter *c,
								     uint32_t kind, uint64_t size)
{
	ml_counters_free_in(c, kind, size, ml_tl_plain);
}

/* A move (ml_counters_move), inline, of kind (from's and to's). */
static inline __attribute__((always_inline)) void
ml_counters_move_in(struct ml_counter *from, uint64_t old_size, struct ml_counter *to,
		    uint32_t kind, uint64_t new_size, bool plain)
{
	uint64_t before, after = ml_counters_apply_in(kind, (int64_t)new_size - (int64_t)old_size,
						      &before, plain);
	ml_counters_before(from, before);
	ml_counters_before(to, before);
	from->live_blocks--;
	from->live_bytes -= (int64_t)old_size;
	to->allocs++;
	to->alloc_bytes += new_size;
	to->live_blocks++;
	to->live_bytes += (int64_t)new_size;
	ml_counters_after(from, before, after);
	ml_counters_after(to, before, after);
}
static inline __attribute__((always_inline)) void
ml_counters_move_k(struct ml_counter *from, uint64_t old_size, struct ml_counter *to,
		   uint32_t kind, uint64_t new_size)
{
	ml_counters_move_in(from, old_size, to, kind, new_size, ml_tl_plain);
}

static inline __attribute__((always_inline)) void ml_counters_alloc(struct ml_counter *c,
								    uint64_t size)
{
	ml_counters_alloc_k(c, c->kind, size);
}

static inline __attribute__((always_inline)) void ml_counters_free(struct ml_counter *c,
								   uint64_t size)
{
	ml_counters_free_k(c, c->kind, size);
}

#endif
