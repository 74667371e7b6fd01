/* tests/torture/sig_altstack.c - a stack-overflow catcher: SIGSEGV handled on
 * a SIGSTKSZ (8 KiB) alternate signal stack, ending the process with _exit,
 * exit or abort (one fork child each).  memline writes the profile in the
 * middle of that (_exit, exit's destructors, abort's SIGABRT), and must do it
 * on a stack of its own: the program's small alternate stack has no room for
 * it, and an overflow there turned the catcher into a SIGSEGV.
 *
 * @profiles sig_altstack=4
 * @end sig_altstack[forked=false] exit 0
 * @end sig_altstack[end_reason=_exit] _exit 3
 * @end sig_altstack[forked=true,end_reason=exit] exit 4
 * @end sig_altstack[end_reason=signal] signal 6
 * @expect sig_altstack[forked=true] child allocs=1 alloc_bytes=77 leaked_bytes=77
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int how;
void *kept;

static void on_segv(int sig)
{
	static const char msg[] = "caught stack overflow\n";
	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(9);
	if (how == 0)
		_exit(3);
	if (how == 1)
		exit(4);
	abort();
}

static int recurse(volatile char *up, int n)
{
	volatile char buf[1024];
	buf[0] = (char)n;
	return recurse(buf, n + 1) + buf[0] + up[0];
}

__attribute__((noinline)) static int child(void)
{
	static char stack[8192];
	kept = malloc(77);
	stack_t ss = { .ss_sp = stack, .ss_size = sizeof(stack), .ss_flags = 0 };
	sigaltstack(&ss, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGSEGV, &sa, NULL);
	char c = 0;
	return recurse(&c, 0);
}

int main(void)
{
	for (how = 0; how < 3; how++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0)
			return child();
		int st;
		waitpid(pid, &st, 0);
		if (WIFEXITED(st))
			printf("child %d: exit %d\n", how, WEXITSTATUS(st));
		else
			printf("child %d: signal %d\n", how, WTERMSIG(st));
	}
	return 0;
}
