/* torch_hooks/hooks.c - the exported entry points of the PyTorch room:
 * c10::reportMemoryUsageToProfiler in its 1.x and 2.x manglings.  PyTorch's
 * CUDA caching allocator calls it for every block it hands out (+size) and
 * takes back (-size), whether or not torch.profiler runs; memline records
 * each CUDA block as a torch_cuda allocation with the caller's stack (the
 * Python line and the ATen op), then forwards the call to libc10's own
 * definition, so that torch.profiler keeps its memory events. */
#include "torch_hooks/internal.h"

/* Inlined into each hook: the stack walk starts at the hook's frame.  The
 * allocator holds its mutex here: record only (no lock of ours is held
 * long, nothing calls back into PyTorch). */
static inline __attribute__((always_inline)) void record(void *ptr, int64_t size,
							  struct ml_c10_device device)
{
	if (device.type != ML_C10_CUDA || !ptr || !size) {
		/* The CPU allocator reports only while torch.profiler profiles
		 * memory; CPU tensors are heap blocks memline has already. */
		__atomic_fetch_add(&ml_torch.other_reports, 1, __ATOMIC_RELAXED);
		return;
	}
	if (!ml_guard_enter())
		return;
	if (size > 0) {
		ML_UNWIND_MARK();
		ml_track_alloc(ptr, (size_t)size, ML_KIND_TORCH_CUDA);
		ml_unwind_unmark();
		__atomic_fetch_add(&ml_torch.block_allocs, 1, __ATOMIC_RELAXED);
	} else {
		ml_track_free(ptr, ML_KIND_TORCH_CUDA);
		__atomic_fetch_add(&ml_torch.block_frees, 1, __ATOMIC_RELAXED);
	}
	ml_guard_exit();
}

/* c10::reportMemoryUsageToProfiler(void*, long, long, long, c10::Device): 1.x */
ML_EXPORT void _ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE(
	void *ptr, int64_t size, int64_t allocated, int64_t reserved, struct ml_c10_device device)
{
	ml_torch_flag(ML_TORCH_SIG_113);
	record(ptr, size, device);
	ml_c10_report_fn fn = ml_torch_real(ML_TORCH_V1);
	if (fn)
		fn(ptr, size, (uint64_t)allocated, (uint64_t)reserved, device);
}

/* c10::reportMemoryUsageToProfiler(void*, long, unsigned long, unsigned long,
 * c10::Device): 2.x */
ML_EXPORT void _ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE(
	void *ptr, int64_t size, uint64_t allocated, uint64_t reserved, struct ml_c10_device device)
{
	ml_torch_flag(ML_TORCH_SIG_2);
	record(ptr, size, device);
	ml_c10_report_fn fn = ml_torch_real(ML_TORCH_V2);
	if (fn)
		fn(ptr, size, allocated, reserved, device);
}
