/* tests/cuda_double/fake_caching.cc - a stand-in for PyTorch's CUDA caching
 * allocator (libc10_cuda.so, linked with the fake libc10.so): blocks carved
 * out of segments it gets from the driver (the test double, found as the
 * CUDA runtime finds it), sizes rounded up to 512 bytes as PyTorch rounds
 * them, segments of 2 MiB for blocks up to 1 MiB and of the block's size
 * rounded to 2 MiB above; a freed block goes back to its segment's free
 * list (the segment stays reserved) and empty_cache() returns the empty
 * segments.  Every block handed out and taken back is reported with
 * c10::reportMemoryUsageToProfiler(ptr, +-size, allocated, reserved, CUDA),
 * as DeviceCachingAllocator::malloc and ::free do. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
extern "C" {
#include "drv_common.h"
}

namespace c10 {
struct Device {
	int8_t type;
	int8_t index;
};
#ifdef FAKE_C10_V1
void reportMemoryUsageToProfiler(void *ptr, int64_t alloc_size, int64_t total_allocated,
				 int64_t total_reserved, Device device);
#else
void reportMemoryUsageToProfiler(void *ptr, int64_t alloc_size, size_t total_allocated,
				 size_t total_reserved, Device device);
#endif
}  // namespace c10

namespace {

const size_t kMinBlock = 512, kSmall = 1 << 20, kSmallSegment = 2 << 20, kRound = 2 << 20;

struct Block {
	CUdeviceptr ptr;
	size_t size;
	bool used;
};

struct Segment {
	CUdeviceptr base;
	size_t size;
	Block blocks[64];
	int n;
};

Segment segments[64];
int n_segments;
size_t allocated, reserved;
CUresult (*mem_alloc)(CUdeviceptr *, size_t);
CUresult (*mem_free)(CUdeviceptr);

void init()
{
	if (mem_alloc)
		return;
	open_driver(1);
	CUresult (*retain)(CUcontext *, int) =
		(CUresult (*)(CUcontext *, int))get("cuDevicePrimaryCtxRetain", 7000);
	CUresult (*set_current)(CUcontext) = (CUresult (*)(CUcontext))get("cuCtxSetCurrent", 4000);
	mem_alloc = (CUresult (*)(CUdeviceptr *, size_t))get("cuMemAlloc", 3020);
	mem_free = (CUresult (*)(CUdeviceptr))get("cuMemFree", 3020);
	CUcontext ctx;
	CHECK(retain(&ctx, 0));
	CHECK(set_current(ctx));
}

void report(CUdeviceptr p, int64_t size)
{
	c10::Device cuda = { 1, 0 };
	c10::reportMemoryUsageToProfiler((void *)p, size, allocated, reserved, cuda);
}

/* A free piece of size bytes in seg, split off its free block. */
Block *take(Segment *seg, size_t size)
{
	for (int i = 0; i < seg->n; i++) {
		Block *b = &seg->blocks[i];
		if (b->used || b->size < size)
			continue;
		if (b->size > size && seg->n < 64) {
			memmove(b + 2, b + 1, (seg->n - i - 1) * sizeof(*b));
			b[1] = { b->ptr + size, b->size - size, false };
			b->size = size;
			seg->n++;
		}
		b->used = true;
		return b;
	}
	return nullptr;
}

}  // namespace

extern "C" void *fake_cuda_malloc(size_t n)
{
	init();
	size_t size = (n + kMinBlock - 1) / kMinBlock * kMinBlock;
	if (!size)
		size = kMinBlock;
	Block *b = nullptr;
	for (int s = 0; s < n_segments && !b; s++)
		b = take(&segments[s], size);
	if (!b && n_segments < 64) {
		Segment *seg = &segments[n_segments];
		seg->size = size <= kSmall ? kSmallSegment : (size + kRound - 1) / kRound * kRound;
		if (mem_alloc(&seg->base, seg->size) != 0)
			return nullptr;
		seg->blocks[0] = { seg->base, seg->size, false };
		seg->n = 1;
		n_segments++;
		reserved += seg->size;
		b = take(seg, size);
	}
	if (!b)
		return nullptr;
	allocated += b->size;
	report(b->ptr, (int64_t)b->size);
	return (void *)b->ptr;
}

extern "C" void fake_cuda_free(void *p)
{
	for (int s = 0; s < n_segments; s++)
		for (int i = 0; i < segments[s].n; i++) {
			Block *b = &segments[s].blocks[i];
			if (b->ptr != (CUdeviceptr)p || !b->used)
				continue;
			allocated -= b->size;
			report(b->ptr, -(int64_t)b->size);
			b->used = false;
			return;
		}
}

/* torch.cuda.memory_allocated() and memory_reserved(). */
extern "C" size_t fake_cuda_allocated(void)
{
	return allocated;
}

extern "C" size_t fake_cuda_reserved(void)
{
	return reserved;
}

/* Returns the segments no block uses to the driver. */
extern "C" void fake_cuda_empty_cache(void)
{
	int kept = 0;
	for (int s = 0; s < n_segments; s++) {
		bool used = false;
		for (int i = 0; i < segments[s].n; i++)
			used = used || segments[s].blocks[i].used;
		if (used) {
			segments[kept++] = segments[s];
			continue;
		}
		reserved -= segments[s].size;
		mem_free(segments[s].base);
	}
	n_segments = kept;
}
