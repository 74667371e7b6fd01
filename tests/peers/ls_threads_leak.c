/* ls_threads_leak.c - peer: LeakSanitizer's create_thread_leak,
 * leak_check_before_thread_started and high_allocator_contention: 8 threads
 * allocate concurrently; half leak, one is still running at exit. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile int started;

static void *busy(void *arg)
{
	long id = (long)arg;
	void *blocks[100];
	for (int i = 0; i < 100; i++)
		blocks[i] = malloc((size_t)(32 + id));
	if (id % 2)
		for (int i = 0; i < 100; i++)
			free(blocks[i]);
	return NULL;
}

static void *forever(void *arg)
{
	void *p = malloc(777);
	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
	for (;;)
		pause();
	return p;
}

int main(void)
{
	pthread_t t[8], f;
	for (long i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, busy, (void *)i);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	pthread_create(&f, NULL, forever, NULL);
	while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		usleep(1000);
	printf("exiting with a thread running\n");
	return 0;
}
