/* bench/rss_prog.c - the workload of bench/rss.py: memline's own memory per
 * live block and per distinct stack.
 *
 *   rss_prog blocks N SIZE    keeps N blocks of SIZE bytes live (one stack),
 *                             then exits without freeing them
 *   rss_prog stacks BITS      allocates (and frees) one block from each of
 *                             2^BITS distinct stacks: a recursion BITS
 *                             levels deep that goes through one of two
 *                             functions per level
 * Prints its own peak RSS (VmHWM, KiB), so a tool's share can be taken out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void **kept;

static long vm_hwm(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kib = atol(line + 6);
	if (f)
		fclose(f);
	return kib;
}

static int down_a(unsigned path, int level);
static int down_b(unsigned path, int level);

__attribute__((noinline)) static int leaf(void)
{
	volatile char *p = malloc(24);
	p[0] = 1;
	free((void *)p);
	return 1;
}

__attribute__((noinline)) static int down_a(unsigned path, int level)
{
	volatile int r = level ? ((path >> level) & 1 ? down_b : down_a)(path, level - 1) : leaf();
	return r + 1;
}

__attribute__((noinline)) static int down_b(unsigned path, int level)
{
	volatile int r = level ? ((path >> level) & 1 ? down_b : down_a)(path, level - 1) : leaf();
	return r + 2;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "blocks")) {
		long n = atol(argv[2]), size = atol(argv[3]);
		kept = malloc((size_t)n * sizeof(*kept));
		for (long i = 0; i < n; i++) {
			kept[i] = malloc((size_t)size);
			memset(kept[i], 1, (size_t)size);
		}
	} else if (argc == 3 && !strcmp(argv[1], "stacks")) {
		int bits = atoi(argv[2]);
		for (unsigned path = 0; path < (1u << bits); path++)
			(path & 1 ? down_b : down_a)(path, bits);
	} else {
		fprintf(stderr, "usage: rss_prog blocks N SIZE | stacks BITS\n");
		return 2;
	}
	printf("vmhwm_kib=%ld\n", vm_hwm());
	return 0;
}
