/* cuda_hooks/hooks.c - CUDA memory interception, and nothing else.
 *
 * Three doors lead to the driver's allocation functions, and each is hooked:
 *  1. cuGetProcAddress / cuGetProcAddress_v2: how the CUDA runtime (static or
 *     shared) and PyTorch find every driver function.  We interpose dlsym for
 *     the exact names of the hooked functions (through an assembly trampoline
 *     that tail-jumps to the real dlsym for every other name, so that
 *     RTLD_NEXT still resolves relative to the real caller), and wrap what
 *     cuGetProcAddress returns, keyed by (name, version, flags); its lookup of
 *     itself returns our wrapper too.
 *  2. The exported cu* symbols, for programs linked with -lcuda.
 *  3. The runtime's cuda* symbols, for programs linked with a shared libcudart.
 * Nested doors (cudaMalloc calling cuMemAlloc_v2) count once: the outer hook
 * holds the reentrancy guard during the real call, so the inner one passes
 * through, and so do the host mallocs the CUDA libraries make meanwhile.
 *
 * Only exact names are touched: nothing else starting with cu (cuBLAS, cuDNN),
 * never cuGetExportTable.  When a driver hands out a function whose ABI we
 * cannot be sure of (an older version of the symbol, an unexpected pointer),
 * it is returned untouched: the program always gets the real behaviour.
 *
 * The hook table is in internal.h; finding real definitions in dlsym.c,
 * wrapping what cuGetProcAddress hands out in procaddr.c, recording in
 * record.c.  This file holds the exported entry points and their bodies. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include "cuda_hooks/blocks.h"
#include "cuda_hooks/driver.h"
#include "cuda_hooks/internal.h"

static const char *const runtime_syms[R_COUNT] = {
#define NAME_R(id, sym) #sym,
	ML_CUDA_RUNTIME_HOOKS(NAME_R)
};
static void *volatile runtime_real[R_COUNT];
static void *const runtime_exports[R_COUNT];	/* our exported functions, below */

/* --------------------------------------------------------------- dlsym
 * The real dlsym, and the trampoline that replaces it.  The trampoline asks
 * ml_cuda_dlsym_wants(name); for any name we do not hook it jumps to the
 * real dlsym with the caller's return address untouched (dlsym resolves
 * RTLD_NEXT and RTLD_DEFAULT relative to its caller). */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	".p2align 4\n"
	"dlsym:\n"
	".cfi_startproc\n"
	"pushq %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"pushq %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"subq $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"movq %rsi, %rdi\n"
	"call ml_cuda_dlsym_wants\n"
	"addq $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"popq %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"popq %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"testl %eax, %eax\n"
	"jnz 1f\n"
	"jmp *ml_cuda_real_dlsym(%rip)\n"
	"1:\n"
	"jmp ml_cuda_dlsym_hooked\n"
	".cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#endif

/* ------------------------------------------------------------ the guard */

static inline void guard_release(bool *held)
{
	if (*held)
		ml_guard_exit();
}

/* Takes the guard for the scope: the real call runs with it held, so nested
 * hooks and the CUDA libraries' own mallocs are not recorded. */
#define GUARD bool held __attribute__((cleanup(guard_release))) = ml_guard_enter()

/* The real function: the export's (found with dlsym RTLD_NEXT) or the one
 * the driver handed out. */
static void *export_real(int id)
{
	struct hook *h = &ml_cuda_hooks[id];
	if (!h->export_real)
		h->export_real = ml_cuda_find_real(h->sym, h->export_wrap);
	return h->export_real;
}

/* Export and cuGetProcAddress twins of one implementation: R is the real
 * function inside the body given as args. */
#define PAIR(id, impl, name, params, args) \
	ML_EXPORT CUresult name params \
	{ \
		void *R = export_real(id); \
		return impl args; \
	} \
	static CUresult p_##name params \
	{ \
		void *R = ml_cuda_hooks[id].proc_real[0]; \
		return impl args; \
	} \
	static CUresult q_##name params \
	{ \
		void *R = ml_cuda_hooks[id].proc_real[1]; \
		return impl args; \
	}

