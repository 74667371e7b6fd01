/* tests/cuda_double/drv_user_lib.c - a library linked with the driver
 * (-lcuda) that the program loads with dlopen(RTLD_LOCAL), as Python loads
 * PyTorch's extension modules: its calls bind to memline's exported cu*
 * symbols, while its libcuda.so.1 is outside the global scope. */
#include <stddef.h>
typedef int CUresult;
typedef unsigned long long CUdeviceptr;

CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);

int user_alloc(CUdeviceptr *d, unsigned long size)
{
	return cuMemAlloc_v2(d, size);	/* L:user_alloc */
}

int user_free(CUdeviceptr d)
{
	return cuMemFree_v2(d);
}
