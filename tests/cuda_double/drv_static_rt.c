/* tests/cuda_double/drv_static_rt.c - a program linked with a stand-in for
 * the static CUDA runtime (fake_cudart.c, no debug info): memline must
 * credit the SELF CUDA bytes to the lines calling cudaMalloc, not to the
 * runtime's frames.  cuda_user_alloc is the program's own function (with
 * debug info) whose name starts like the runtime's: its line keeps them. */
#include <stddef.h>
#include <stdio.h>

typedef int cudaError_t;
cudaError_t cudaMalloc(void **p, size_t size);
cudaError_t cudaFree(void *p);

__attribute__((noinline)) static int cuda_user_alloc(void **p)
{
	return cudaMalloc(p, 3000);	/* L:user_helper */
}

int main(void)
{
	void *a, *b, *c;
	if (cudaMalloc(&a, 1000))	/* L:static_leak */
		return 1;
	if (cudaMalloc(&b, 2000))	/* L:static_freed */
		return 1;
	if (cudaFree(b))
		return 1;
	if (cuda_user_alloc(&c))	/* L:user_call */
		return 1;
	puts("ok");
	return 0;
}
