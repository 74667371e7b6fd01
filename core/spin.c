/* core/spin.c - the slow path of the runtime's spinlocks (internal.h):
 * give the CPU away when the holder seems preempted. */
#include <sched.h>
#include "core/internal.h"

void ml_spin_yield(void)
{
	sched_yield();
}
