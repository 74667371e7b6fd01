/* bh_spawn_exec.c - peer: bytehound's spawn-child.c: fork, and the child
 * execs another program; the parent allocates before and after. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	void *a = malloc(10001);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	void *b = malloc(10003);
	printf("child %d\n", WEXITSTATUS(status));
	free(a);
	(void)b;
	return 0;
}
