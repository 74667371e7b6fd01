/* tests/torture/signal_malloc.c - a signal handler that allocates: the
 * program raises SIGUSR1 100 times (synchronously, never inside malloc);
 * each time the handler allocates 64 bytes and frees the previous block,
 * so one block is live at the end.  SIGUSR2 is ignored, then restored.
 *
 * @expect signal_malloc on_usr1 allocs=100 alloc_bytes=6400 frees=99 freed_bytes=6336 leaked_blocks=1 leaked_bytes=64
 * @expect signal_malloc main allocs=1 alloc_bytes=4096 frees=1 freed_bytes=4096
 * @end signal_malloc exit 0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile last;
static volatile sig_atomic_t calls;

static void on_usr1(int sig)
{
	void *p = malloc(64);
	memset(p, sig, 64);
	free(last);
	last = p;
	calls++;
}

int main(void)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, &old) != 0)
		return 1;
	char *buf = malloc(4096);
	for (int i = 0; i < 100; i++)
		raise(SIGUSR1);
	snprintf(buf, 4096, "handler ran %d times; previous action was %s\n", (int)calls,
		 old.sa_handler == SIG_DFL ? "SIG_DFL" : "something else");
	fputs(buf, stdout);
	free(buf);
	signal(SIGUSR2, SIG_IGN);
	raise(SIGUSR2);	/* ignored */
	printf("SIGUSR2 ignored; restoring gives %s\n",
	       signal(SIGUSR2, SIG_DFL) == SIG_IGN ? "SIG_IGN" : "something else");
	return 0;
}
