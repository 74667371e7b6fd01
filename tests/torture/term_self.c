/* tests/torture/term_self.c - output, a file, then death by SIGTERM with
 * the default action: the program dies of the signal under memline as
 * without it, and the profile is written by memline's handler.
 *
 * @expect term_self main allocs=2 alloc_bytes=3000 frees=1 freed_bytes=1000 leaked_bytes=2000
 * @end term_self signal 15
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

void *kept;

int main(void)
{
	char *a = malloc(1000);
	kept = malloc(2000);
	free(a);
	FILE *f = fopen("before.txt", "w");
	if (f) {
		fputs("before the signal\n", f);
		fclose(f);
	}
	printf("about to be terminated\n");
	fflush(stdout);
	raise(SIGTERM);
	printf("not reached\n");
	return 0;
}
