/* ls_reachability.c - peer: LeakSanitizer's use_globals_*, use_stacks,
 * use_registers, use_tls_*, pointer_to_self and stale_stack_leak tests:
 * blocks kept only in a global, on the stack, in thread-local storage, in
 * a block pointing to itself, or nowhere.  Not freed, each is in use at
 * exit (memline does not tell reachable from lost). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *global_ptr;
static __thread void *tls_ptr;

static void *in_thread(void *arg)
{
	tls_ptr = malloc(1337);		/* TLS of an exited thread */
	return arg;
}

int main(void)
{
	global_ptr = malloc(111);
	void *volatile on_stack = malloc(222);
	void **self = malloc(sizeof(void *) * 4);
	self[0] = self;
	tls_ptr = malloc(333);
	pthread_t t;
	pthread_create(&t, NULL, in_thread, NULL);
	pthread_join(t, NULL);
	malloc(444);			/* nowhere */
	printf("%d\n", on_stack != NULL);
	return 0;
}
