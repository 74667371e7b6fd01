/* tests/torture/fork_exec.c - fork, then exec: the parent leaks 100 bytes,
 * forks a child that leaks 200 bytes and execs this program again as
 * "target", which leaks 300 bytes and writes a file; the parent waits and
 * passes the target's exit status on.  Three profiles: the parent's, the
 * child's up to its exec, the exec'd target's.
 *
 * @profiles fork_exec=3
 * @expect fork_exec[argc=0,forked=false] parent_work allocs=1 alloc_bytes=100 leaked_bytes=100
 * @expect fork_exec[argc=0,forked=false] child_work allocs=0
 * @expect fork_exec[forked=true] child_work allocs=1 alloc_bytes=200 leaked_bytes=200
 * @expect fork_exec[forked=true] parent_work allocs=0
 * @expect fork_exec[argc=1] target allocs=1 alloc_bytes=300 leaked_bytes=300
 * @expect fork_exec[argc=1] parent_work allocs=0
 * @end fork_exec[forked=true] exec 0
 * @end fork_exec[argc=1] exit 7
 * @end fork_exec[argc=0,forked=false] exit 7
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void *kept;

__attribute__((noinline)) static void parent_work(void)
{
	kept = malloc(100);
}

__attribute__((noinline)) static void child_work(void)
{
	kept = malloc(200);
}

__attribute__((noinline)) static int target(void)
{
	kept = malloc(300);
	FILE *f = fopen("target.txt", "w");
	if (!f)
		return 1;
	fputs("written by the exec'd target\n", f);
	fclose(f);
	return 7;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "target") == 0)
		return target();
	parent_work();
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		child_work();
		execl("/proc/self/exe", argv[0], "target", (char *)NULL);
		_exit(127);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 1;
	printf("target exited %d\n", WEXITSTATUS(status));
	return WEXITSTATUS(status);
}
