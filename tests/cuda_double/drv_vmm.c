/* tests/cuda_double/drv_vmm.c - PyTorch's expandable-segments sequence
 * (c10/cuda/CUDACachingAllocator): reserve address space, then per 2 MiB
 * chunk cuMemCreate + cuMemMap + cuMemSetAccess; shrinking unmaps and
 * releases chunks; at the end the reservation is freed.  Functions are found
 * through cuGetProcAddress_v2 at version 12000, as PyTorch does through
 * cudaGetDriverEntryPointByVersion. */
#include "drv_common.h"

#define CHUNK (2ull << 20)

int main(void)
{
	open_driver(1);
	CUresult (*retain)(CUcontext *, int) = get("cuDevicePrimaryCtxRetain", 7000);
	CUresult (*set_current)(CUcontext) = get("cuCtxSetCurrent", 4000);
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long) =
		get("cuMemAddressReserve", 12000);
	CUresult (*address_free)(CUdeviceptr, size_t) = get("cuMemAddressFree", 12000);
	CUresult (*create)(unsigned long long *, size_t, const void *, unsigned long long) =
		get("cuMemCreate", 12000);
	CUresult (*release)(unsigned long long) = get("cuMemRelease", 12000);
	CUresult (*map)(CUdeviceptr, size_t, size_t, unsigned long long, unsigned long long) =
		get("cuMemMap", 12000);
	CUresult (*unmap)(CUdeviceptr, size_t) = get("cuMemUnmap", 12000);
	CUresult (*set_access)(CUdeviceptr, size_t, const void *, size_t) =
		get("cuMemSetAccess", 12000);

	CUcontext ctx;
	CHECK(retain(&ctx, 0));
	CHECK(set_current(ctx));
	int prop[16] = { 0 }, access[4] = { 1, 0, 3, 0 };
	CUdeviceptr base;
	CHECK(reserve(&base, 16 * CHUNK, 0, 0, 0));	/* L:reserve */
	unsigned long long h[3];
	for (int i = 0; i < 3; i++) {
		CHECK(create(&h[i], CHUNK, prop, 0));	/* L:create */
		CHECK(map(base + i * CHUNK, CHUNK, 0, h[i], 0));	/* L:map */
		CHECK(set_access(base + i * CHUNK, CHUNK, access, 1));
	}
	/* Shrink: the last two chunks go, in one unmap of both. */
	CHECK(unmap(base + CHUNK, 2 * CHUNK));
	CHECK(release(h[1]));
	CHECK(release(h[2]));
	/* One more chunk that stays mapped at exit: a leak of 2 MiB physical. */
	unsigned long long extra;
	CHECK(create(&extra, CHUNK, prop, 0));	/* L:create_leak */
	CHECK(map(base + CHUNK, CHUNK, 0, extra, 0));	/* L:map_leak */
	(void)address_free;
	return 0;
}
