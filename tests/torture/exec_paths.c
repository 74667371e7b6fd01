/* tests/torture/exec_paths.c - one image after another through every exec
 * call glibc has for a file descriptor or a directory fd: execveat on a
 * path, fexecve, execveat with AT_EMPTY_PATH, then execvpe; each image
 * allocates (its stage x 1000 + 1 bytes) and writes its profile before it
 * is replaced.  Stage N runs with N arguments after the program's name.
 *
 * @profiles exec_paths=5
 * @expect exec_paths[argc=0] main allocs=1 alloc_bytes=1
 * @end exec_paths[argc=0] exec 0
 * @expect exec_paths[argc=1] main allocs=1 alloc_bytes=1001
 * @end exec_paths[argc=1] exec 0
 * @expect exec_paths[argc=2] main allocs=1 alloc_bytes=2001
 * @end exec_paths[argc=2] exec 0
 * @expect exec_paths[argc=3] main allocs=1 alloc_bytes=3001
 * @end exec_paths[argc=3] exec 0
 * @expect exec_paths[argc=4] main allocs=1 alloc_bytes=4001 leaked_bytes=4001
 * @end exec_paths[argc=4] exit 0
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	int stage = argc - 1;
	char *args[7] = { argv[0], "a", "b", "c", "d", NULL, NULL };
	void *mine = malloc((size_t)stage * 1000 + 1);
	printf("stage %d\n", stage);
	fflush(stdout);
	args[stage + 2] = NULL;		/* the next image: stage + 2 arguments */
	int self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	switch (stage) {
	case 0:
		execveat(AT_FDCWD, "/proc/self/exe", args, environ, 0);
		break;
	case 1:
		fexecve(self, args, environ);
		break;
	case 2:
		execveat(self, "", args, environ, AT_EMPTY_PATH);
		break;
	case 3:
		execvpe("/proc/self/exe", args, environ);
		break;
	default:
		return mine ? 0 : 1;
	}
	perror("exec");
	return 2;
}
