/* common/kinds.h - the allocation kinds: the one table the runtime, the
 * profile format and the report share.  Counters, totals and peaks are kept
 * per kind.  A new kind is one line here (and a word in docs/format.md). */
#ifndef ML_COMMON_KINDS_H
#define ML_COMMON_KINDS_H

#include <stdbool.h>
#include <string.h>

/* X(ENUM, value, "name", gpu, cuda, peak, derived): value is the kind's
 * number in the profile (never reuse one); name is what `memline report
 * --kind` and the JSON use; gpu is 1 for GPU memory the program owns (added
 * into ML_KIND_CUDA_GPU and into the report's CUDA columns); cuda is 1 for
 * the CUDA kinds (the views' CUDA sections); peak is the kind whose peak
 * it shares: the runtime keeps one total for a kind and those that name it,
 * so each one's bytes at that peak add up exactly (heap and python: the CPU
 * peak); derived is 1 for a kind the report makes (never in a file). */
#define ML_KINDS(X) \
	X(HEAP, 0, "heap", 0, 0, 0, 0)		/* malloc family, C++ new, jemalloc API */ \
	X(CUDA_DEVICE, 1, "cuda_device", 1, 1, 1, 0) \
	X(CUDA_MANAGED, 2, "cuda_managed", 1, 1, 2, 0) \
	X(CUDA_PINNED, 3, "cuda_pinned", 0, 1, 3, 0)	/* page-locked host memory */ \
	X(CUDA_POOL, 4, "cuda_pool", 1, 1, 4, 0)	/* stream-ordered allocations */ \
	X(CUDA_VMM, 5, "cuda_vmm", 1, 1, 5, 0)	/* physical bytes from cuMemCreate */ \
	X(CUDA_ARRAY, 6, "cuda_array", 1, 1, 6, 0) \
	X(CUDA_MAPPED, 7, "cuda_mapped", 0, 1, 7, 0)	/* VMM ranges mapped by cuMemMap */ \
	X(CUDA_RESERVED, 8, "cuda_reserved", 0, 1, 8, 0)	/* VMM space from cuMemAddressReserve */ \
	/* Pseudo-kind: every block of the GPU kinds counted a second time under \
	 * one total, so that the combined GPU peak and each stack's bytes live \
	 * at it are exact.  Not added to any sum over kinds (docs/format.md). */ \
	X(CUDA_GPU, 9, "cuda_gpu", 0, 1, 9, 0) \
	/* Python objects: blocks of the interpreter's PyMem domains (RAW, MEM, \
	 * OBJ) at the size asked for, as tracemalloc counts them; the malloc \
	 * such a block makes is not also heap.  Its peak is the heap's. */ \
	X(PYTHON, 10, "python", 0, 0, 0, 0) \
	/* What the interpreter maps through its arena allocator: pymalloc's \
	 * arenas (holding the small Python objects) and 3.11+ frame stacks. \
	 * Never added to the objects inside them. */ \
	X(PY_ARENA, 11, "pyarena", 0, 0, 11, 0) \
	/* Derived by the report: heap + python, all CPU memory the program \
	 * asked for (at the CPU peak, exactly). */ \
	X(CPU, 12, "cpu", 0, 0, 0, 1) \
	/* PyTorch's CUDA blocks: what its caching allocator hands out (one per \
	 * tensor storage, rounded as PyTorch rounds), from its own reports \
	 * (torch_hooks/).  They live inside cuda_device / cuda_vmm segments, \
	 * so they are never added to those (docs/torch.md). */ \
	X(TORCH_CUDA, 13, "torch_cuda", 0, 1, 13, 0) \
	/* Events, not memory: each free of a CPU tensor's storage (c10::free_cpu) \
	 * and of a PyTorch CUDA block, counted as an "allocation" of the bytes \
	 * freed at the stack that freed them, and released at once.  The report \
	 * subtracts them to get what an op or line allocated net, as \
	 * torch.profiler counts it; no view lists them as memory. */ \
	X(TORCH_CPU_FREED, 14, "torch_cpu_freed", 0, 0, 14, 0) \
	X(TORCH_CUDA_FREED, 15, "torch_cuda_freed", 0, 1, 15, 0)

#define ML_KIND_ENUM_(id, value, name, gpu, cuda, peak, derived) ML_KIND_##id = value,
enum ml_kind {
	ML_KINDS(ML_KIND_ENUM_)
	ML_KIND_COUNT
};
#undef ML_KIND_ENUM_

/* Bit k set: kind k is GPU memory the program owns; a CUDA kind; derived. */
#define ML_KIND_GPU_BIT_(id, value, name, gpu, cuda, peak, derived) | ((gpu) ? 1u << (value) : 0u)
#define ML_KIND_GPU_MASK (0u ML_KINDS(ML_KIND_GPU_BIT_))
#define ML_KIND_CUDA_BIT_(id, value, name, gpu, cuda, peak, derived) | ((cuda) ? 1u << (value) : 0u)
#define ML_KIND_CUDA_MASK (0u ML_KINDS(ML_KIND_CUDA_BIT_))
#define ML_KIND_DERIVED_BIT_(id, value, name, gpu, cuda, peak, derived) \
	| ((derived) ? 1u << (value) : 0u)
#define ML_KIND_DERIVED_MASK (0u ML_KINDS(ML_KIND_DERIVED_BIT_))

#define ML_KIND_PEAK_(id, value, name, gpu, cuda, peak, derived) [value] = peak,
/* The kind whose total (and peak) kind's events go to: itself, or the
 * kind it shares its peak with. */
static inline enum ml_kind ml_kind_peak_of(enum ml_kind kind)
{
	static const unsigned char peak[ML_KIND_COUNT] = { ML_KINDS(ML_KIND_PEAK_) };
	return (unsigned)kind < ML_KIND_COUNT ? (enum ml_kind)peak[kind] : kind;
}
#undef ML_KIND_PEAK_

#define ML_KIND_NAME_(id, value, name, gpu, cuda, peak, derived) [value] = name,
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

/* True for the CUDA kinds (the CUDA_GPU total included). */
static inline bool ml_kind_is_cuda(enum ml_kind kind)
{
	return (unsigned)kind < ML_KIND_COUNT && (ML_KIND_CUDA_MASK >> kind) & 1u;
}

/* True for a kind the report derives from others (never in a profile). */
static inline bool ml_kind_is_derived(enum ml_kind kind)
{
	return (unsigned)kind < ML_KIND_COUNT && (ML_KIND_DERIVED_MASK >> kind) & 1u;
}

#endif
