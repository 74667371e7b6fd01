/* bh_signals.c - peer: bytehound's gather.c: a handler counts SIGUSR1s the
 * program sends itself; the main loop allocates each time the count moves. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t counter;

static void on_usr1(int sig)
{
	(void)sig;
	counter++;
}

int main(void)
{
	signal(SIGUSR1, on_usr1);
	int last = 0;
	void *blocks[10];
	for (int i = 0; i < 10; i++) {
		kill(getpid(), SIGUSR1);
		while (counter == last)
			usleep(100);
		last = counter;
		blocks[i] = malloc((size_t)(10001 + last));
	}
	for (int i = 0; i < 10; i += 2)
		free(blocks[i]);
	printf("%d signals\n", last);
	return 0;
}
