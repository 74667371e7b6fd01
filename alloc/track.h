/* alloc/track.h - the recording core's API for every hook module (alloc/,
 * cuda_hooks/, lineprof/).  Records raw events; never symbolizes or formats. */
#ifndef ML_ALLOC_TRACK_H
#define ML_ALLOC_TRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/format.h"

/* The per-thread reentrancy guard.  ml_guard_enter() returns true when the
 * caller now holds the guard and may record; false when this thread is
 * already inside memline (the runtime's own work, or a hook called from a
 * hook), or recording is off: then the caller just passes the call through.
 * Async-signal-safe. */
bool ml_guard_enter(void);
void ml_guard_exit(void);

/* Records a successful allocation of size requested bytes at ptr, of the
 * given kind, with the calling thread's stack.  Call with the guard held,
 * after the real allocator returned ptr != NULL.  Never allocates through
 * the hooked allocator; thread-safe; no global lock. */
void ml_track_alloc(void *ptr, size_t size, enum ml_kind kind);

/* ml_track_alloc, and the same block counted a second time under the
 * pseudo-kind also (one stack capture; its own live-table entry (ptr, also),
 * released with ml_track_free(ptr, also) or detach/release).  For the CUDA
 * hooks' combined GPU total (ML_KIND_CUDA_GPU); cold path. */
void ml_track_alloc_also(void *ptr, size_t size, enum ml_kind kind, enum ml_kind also);

/* Records the release of ptr.  Call with the guard held, BEFORE the real
 * free: after it another thread may be given the same address.  Unknown
 * pointers (allocated before start-up, or by an untracked path) are
 * ignored.  Returns the size recorded at allocation, or 0 if unknown. */
size_t ml_track_free(void *ptr, enum ml_kind kind);

/* A block taken out of the live table while a realloc-like call runs.
 * Sequence, guard held throughout:
 *   ml_track_detach(old)            before the real call (old may be freed by it)
 *   real call
 *   success:        ml_track_moved(&held, new, size)   (one event for the peak)
 *   failure:        ml_track_reattach(&held)           (old is still allocated)
 *   old freed only: ml_track_release(&held)            (e.g. glibc realloc(p, 0))
 * While detached the block still counts as live. */
struct ml_track_held {
	uint64_t addr;		/* 0: old was unknown (moved then records a plain alloc) */
	uint64_t size;
	struct ml_counter *counter;
};
bool ml_track_detach(void *ptr, enum ml_kind kind, struct ml_track_held *held);
void ml_track_moved(const struct ml_track_held *held, void *ptr, size_t size,
		    enum ml_kind kind);
void ml_track_reattach(const struct ml_track_held *held);
void ml_track_release(const struct ml_track_held *held);

/* Takes the guard whether or not recording is on (for the runtime's own
 * work: writing the profile, start-up).  False if already held. */
bool ml_guard_enter_always(void);
/* True while this thread holds the guard. */
bool ml_guard_held(void);

/* Initialises the core: reads the environment, starts the clocks, creates
 * the tables and turns recording on.  self_addr is an address inside
 * libmemline (its frames are dropped from captured stacks), 0 when the core
 * is linked into a test.  Idempotent; returns 0 or -errno.  Not
 * async-signal-safe. */
int ml_core_init(uint64_t self_addr);

/* In a fork child: forget the parent's live blocks and counters (stack ids
 * stay), restart clocks, flag the profile ML_META_FORKED. */
void ml_core_after_fork(void);

/* Writes the profile now (see alloc/dump.c for the file name).  reason is
 * enum ml_fmt_end_reason.  Returns 0 or -errno.  Async-signal-safe except for
 * refreshing the module map; serialised: a second concurrent call returns
 * -EBUSY. */
int ml_dump_write(uint32_t reason, int32_t status);

#endif
