/* lineprof/lineprof.h - the line timer's and the regions' API for the rest of
 * the runtime (alloc/lifecycle.c starts it, alloc/dump.c writes its sections,
 * alloc/track.c counts allocations for the open regions). */
#ifndef ML_LINEPROF_LINEPROF_H
#define ML_LINEPROF_LINEPROF_H

#include <stdint.h>

struct ml_writer;

/* Starts regions, and the sampler when MEMLINE_LINES=1 (MEMLINE_CLOCK,
 * MEMLINE_RATE).  Call once from the runtime's constructor, after
 * ml_core_init, on the main thread.  Never fails: trouble is a warning and
 * the program runs without line timing. */
void ml_lineprof_init(void);

/* Appends the SAMPLES section (when the sampler ran) and the REGIONS
 * section (when a region was completed) to w.  Async-signal-safe (no
 * malloc, no locks a handler could be waiting on): it runs in dump.c. */
void ml_lineprof_write(struct ml_writer *w);

/* Heap allocations made by this thread, for the regions it has open
 * (initial-exec TLS, defined in lineprof/regions.c). */
extern __thread uint64_t ml_lp_tl_alloc_bytes __attribute__((tls_model("initial-exec")));
extern __thread uint64_t ml_lp_tl_allocs __attribute__((tls_model("initial-exec")));

/* Counts one recorded allocation of size bytes on this thread.  Two TLS
 * adds; async-signal-safe. */
static inline void ml_lineprof_note_alloc(uint64_t size)
{
	ml_lp_tl_alloc_bytes += size;
	ml_lp_tl_allocs++;
}

#endif
