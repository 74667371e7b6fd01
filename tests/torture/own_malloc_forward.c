/* tests/torture/own_malloc_forward.c - the program's own malloc counts calls
 * and passes them on with dlsym(RTLD_NEXT): under memline they reach
 * memline's hook, so all of them are recorded (charged to the wrapper, as
 * valgrind charges them), and memline says its malloc is not the first.
 *
 * @warns malloc is defined by
 * @expect own_malloc_forward malloc allocs=2 alloc_bytes=300
 * @expect own_malloc_forward main total.allocs=2 total.alloc_bytes=300 total.leaked_bytes=200
 * @end own_malloc_forward exit 0
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int calls;

void *malloc(size_t n)
{
	static void *(*next)(size_t);
	if (!next)
		next = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	calls++;
	return next(n);
}

int main(void)
{
	calls = 0;
	void *a = malloc(100);
	void *volatile b = malloc(200);
	free(a);
	fprintf(stderr, "wrapper calls: %d\n", calls);
	return b ? 0 : 1;
}