#define NOT_READY(r) if (!(r)) return ML_CUDA_ERROR_NOT_INITIALIZED

/* ---- device, managed, pinned host: allocate, then record ---- */

typedef CUresult (*dptr_size_fn)(CUdeviceptr *, size_t);
static CUresult mem_alloc(void *real, CUdeviceptr *d, size_t size)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((dptr_size_fn)real)(d, size);
	if (held && rc == ML_CUDA_SUCCESS && d)
		ml_cuda_note_alloc(*d, size, K_DEVICE, true);
	return rc;
}
PAIR(H_MEM_ALLOC, mem_alloc, cuMemAlloc_v2, (CUdeviceptr *d, size_t s), (R, d, s))

typedef CUresult (*pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
static CUresult mem_alloc_pitch(void *real, CUdeviceptr *d, size_t *pitch, size_t w, size_t h,
				unsigned int elem)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((pitch_fn)real)(d, pitch, w, h, elem);
	if (held && rc == ML_CUDA_SUCCESS && d && pitch)
		ml_cuda_note_alloc(*d, *pitch * h, K_DEVICE, true);
	return rc;
}
PAIR(H_MEM_ALLOC_PITCH, mem_alloc_pitch, cuMemAllocPitch_v2,
     (CUdeviceptr *d, size_t *p, size_t w, size_t h, unsigned int e), (R, d, p, w, h, e))

typedef CUresult (*managed_fn)(CUdeviceptr *, size_t, unsigned int);
static CUresult mem_alloc_managed(void *real, CUdeviceptr *d, size_t size, unsigned int flags)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((managed_fn)real)(d, size, flags);
	if (held && rc == ML_CUDA_SUCCESS && d)
		ml_cuda_note_alloc(*d, size, K_MANAGED, true);
	return rc;
}
PAIR(H_MEM_ALLOC_MANAGED, mem_alloc_managed, cuMemAllocManaged,
     (CUdeviceptr *d, size_t s, unsigned int f), (R, d, s, f))

typedef CUresult (*host_alloc_fn)(void **, size_t, unsigned int);
static CUresult mem_host_alloc(void *real, void **pp, size_t size, unsigned int flags)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((host_alloc_fn)real)(pp, size, flags);
	if (held && rc == ML_CUDA_SUCCESS && pp)
		ml_cuda_note_alloc((uintptr_t)*pp, size, K_PINNED, true);
	return rc;
}
PAIR(H_MEM_HOST_ALLOC, mem_host_alloc, cuMemHostAlloc, (void **p, size_t s, unsigned int f),
     (R, p, s, f))

typedef CUresult (*alloc_host_fn)(void **, size_t);
static CUresult mem_alloc_host(void *real, void **pp, size_t size)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((alloc_host_fn)real)(pp, size);
	if (held && rc == ML_CUDA_SUCCESS && pp)
		ml_cuda_note_alloc((uintptr_t)*pp, size, K_PINNED, true);
	return rc;
}
PAIR(H_MEM_ALLOC_HOST, mem_alloc_host, cuMemAllocHost_v2, (void **p, size_t s), (R, p, s))

/* cuMemHostRegister pins memory the program already has: it is pinned bytes,
 * not new CPU bytes (the heap block, if any, stays counted as heap). */
typedef CUresult (*host_register_fn)(void *, size_t, unsigned int);
static CUresult mem_host_register(void *real, void *p, size_t size, unsigned int flags)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((host_register_fn)real)(p, size, flags);
	if (held && rc == ML_CUDA_SUCCESS)
		ml_cuda_note_alloc((uintptr_t)p, size, K_PINNED, true);
	return rc;
}
PAIR(H_MEM_HOST_REGISTER_V2, mem_host_register, cuMemHostRegister_v2,
     (void *p, size_t s, unsigned int f), (R, p, s, f))
PAIR(H_MEM_HOST_REGISTER, mem_host_register, cuMemHostRegister,
     (void *p, size_t s, unsigned int f), (R, p, s, f))

