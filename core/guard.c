/* core/guard.c - the per-thread reentrancy guard (initial-exec TLS; its
 * functions are inline, core/core.h).  Work done while a thread holds the
 * guard is never recorded. */
#include "core/internal.h"

/* The only definition of the guard; initial-exec so that reading it never
 * calls __tls_get_addr (which may allocate). */
__thread int ml_tl_guard __attribute__((tls_model("initial-exec")));
