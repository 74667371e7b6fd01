/* vg_exit_in_thread.c - peer: valgrind's and LeakSanitizer's tests of exit
 * called by a thread other than the main one, while main waits. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *ender(void *arg)
{
	malloc(321);
	printf("thread calls exit\n");
	exit(9);
	return arg;
}

int main(void)
{
	pthread_t t;
	malloc(123);
	pthread_create(&t, NULL, ender, NULL);
	for (;;)
		pause();
}