/* ---- frees: out of the tables first (the address may be handed out again
 * as soon as the real free returns), back in if the free failed ---- */

typedef CUresult (*dptr_fn)(CUdeviceptr);
static CUresult mem_free_kinds(void *real, uint64_t addr, uint32_t kinds, bool host)
{
	NOT_READY(real);
	GUARD;
	struct pending p;
	if (held)
		ml_cuda_free_begin(addr, kinds, &p);
	CUresult rc = host ? ((CUresult (*)(void *))real)((void *)(uintptr_t)addr)
			   : ((dptr_fn)real)(addr);
	if (held)
		ml_cuda_free_end(addr, &p, rc == ML_CUDA_SUCCESS);
	return rc;
}
static CUresult mem_free(void *real, CUdeviceptr d)
{
	return mem_free_kinds(real, d, FREEABLE, false);
}
PAIR(H_MEM_FREE, mem_free, cuMemFree_v2, (CUdeviceptr d), (R, d))

static CUresult mem_free_host(void *real, void *p)
{
	return mem_free_kinds(real, (uintptr_t)p, BIT(K_PINNED), true);
}
PAIR(H_MEM_FREE_HOST, mem_free_host, cuMemFreeHost, (void *p), (R, p))
PAIR(H_MEM_HOST_UNREGISTER, mem_free_host, cuMemHostUnregister, (void *p), (R, p))

typedef CUresult (*array_fn)(CUarray *, const void *);
static CUresult array_create(void *real, CUarray *a, const struct ml_cu_array_desc *d)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((array_fn)real)(a, d);
	if (held && rc == ML_CUDA_SUCCESS && a && d)
		ml_cuda_note_alloc((uintptr_t)*a, ml_cuda_array_bytes(d->Width, d->Height, 1, d->Format,
						       d->NumChannels), K_ARRAY, true);
	return rc;
}
PAIR(H_ARRAY_CREATE, array_create, cuArrayCreate_v2,
     (CUarray *a, const struct ml_cu_array_desc *d), (R, a, d))

static CUresult array3d_create(void *real, CUarray *a, const struct ml_cu_array3d_desc *d)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((array_fn)real)(a, d);
	if (held && rc == ML_CUDA_SUCCESS && a && d)
		ml_cuda_note_alloc((uintptr_t)*a, ml_cuda_array_bytes(d->Width, d->Height, d->Depth, d->Format,
						       d->NumChannels), K_ARRAY, true);
	return rc;
}
PAIR(H_ARRAY3D_CREATE, array3d_create, cuArray3DCreate_v2,
     (CUarray *a, const struct ml_cu_array3d_desc *d), (R, a, d))

static CUresult array_destroy(void *real, CUarray a)
{
	return mem_free_kinds(real, (uintptr_t)a, BIT(K_ARRAY), true);
}
PAIR(H_ARRAY_DESTROY, array_destroy, cuArrayDestroy, (CUarray a), (R, a))

/* ---- stream-ordered (pool) allocations: counted when asked for ---- */

typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
static CUresult mem_alloc_async(void *real, CUdeviceptr *d, size_t size, CUstream s)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((alloc_async_fn)real)(d, size, s);
	if (held && rc == ML_CUDA_SUCCESS && d)
		ml_cuda_note_alloc(*d, size, K_POOL, true);
	return rc;
}
PAIR(H_MEM_ALLOC_ASYNC, mem_alloc_async, cuMemAllocAsync,
     (CUdeviceptr *d, size_t n, CUstream s), (R, d, n, s))
PAIR(H_MEM_ALLOC_ASYNC_PTSZ, mem_alloc_async, cuMemAllocAsync_ptsz,
     (CUdeviceptr *d, size_t n, CUstream s), (R, d, n, s))

