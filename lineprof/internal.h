/* lineprof/internal.h - private interfaces between lineprof's files: config,
 * the sample table, the sampler, the regions, NVTX, the sections, the room
 * (room.c) and the hooks.  Other rooms never include it. */
#ifndef ML_LINEPROF_INTERNAL_H
#define ML_LINEPROF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "core/core.h"

#define ML_LP_RATE_DEFAULT 997u	/* Hz: prime, not a multiple of 100/250/300/1000 */
#define ML_LP_RATE_MIN 1u
#define ML_LP_RATE_MAX 100000u
#define ML_LP_DEPTH_MAX 256u

/* ---- config.c: MEMLINE_LINES, MEMLINE_CLOCK, MEMLINE_RATE ---- */
struct ml_lp_config {
	bool lines;		/* MEMLINE_LINES=1: sample */
	uint32_t clock;		/* enum ml_fmt_clock (MEMLINE_CLOCK=cpu|wall) */
	uint32_t rate_hz;	/* MEMLINE_RATE */
	uint64_t period_ns;	/* 1e9 / rate_hz */
};
extern struct ml_lp_config ml_lp_config;
/* Reads the environment (start-up only; getenv).  Bad values fall back to
 * the defaults with a warning. */
void ml_lp_config_load(void);
/* Parses a rate in Hz: returns it, or 0 when s is not a whole number in
 * [ML_LP_RATE_MIN, ML_LP_RATE_MAX]. */
uint32_t ml_lp_parse_rate(const char *s);
/* Parses a clock name ("cpu", "wall"): enum ml_fmt_clock, or 0. */
uint32_t ml_lp_parse_clock(const char *s);

/* ---- sampletab.c: samples counted per (thread, stack), lock-free ---- */
/* Maps the table (idempotent).  Returns 0 or -ENOMEM.  Not in a handler. */
int ml_lp_sampletab_init(void);
/* Adds weight samples to (tid, frames[0..depth), flags).  Async-signal-safe
 * and lock-free: callable from a signal handler on any thread.  Counts the
 * weight as dropped when the table is full. */
void ml_lp_sampletab_add(uint32_t tid, const uint64_t *frames, uint32_t depth,
			 uint32_t flags, uint64_t weight);
/* Counts weight samples that could not be recorded. */
void ml_lp_sampletab_drop(uint64_t weight);
struct ml_lp_entry {
	uint64_t hash;
	uint32_t tid;
	uint16_t depth;
	uint16_t flags;
	uint64_t count;		/* atomic */
	uint64_t frames[];
};
/* Calls fn for every (thread, stack) with samples. */
void ml_lp_sampletab_foreach(void (*fn)(const struct ml_lp_entry *e, void *arg), void *arg);
/* Samples recorded and dropped so far; distinct entries. */
uint64_t ml_lp_sampletab_samples(void);
uint64_t ml_lp_sampletab_dropped(void);
uint32_t ml_lp_sampletab_entries(void);
/* Forgets everything (fork child, tests). */
void ml_lp_sampletab_reset(void);

/* ---- sampler.c: per-thread POSIX timers and the SIGPROF handler ---- */
/* Installs the handler and starts the calling thread's timer.  Returns 0
 * or -errno. */
int ml_lp_sampler_start(void);
/* Starts the calling thread's timer (a new thread; the fork child). */
void ml_lp_sampler_thread_begin(void);
/* Stops the calling thread's timer (thread exit). */
void ml_lp_sampler_thread_end(void);
/* True while sampling is on (not stepped aside). */
bool ml_lp_sampling(void);
/* The program takes SIGPROF (sigaction, signal, setitimer): warn once,
 * stop every timer and leave SIGPROF to the program (disposition reset to
 * SIG_DFL with pending signals of ours discarded). */
void ml_lp_step_aside(void);
bool ml_lp_stepped_aside(void);
/* Around a call that a signal handler would cut short (EINTR) or that waits
 * for signals: SIGPROF is blocked on the calling thread between begin and
 * end, so that only the program's own signals interrupt the call; a sample
 * our timer took meanwhile is counted at end, with the stack of the call
 * (fn, the real function, under its caller).  No-ops when not sampling.
 * errno is kept. */
#include <signal.h>
struct ml_lp_quiet {
	sigset_t old;
	bool on;
};
void ml_lp_quiet_begin(struct ml_lp_quiet *q);
void ml_lp_quiet_end(struct ml_lp_quiet *q, const void *fn);
/* Threads that got a timer. */
uint32_t ml_lp_sampler_threads(void);
/* In a fork child: forget the parent's timers and samples, and start this
 * thread's timer if sampling was on. */
void ml_lp_sampler_after_fork(void);
/* Pauses or resumes recording in the handler (around writing the profile). */
void ml_lp_sampler_pause(bool paused);

/* ---- write.c: the profile's sections ---- */
struct ml_writer;
/* Appends the SAMPLES section (when the sampler ran) and the REGIONS
 * section (when a region was completed) to w.  Async-signal-safe (no
 * malloc, no locks a handler could be waiting on): it runs when the core
 * writes the profile. */
void ml_lp_write_sections(struct ml_writer *w);

/* ---- regions.c: named regions (memline.h, NVTX) as a tree ---- */
#define ML_LP_REGION_DEPTH 32u
#define ML_LP_REGIONS_MAX 4096u
#define ML_LP_REGION_NAME_MAX 127u
/* Opens region name under the thread's innermost open region. */
void ml_lp_region_push(const char *name, uint32_t flags);
/* Closes the thread's innermost open region (ignored when none). */
void ml_lp_region_pop(void);
/* NVTX start/end ranges: not nested, may end on another thread.  start
 * returns a range id (> 0), or 0 when the table of open ranges is full. */
uint64_t ml_lp_range_start(const char *name, uint32_t flags);
void ml_lp_range_end(uint64_t id);
struct ml_lp_region_info {
	uint32_t id, parent, flags;
	const char *name;
	uint64_t count, total_ns, alloc_bytes, allocs;
};
/* Calls fn for every region node, parents before children. */
void ml_lp_regions_foreach(void (*fn)(const struct ml_lp_region_info *r, void *arg), void *arg);
uint32_t ml_lp_regions_count(void);
/* Forgets the counts (fork child: the child reports only its own). */
void ml_lp_regions_reset(void);

/* spans.c: regions on the time axis.  span_add records one completed
 * region (monotonic start and end, ml_lp_now_ns); async-signal-safe,
 * lock-free, never allocates.  span_tid is the calling thread's id. */
uint32_t ml_lp_span_tid(void);
void ml_lp_span_add(uint32_t region, uint32_t tid, uint64_t start_mono_ns, uint64_t end_mono_ns);
void ml_lp_spans_reset(void);
void ml_lp_spans_write(struct ml_writer *w);

/* Monotonic nanoseconds. */
static inline uint64_t ml_lp_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
