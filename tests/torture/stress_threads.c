/* tests/torture/stress_threads.c - slow: 8 threads x 100000 malloc/free
 * pairs of 1..64 bytes, all freed, with exact totals.
 *
 * @slow
 * @expect stress_threads churn allocs=800000 alloc_bytes=25995904 frees=800000 freed_bytes=25995904 leaked_bytes=0
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 8
#define PAIRS 100000

__attribute__((noinline)) static unsigned long churn(void)
{
	unsigned long sum = 0;
	for (int i = 0; i < PAIRS; i++) {
		size_t n = (size_t)(i % 64) + 1;
		unsigned char *p = malloc(n);
		p[n - 1] = (unsigned char)i;
		sum += p[n - 1];
		free(p);
	}
	return sum;
}

static void *worker(void *arg)
{
	*(unsigned long *)arg = churn();
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];
	static unsigned long sums[THREADS];
	unsigned long total = 0;
	for (int t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, &sums[t]);
	for (int t = 0; t < THREADS; t++) {
		pthread_join(th[t], NULL);
		total += sums[t];
	}
	printf("checksum %lu\n", total);
	return 0;
}
