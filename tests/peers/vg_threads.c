/* vg_threads.c - peer: valgrind memcheck's thread tests and bytehound's
 * cross-thread-alloc: 6 threads allocate and free; blocks allocated in one
 * thread are freed in another; one thread's blocks leak. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N_THREADS 6
static void *handoff[N_THREADS][50];

static void *work(void *arg)
{
	long id = (long)arg;
	for (int round = 0; round < 200; round++) {
		void *p = malloc((size_t)(id * 10 + round % 7 + 1));
		free(p);
	}
	for (int i = 0; i < 50; i++)
		handoff[id][i] = malloc((size_t)(16 + id));
	return NULL;
}

int main(void)
{
	pthread_t t[N_THREADS];
	for (long i = 0; i < N_THREADS; i++)
		pthread_create(&t[i], NULL, work, (void *)i);
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int id = 1; id < N_THREADS; id++)	/* thread 0's blocks leak */
		for (int i = 0; i < 50; i++)
			free(handoff[id][i]);
	printf("joined %d\n", N_THREADS);
	return 0;
}
