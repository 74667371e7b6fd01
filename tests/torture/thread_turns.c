/* tests/torture/thread_turns.c - threads that take turns, then all at once:
 * the plain (non-atomic) recording mode changes hands at every turn, and
 * is revoked and taken under contention, without losing a byte.
 *
 * Turns: four threads pass a token round 8 times (32 turns).  A turn frees
 * every block of the turn before it (allocated by another thread), then
 * allocates TURN_BLOCKS blocks of 32 bytes in turn_alloc: more events than
 * a thread needs to take the plain mode (ML_TAKE_EVERY, 4096), so each
 * turn revokes the last owner and takes the mode itself.  The last turn's
 * thread frees its blocks at once.  Live memory is then 192000 bytes at
 * the end of every turn and never more: the peak.
 * Together: the four threads, released at once by a barrier, each
 * allocate and free CHURN blocks of 24 bytes in churn, one at a time
 * (while one runs alone, at the start or the end, it may take the mode,
 * and the others revoke it).
 * @expect thread_turns turn_alloc allocs=192000 alloc_bytes=6144000 frees=192000 freed_bytes=6144000 leaked_bytes=0 peak_blocks=6000 peak_bytes=192000
 * @expect thread_turns churn allocs=120000 alloc_bytes=2880000 frees=120000 freed_bytes=2880000 leaked_bytes=0 peak_bytes=0
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 8
#define TURN_BLOCKS 6000
#define CHURN 30000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t together;
static int token;			/* whose turn: turn number % THREADS */
static void *blocks[TURN_BLOCKS];	/* the last turn's */
static unsigned long sums[THREADS];

__attribute__((noinline)) static void turn_alloc(int id)
{
	for (int i = 0; i < TURN_BLOCKS; i++) {
		unsigned char *p = malloc(32);
		memset(p, id + 1, 32);
		blocks[i] = p;
	}
}

__attribute__((noinline)) static unsigned long churn(int id)
{
	unsigned long sum = 0;
	for (int i = 0; i < CHURN; i++) {
		unsigned char *p = malloc(24);
		memset(p, (id + i) & 0xff, 24);
		sum += p[23];
		free(p);
	}
	return sum;
}

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	for (int round = 0; round < ROUNDS; round++) {
		int turn = round * THREADS + id;
		pthread_mutex_lock(&lock);
		while (token != turn)
			pthread_cond_wait(&changed, &lock);
		pthread_mutex_unlock(&lock);
		unsigned long sum = 0;
		for (int i = 0; i < TURN_BLOCKS && turn > 0; i++) {
			sum += ((unsigned char *)blocks[i])[31];
			free(blocks[i]);
		}
		sums[id] += sum;
		turn_alloc(id);
		pthread_mutex_lock(&lock);
		token = turn + 1;
		pthread_cond_broadcast(&changed);
		pthread_mutex_unlock(&lock);
	}
	if (id == THREADS - 1)		/* the last turn */
		for (int i = 0; i < TURN_BLOCKS; i++)
			free(blocks[i]);
	pthread_barrier_wait(&together);
	sums[id] += churn(id);
	return NULL;
}

int main(void)
{
	pthread_t threads[THREADS];
	pthread_barrier_init(&together, NULL, THREADS);
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&threads[i], NULL, worker, (void *)i) != 0) {
			fprintf(stderr, "thread_turns: pthread_create failed\n");
			return 1;
		}
	unsigned long total = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(threads[i], NULL);
		total += sums[i];
	}
	pthread_barrier_destroy(&together);
	printf("thread_turns: checksum %lu\n", total);
	return 0;
}
