/* bench/cpu_bound.c - a CPU-bound program for the line timer's overhead
 * (bench/lineprof_overhead.py): no allocations, stacks about 20 frames deep
 * (a recursive walk), so each sample unwinds a realistic stack.
 * argv[1]: rounds (default 300, about 1 s on a 2020s x86 core). */
#include <stdio.h>
#include <stdlib.h>

static unsigned long mix(unsigned long x, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		x = (x ^ (x >> 13)) * 0x9e3779b97f4a7c15ul + i;
	return x;
}

__attribute__((noinline)) static unsigned long walk(int depth, unsigned long x)
{
	if (depth == 0)
		return mix(x, 2000);
	return walk(depth - 1, x) + walk(depth - 1, x + 1);	/* 2^depth leaves */
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 300;
	unsigned long sum = 0;
	for (int r = 0; r < rounds; r++)
		sum += walk(10, (unsigned long)r);
	printf("%lu\n", sum);
	return 0;
}
