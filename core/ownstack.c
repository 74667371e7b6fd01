/* core/ownstack.c - a stack of the runtime's own, for writing the profile.
 * The profile is written wherever the process ends: in the program's
 * _exit, in a fatal-signal handler running on the program's alternate
 * signal stack (often SIGSTKSZ, 8 KiB, for a stack-overflow catcher), in a
 * coroutine on a small stack.  Writing needs tens of KiB; so it runs here,
 * on 1 MiB mapped at start-up (pages are only touched as used), with a
 * guard page below. */
#include <errno.h>
#include <sys/mman.h>
#include "core/internal.h"

#define OWN_STACK_SIZE (1u << 20)
#define GUARD_SIZE 4096u

static char *stack_top;

/* Calls fn(arg) with rsp at top (16-byte aligned); returns fn's result.
 * The frame keeps rbp as its CFA, so debuggers and unwinders walk back to
 * the caller's stack. */
int ml_ownstack_call(int (*fn)(void *), void *arg, void *top);
__asm__(".text\n"
	".globl ml_ownstack_call\n"
	".hidden ml_ownstack_call\n"
	".type ml_ownstack_call, @function\n"
	"ml_ownstack_call:\n"
	"	.cfi_startproc\n"
	"	pushq %rbp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbp, -16\n"
	"	movq %rsp, %rbp\n"
	"	.cfi_def_cfa_register %rbp\n"
	"	movq %rdx, %rsp\n"
	"	movq %rdi, %rax\n"
	"	movq %rsi, %rdi\n"
	"	call *%rax\n"
	"	movq %rbp, %rsp\n"
	"	popq %rbp\n"
	"	.cfi_def_cfa %rsp, 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size ml_ownstack_call, .-ml_ownstack_call\n");

int ml_ownstack_init(void)
{
	if (stack_top)
		return 0;
	char *p = mmap(NULL, OWN_STACK_SIZE + GUARD_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	mprotect(p, GUARD_SIZE, PROT_NONE);
	stack_top = p + GUARD_SIZE + OWN_STACK_SIZE;
	return 0;
}

int ml_ownstack_run(int (*fn)(void *), void *arg)
{
	if (!stack_top)
		return fn(arg);	/* no stack of our own: the caller's */
	char here;
	/* Already on it (a signal handler interrupting the writer): go on. */
	if (&here < stack_top && &here >= stack_top - OWN_STACK_SIZE)
		return fn(arg);
	return ml_ownstack_call(fn, arg, stack_top);
}
