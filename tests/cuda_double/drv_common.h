/* tests/cuda_double/drv_common.h - driver API declarations for the fixtures
 * (from the public driver API documentation), and the lookup helper that
 * replays how the CUDA runtime finds driver functions. */
#ifndef DRV_COMMON_H
#define DRV_COMMON_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;

typedef CUresult (*gpa1_t)(const char *, void **, int, unsigned long long);
typedef CUresult (*gpa2_t)(const char *, void **, int, unsigned long long, int *);

static gpa1_t gpa1;
static gpa2_t gpa2;
static unsigned long long lookup_flags;

/* cuGetProcAddress[_v2](name, version, lookup_flags), or exit 3. */
static void *get(const char *name, int version)
{
	void *p = NULL;
	int status = -1;
	CUresult rc = gpa2 ? gpa2(name, &p, version, lookup_flags, &status)
			   : gpa1(name, &p, version, lookup_flags);
	if (rc || !p) {
		fprintf(stderr, "lookup of %s at %d failed: %d\n", name, version, rc);
		exit(3);
	}
	return p;
}

/* What the runtime does first: dlopen the driver, dlsym its cuGetProcAddress
 * (v2 from CUDA 12, v1 for 11.x), then look cuGetProcAddress up through
 * itself and use that from then on. */
static void open_driver(int v2)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "no driver: %s\n", dlerror());
		exit(2);
	}
	if (v2) {
		gpa2 = (gpa2_t)dlsym(h, "cuGetProcAddress_v2");
		if (!gpa2)
			exit(4);
		gpa2 = (gpa2_t)get("cuGetProcAddress", 12000);
	} else {
		gpa1 = (gpa1_t)dlsym(h, "cuGetProcAddress");
		if (!gpa1)
			exit(4);
		gpa1 = (gpa1_t)get("cuGetProcAddress", 11030);
	}
	CUresult (*init)(unsigned) = (CUresult (*)(unsigned))get("cuInit", 2000);
	if (init(0))
		exit(5);
}

#define CHECK(call) do { CUresult rc_ = (call); if (rc_) { \
	fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, rc_); exit(6); } } while (0)

#endif
