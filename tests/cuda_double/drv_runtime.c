/* tests/cuda_double/drv_runtime.c - every hooked allocation API, found the
 * way the CUDA runtime finds them (dlopen + dlsym of cuGetProcAddress, then
 * lookups by base name, version and flags).
 *   drv_runtime v2|v1 [ptsz] [reset]
 * v2: cuGetProcAddress_v2, CUDA 12 versions; v1: cuGetProcAddress, CUDA 11.
 * ptsz: lookups with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
 * reset: resets the primary context at the end (frees what it held). */
#include <string.h>
#include "drv_common.h"

struct arr { size_t w, h; int format; unsigned int channels; };
struct arr3 { size_t w, h, d; int format; unsigned int channels, flags; };

int main(int argc, char **argv)
{
	int v2 = argc > 1 && strcmp(argv[1], "v2") == 0;
	int reset = 0;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "ptsz") == 0)
			lookup_flags = 2;
		if (strcmp(argv[i], "reset") == 0)
			reset = 1;
		/* A stand-in for PyTorch's CUDA library, and the environment
		 * variable `memline run --no-torch-cache` sets. */
		if (strcmp(argv[i], "torch") == 0) {
			if (!dlopen("libc10_cuda.so", RTLD_NOW))
				return 8;
			const char *v = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
			printf("caching %s\n", v ? v : "on");
		}
	}
	open_driver(v2);
	int ver = v2 ? 12000 : 11020;

	CUresult (*retain)(CUcontext *, int) = get("cuDevicePrimaryCtxRetain", 7000);
	CUresult (*set_current)(CUcontext) = get("cuCtxSetCurrent", 4000);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t) = get("cuMemAlloc", 3020);
	CUresult (*mem_free)(CUdeviceptr) = get("cuMemFree", 3020);
	CUresult (*alloc_pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned) =
		get("cuMemAllocPitch", 3020);
	CUresult (*managed)(CUdeviceptr *, size_t, unsigned) = get("cuMemAllocManaged", 6000);
	CUresult (*host_alloc)(void **, size_t, unsigned) = get("cuMemHostAlloc", 2020);
	CUresult (*alloc_host)(void **, size_t) = get("cuMemAllocHost", 3020);
	CUresult (*free_host)(void *) = get("cuMemFreeHost", 2000);
	CUresult (*host_register)(void *, size_t, unsigned) =
		get("cuMemHostRegister", v2 ? 6050 : 6000);
	CUresult (*host_unregister)(void *) = get("cuMemHostUnregister", 4000);
	CUresult (*array_create)(void **, const struct arr *) = get("cuArrayCreate", 3020);
	CUresult (*array3d_create)(void **, const struct arr3 *) = get("cuArray3DCreate", 3020);
	CUresult (*array_destroy)(void *) = get("cuArrayDestroy", 2000);
	CUresult (*alloc_async)(CUdeviceptr *, size_t, void *) = get("cuMemAllocAsync", ver);
	CUresult (*free_async)(CUdeviceptr, void *) = get("cuMemFreeAsync", ver);
	CUresult (*default_pool)(void **, int) = get("cuDeviceGetDefaultMemPool", ver);
	CUresult (*alloc_pool)(CUdeviceptr *, size_t, void *, void *) =
		get("cuMemAllocFromPoolAsync", ver);
	CUresult (*pool_trim)(void *, size_t) = get("cuMemPoolTrimTo", ver);
	CUresult (*ctx_create)(CUcontext *, unsigned, int) = get("cuCtxCreate", 3020);
	CUresult (*ctx_destroy)(CUcontext) = get("cuCtxDestroy", 4000);
	CUresult (*primary_reset)(int) = get("cuDevicePrimaryCtxReset", ver);

	CUcontext ctx;
	CHECK(retain(&ctx, 0));
	CHECK(set_current(ctx));

	CUdeviceptr d1, d2, d3, m, p1, p2, p3, d4;
	size_t pitch;
	void *h1, *h2, *a1, *a2, *pool;
	CHECK(mem_alloc(&d1, 1000));	/* L:dev_leak */
	CHECK(mem_alloc(&d2, 2000));	/* L:dev_freed */
	CHECK(mem_free(d2));
	if (mem_free(0x1234) == 0)	/* not a block: fails, changes nothing */
		return 7;
	CHECK(alloc_pitch(&d3, &pitch, 100, 10, 4));	/* L:pitch */
	CHECK(managed(&m, 3000, 1));	/* L:managed */
	CHECK(host_alloc(&h1, 4000, 0));	/* L:host_alloc */
	CHECK(alloc_host(&h2, 5000));	/* L:alloc_host */
	CHECK(free_host(h2));
	char *buf = malloc(6000);	/* L:reg_buf */
	CHECK(host_register(buf, 6000, 0));	/* L:register */
	CHECK(host_unregister(buf));
	free(buf);
	struct arr ad = { 64, 4, 0x20, 2 };	/* float2: 64 x 4 x 8 = 2048 bytes */
	CHECK(array_create(&a1, &ad));	/* L:array */
	struct arr3 ad3 = { 8, 8, 8, 0x01, 1, 0 };	/* uint8: 512 bytes */
	CHECK(array3d_create(&a2, &ad3));	/* L:array3d */
	CHECK(array_destroy(a2));
	CHECK(alloc_async(&p1, 7000, NULL));	/* L:async_freed */
	CHECK(free_async(p1, NULL));
	CHECK(alloc_async(&p2, 7100, NULL));	/* L:async_leak */
	CHECK(default_pool(&pool, 0));
	CHECK(alloc_pool(&p3, 7200, pool, NULL));	/* L:pool */
	CHECK(pool_trim(pool, 0));
	CUcontext other;
	CHECK(ctx_create(&other, 0, 0));	/* L:ctx_create */
	CHECK(mem_alloc(&d4, 8000));	/* L:ctx_alloc */
	CHECK(ctx_destroy(other));	/* frees d4 */
	CHECK(set_current(ctx));
	if (reset)
		CHECK(primary_reset(0));	/* frees everything left */
	printf("pitch %zu\n", pitch);
	return 0;
}
