/* tests/cuda_double/drv_linked.c - a program linked with -lcuda calling the
 * exported cu* symbols directly (no cuGetProcAddress), and calling
 * cuGetProcAddress_v2 itself, so a function reached by both doors must be
 * counted once per call. */
#include <stdio.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;

CUresult cuInit(unsigned int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);

int main(void)
{
	CUcontext ctx;
	CUdeviceptr a, b, c;
	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
		return 2;
	if (cuMemAlloc_v2(&a, 1111))	/* L:linked_alloc */
		return 3;
	if (cuMemAllocManaged(&b, 2222, 1))	/* L:linked_managed */
		return 3;
	cuMemFree_v2(b);
	void *fn = NULL;
	int st;
	if (cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &st) || !fn)
		return 4;
	if (((CUresult (*)(CUdeviceptr *, size_t))fn)(&c, 3333))	/* L:linked_proc */
		return 5;
	printf("%d\n", a != 0);
	return 0;
}
