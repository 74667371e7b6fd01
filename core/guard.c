/* core/guard.c - the per-thread reentrancy guard (initial-exec TLS).
 * Work done while a thread holds the guard is never recorded. */
#include "core/internal.h"

/* The only definition of the guard; initial-exec so that reading it never
 * calls __tls_get_addr (which may allocate). */
static __thread int ml_tl_guard __attribute__((tls_model("initial-exec")));

bool ml_guard_enter(void)
{
	if (ml_tl_guard || !ml_core_active)
		return false;
	ml_tl_guard = 1;
	return true;
}

void ml_guard_exit(void)
{
	ml_tl_guard = 0;
}

bool ml_guard_enter_always(void)
{
	if (ml_tl_guard)
		return false;
	ml_tl_guard = 1;
	return true;
}

bool ml_guard_held(void)
{
	return ml_tl_guard != 0;
}
