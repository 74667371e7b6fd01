/* ht_peak.c - peer: heaptrack's tests/manual/peak.c: the peak (225 bytes)
 * is reached in the middle; everything is freed by the end. */
#include <stdio.h>
#include <stdlib.h>

static char *allocate_something(int size) { return malloc((size_t)size); }
static char *foo(void) { return allocate_something(100); }
static char *bar(void) { return allocate_something(25); }

int main(void)
{
	char *f1 = foo();
	char *b2 = bar();
	free(f1);
	char *b3 = bar();
	char *b4 = bar();
	free(b2);
	free(b3);
	free(b4);
	char *f2 = foo();
	free(f2);
	printf("peak done\n");
	return 0;
}
