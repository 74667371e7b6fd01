/* core/spin.c - the slow path of the runtime's spinlocks (internal.h):
 * give the CPU away when the holder seems preempted. */
#include <sched.h>
#include "core/internal.h"

void ml_spin_yield(void)
{
	sched_yield();
}

void ml_spin_wait(ml_spin_t *l)
{
	unsigned spins = 0;
	do {
		while (__atomic_load_n(&l->locked, __ATOMIC_RELAXED)) {
			if (++spins < 64)
				__builtin_ia32_pause();
			else
				ml_spin_yield();
		}
	} while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE));
}
