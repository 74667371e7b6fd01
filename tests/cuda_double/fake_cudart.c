/* tests/cuda_double/fake_cudart.c - the shape of nvcc's default, the CUDA
 * runtime linked statically into the program, without the toolkit: a
 * cudaMalloc / cudaFree pair and a hashed internal function named like CUDA
 * 13's (libcudart_static_<sha1>), compiled WITHOUT debug info and linked
 * into drv_static_rt, reaching the driver (the test double) through
 * cuGetProcAddress as the real runtime does.  The internal function also
 * keeps one host block of runtime state (a malloc outside any driver call,
 * as libcudart makes). */
#include <stdint.h>
#include "drv_common.h"

typedef int cudaError_t;

static CUresult (*mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*mem_free)(CUdeviceptr);
static void *state;

__attribute__((noinline)) static int libcudart_static_5f3a9c0e1d2b4a6f(void)
{
	if (mem_alloc)
		return 0;
	state = malloc(64);	/* the runtime's own host memory */
	open_driver(1);
	CUresult (*retain)(CUcontext *, int) =
		(CUresult (*)(CUcontext *, int))get("cuDevicePrimaryCtxRetain", 7000);
	CUresult (*set_current)(CUcontext) = (CUresult (*)(CUcontext))get("cuCtxSetCurrent", 4000);
	CUcontext ctx;
	if (retain(&ctx, 0) || set_current(ctx))
		return 3;
	mem_alloc = (CUresult (*)(CUdeviceptr *, size_t))get("cuMemAlloc", 3020);
	mem_free = (CUresult (*)(CUdeviceptr))get("cuMemFree", 3020);
	return state ? 0 : 2;
}

__attribute__((noinline)) static cudaError_t libcudart_static_9b8e7d6c5a4f3e2d(void **p, size_t size)
{
	CUdeviceptr d = 0;
	if (libcudart_static_5f3a9c0e1d2b4a6f())
		return 2;
	CUresult rc = mem_alloc(&d, size);
	*p = (void *)(uintptr_t)d;
	return rc;
}

cudaError_t cudaMalloc(void **p, size_t size)
{
	return libcudart_static_9b8e7d6c5a4f3e2d(p, size);
}

cudaError_t cudaFree(void *p)
{
	if (libcudart_static_5f3a9c0e1d2b4a6f())
		return 2;
	return mem_free((CUdeviceptr)(uintptr_t)p);
}
