/* ls_quick_exit.c - peer: LeakSanitizer's and valgrind's exit-path tests:
 * quick_exit runs the at_quick_exit handlers (which allocate and free) and
 * ends the process without atexit handlers or stdio flushing. */
#include <stdio.h>
#include <stdlib.h>

static void *held;

static void on_quick_exit(void)
{
	free(held);
	held = malloc(77);
	fputs("quick exit handler\n", stdout);
	fflush(stdout);
}

static void on_exit_never(void)
{
	malloc(99999);	/* atexit handlers do not run at quick_exit */
}

int main(void)
{
	atexit(on_exit_never);
	at_quick_exit(on_quick_exit);
	held = malloc(66);
	malloc(55);
	quick_exit(4);
}
