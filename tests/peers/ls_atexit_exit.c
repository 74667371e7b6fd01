/* ls_atexit_exit.c - peer: LeakSanitizer's exit_atexit_stale_stack and
 * valgrind's exitprog: allocations in atexit handlers and in a destructor,
 * and exit() called from inside the program's call tree. */
#include <stdio.h>
#include <stdlib.h>

static void *late;

static void at_exit_1(void)
{
	free(late);
	late = malloc(91);	/* allocated during exit: leaked */
}

static void at_exit_2(void)
{
	void *p = malloc(92);
	free(p);
}

__attribute__((destructor)) static void dtor(void)
{
	malloc(93);
}

static void nested(int depth)
{
	if (depth == 0) {
		printf("exiting from depth 5\n");
		exit(3);
	}
	malloc(10);
	nested(depth - 1);
}

int main(void)
{
	atexit(at_exit_1);
	atexit(at_exit_2);
	late = malloc(90);
	nested(5);
	return 0;
}
