/* tests/torture/quick_exit.c - quick_exit: the at_quick_exit handlers run
 * (they free and allocate) and atexit handlers do not; the profile is written after the handlers, with the status given.
 *
 * @expect quick_exit main allocs=2 alloc_bytes=121 leaked_bytes=55
 * @expect quick_exit on_quick_exit allocs=1 alloc_bytes=77 leaked_bytes=77
 * @expect quick_exit on_exit_never allocs=0
 * @end quick_exit _exit 4
 */
#include <stdio.h>
#include <stdlib.h>

static void *held;

static void on_quick_exit(void)
{
	free(held);
	held = malloc(77);
	puts("handler ran");
	fflush(stdout);
}

static void on_exit_never(void)
{
	void *volatile never = malloc(99999);
	(void)never;
}

int main(void)
{
	atexit(on_exit_never);
	at_quick_exit(on_quick_exit);
	held = malloc(66);
	void *volatile leak = malloc(55);
	(void)leak;
	quick_exit(4);
}
