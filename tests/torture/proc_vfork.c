/* tests/torture/proc_vfork.c - children that share the parent's memory and
 * end without exec: vfork(); execv(missing); _exit(127), and a
 * clone(CLONE_VM) child that calls _exit.  They run memline's _exit in the
 * parent's memory: the parent's profile must still be written, whole.
 *
 * @expect proc_vfork main allocs=1 alloc_bytes=4242 leaked_bytes=4242
 * @end proc_vfork exit 0
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void *kept;
static char child_stack[65536] __attribute__((aligned(16)));

static int clone_child(void *arg)
{
	_exit((int)(long)arg);
}

int main(void)
{
	char *argv[] = { "missing", NULL };
	int st;
	pid_t pid = vfork();
	if (pid == 0) {
		execv("/nonexistent/missing", argv);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	printf("vfork child: exit %d\n", WEXITSTATUS(st));
	pid = clone(clone_child, child_stack + sizeof(child_stack), CLONE_VM | SIGCHLD, (void *)5L);
	waitpid(pid, &st, 0);
	printf("clone child: exit %d\n", WEXITSTATUS(st));
	kept = malloc(4242);
	return 0;
}
