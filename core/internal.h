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
/* Marks the run degraded (ML_META_DEGRADED) and warns once per process;
 * allocations are no longer recorded. */
void ml_degrade(const char *msg);
extern volatile int ml_degraded;

/* ---- arena.c (ml_arena_alloc: core.h) ---- */
/* Bytes handed out so far. */
size_t ml_arena_used(void);
/* After fork in the child: reset the lock (memory stays). */
void ml_arena_after_fork(void);

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
/* Debug builds: checks every stack id is unique and in range (ML_ASSERT).
 * Uses arena memory; a no-op in release builds. */
void ml_stacktab_check_ids(void);

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

/* ---- lifecycle.c (libmemline.so only; the rest of its API: core.h) ---- */
/* Writes the profile unless this process must not (a vfork child, a fork
 * child with MEMLINE_FOLLOW=0, recording off).  Returns ml_dump_write's
 * result, or 0 when nothing is written. */
int ml_lifecycle_write(uint32_t reason, int32_t status);
/* The exit-time profile is out: nothing else is written. */
bool ml_lifecycle_final_written(void);

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

/* ---- rooms.c: the registry (struct ml_room: core.h) ---- */
void ml_rooms_start(void);
void ml_rooms_fork_child(void);
void ml_rooms_signal_taken(int sig);
void ml_rooms_write_sections(struct ml_writer *w);
/* Rooms' decorate_stack callbacks, in order (ml_core_decorate_stack). */
uint32_t ml_rooms_decorate(uint64_t *frames, uint32_t depth, uint32_t cap, uint32_t *flags);
/* Whether any room decorates stacks (the hot path's test). */
extern volatile int ml_rooms_decorating;

/* ---- track.c: state shared by the whole core (ml_core_active: core.h) ---- */
extern volatile uint32_t ml_core_flags;	/* ML_META_* */
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

#endif
