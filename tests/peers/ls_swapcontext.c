/* ls_swapcontext.c - peer: LeakSanitizer's swapcontext: allocations made on
 * a coroutine's own stack (makecontext, 256 KiB), kept in a heap block. */
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

static ucontext_t main_ctx, co_ctx;
static void **kept;

static void coroutine(void)
{
	for (int i = 0; i < 10; i++) {
		kept[i] = malloc((size_t)(100 + i));
		swapcontext(&co_ctx, &main_ctx);
	}
}

int main(void)
{
	size_t stack_size = 256 * 1024;
	char *stack = malloc(stack_size);
	kept = calloc(10, sizeof(void *));
	getcontext(&co_ctx);
	co_ctx.uc_stack.ss_sp = stack;
	co_ctx.uc_stack.ss_size = stack_size;
	co_ctx.uc_link = &main_ctx;
	makecontext(&co_ctx, coroutine, 0);
	for (int i = 0; i < 10; i++)
		swapcontext(&main_ctx, &co_ctx);
	for (int i = 0; i < 10; i += 2)
		free(kept[i]);
	printf("switched 10 times\n");
	return 0;
}
