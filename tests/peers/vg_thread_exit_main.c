/* vg_thread_exit_main.c - peer: valgrind's pth_exit tests: the main thread
 * leaves with pthread_exit while a second thread allocates; the process
 * ends when that thread returns. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *worker(void *arg)
{
	usleep(20000);
	void *p = malloc(5555);
	free(malloc(111));
	printf("worker done\n");
	fflush(stdout);
	return p;
}

int main(void)
{
	pthread_t t;
	malloc(4444);
	pthread_create(&t, NULL, worker, NULL);
	pthread_exit(NULL);
}
