/* core/guard.c - the per-thread reentrancy guard (initial-exec TLS; its
 * functions are inline, core/core.h).  Work done while a thread holds the
 * guard is never recorded. */
#include "core/internal.h"

/* The runtime's TLS block (core.h: the guard and the hot paths' other
 * per-thread variables); initial-exec so that reading it never calls
 * __tls_get_addr (which may allocate). */
__thread struct ml_tls ml_tl __attribute__((tls_model("initial-exec"))) = {
	.sample = &ml_sample_none,	/* the TLS image's, relocated at load */
};
struct ml_sample_count ml_sample_none = { .left = INT64_MIN };