typedef CUresult (*alloc_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
static CUresult mem_alloc_pool(void *real, CUdeviceptr *d, size_t size, CUmemoryPool pool,
			       CUstream s)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((alloc_pool_fn)real)(d, size, pool, s);
	if (held && rc == ML_CUDA_SUCCESS && d)
		ml_cuda_note_alloc(*d, size, K_POOL, true);
	return rc;
}
PAIR(H_MEM_ALLOC_POOL_ASYNC, mem_alloc_pool, cuMemAllocFromPoolAsync,
     (CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s), (R, d, n, p, s))
PAIR(H_MEM_ALLOC_POOL_ASYNC_PTSZ, mem_alloc_pool, cuMemAllocFromPoolAsync_ptsz,
     (CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s), (R, d, n, p, s))

typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);
static CUresult mem_free_async(void *real, CUdeviceptr d, CUstream s)
{
	NOT_READY(real);
	GUARD;
	struct pending p;
	if (held)
		ml_cuda_free_begin(d, FREEABLE, &p);
	CUresult rc = ((free_async_fn)real)(d, s);
	if (held)
		ml_cuda_free_end(d, &p, rc == ML_CUDA_SUCCESS);
	return rc;
}
PAIR(H_MEM_FREE_ASYNC, mem_free_async, cuMemFreeAsync, (CUdeviceptr d, CUstream s), (R, d, s))
PAIR(H_MEM_FREE_ASYNC_PTSZ, mem_free_async, cuMemFreeAsync_ptsz, (CUdeviceptr d, CUstream s),
     (R, d, s))

/* Trimming or destroying a pool returns the pool's cached memory, which was
 * never counted (blocks are counted as the program asks for them); held only
 * so that the driver's host allocations are not charged to the program. */
typedef CUresult (*pool_trim_fn)(CUmemoryPool, size_t);
static CUresult mem_pool_trim_to(void *real, CUmemoryPool pool, size_t keep)
{
	NOT_READY(real);
	GUARD;
	return ((pool_trim_fn)real)(pool, keep);
}
PAIR(H_MEM_POOL_TRIM_TO, mem_pool_trim_to, cuMemPoolTrimTo, (CUmemoryPool p, size_t k), (R, p, k))

static CUresult mem_pool_destroy(void *real, CUmemoryPool pool)
{
	NOT_READY(real);
	GUARD;
	return ((CUresult (*)(CUmemoryPool))real)(pool);
}
PAIR(H_MEM_POOL_DESTROY, mem_pool_destroy, cuMemPoolDestroy, (CUmemoryPool p), (R, p))

/* ---- virtual memory management: physical bytes (cuMemCreate, keyed by the
 * handle), mapped ranges and address reservations, each its own kind ---- */

typedef CUresult (*mem_create_fn)(CUmemGenericAllocationHandle *, size_t, const void *,
				  unsigned long long);
static CUresult mem_create(void *real, CUmemGenericAllocationHandle *h, size_t size,
			   const void *prop, unsigned long long flags)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((mem_create_fn)real)(h, size, prop, flags);
	if (held && rc == ML_CUDA_SUCCESS && h)
		ml_cuda_note_alloc(*h, size, K_VMM, false);
	return rc;
}
PAIR(H_MEM_CREATE, mem_create, cuMemCreate,
     (CUmemGenericAllocationHandle *h, size_t s, const void *p, unsigned long long f),
     (R, h, s, p, f))

static CUresult mem_release(void *real, CUmemGenericAllocationHandle h)
{
	return mem_free_kinds(real, h, BIT(K_VMM), false);
}
PAIR(H_MEM_RELEASE, mem_release, cuMemRelease, (CUmemGenericAllocationHandle h), (R, h))

typedef CUresult (*mem_map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			       unsigned long long);
static CUresult mem_map(void *real, CUdeviceptr ptr, size_t size, size_t offset,
			CUmemGenericAllocationHandle h, unsigned long long flags)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((mem_map_fn)real)(ptr, size, offset, h, flags);
	if (held && rc == ML_CUDA_SUCCESS)
		ml_cuda_note_alloc(ptr, size, K_MAPPED, false);
	return rc;
}
PAIR(H_MEM_MAP, mem_map, cuMemMap,
     (CUdeviceptr p, size_t s, size_t o, CUmemGenericAllocationHandle h, unsigned long long f),
     (R, p, s, o, h, f))

