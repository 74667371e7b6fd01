/* cuda_hooks/internal.h - private to cuda_hooks/: the table of hooked
 * functions and what the hooks (hooks.c) share with finding the real
 * functions (dlsym.c), wrapping what cuGetProcAddress hands out
 * (procaddr.c) and recording blocks (record.c).  Not for other modules. */
#ifndef ML_CUDA_INTERNAL_H
#define ML_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/core.h"
#include "cuda_hooks/driver.h"

#define K_DEVICE ML_KIND_CUDA_DEVICE
#define K_MANAGED ML_KIND_CUDA_MANAGED
#define K_PINNED ML_KIND_CUDA_PINNED
#define K_POOL ML_KIND_CUDA_POOL
#define K_VMM ML_KIND_CUDA_VMM
#define K_ARRAY ML_KIND_CUDA_ARRAY
#define K_MAPPED ML_KIND_CUDA_MAPPED
#define K_RESERVED ML_KIND_CUDA_RESERVED
#define K_GPU ML_KIND_CUDA_GPU
#define BIT(k) (1u << (k))
/* The kinds added into the combined GPU total (K_GPU): GPU memory the
 * program owns (common/kinds.h).  Not pinned host memory, not VMM mappings
 * (views of VMM physical memory) or reservations (address space only). */
#define GPU_KINDS ML_KIND_GPU_MASK
/* What cuMemFree / cudaFree / the async frees may release. */
#define FREEABLE (BIT(K_DEVICE) | BIT(K_MANAGED) | BIT(K_POOL))
/* What a context owns and takes along when it is destroyed. */
#define CTX_KINDS (BIT(K_DEVICE) | BIT(K_MANAGED) | BIT(K_PINNED) | BIT(K_POOL) | BIT(K_ARRAY))

/* ------------------------------------------------------------ the hook table
 * X(id, exported symbol, base name given to cuGetProcAddress, lowest
 *   cudaVersion that resolves the base name to this symbol, first version
 *   that no longer does (0: none), stream variant: -1 any, 0 legacy, 1 _ptsz) */
