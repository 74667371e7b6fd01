/* vg_spawn_family.c - peer: valgrind's tests of programs that start others:
 * vfork + exec, posix_spawn, system and popen, each child printing a line. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(void)
{
	int status;
	void *keep = malloc(321);
	fflush(stdout);
	pid_t pid = vfork();
	if (pid == 0) {
		execl("/bin/echo", "echo", "from vfork", (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	char *argv[] = { "echo", "from posix_spawn", NULL };
	if (posix_spawn(&pid, "/bin/echo", NULL, NULL, argv, environ) == 0)
		waitpid(pid, &status, 0);
	fflush(stdout);
	if (system("echo from system") != 0)
		return 1;
	FILE *p = popen("echo from popen", "r");
	char line[64];
	if (p && fgets(line, sizeof(line), p))
		printf("read: %s", line);
	if (p)
		pclose(p);
	free(keep);
	return 0;
}