/* Unmaps [ptr, ptr + size): every mapping we saw starting in it, in order. */
typedef CUresult (*range_fn)(CUdeviceptr, size_t);
static CUresult mem_unmap_kind(void *real, CUdeviceptr ptr, size_t size, uint32_t kind)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((range_fn)real)(ptr, size);
	if (!held || rc != ML_CUDA_SUCCESS)
		return rc;
	/* Recorded after the call: the range cannot be mapped again before the
	 * program's own next call on it, unlike a freed device pointer. */
	for (uint64_t at = ptr, end = ptr + size; at < end;) {
		uint32_t k;
		void *ctx;
		ml_cuda_blocks_take(at, BIT(kind), &k, &ctx);
		size_t got = ml_track_free((void *)(uintptr_t)at, (enum ml_kind)kind);
		if (!got)
			break;
		at += got;
	}
	return rc;
}
static CUresult mem_unmap(void *real, CUdeviceptr ptr, size_t size)
{
	return mem_unmap_kind(real, ptr, size, K_MAPPED);
}
PAIR(H_MEM_UNMAP, mem_unmap, cuMemUnmap, (CUdeviceptr p, size_t s), (R, p, s))

typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult mem_address_reserve(void *real, CUdeviceptr *ptr, size_t size, size_t align,
				    CUdeviceptr addr, unsigned long long flags)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((reserve_fn)real)(ptr, size, align, addr, flags);
	if (held && rc == ML_CUDA_SUCCESS && ptr)
		ml_cuda_note_alloc(*ptr, size, K_RESERVED, false);
	return rc;
}
PAIR(H_MEM_ADDRESS_RESERVE, mem_address_reserve, cuMemAddressReserve,
     (CUdeviceptr *p, size_t s, size_t a, CUdeviceptr at, unsigned long long f),
     (R, p, s, a, at, f))

static CUresult mem_address_free(void *real, CUdeviceptr ptr, size_t size)
{
	return mem_unmap_kind(real, ptr, size, K_RESERVED);
}
PAIR(H_MEM_ADDRESS_FREE, mem_address_free, cuMemAddressFree, (CUdeviceptr p, size_t s), (R, p, s))

/* ---- graph memory nodes: the graph's allocation has a fixed address from
 * the moment its alloc node is added, so it is counted then, as a pool
 * (stream-ordered) block at the line that added the node; graph launches are
 * not seen.  A free node releases it when added; an allocation without one
 * stays live until cuMemFree / cuMemFreeAsync on its address, as in CUDA
 * (destroying the graph does not free it).  cuGraphMemAllocNodeGetParams
 * only reads and is not hooked. ---- */

typedef CUresult (*graph_alloc_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
				   struct ml_cu_mem_alloc_node_params *);
static CUresult graph_add_mem_alloc(void *real, CUgraphNode *node, CUgraph g,
				    const CUgraphNode *deps, size_t n,
				    struct ml_cu_mem_alloc_node_params *params)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((graph_alloc_fn)real)(node, g, deps, n, params);
	if (held && rc == ML_CUDA_SUCCESS && params)
		ml_cuda_note_alloc(params->dptr, params->bytesize, K_POOL, true);
	return rc;
}
PAIR(H_GRAPH_ADD_MEM_ALLOC, graph_add_mem_alloc, cuGraphAddMemAllocNode,
     (CUgraphNode *nd, CUgraph g, const CUgraphNode *dp, size_t n,
      struct ml_cu_mem_alloc_node_params *pr), (R, nd, g, dp, n, pr))

typedef CUresult (*graph_free_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
				  CUdeviceptr);