#define ML_CUDA_DRIVER_HOOKS(X) \
	X(H_MEM_ALLOC, cuMemAlloc_v2, "cuMemAlloc", 3020, 0, -1) \
	X(H_MEM_ALLOC_PITCH, cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0, -1) \
	X(H_MEM_FREE, cuMemFree_v2, "cuMemFree", 3020, 0, -1) \
	X(H_MEM_ALLOC_MANAGED, cuMemAllocManaged, "cuMemAllocManaged", 0, 0, -1) \
	X(H_MEM_HOST_ALLOC, cuMemHostAlloc, "cuMemHostAlloc", 0, 0, -1) \
	X(H_MEM_ALLOC_HOST, cuMemAllocHost_v2, "cuMemAllocHost", 3020, 0, -1) \
	X(H_MEM_FREE_HOST, cuMemFreeHost, "cuMemFreeHost", 0, 0, -1) \
	X(H_MEM_HOST_REGISTER_V2, cuMemHostRegister_v2, "cuMemHostRegister", 6050, 0, -1) \
	X(H_MEM_HOST_REGISTER, cuMemHostRegister, "cuMemHostRegister", 0, 6050, -1) \
	X(H_MEM_HOST_UNREGISTER, cuMemHostUnregister, "cuMemHostUnregister", 0, 0, -1) \
	X(H_ARRAY_CREATE, cuArrayCreate_v2, "cuArrayCreate", 3020, 0, -1) \
	X(H_ARRAY3D_CREATE, cuArray3DCreate_v2, "cuArray3DCreate", 3020, 0, -1) \
	X(H_ARRAY_DESTROY, cuArrayDestroy, "cuArrayDestroy", 0, 0, -1) \
	X(H_MEM_ALLOC_ASYNC, cuMemAllocAsync, "cuMemAllocAsync", 0, 0, 0) \
	X(H_MEM_ALLOC_ASYNC_PTSZ, cuMemAllocAsync_ptsz, "cuMemAllocAsync", 0, 0, 1) \
	X(H_MEM_ALLOC_POOL_ASYNC, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0, 0, 0) \
	X(H_MEM_ALLOC_POOL_ASYNC_PTSZ, cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 0, 0, 1) \
	X(H_MEM_FREE_ASYNC, cuMemFreeAsync, "cuMemFreeAsync", 0, 0, 0) \
	X(H_MEM_FREE_ASYNC_PTSZ, cuMemFreeAsync_ptsz, "cuMemFreeAsync", 0, 0, 1) \
	X(H_MEM_POOL_TRIM_TO, cuMemPoolTrimTo, "cuMemPoolTrimTo", 0, 0, -1) \
	X(H_MEM_POOL_DESTROY, cuMemPoolDestroy, "cuMemPoolDestroy", 0, 0, -1) \
	X(H_MEM_CREATE, cuMemCreate, "cuMemCreate", 0, 0, -1) \
	X(H_MEM_RELEASE, cuMemRelease, "cuMemRelease", 0, 0, -1) \
	X(H_MEM_MAP, cuMemMap, "cuMemMap", 0, 0, -1) \
	X(H_MEM_UNMAP, cuMemUnmap, "cuMemUnmap", 0, 0, -1) \
	X(H_MEM_ADDRESS_RESERVE, cuMemAddressReserve, "cuMemAddressReserve", 0, 0, -1) \
	X(H_MEM_ADDRESS_FREE, cuMemAddressFree, "cuMemAddressFree", 0, 0, -1) \
	X(H_GRAPH_ADD_MEM_ALLOC, cuGraphAddMemAllocNode, "cuGraphAddMemAllocNode", 0, 0, -1) \
	X(H_GRAPH_ADD_MEM_FREE, cuGraphAddMemFreeNode, "cuGraphAddMemFreeNode", 0, 0, -1) \
	X(H_CTX_DESTROY, cuCtxDestroy_v2, "cuCtxDestroy", 4000, 0, -1) \
	X(H_PRIMARY_RETAIN, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0, 0, -1) \
	X(H_PRIMARY_RESET_V2, cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, 0, -1) \
	X(H_PRIMARY_RESET, cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", 0, 11000, -1) \
	X(H_GPA, cuGetProcAddress, "cuGetProcAddress", 0, 12000, -1) \
	X(H_GPA_V2, cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0, -1)

/* Driver calls that allocate no memory the program owns but may malloc
 * host memory for the driver's own state (a context, a loaded module, a
 * stream, an event): hooked only to hold the guard, so that those mallocs
 * are not charged to the program's line.  Each has at most six integer or
 * pointer arguments and returns CUresult: one generic forwarder passes the
 * six argument registers through (x86-64 SysV), so the wrapper is right for
 * whichever revision of the function the driver hands out.  Same columns as
 * above; lookups of a base name spread over the hooks sharing it. */
#define ML_CUDA_GUARD_HOOKS(X) \
	X(G_INIT, cuInit, "cuInit", 0, 0, -1) \
	X(G_CTX_CREATE_V2, cuCtxCreate_v2, "cuCtxCreate", 3020, 0, -1) \
	X(G_CTX_CREATE_V3, cuCtxCreate_v3, "cuCtxCreate", 3020, 0, -1) \
	X(G_CTX_CREATE_V4, cuCtxCreate_v4, "cuCtxCreate", 3020, 0, -1) \
	X(G_MODULE_LOAD, cuModuleLoad, "cuModuleLoad", 0, 0, -1) \
	X(G_MODULE_LOAD_DATA, cuModuleLoadData, "cuModuleLoadData", 0, 0, -1) \
	X(G_MODULE_LOAD_DATA_EX, cuModuleLoadDataEx, "cuModuleLoadDataEx", 0, 0, -1) \
	X(G_MODULE_LOAD_FATBIN, cuModuleLoadFatBinary, "cuModuleLoadFatBinary", 0, 0, -1) \
	X(G_MODULE_UNLOAD, cuModuleUnload, "cuModuleUnload", 0, 0, -1) \
	X(G_STREAM_CREATE, cuStreamCreate, "cuStreamCreate", 0, 0, -1) \
	X(G_STREAM_CREATE_PRIO, cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 0, 0, -1) \
	X(G_EVENT_CREATE, cuEventCreate, "cuEventCreate", 0, 0, -1) \
	X(G_GRAPH_CREATE, cuGraphCreate, "cuGraphCreate", 0, 0, -1) \
	X(G_GRAPH_DESTROY, cuGraphDestroy, "cuGraphDestroy", 0, 0, -1) \
	X(G_GRAPH_MEM_TRIM, cuDeviceGraphMemTrim, "cuDeviceGraphMemTrim", 0, 0, -1)

/* The runtime's symbols (shared libcudart only): exported, never handed out
 * by cuGetProcAddress. */
#define ML_CUDA_RUNTIME_HOOKS(X) \
	X(R_MALLOC, cudaMalloc) \
	X(R_MALLOC_MANAGED, cudaMallocManaged) \
	X(R_MALLOC_PITCH, cudaMallocPitch) \
	X(R_MALLOC_HOST, cudaMallocHost) \
	X(R_HOST_ALLOC, cudaHostAlloc) \
	X(R_FREE_HOST, cudaFreeHost) \
	X(R_HOST_REGISTER, cudaHostRegister) \
	X(R_HOST_UNREGISTER, cudaHostUnregister) \
	X(R_FREE, cudaFree) \
	X(R_MALLOC_ASYNC, cudaMallocAsync) \
	X(R_MALLOC_ASYNC_PTSZ, cudaMallocAsync_ptsz) \
	X(R_MALLOC_POOL_ASYNC, cudaMallocFromPoolAsync) \
	X(R_MALLOC_POOL_ASYNC_PTSZ, cudaMallocFromPoolAsync_ptsz) \
	X(R_FREE_ASYNC, cudaFreeAsync) \
	X(R_FREE_ASYNC_PTSZ, cudaFreeAsync_ptsz)

#define ENUM_D(id, sym, base, vmin, vmax, stream) id,
enum { ML_CUDA_DRIVER_HOOKS(ENUM_D) ML_CUDA_GUARD_HOOKS(ENUM_D) H_COUNT };
#define ENUM_R(id, sym) id,
enum { ML_CUDA_RUNTIME_HOOKS(ENUM_R) R_COUNT };

#define PROC_SLOTS 2
struct hook {
	const char *sym;
	const char *base;
	int vmin, vmax;
	int stream;
	/* What cuGetProcAddress / dlsym hand out, and the driver's function
	 * behind each.  Two slots: a driver may give a different address for
	 * the same function through dlsym and through cuGetProcAddress. */
	void *proc_wrap[PROC_SLOTS];
	void *volatile proc_real[PROC_SLOTS];
	void *export_wrap;		/* our exported symbol of the same name */
	void *volatile export_real;	/* dlsym(RTLD_NEXT, sym), for export_wrap */
	bool guard_only;		/* ML_CUDA_GUARD_HOOKS: generic forwarder */
};
/* The hook table, one row per X of ML_CUDA_DRIVER_HOOKS and
 * ML_CUDA_GUARD_HOOKS; defined in hooks.c next to the wrappers it names. */
extern struct hook ml_cuda_hooks[H_COUNT];

/* ---- dlsym.c: the real definitions ---- */

/* The real dlsym (NULL until found); the trampoline in hooks.c jumps to it. */
extern void *(*ml_cuda_real_dlsym)(void *, const char *);
/* Finds the real dlsym once (GLIBC_2.34, else GLIBC_2.2.5). */
void ml_cuda_resolve_real_dlsym(void);
/* Our dlsym(RTLD_NEXT, sym): the call comes from inside libmemline. */
void *ml_cuda_next_sym(const char *sym);
/* The real definition behind our exported sym (ours: our export), or NULL. */
void *ml_cuda_find_real(const char *sym, void *ours);
/* The trampoline's two halves: whether dlsym of name is ours to answer,
 * and the answer (the real symbol, or our wrapper for it). */
int ml_cuda_dlsym_wants(const char *name);
void *ml_cuda_dlsym_hooked(void *handle, const char *name);

/* ---- procaddr.c: wrapping the driver's functions ---- */

/* The driver's own cuGetProcAddress entry points, when seen. */
extern void *volatile ml_cuda_gpa_v1_real, *volatile ml_cuda_gpa_v2_real;
/* MEMLINE_CUDA_TRACE=1: one line on stderr per driver function wrapped. */
extern int ml_cuda_trace;
/* The hook whose sym is name, or -1. */
int ml_cuda_hook_by_sym(const char *name);
/* Hands out h's wrapper for the driver's function real, or real itself when
 * h already stands for other functions (then the call is not counted). */
void *ml_cuda_claim(struct hook *h, void *real);
/* The hook for a successful lookup of symbol, or -1. */
int ml_cuda_hook_for_lookup(const char *symbol, int version, uint64_t flags, void *real);

/* ---- record.c: what the hooks record (guard held by the caller) ---- */

/* The calling thread's current context (NULL if none or unknown). */
void *ml_cuda_current_ctx(void);
/* Records a block of kind at addr (nothing for addr 0). */
void ml_cuda_note_alloc(uint64_t addr, size_t size, uint32_t kind, bool with_ctx);

/* A free in progress: the block is out of both tables until it ends. */
struct pending {
	struct ml_track_held held;
	struct ml_track_held gpu;	/* its entry in the GPU total, if any */
	uint32_t kind;
	void *ctx;
	bool in_blocks;
};

/* A free in two steps around the real call: begin takes the block at addr
 * (one of kinds) out of the tables; end releases it (ok) or puts it back. */
void ml_cuda_free_begin(uint64_t addr, uint32_t kinds, struct pending *p);
void ml_cuda_free_end(uint64_t addr, const struct pending *p, bool ok);
/* ml_cuda_blocks_sweep's callback: frees one block of a dead context. */
void ml_cuda_sweep_one(uint64_t addr, uint32_t kind, void *arg);
/* The logical size of a CUDA array, width x height x depth x channels x element. */
size_t ml_cuda_array_bytes(size_t w, size_t h, size_t d, int format, unsigned int channels);

#endif
