/* torch_hooks/hooks.c - the exported entry points of the PyTorch room, all
 * of them functions of PyTorch's libc10 that memline defines first:
 *   - c10::reportMemoryUsageToProfiler, in its 1.x and 2.x manglings.
 *     PyTorch's CUDA caching allocator calls it for every block it hands
 *     out (+size) and takes back (-size), whether or not torch.profiler
 *     runs: memline records each CUDA block as a torch_cuda allocation with
 *     the caller's stack (the Python line and the ATen op), and each block
 *     freed as a torch_cuda_freed event at the stack that freed it;
 *   - c10::free_cpu, which frees a CPU tensor's storage: a torch_cpu_freed
 *     event at the freeing stack (the storage itself is a heap block,
 *     recorded by the allocation hooks under c10::alloc_cpu).
 * The free events let the report count what an op allocated net, as
 * torch.profiler does.  Each hook then calls libc10's own definition. */
#include <stdlib.h>
#include "torch_hooks/internal.h"

/* A free of size bytes at ptr, as an event at this stack.  Guard held;
 * inlined into the hooks, so the walk starts at the hook's frame. */
static inline __attribute__((always_inline)) void freed_event(void *ptr, uint64_t size,
							       enum ml_kind kind)
{
	ML_UNWIND_MARK();
	ml_track_alloc(ptr, size, kind);
	ml_unwind_unmark();
	ml_track_free(ptr, kind);
	/* An event, not an allocation of this thread's (regions count those). */
	ml_tl_alloc_bytes -= size;
	ml_tl_allocs--;
}

/* The allocator holds its mutex here: record only (no lock of ours is held
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
		/* A block is carved out of a segment the driver hooks counted:
		 * no new memory of this thread's (regions count those). */
		ml_tl_alloc_bytes -= (uint64_t)size;
		ml_tl_allocs--;
		__atomic_fetch_add(&ml_torch.block_allocs, 1, __ATOMIC_RELAXED);
	} else {
		freed_event(ptr, (uint64_t)-size, ML_KIND_TORCH_CUDA_FREED);
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
	ml_c10_report_fn fn = (ml_c10_report_fn)ml_torch_real(ML_TORCH_REPORT_V1);
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
	ml_c10_report_fn fn = (ml_c10_report_fn)ml_torch_real(ML_TORCH_REPORT_V2);
	if (fn)
		fn(ptr, size, allocated, reserved, device);
}

/* c10::free_cpu(void*) */
ML_EXPORT void _ZN3c108free_cpuEPv(void *ptr)
{
	struct ml_track_held block;
	if (ptr && ml_guard_enter()) {
		/* The heap block's size, from the live table (taken out and put
		 * back: the real free below records its release). */
		if (ml_track_detach(ptr, ML_KIND_HEAP, &block)) {
			ml_track_reattach(&block);
			freed_event(ptr, block.size, ML_KIND_TORCH_CPU_FREED);
			__atomic_fetch_add(&ml_torch.tensor_frees, 1, __ATOMIC_RELAXED);
		}
		ml_guard_exit();
	}
	ml_c10_free_fn fn = (ml_c10_free_fn)ml_torch_real(ML_TORCH_FREE_CPU);
	if (fn)
		fn(ptr);
	else
		free(ptr);	/* what c10::free_cpu does on Linux */
}
