/* bench/cuda_bench.c - time per device allocation + free pair through the
 * driver API, found the way the CUDA runtime finds it (dlopen libcuda.so.1,
 * cuGetProcAddress_v2), so that under memline every call goes through the
 * cuGetProcAddress wrappers: cudaMalloc / cudaFree end in exactly these two
 * calls.  Run against the test double (tests/cuda_double), whose own cost is
 * a malloc, a free and a list operation.
 *   cuda_bench PAIRS SIZE
 * Prints "ns_per_pair N". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*gpa_t)(const char *, void **, int, unsigned long long, int *);

static void *get(gpa_t gpa, const char *name, int version)
{
	void *p = NULL;
	int st;
	if (gpa(name, &p, version, 0, &st) || !p) {
		fprintf(stderr, "cuda_bench: no %s\n", name);
		exit(2);
	}
	return p;
}

int main(int argc, char **argv)
{
	long pairs = argc > 1 ? atol(argv[1]) : 200000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 4096;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "cuda_bench: %s\n", dlerror());
		return 2;
	}
	gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
	if (!gpa)
		return 2;
	gpa = (gpa_t)get(gpa, "cuGetProcAddress", 12000);
	int (*init)(unsigned) = get(gpa, "cuInit", 2000);
	int (*retain)(void **, int) = get(gpa, "cuDevicePrimaryCtxRetain", 7000);
	int (*set_current)(void *) = get(gpa, "cuCtxSetCurrent", 4000);
	int (*mem_alloc)(unsigned long long *, size_t) = get(gpa, "cuMemAlloc", 3020);
	int (*mem_free)(unsigned long long) = get(gpa, "cuMemFree", 3020);
	void *ctx;
	if (init(0) || retain(&ctx, 0) || set_current(ctx))
		return 3;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < pairs; i++) {
		unsigned long long d;
		if (mem_alloc(&d, size) || mem_free(d))
			return 4;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	printf("ns_per_pair %.1f\n", ns / (double)pairs);
	return 0;
}
