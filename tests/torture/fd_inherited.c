/* tests/torture/fd_inherited.c - the descriptors a program finds open: under
 * memline exactly the ones it had alone (0, 1 and 2 here), before and after
 * it allocates.  (libunwind's memory-validation pipe used to sit on 3 and 4
 * in every profiled process.)
 *
 * @expect fd_inherited main allocs=1 alloc_bytes=100 frees=1 freed_bytes=100
 * @end fd_inherited exit 0
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

static void list(const char *when)
{
	printf("%s:", when);
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			printf(" %d", fd);
	printf("\n");
}

int main(void)
{
	list("start");
	void *p = malloc(100);
	free(p);
	list("end");
	return 0;
}
