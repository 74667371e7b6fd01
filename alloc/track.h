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

/* Records the release of ptr.  Call with the guard held, BEFORE the real
 * free: after it another thread may be given the same address.  Unknown
 * pointers (allocated before start-up, or by an untracked path) are
 * ignored.  Returns the size recorded at allocation, or 0 if unknown. */
size_t ml_track_free(void *ptr, enum ml_kind kind);

/* realloc-style move: records the free of old (if not NULL) and the
 * allocation of ptr as one event for the peak. */
void ml_track_realloc(void *old, void *ptr, size_t size, enum ml_kind kind);

/* True once the runtime is initialised and recording. */
bool ml_track_active(void);

#endif
