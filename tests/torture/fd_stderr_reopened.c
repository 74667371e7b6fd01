/* tests/torture/fd_stderr_reopened.c - stderr closed and descriptor 2
 * reopened as a data file; then the program takes SIGPROF (setitimer), on
 * which the line timer steps aside with a warning.  The warning must not
 * land in the program's data file (memline writes its lines only while
 * descriptor 2 is the stream it was at start-up; the warning is kept in the
 * profile and `memline run` shows it).
 *
 * @run --lines
 * @expect fd_stderr_reopened main allocs=1 alloc_bytes=10 frees=1 freed_bytes=10
 * @end fd_stderr_reopened exit 0
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

int main(void)
{
	close(2);
	int fd = open("data.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd != 2)
		return 1;
	if (write(fd, "data\n", 5) != 5)
		return 2;
	struct itimerval it;
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_PROF, &it, NULL);	/* the program's SIGPROF now */
	void *p = malloc(10);
	free(p);
	if (write(fd, "more\n", 5) != 5)
		return 3;
	printf("done\n");
	return 0;
}
