/* tests/torture/wall_progress.c - every accepted rate lets the program run:
 * at the highest (100 kHz, wall clock) a fixed amount of CPU work must
 * finish (with interval timers a thread could spend all its time in the
 * signal handler: 0.8 s of work took 13 s and more).
 *
 * @run --lines --clock wall --rate 100000
 * @timeout 30
 * @expect wall_progress main allocs=1 alloc_bytes=24 leaked_bytes=24
 * @end wall_progress exit 0
 */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;
void *kept;

int main(void)
{
	kept = malloc(24);
	for (unsigned long i = 0; i < 300000000ul; i++)
		sink += i;
	printf("done\n");
	return 0;
}
