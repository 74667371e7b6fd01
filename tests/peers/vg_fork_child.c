/* vg_fork_child.c - peer: valgrind memcheck's fork tests and bytehound's
 * fork: the child allocates on its own and exits; the parent's numbers
 * must not include the child's, nor the child's repeat the parent's. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	void *before = malloc(1001);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		void *child = malloc(3003);
		free(before);
		(void)child;
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	void *after = malloc(2002);
	printf("child exited %d\n", WEXITSTATUS(status));
	free(after);
	return 0;
}
