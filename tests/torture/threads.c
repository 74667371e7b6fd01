/* tests/torture/threads.c - eight threads allocate and free in parallel,
 * each from its own function depth, and leave a known part live; main
 * joins them and prints a checksum of what they wrote.
 *
 * Each worker: 1000 blocks of 1..1000 bytes (500500 bytes); frees blocks
 * 0, 2, ..., 998 (sizes 1, 3, ..., 999: 250000 bytes) and leaks the others
 * (sizes 2, 4, ..., 1000: 250500 bytes).  Main: 8 argument blocks of 16.
 * @expect threads work allocs=8000 alloc_bytes=4004000 frees=4000 freed_bytes=2000000 leaked_blocks=4000 leaked_bytes=2004000
 * @expect threads main allocs=8 alloc_bytes=128 frees=8 freed_bytes=128
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8
#define BLOCKS 1000

static void *live[THREADS][BLOCKS];

__attribute__((noinline)) static unsigned long work(int t)
{
	unsigned long sum = 0;
	for (int i = 0; i < BLOCKS; i++) {
		unsigned char *p = malloc((size_t)i + 1);
		memset(p, t + 1, (size_t)i + 1);
		sum += p[i];
		live[t][i] = p;
	}
	for (int i = 0; i < BLOCKS; i += 2) {
		free(live[t][i]);
		live[t][i] = NULL;
	}
	return sum;
}

static void *worker(void *arg)
{
	unsigned long *slot = arg;
	*slot = work((int)slot[1]);
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];
	unsigned long *args[THREADS], total = 0;
	for (int t = 0; t < THREADS; t++) {
		args[t] = malloc(2 * sizeof(unsigned long));	/* result, index */
		args[t][1] = (unsigned long)t;
		pthread_create(&th[t], NULL, worker, args[t]);
	}
	for (int t = 0; t < THREADS; t++) {
		pthread_join(th[t], NULL);
		total += args[t][0];
		free(args[t]);
	}
	printf("checksum %lu\n", total);
	return 0;
}