static CUresult graph_add_mem_free(void *real, CUgraphNode *node, CUgraph g,
				   const CUgraphNode *deps, size_t n, CUdeviceptr d)
{
	NOT_READY(real);
	GUARD;
	struct pending p;
	if (held)
		ml_cuda_free_begin(d, BIT(K_POOL), &p);	/* only graph allocations */
	CUresult rc = ((graph_free_fn)real)(node, g, deps, n, d);
	if (held)
		ml_cuda_free_end(d, &p, rc == ML_CUDA_SUCCESS);
	return rc;
}
PAIR(H_GRAPH_ADD_MEM_FREE, graph_add_mem_free, cuGraphAddMemFreeNode,
     (CUgraphNode *nd, CUgraph g, const CUgraphNode *dp, size_t n, CUdeviceptr d),
     (R, nd, g, dp, n, d))

/* ---- contexts: destroying one (or resetting a device's primary context)
 * releases every block it held ---- */

static CUresult ctx_destroy(void *real, CUcontext ctx)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((CUresult (*)(CUcontext))real)(ctx);
	if (held && rc == ML_CUDA_SUCCESS && ctx)
		ml_cuda_blocks_sweep(ctx, CTX_KINDS, ml_cuda_sweep_one, NULL);
	return rc;
}
PAIR(H_CTX_DESTROY, ctx_destroy, cuCtxDestroy_v2, (CUcontext c), (R, c))

#define MAX_DEVICES 64
static void *volatile primary_ctx[MAX_DEVICES];

typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
static CUresult primary_retain(void *real, CUcontext *pctx, CUdevice dev)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((retain_fn)real)(pctx, dev);
	if (rc == ML_CUDA_SUCCESS && pctx && dev >= 0 && dev < MAX_DEVICES)
		primary_ctx[dev] = *pctx;
	return rc;
}
PAIR(H_PRIMARY_RETAIN, primary_retain, cuDevicePrimaryCtxRetain, (CUcontext *c, CUdevice d),
     (R, c, d))

static CUresult primary_reset(void *real, CUdevice dev)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((CUresult (*)(CUdevice))real)(dev);
	if (held && rc == ML_CUDA_SUCCESS && dev >= 0 && dev < MAX_DEVICES && primary_ctx[dev])
		ml_cuda_blocks_sweep(primary_ctx[dev], CTX_KINDS, ml_cuda_sweep_one, NULL);
	return rc;
}
PAIR(H_PRIMARY_RESET_V2, primary_reset, cuDevicePrimaryCtxReset_v2, (CUdevice d), (R, d))
PAIR(H_PRIMARY_RESET, primary_reset, cuDevicePrimaryCtxReset, (CUdevice d), (R, d))

/* ---- cuGetProcAddress: the lookup itself, wrapped ---- */

static CUresult gpa(bool v2, void *real, const char *symbol, void **pfn, int version,
		    uint64_t flags, ml_cu_query_result *status)
{
	NOT_READY(real);
	if (v2 && !ml_cuda_gpa_v2_real)
		ml_cuda_gpa_v2_real = real;
	if (!v2 && !ml_cuda_gpa_v1_real)
		ml_cuda_gpa_v1_real = real;
	GUARD;
	CUresult rc = v2 ? ((ml_cu_gpa_v2)real)(symbol, pfn, version, flags, status)
			 : ((ml_cu_gpa_v1)real)(symbol, pfn, version, flags);
	if (rc != ML_CUDA_SUCCESS || !symbol || !pfn || !*pfn)
		return rc;
	int i = ml_cuda_hook_for_lookup(symbol, version, flags, *pfn);
	if (i >= 0)
		*pfn = ml_cuda_claim(&ml_cuda_hooks[i], *pfn);
	return rc;
}

static CUresult gpa_v1(void *real, const char *s, void **p, int v, uint64_t f)
{
	return gpa(false, real, s, p, v, f, NULL);
}
PAIR(H_GPA, gpa_v1, cuGetProcAddress, (const char *s, void **p, int v, uint64_t f),
     (R, s, p, v, f))

static CUresult gpa_v2(void *real, const char *s, void **p, int v, uint64_t f,
		       ml_cu_query_result *st)
{
	return gpa(true, real, s, p, v, f, st);
}
PAIR(H_GPA_V2, gpa_v2, cuGetProcAddress_v2,
     (const char *s, void **p, int v, uint64_t f, ml_cu_query_result *st), (R, s, p, v, f, st))

