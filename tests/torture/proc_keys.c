/* tests/torture/proc_keys.c - pthread keys are the program's (1024 of them):
 * after threads that allocate, allocations through code without unwind
 * information (libunwind's path) and with the line timer on, the program
 * can still create exactly as many keys as alone.
 *
 * @run --lines
 * @expect proc_keys thread_main allocs=4 alloc_bytes=80 frees=4 freed_bytes=80
 * @end proc_keys exit 0
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void *noinfo_malloc(size_t n);
__asm__(".text\n"
	".globl noinfo_malloc\n"
	".type noinfo_malloc, @function\n"
	"noinfo_malloc:\n"
	"	subq $8, %rsp\n"
	"	call malloc@PLT\n"
	"	addq $8, %rsp\n"
	"	ret\n"
	".size noinfo_malloc, .-noinfo_malloc\n");

static void *thread_main(void *arg)
{
	free(malloc(20));
	free(noinfo_malloc(10));
	return arg;
}

int main(void)
{
	for (int i = 0; i < 4; i++) {
		pthread_t t;
		pthread_create(&t, NULL, thread_main, NULL);
		pthread_join(t, NULL);
	}
	free(noinfo_malloc(10));
	int n = 0;
	pthread_key_t k;
	while (pthread_key_create(&k, NULL) == 0)
		n++;
	printf("keys the program could create: %d\n", n);
	return 0;
}
