/* tests/torture/proc_umask.c - a program that sets its umask to 0777 before
 * it ends: its profile keeps the permission bits `memline run`'s umask gives
 * (run.py checks every profile's mode), not mode 0000.
 *
 * @expect proc_umask main allocs=1 alloc_bytes=5 leaked_bytes=5
 * @end proc_umask exit 0
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

void *kept;

int main(void)
{
	umask(0777);
	kept = malloc(5);
	printf("umask set\n");
	return 0;
}
