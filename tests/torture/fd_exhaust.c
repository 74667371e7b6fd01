/* tests/torture/fd_exhaust.c - the program uses up every file descriptor
 * its limit allows and exits holding them: memline cannot open the profile
 * and says why in words ("Too many open files (EMFILE)", not a bare errno
 * number), and `memline run` says no profile was written.
 *
 * @profiles fd_exhaust=0
 * @warns cannot write the profile in
 * @warns Too many open files (EMFILE)
 * @warns no profile was written
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

int main(void)
{
	struct rlimit lim = { 64, 64 };
	int opened = 0;
	void *kept = malloc(100);
	if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
		return 2;
	while (open("/dev/null", O_RDONLY) >= 0)
		opened++;
	printf("%d\n", opened > 0 && kept != NULL);
	fflush(stdout);
	return 0;
}
