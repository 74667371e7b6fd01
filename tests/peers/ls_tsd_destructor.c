/* ls_tsd_destructor.c - peer: LeakSanitizer's cleanup_in_tsd_destructor and
 * many_tls_keys_pthread: thread-specific data whose destructors free (and
 * allocate) when each thread exits; 40 keys in use at once. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N_KEYS 40
static pthread_key_t keys[N_KEYS];

static void destroy(void *value)
{
	free(value);
}

static void *work(void *arg)
{
	for (int k = 0; k < N_KEYS; k++)
		pthread_setspecific(keys[k], calloc(1, (size_t)(k + 1)));
	return arg;
}

int main(void)
{
	for (int k = 0; k < N_KEYS; k++)
		pthread_key_create(&keys[k], destroy);
	for (int i = 0; i < 4; i++) {
		pthread_t t;
		pthread_create(&t, NULL, work, NULL);
		pthread_join(t, NULL);
	}
	work(NULL);	/* the main thread's values are never destroyed: leaked */
	printf("keys done\n");
	return 0;
}