/* ---- driver calls hooked only to hold the guard (ML_CUDA_GUARD_HOOKS) ---- */

typedef CUresult (*fwd6_fn)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);
static CUresult guard_only(void *real, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d,
			   uintptr_t e, uintptr_t f)
{
	NOT_READY(real);
	GUARD;
	CUresult rc = ((fwd6_fn)real)(a, b, c, d, e, f);
	return rc;
}
#define GUARD_PAIR(id, name, base_, lo_, hi_, st_) \
	PAIR(id, guard_only, name, (uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, \
				    uintptr_t e, uintptr_t f), (R, a, b, c, d, e, f))
ML_CUDA_GUARD_HOOKS(GUARD_PAIR)

#define ROW_D(id, name, b, lo, hi, st) \
	[id] = { #name, b, lo, hi, st, { (void *)p_##name, (void *)q_##name }, { NULL, NULL }, \
		 (void *)name, NULL, false },
#define ROW_G(id, name, b, lo, hi, st) \
	[id] = { #name, b, lo, hi, st, { (void *)p_##name, (void *)q_##name }, { NULL, NULL }, \
		 (void *)name, NULL, true },
struct hook ml_cuda_hooks[H_COUNT] = { ML_CUDA_DRIVER_HOOKS(ROW_D) ML_CUDA_GUARD_HOOKS(ROW_G) };

/* ----------------------------------------------- the runtime (libcudart.so) */

typedef int cudaError_t;
#define ML_CUDART_ERROR_INIT 3		/* cudaErrorInitializationError */

static void *rt_real(int id)
{
	if (!runtime_real[id])
		runtime_real[id] = ml_cuda_find_real(runtime_syms[id], runtime_exports[id]);
	return runtime_real[id];
}

#define RT_BEGIN(id, type) \
	type real_ = (type)rt_real(id); \
	if (!real_) \
		return ML_CUDART_ERROR_INIT; \
	GUARD

typedef cudaError_t (*rt_malloc_fn)(void **, size_t);
ML_EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
	RT_BEGIN(R_MALLOC, rt_malloc_fn);
	cudaError_t rc = real_(p, size);
	if (held && rc == 0 && p)
		ml_cuda_note_alloc((uintptr_t)*p, size, K_DEVICE, true);
	return rc;
}

typedef cudaError_t (*rt_malloc_flags_fn)(void **, size_t, unsigned int);
ML_EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int flags)
{
	RT_BEGIN(R_MALLOC_MANAGED, rt_malloc_flags_fn);
	cudaError_t rc = real_(p, size, flags);
	if (held && rc == 0 && p)
		ml_cuda_note_alloc((uintptr_t)*p, size, K_MANAGED, true);
	return rc;
}

typedef cudaError_t (*rt_pitch_fn)(void **, size_t *, size_t, size_t);
ML_EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h)
{
	RT_BEGIN(R_MALLOC_PITCH, rt_pitch_fn);
	cudaError_t rc = real_(p, pitch, w, h);
	if (held && rc == 0 && p && pitch)
		ml_cuda_note_alloc((uintptr_t)*p, *pitch * h, K_DEVICE, true);
	return rc;
}

ML_EXPORT cudaError_t cudaMallocHost(void **p, size_t size)
{
	RT_BEGIN(R_MALLOC_HOST, rt_malloc_fn);
	cudaError_t rc = real_(p, size);
	if (held && rc == 0 && p)
		ml_cuda_note_alloc((uintptr_t)*p, size, K_PINNED, true);
	return rc;
}

ML_EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
	RT_BEGIN(R_HOST_ALLOC, rt_malloc_flags_fn);
	cudaError_t rc = real_(p, size, flags);
	if (held && rc == 0 && p)
		ml_cuda_note_alloc((uintptr_t)*p, size, K_PINNED, true);
	return rc;
}

