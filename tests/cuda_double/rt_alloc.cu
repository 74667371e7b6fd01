// tests/cuda_double/rt_alloc.cu - the CUDA runtime API, one call per
// allocation API, each leaking one block when run as `rt_alloc leak` (the
// GPU script compares memline's leaks with compute-sanitizer's); without an
// argument every block is freed.  Built by nvcc with its defaults (static
// libcudart) and with -cudart shared.  Stops at the first error, printing
// it, and exits 0: without a usable driver (no GPU, the test double) the
// program must behave exactly as it does without memline.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

static bool ok(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return true;
	std::printf("cuda error at %s: %s\n", what, cudaGetErrorString(e));
	return false;
}

int main(int argc, char **argv)
{
	bool leak = argc > 1 && std::strcmp(argv[1], "leak") == 0;
	void *d = nullptr, *m = nullptr, *h = nullptr, *ha = nullptr, *p = nullptr, *a = nullptr;
	size_t pitch = 0;
	cudaArray_t arr = nullptr;
	cudaStream_t s = nullptr;
	if (!ok(cudaMalloc(&d, 1 << 20), "cudaMalloc"))	// L:rt_malloc
		return 0;
	if (!ok(cudaMallocManaged(&m, 2 << 20), "cudaMallocManaged"))	// L:rt_managed
		return 0;
	if (!ok(cudaMallocHost(&h, 3 << 20), "cudaMallocHost"))	// L:rt_host
		return 0;
	if (!ok(cudaHostAlloc(&ha, 4 << 20, cudaHostAllocDefault), "cudaHostAlloc"))	// L:rt_hostalloc
		return 0;
	if (!ok(cudaMallocPitch(&p, &pitch, 1000, 100), "cudaMallocPitch"))	// L:rt_pitch
		return 0;
	cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
	if (!ok(cudaMallocArray(&arr, &fd, 256, 256), "cudaMallocArray"))	// L:rt_array
		return 0;
	if (!ok(cudaStreamCreate(&s), "cudaStreamCreate"))
		return 0;
	if (!ok(cudaMallocAsync(&a, 5 << 20, s), "cudaMallocAsync"))	// L:rt_async
		return 0;
	if (!ok(cudaStreamSynchronize(s), "cudaStreamSynchronize"))
		return 0;
	std::printf("pitch %zu\n", pitch);
	if (leak)
		return 0;
	cudaFreeAsync(a, s);
	cudaStreamSynchronize(s);
	cudaStreamDestroy(s);
	cudaFreeArray(arr);
	cudaFree(p);
	cudaFreeHost(ha);
	cudaFreeHost(h);
	cudaFree(m);
	cudaFree(d);
	return 0;
}
