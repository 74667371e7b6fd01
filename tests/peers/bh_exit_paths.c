/* bh_exit_paths.c - peer: bytehound's exit_1/exit_2/exit_3: a leak, then
 * the process ends by exit, _exit or _Exit (argv[1]: 1, 2 or 3; peers-args: 2). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int how = argc > 1 ? atoi(argv[1]) : 1;
	void *p = malloc((size_t)(11000 + how));
	printf("ending by %d\n", how);
	fflush(stdout);
	if (how == 2)
		_exit(0);
	if (how == 3)
		_Exit(0);
	exit(p ? 0 : 1);
}
