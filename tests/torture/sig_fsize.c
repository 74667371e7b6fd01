/* tests/torture/sig_fsize.c - a file size limit (RLIMIT_FSIZE, 128 bytes)
 * below the size of the profile (a compressed profile of this program is
 * under 1 KiB): at exit, writing the profile must neither kill
 * the program with SIGXFSZ nor lose its buffered stdout.  No profile can be
 * written; memline says so in one line.
 *
 * @profiles sig_fsize=0
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

void *kept[64];

int main(void)
{
	struct rlimit rl = { 128, 128 };
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		return 1;
	printf("a buffered line\n");
	for (int i = 0; i < 64; i++)
		kept[i] = malloc((size_t)i + 1);
	return 0;
}
