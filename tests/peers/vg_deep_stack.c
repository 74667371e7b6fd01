/* vg_deep_stack.c - peer: valgrind memcheck's deep-backtrace: allocations
 * made 300 calls deep (deeper than the captured stack: totals stay exact). */
#include <stdio.h>
#include <stdlib.h>

static void *deep(int n)
{
	if (n == 0)
		return malloc(1000);
	void *p = deep(n - 1);
	__asm__ volatile("" ::: "memory");	/* no tail call */
	return p;
}

int main(void)
{
	void *keep = NULL;
	for (int i = 0; i < 10; i++) {
		void *p = deep(300);
		if (i == 9)
			keep = p;
		else
			free(p);
	}
	printf("%d\n", keep != NULL);
	return 0;
}
