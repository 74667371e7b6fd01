/* common/kinds.h - the allocation kinds: the one table the runtime, the
 * profile format and the report share.  Counters, totals and peaks are kept
 * per kind.  A new kind is one line here (and a word in docs/format.md). */
#ifndef ML_COMMON_KINDS_H
#define ML_COMMON_KINDS_H

#include <stdbool.h>
#include <string.h>

/* X(ENUM, value, "name", gpu): value is the kind's number in the profile
 * (never reuse one); name is what `memline report --kind` and the JSON use;
 * gpu is 1 for GPU memory the program owns (added into ML_KIND_CUDA_GPU and
 * into the report's CUDA columns). */
#define ML_KINDS(X) \
	X(HEAP, 0, "heap", 0)			/* malloc family, C++ new, jemalloc API */ \
	X(CUDA_DEVICE, 1, "cuda_device", 1) \
	X(CUDA_MANAGED, 2, "cuda_managed", 1) \
	X(CUDA_PINNED, 3, "cuda_pinned", 0)	/* page-locked host memory */ \
	X(CUDA_POOL, 4, "cuda_pool", 1)		/* stream-ordered allocations */ \
	X(CUDA_VMM, 5, "cuda_vmm", 1)		/* physical bytes from cuMemCreate */ \
	X(CUDA_ARRAY, 6, "cuda_array", 1) \
	X(CUDA_MAPPED, 7, "cuda_mapped", 0)	/* VMM address ranges mapped by cuMemMap */ \
	X(CUDA_RESERVED, 8, "cuda_reserved", 0)	/* VMM address space from cuMemAddressReserve */ \
	/* Pseudo-kind: every block of the GPU kinds counted a second time under \
	 * one total, so that the combined GPU peak and each stack's bytes live \
	 * at it are exact.  Not added to any sum over kinds (docs/format.md). */ \
	X(CUDA_GPU, 9, "cuda_gpu", 0) \
	/* PyTorch's CUDA blocks: what its caching allocator hands out (one per \
	 * tensor storage, rounded as PyTorch rounds), from its own reports \
	 * (torch_hooks/).  They live inside cuda_device / cuda_vmm segments, \
	 * so they are never added to those (docs/torch.md). */ \
	X(TORCH_CUDA, 10, "torch_cuda", 0) \
	/* Events, not memory: each free of a CPU tensor's storage (c10::free_cpu) \
	 * and of a PyTorch CUDA block, counted as an "allocation" of the bytes \
	 * freed at the stack that freed them, and released at once.  The report \
	 * subtracts them to get what an op or line allocated net, as \
	 * torch.profiler counts it; no view lists them as memory. */ \
	X(TORCH_CPU_FREED, 11, "torch_cpu_freed", 0) \
	X(TORCH_CUDA_FREED, 12, "torch_cuda_freed", 0)

#define ML_KIND_ENUM_(id, value, name, gpu) ML_KIND_##id = value,
enum ml_kind {
	ML_KINDS(ML_KIND_ENUM_)
	ML_KIND_COUNT
};
#undef ML_KIND_ENUM_

/* Bit k set: kind k is GPU memory the program owns. */
#define ML_KIND_GPU_BIT_(id, value, name, gpu) | ((gpu) ? 1u << (value) : 0u)
#define ML_KIND_GPU_MASK (0u ML_KINDS(ML_KIND_GPU_BIT_))

#define ML_KIND_NAME_(id, value, name, gpu) [value] = name,
/* The kind's name ("heap", "cuda_device", ...), or "unknown". */
static inline const char *ml_kind_name(enum ml_kind kind)
{
	static const char *const names[ML_KIND_COUNT] = { ML_KINDS(ML_KIND_NAME_) };
	return (unsigned)kind < ML_KIND_COUNT ? names[kind] : "unknown";
}

/* The kind called name, or -1. */
static inline int ml_kind_parse(const char *name)
{
	for (int k = 0; k < ML_KIND_COUNT; k++)
		if (strcmp(ml_kind_name((enum ml_kind)k), name) == 0)
			return k;
	return -1;
}

/* True for GPU memory the program owns (device, managed, pool, VMM
 * physical, arrays): not pinned host memory, mappings or reservations. */
static inline bool ml_kind_is_gpu(enum ml_kind kind)
{
	return (unsigned)kind < ML_KIND_COUNT && (ML_KIND_GPU_MASK >> kind) & 1u;
}

/* True for the kinds that count events at the stack that freed memory
 * (torch_cpu_freed, torch_cuda_freed), not memory held: views of memory
 * leave them out. */
static inline bool ml_kind_is_event(enum ml_kind kind)
{
	return kind == ML_KIND_TORCH_CPU_FREED || kind == ML_KIND_TORCH_CUDA_FREED;
}

#endif
