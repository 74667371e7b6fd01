/* alloc/internal.h - private interfaces between the recording core's files
 * (arena, config, stacktab, livetab, counters, timeline, modules, dump).
 * Other folders use alloc/track.h only. */
#ifndef ML_ALLOC_INTERNAL_H
#define ML_ALLOC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <time.h>
#include "common/format.h"

#define ML_DEPTH_DEFAULT 64u
#define ML_DEPTH_MAX 256u

/* ---- config.c: the environment, read once at start-up. ---- */
struct ml_config {
	char output_dir[PATH_MAX];	/* MEMLINE_OUTPUT_DIR, else cwd at start */
	uint32_t max_depth;		/* MEMLINE_DEPTH, 1..ML_DEPTH_MAX */
	bool follow;			/* MEMLINE_FOLLOW (default 1) */
	bool quiet;			/* MEMLINE_QUIET */
	bool fast_unwind;		/* not MEMLINE_LIBUNWIND_ONLY (unwind.c) */
};
extern struct ml_config ml_config;

/* Reads the environment into ml_config.  Not async-signal-safe (getenv);
 * call at start-up only.  Safe to call again (re-reads). */
void ml_config_load(void);

/* Removes every LD_PRELOAD entry naming libmemline from the environment, in
 * place (no allocation), so exec'd programs are not profiled. */
void ml_config_unpreload(void);
/* Rewrites an LD_PRELOAD value in place without its libmemline entries. */
void ml_config_filter_preload(char *value);

/* ---- warn.c: one-line diagnostics on stderr, async-signal-safe. ---- */
/* Prints "memline: <msg>\n" unless quiet. */
void ml_warn(const char *msg);
/* Marks the run degraded (ML_META_DEGRADED) and warns once per process. */
void ml_degrade(const char *msg);
extern volatile int ml_degraded;
/* Flags the run ML_META_DEGRADED and warns once, but keeps recording. */
void ml_warn_once(const char *msg);

/* ---- arena.c: the runtime's private heap (mmap, never the hooked malloc). */
/* Returns zeroed memory aligned to 16 bytes, or NULL when the arena is
 * exhausted (then the run is degraded).  Thread-safe, lock-free on the
 * common path.  Memory is never returned. */
void *ml_arena_alloc(size_t size);
/* Bytes handed out so far. */
size_t ml_arena_used(void);
/* After fork in the child: reset the lock (memory stays). */
void ml_arena_after_fork(void);

/* ---- spinlock: tiny, for per-stack counters and livetab shards. ---- */
/* sched_yield(2); async-signal-safe, never allocates. */
void ml_spin_yield(void);
typedef struct { volatile int locked; } ml_spin_t;
/* Spins briefly, then yields: with more threads than CPUs the holder may
 * be preempted, and spinning through a whole time slice would be waste. */
