/* tests/cuda_double/fake_c10.cc - a stand-in for PyTorch's libc10 (soname
 * libc10.so), built twice: with the 1.x signature of
 * c10::reportMemoryUsageToProfiler (-DFAKE_C10_V1) and with the 2.x one.
 * Its functions are what memline interposes (torch_hooks/hooks.c); each
 * counts its calls, so that a test can see memline forwarded them:
 *   reportMemoryUsageToProfiler  counts calls and the net bytes reported
 *   alloc_cpu / free_cpu         PyTorch's CPU tensor storage (64-byte
 *                                aligned, as c10 allocates it) */
#include <stdint.h>
#include <stdlib.h>

namespace c10 {

struct Device {
	int8_t type;
	int8_t index;
};

static long report_calls, report_net, free_calls;

#ifdef FAKE_C10_V1
void reportMemoryUsageToProfiler(void *ptr, int64_t alloc_size, int64_t total_allocated,
				 int64_t total_reserved, Device device)
#else
void reportMemoryUsageToProfiler(void *ptr, int64_t alloc_size, size_t total_allocated,
				 size_t total_reserved, Device device)
#endif
{
	(void)ptr;
	(void)total_allocated;
	(void)total_reserved;
	if (device.type == 1) {
		report_calls++;
		report_net += alloc_size;
	}
}

void *alloc_cpu(size_t nbytes)
{
	void *p = nullptr;
	return posix_memalign(&p, 64, nbytes ? nbytes : 1) == 0 ? p : nullptr;
}

void free_cpu(void *p)
{
	free_calls++;
	free(p);
}

}  // namespace c10

/* What the fake saw, for the test program to print. */
extern "C" void fake_c10_counts(long *reports, long *net, long *frees)
{
	*reports = c10::report_calls;
	*net = c10::report_net;
	*frees = c10::free_calls;
}
