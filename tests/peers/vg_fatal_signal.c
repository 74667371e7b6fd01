/* vg_fatal_signal.c - peer: valgrind memcheck's tests of programs killed by a
 * signal (valgrind still prints the heap summary): leaks, then dies of
 * SIGALRM, whose default action ends the process. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
	void *leak = malloc(4321);
	void *gone = malloc(100);
	free(gone);
	printf("%d\n", leak != NULL);
	fflush(stdout);
	raise(SIGALRM);
	pause();
	return 0;
}
