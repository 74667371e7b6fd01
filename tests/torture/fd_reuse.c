/* tests/torture/fd_reuse.c - a program that closes every inherited
 * descriptor (close_range, as daemons and closefrom(3) do), opens its own
 * files on 3 and 4, then allocates through a function without unwind
 * information and spins in it while the line timer samples: the stack
 * walker must not read or write a byte of those files (libunwind's
 * memory-validation pipe sat on 3 and 4, and libunwind validates memory
 * exactly on such frames).  The files must hold what the program wrote, at
 * the offsets it left them.
 *
 * @run --lines --rate 4999
 * @expect fd_reuse noinfo_alloc allocs=100 alloc_bytes=5950 frees=100 freed_bytes=5950 leaked_bytes=0
 * @expect fd_reuse main allocs=0
 * @end fd_reuse exit 0
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* malloc(n), then a spin of `spins` iterations, in code with no CFI: no
 * unwinder can use DWARF for this frame. */
void *noinfo_alloc(size_t n, unsigned long spins);
__asm__(".text\n"
	".globl noinfo_alloc\n"
	".type noinfo_alloc, @function\n"
	"noinfo_alloc:\n"
	"	pushq %rbx\n"
	"	movq %rsi, %rbx\n"
	"	call malloc@PLT\n"
	"1:	subq $1, %rbx\n"
	"	jnc 1b\n"
	"	popq %rbx\n"
	"	ret\n"
	".size noinfo_alloc, .-noinfo_alloc\n");

int main(void)
{
	if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
		return 1;
	int in = open("in.dat", O_RDWR | O_CREAT | O_TRUNC, 0644);
	int out = open("out.dat", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (in != 3 || out != 4) {
		printf("descriptors %d %d\n", in, out);
		return 2;
	}
	if (write(in, "0123456789", 10) != 10 || lseek(in, 0, SEEK_SET) != 0)
		return 3;
	void *keep[100];
	for (int i = 0; i < 100; i++)
		keep[i] = noinfo_alloc(10 + (size_t)i, 2000000ul);
	char buf[8] = { 0 };
	ssize_t n = read(in, buf, 4);
	if (write(out, "abc", 3) != 3)
		return 4;
	printf("read %zd '%s'; in.dat at %ld, out.dat at %ld\n", n, buf,
	       (long)lseek(in, 0, SEEK_CUR), (long)lseek(out, 0, SEEK_CUR));
	for (int i = 0; i < 100; i++)
		free(keep[i]);
	return 0;
}