typedef cudaError_t (*rt_register_fn)(void *, size_t, unsigned int);
ML_EXPORT cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
	RT_BEGIN(R_HOST_REGISTER, rt_register_fn);
	cudaError_t rc = real_(p, size, flags);
	if (held && rc == 0)
		ml_cuda_note_alloc((uintptr_t)p, size, K_PINNED, true);
	return rc;
}

/* A runtime free of addr (kinds), through real. */
static cudaError_t rt_free(void *real, uint64_t addr, uint32_t kinds, void *stream, bool async)
{
	if (!real)
		return ML_CUDART_ERROR_INIT;
	GUARD;
	struct pending p;
	if (held)
		ml_cuda_free_begin(addr, kinds, &p);
	void *ptr = (void *)(uintptr_t)addr;
	cudaError_t rc = async ? ((cudaError_t (*)(void *, void *))real)(ptr, stream)
			       : ((cudaError_t (*)(void *))real)(ptr);
	if (held)
		ml_cuda_free_end(addr, &p, rc == 0);
	return rc;
}

ML_EXPORT cudaError_t cudaFree(void *p)
{
	return rt_free(rt_real(R_FREE), (uintptr_t)p, FREEABLE, NULL, false);
}

ML_EXPORT cudaError_t cudaFreeHost(void *p)
{
	return rt_free(rt_real(R_FREE_HOST), (uintptr_t)p, BIT(K_PINNED), NULL, false);
}

ML_EXPORT cudaError_t cudaHostUnregister(void *p)
{
	return rt_free(rt_real(R_HOST_UNREGISTER), (uintptr_t)p, BIT(K_PINNED), NULL, false);
}

ML_EXPORT cudaError_t cudaFreeAsync(void *p, void *stream)
{
	return rt_free(rt_real(R_FREE_ASYNC), (uintptr_t)p, FREEABLE, stream, true);
}

ML_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, void *stream)
{
	return rt_free(rt_real(R_FREE_ASYNC_PTSZ), (uintptr_t)p, FREEABLE, stream, true);
}

typedef cudaError_t (*rt_async_fn)(void **, size_t, void *);
static cudaError_t rt_malloc_async(int id, void **p, size_t size, void *stream)
{
	RT_BEGIN(id, rt_async_fn);
	cudaError_t rc = real_(p, size, stream);
	if (held && rc == 0 && p)
		ml_cuda_note_alloc((uintptr_t)*p, size, K_POOL, true);
	return rc;
}

ML_EXPORT cudaError_t cudaMallocAsync(void **p, size_t size, void *stream)
{
	return rt_malloc_async(R_MALLOC_ASYNC, p, size, stream);
}

ML_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, void *stream)
{
	return rt_malloc_async(R_MALLOC_ASYNC_PTSZ, p, size, stream);
}

typedef cudaError_t (*rt_pool_fn)(void **, size_t, void *, void *);
static cudaError_t rt_malloc_pool(int id, void **p, size_t size, void *pool, void *stream)
{
	RT_BEGIN(id, rt_pool_fn);
	cudaError_t rc = real_(p, size, pool, stream);
	if (held && rc == 0 && p)
		ml_cuda_note_alloc((uintptr_t)*p, size, K_POOL, true);
	return rc;
}

ML_EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, void *pool, void *stream)
{
	return rt_malloc_pool(R_MALLOC_POOL_ASYNC, p, size, pool, stream);
}

ML_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t size, void *pool, void *stream)
{
	return rt_malloc_pool(R_MALLOC_POOL_ASYNC_PTSZ, p, size, pool, stream);
}

#define EXPORT_R(id, sym) [id] = (void *)sym,
static void *const runtime_exports[R_COUNT] = { ML_CUDA_RUNTIME_HOOKS(EXPORT_R) };

/* ------------------------------------------------------------ start-up */

/* The real dlsym is needed by the trampoline whether or not the core
 * records; after the core's constructor (102). */
__attribute__((constructor(103))) static void ml_cuda_init(void)
{
	ml_cuda_resolve_real_dlsym();
	const char *t = getenv("MEMLINE_CUDA_TRACE");
	ml_cuda_trace = t && *t && *t != '0';
}
