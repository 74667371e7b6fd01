/* ls_segv_after_leak.c - peer: LeakSanitizer's leak_check_segv: a program
 * that leaks and then dies of SIGSEGV.  The profile is written anyway. */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	void *leak = malloc(1234);
	printf("about to crash\n");
	fflush(stdout);
	volatile int *null = NULL;
	*null = (int)(long)leak;
	return 0;
}