static inline void ml_spin_lock(ml_spin_t *l)
{
	unsigned spins = 0;
	while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&l->locked, __ATOMIC_RELAXED)) {
			if (++spins < 64)
				__builtin_ia32_pause();
			else
				ml_spin_yield();
		}
}
static inline void ml_spin_unlock(ml_spin_t *l)
{
	__atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

/* ---- counters.c: per (stack, kind) counters and the exact peak. ---- */
struct ml_counter {
	ml_spin_t lock;
	uint32_t stack_id;
	uint32_t kind;
	uint64_t allocs, alloc_bytes;
	uint64_t frees, freed_bytes;
	uint64_t live_blocks, live_bytes;
	uint64_t at_peak_blocks, at_peak_bytes;	/* valid when touched_peak == final peak */
	uint64_t touched_peak;		/* the kind's peak value when at_peak_* was taken */
	bool touched;			/* at_peak_* was ever taken (peak 0 is a value too) */
};

/* A snapshot of a kind's running totals (kept in counters.c as 16-byte
 * words updated with cmpxchg16b). */
struct ml_kind_totals {
	uint64_t live_bytes;
	uint64_t peak_bytes;
	uint64_t peak_tsc;		/* when peak_bytes was set (raw TSC), 0 if never */
};

/* Applies one allocation (+size) to c.  Thread-safe.  Returns nothing;
 * exact under any interleaving (see DESIGN.md, lazy snapshot). */
void ml_counters_alloc(struct ml_counter *c, uint64_t size);
/* Applies one free of size bytes to c. */
void ml_counters_free(struct ml_counter *c, uint64_t size);
/* A move (realloc): the free of old_size from from and the allocation of
 * new_size to to, as one event for the kind's peak.  from and to have the
 * same kind; they may be the same counter. */
void ml_counters_move(struct ml_counter *from, uint64_t old_size,
		      struct ml_counter *to, uint64_t new_size);
/* Bytes and blocks of c live at its kind's final peak (read at the end). */
void ml_counters_at_peak(const struct ml_counter *c, uint64_t *bytes, uint64_t *blocks);
/* A snapshot of the kind's totals. */
void ml_counters_totals(uint32_t kind, struct ml_kind_totals *out);
/* Zeroes the kind totals (start-up, fork child). */
void ml_counters_reset_totals(void);
/* Zeroes one counter (fork child). */
void ml_counter_reset(struct ml_counter *c);

/* ---- stacktab.c: deduplicated call stacks (lock-free hash table). ---- */
struct ml_stack_entry {
	uint64_t hash;
	uint32_t id;			/* > 0 */
	uint16_t depth;
	uint16_t flags;			/* ML_STACK_* */
	uint32_t dump_mark;		/* dump.c: written in the current dump */
	uint32_t dump_leaf;		/* dump.c: its ML_SEC_FRAMES leaf in that dump */
	struct ml_stack_entry *next;	/* stacktab.c: every entry, newest first */
	struct ml_counter *counter[ML_KIND_COUNT];	/* created on first use */
	uint64_t frames[];		/* innermost first */
};

/* Creates the table (idempotent).  Returns 0 or -ENOMEM. */
int ml_stacktab_init(void);
/* Interns frames[0..depth); returns the entry (new or existing), or NULL
 * when out of space.  Thread-safe, lock-free.  Never allocates through
 * malloc. */
struct ml_stack_entry *ml_stacktab_intern(const uint64_t *frames, uint32_t depth,
					  uint32_t flags);
/* Captures the calling thread's stack (libunwind), dropping frames inside
 * [skip_lo, skip_hi) at the innermost end, at most max_depth frames.
 * Returns the depth; *flags gets ML_STACK_TRUNCATED if cut.  Used only by
 * the unit tests (tests/check_stacktab.c): the runtime uses _raw below. */
uint32_t ml_stacktab_capture(uint64_t *frames, uint32_t max_depth, uint32_t *flags);
/* The same without a copy: unwinds into buf (ML_CAPTURE_BUF slots); the
 * stack is buf[*skip .. *skip + depth). */
#define CAPTURE_SLACK 16u		/* room for the runtime's own frames */
#define ML_CAPTURE_BUF (ML_DEPTH_MAX + CAPTURE_SLACK + 1)
uint32_t ml_stacktab_capture_raw(uint64_t *buf, uint32_t max_depth, uint32_t *flags,
				 uint32_t *skip);
/* The address range whose innermost frames capture drops (libmemline). */
void ml_stacktab_set_skip(uint64_t lo, uint64_t hi);
/* The counter of (entry, kind), created on first use; NULL if out of space. */
struct ml_counter *ml_stacktab_counter(struct ml_stack_entry *e, uint32_t kind);
/* Calls fn for every stack interned so far.  Safe while others insert. */
void ml_stacktab_foreach(void (*fn)(struct ml_stack_entry *e, void *arg), void *arg);
/* Number of distinct stacks. */
uint32_t ml_stacktab_count(void);

/* ---- unwind.c: a cached .eh_frame walker for x86-64, libunwind's fast
 * path (see the file comment for when it declines). ---- */
/* Creates the rule cache (idempotent).  Returns 0 or -ENOMEM. */
int ml_unwind_init(void);
/* Stores the calling thread's return addresses, innermost first, into
 * buf[0..limit) (limit <= ML_CAPTURE_BUF), as unw_backtrace() would:
 * buf[0] is a return address into the caller of ml_unwind_fast, the last
 * one the outermost frame's, or the limit's.  Returns the count, or -1
 * when some frame's rule is not one it handles (then use libunwind).
 * Never allocates through malloc; not for signal handlers that may
 * interrupt a walk on the same thread (they get -1). */
int ml_unwind_fast(uint64_t *buf, uint32_t limit);
/* A hook's own frame, where the next walk on this thread may start
 * instead of walking the runtime's frames.  Set by ML_UNWIND_MARK() in the
 * hook itself, cleared by the walk and by the hook (ml_unwind_unmark)
 * before it returns, so that it never outlives that frame. */
struct ml_unwind_mark { uint64_t pc, sp, bp; };
extern __thread struct ml_unwind_mark ml_tl_mark __attribute__((tls_model("initial-exec")));
#define ML_UNWIND_MARK() do { \
	uint64_t pc_, sp_, bp_; \
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" \
			 : "=&r"(pc_), "=&r"(sp_), "=&r"(bp_)); \
	ml_tl_mark.pc = pc_; \
	ml_tl_mark.bp = bp_; \
	ml_tl_mark.sp = sp_; \
} while (0)
static inline void ml_unwind_unmark(void) { ml_tl_mark.sp = 0; }
/* Forgets every cached rule (after dlclose: the address may be reused). */
void ml_unwind_flush(void);
/* In a fork child: release the insert lock. */
void ml_unwind_after_fork(void);

/* ---- livetab.c: live blocks, address -> (size, counter). ---- */
struct ml_live_block {
	uint64_t addr;		/* 0 = empty slot */
	uint64_t size;
	struct ml_counter *counter;	/* gives stack and kind */
};

/* No set-up: each shard maps its slots on its first insert. */
/* Adds (addr, kind).  Returns 0, or -ENOMEM (not recorded).  An existing
 * entry for the same (addr, kind) is replaced and returned in *old
 * (old->addr = 0 if none). */
int ml_livetab_insert(uint64_t addr, uint64_t size, struct ml_counter *c,
		      struct ml_live_block *old);
/* Removes (addr, kind) and returns it in *out.  Returns false if unknown. */
bool ml_livetab_remove(uint64_t addr, uint32_t kind, struct ml_live_block *out);
/* Live entries now (all kinds). */
uint64_t ml_livetab_count(void);
/* Forgets every entry and resets locks (fork child). */
void ml_livetab_reset(void);

/* ---- timeline.c: total live bytes per kind over time, bounded. ---- */
#define ML_TIMELINE_POINTS 2048u
/* Notes that kind's total is now live_bytes at now_ns (ml_clock_coarse_ns).
 * Thread-safe, lock-free except while buckets merge. */
void ml_timeline_note(uint32_t kind, uint64_t now_ns, uint64_t live_bytes);
/* The same for the hot path: kind's total is now live_bytes.  Reads the
 * clock only every few events per thread and touches the shared bucket
 * only when the value may raise it (see timeline.c). */
void ml_timeline_event(uint32_t kind, uint64_t live_bytes);
/* Calls fn(kind, ns_since_start, max_live_in_bucket) for every non-empty
 * bucket in time order, per kind. */
void ml_timeline_foreach(void (*fn)(uint32_t kind, uint64_t ns, uint64_t live, void *arg),
			 void *arg);
/* Clears everything; times are measured from now_ns. */
void ml_timeline_reset(uint64_t now_ns);

/* ---- clock.c: timestamps (TSC for the peak's time, the coarse clock for
 * the timeline). ---- */
static inline uint64_t ml_tsc(void) { return __builtin_ia32_rdtsc(); }
/* Start-up clocks (set by ml_clock_start). */
void ml_clock_start(void);
uint64_t ml_clock_start_tsc(void);
/* CLOCK_MONOTONIC_COARSE in ns (a few ns to read; resolution ~4 ms). */
static inline uint64_t ml_clock_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
uint64_t ml_clock_start_realtime_ns(void);
/* CLOCK_MONOTONIC at start-up, ns. */
uint64_t ml_clock_start_mono_ns(void);
/* Monotonic nanoseconds since start. */
uint64_t ml_clock_elapsed_ns(void);
/* Converts a TSC delta (since start) to nanoseconds, calibrated against
 * CLOCK_MONOTONIC over the run so far. */
uint64_t ml_clock_tsc_to_ns(uint64_t tsc_delta);

/* ---- modules.c: the module map. ---- */
/* Refreshes the map from dl_iterate_phdr, keeping modules seen before and
 * flagging those gone as ML_MOD_UNLOADED.  Not async-signal-safe in a
 * strict sense (takes the loader lock); best effort in signal handlers. */
void ml_modules_refresh(void);
/* Adds the modules holding any of addrs that the map lacks (dlopen'd
 * since the last refresh), without the loader lock: for writes from
 * signal handlers, where ml_modules_refresh must not run. */
void ml_modules_add_missing(const uint64_t *addrs, uint32_t n);
/* The range [lo, hi) of the module that holds addr (0,0 if none). */
void ml_modules_range_of(uint64_t addr, uint64_t *lo, uint64_t *hi);
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

/* ---- dump.c ---- */
/* Reads the executable's path and command line (start-up; the main thread
 * may be gone when the profile is written). */
void ml_dump_init(void);
/* In a fork child: forget a write another thread had in progress. */
void ml_dump_after_fork(void);
/* Waits while another thread writes the profile (a signal handler that
 * must not let the process die mid-write).  Async-signal-safe. */
void ml_dump_wait_other(void);

/* ---- lifecycle.c (libmemline.so only) ---- */
/* Starts recording on the first allocation hook call, before our
 * constructor, once libc is up (environ set) and the real allocator is
 * known.  Idempotent, cheap once done; never recurses (guard held). */
void ml_lifecycle_start(void);
/* The program's sigaction and signal calls, for the exported wrappers
 * (lineprof/hooks.c): memline's fatal-signal handler stays installed
 * where the program sets SIG_DFL, and is never seen: the program reads
 * back exactly the action it set.  Same results and errno as libc's. */
struct sigaction;
int ml_lifecycle_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
typedef void (*ml_sighandler_t)(int);
ml_sighandler_t ml_lifecycle_signal(int sig, ml_sighandler_t handler);

/* ---- track.c: state shared by the whole core (ml_core_init: track.h). ---- */
extern volatile int ml_core_active;	/* recording on */
extern volatile uint32_t ml_core_flags;	/* ML_META_* */

#endif
