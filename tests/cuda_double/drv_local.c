/* tests/cuda_double/drv_local.c - loads libdrv_user.so (linked with the
 * driver) with RTLD_LOCAL and allocates through it: memline's exported
 * cuMemAlloc_v2 must find the driver in that library's own scope. */
#include "drv_common.h"

int main(void)
{
	open_driver(1);	/* cuInit, through cuGetProcAddress */
	CUresult (*retain)(CUcontext *, int) = get("cuDevicePrimaryCtxRetain", 7000);
	CUresult (*set_current)(CUcontext) = get("cuCtxSetCurrent", 4000);
	CUcontext ctx;
	CHECK(retain(&ctx, 0));
	CHECK(set_current(ctx));
	void *lib = dlopen("libdrv_user.so", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 2;
	}
	int (*user_alloc)(CUdeviceptr *, unsigned long) = dlsym(lib, "user_alloc");
	int (*user_free)(CUdeviceptr) = dlsym(lib, "user_free");
	CUdeviceptr a, b;
	CHECK(user_alloc(&a, 4321));	/* L:local_leak */
	CHECK(user_alloc(&b, 1234));
	CHECK(user_free(b));
	printf("ok\n");
	return 0;
}
