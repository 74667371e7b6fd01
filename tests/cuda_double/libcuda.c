/* tests/cuda_double/libcuda.c - a test double of the CUDA driver
 * (libcuda.so.1), written from the public driver API documentation only.
 *
 * One fake device (0) with a primary context; "device" memory is host memory
 * from malloc (deliberately: memline must not charge the driver's own mallocs
 * to the program).  cuGetProcAddress[_v2] resolves base names by version and
 * per-thread-stream flag the way the documentation describes.  Every pointer
 * handed out is remembered with its context, so frees of unknown pointers
 * fail (CUDA_ERROR_INVALID_VALUE) and destroying a context releases its
 * memory.  Built with -Bsymbolic: its own references never reach a
 * preloaded library, like the real driver's. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct ctx *CUcontext;
typedef void *CUstream;
typedef void *CUarray;
typedef void *CUmemoryPool;

#define OK 0
#define E_INVALID_VALUE 1
#define E_OUT_OF_MEMORY 2
#define E_NOT_INITIALIZED 3
#define E_INVALID_DEVICE 101
#define E_INVALID_CONTEXT 201
#define E_NOT_FOUND 500
#define E_NOT_SUPPORTED 801

#define API __attribute__((visibility("default")))

struct ctx {
	int device;
	int primary;
	int refs;
};

static struct ctx primary = { 0, 1, 0 };
static __thread struct ctx *current;
static int initialised;

/* Every live block: address, kind tag, context. */
enum tag { T_DEVICE, T_HOST, T_REGISTERED, T_ARRAY, T_HANDLE, T_RESERVED, T_MAPPED };
struct block {
	uint64_t addr;
	size_t size;
	enum tag tag;
	struct ctx *ctx;
	void *mem;			/* what malloc gave (NULL for address-only blocks) */
	struct block *next;
};
static struct block *blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_address = 0x7f0000000000ull;	/* reservations and handles */

static void add(uint64_t addr, size_t size, enum tag tag, struct ctx *c, void *mem)
{
	struct block *b = calloc(1, sizeof(*b));
	b->addr = addr;
	b->size = size;
	b->tag = tag;
	b->ctx = c;
	b->mem = mem;
	pthread_mutex_lock(&lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&lock);
}

/* Removes the block (addr, tag); returns 0 or E_INVALID_VALUE. */
static CUresult drop(uint64_t addr, enum tag tag)
{
	pthread_mutex_lock(&lock);
	for (struct block **pp = &blocks; *pp; pp = &(*pp)->next) {
		struct block *b = *pp;
		if (b->addr == addr && b->tag == tag) {
			*pp = b->next;
			pthread_mutex_unlock(&lock);
			free(b->mem);
			free(b);
			return OK;
		}
	}
	pthread_mutex_unlock(&lock);
	return E_INVALID_VALUE;
}

static void drop_ctx(struct ctx *c)
{
	pthread_mutex_lock(&lock);
	for (struct block **pp = &blocks; *pp;) {
		struct block *b = *pp;
		if (b->ctx == c) {
			*pp = b->next;
			free(b->mem);
			free(b);
		} else {
			pp = &b->next;
		}
	}
	pthread_mutex_unlock(&lock);
}

static CUresult need_ctx(void)
{
	if (!initialised)
		return E_NOT_INITIALIZED;
	return current ? OK : E_INVALID_CONTEXT;
}

static uint64_t fresh_range(size_t size)
{
	pthread_mutex_lock(&lock);
	uint64_t a = next_address;
	next_address += (size + 0xffff) & ~0xffffull;
	next_address += 0x10000;
	pthread_mutex_unlock(&lock);
	return a;
}

/* Memory of size bytes (at least 1) as a device or host block. */
static CUresult give(CUdeviceptr *out, size_t size, enum tag tag)
{
	CUresult rc = need_ctx();
	if (rc)
		return rc;
	if (!out || size == 0)
		return E_INVALID_VALUE;
	void *m = malloc(size);
	if (!m)
		return E_OUT_OF_MEMORY;
	*out = (uintptr_t)m;
	add(*out, size, tag, current, m);
	return OK;
}

/* ---- initialisation, devices, contexts ---- */

/* The driver's own state, kept for the life of the process (a real driver
 * allocates host memory here too): 7777 bytes, a size no fixture uses, so
 * that a missing guard shows as a heap block of that size. */
static void *driver_state;

API CUresult cuInit(unsigned int flags)
{
	if (flags)
		return E_INVALID_VALUE;
	if (!driver_state)
		driver_state = malloc(7777);
	initialised = 1;
	return OK;
}

API CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return E_INVALID_VALUE;
	*v = 13000;
	return OK;
}

API CUresult cuDeviceGetCount(int *n)
{
	if (!initialised)
		return E_NOT_INITIALIZED;
	*n = 1;
	return OK;
}

API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (!initialised)
		return E_NOT_INITIALIZED;
	if (ordinal != 0)
		return E_INVALID_DEVICE;
	*d = 0;
	return OK;
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	if (!initialised)
		return E_NOT_INITIALIZED;
	if (d != 0)
		return E_INVALID_DEVICE;
	primary.refs++;
	*c = &primary;
	return OK;
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	if (d != 0)
		return E_INVALID_DEVICE;
	if (primary.refs > 0)
		primary.refs--;
	return OK;
}

API CUresult cuDevicePrimaryCtxReset_v2(CUdevice d)
{
	if (d != 0)
		return E_INVALID_DEVICE;
	drop_ctx(&primary);
	return OK;
}

API CUresult cuDevicePrimaryCtxReset(CUdevice d)
{
	return cuDevicePrimaryCtxReset_v2(d);
}

API CUresult cuCtxCreate_v2(CUcontext *c, unsigned int flags, CUdevice d)
{
	if (!initialised)
		return E_NOT_INITIALIZED;
	if (d != 0)
		return E_INVALID_DEVICE;
	struct ctx *n = calloc(1, sizeof(*n));
	n->refs = 1;
	*c = n;
	current = n;
	return OK;
}

API CUresult cuCtxDestroy_v2(CUcontext c)
{
	if (!c || c == &primary)
		return E_INVALID_CONTEXT;
	drop_ctx(c);
	if (current == c)
		current = NULL;
	free(c);
	return OK;
}

API CUresult cuCtxGetCurrent(CUcontext *c)
{
	if (!initialised)
		return E_NOT_INITIALIZED;
	*c = current;
	return OK;
}

API CUresult cuCtxSetCurrent(CUcontext c)
{
	if (!initialised)
		return E_NOT_INITIALIZED;
	current = c;
	return OK;
}

/* ---- memory ---- */

API CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t size)
{
	return give(d, size, T_DEVICE);
}

API CUresult cuMemAllocPitch_v2(CUdeviceptr *d, size_t *pitch, size_t width, size_t height,
				unsigned int elem)
{
	if (!pitch || elem == 0 || elem > 16)
		return E_INVALID_VALUE;
	size_t p = (width + 511) & ~(size_t)511;	/* rows aligned to 512 bytes */
	CUresult rc = give(d, p * height, T_DEVICE);
	if (rc == OK)
		*pitch = p;
	return rc;
}

API CUresult cuMemFree_v2(CUdeviceptr d)
{
	if (d == 0)
		return OK;
	return drop(d, T_DEVICE);
}

API CUresult cuMemAllocManaged(CUdeviceptr *d, size_t size, unsigned int flags)
{
	return give(d, size, T_DEVICE);
}

API CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags)
{
	CUdeviceptr a;
	CUresult rc = give(&a, size, T_HOST);
	if (rc == OK)
		*p = (void *)(uintptr_t)a;
	return rc;
}

API CUresult cuMemAllocHost_v2(void **p, size_t size)
{
	return cuMemHostAlloc(p, size, 0);
}

API CUresult cuMemFreeHost(void *p)
{
	return drop((uintptr_t)p, T_HOST);
}

API CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
	CUresult rc = need_ctx();
	if (rc)
		return rc;
	if (!p || !size)
		return E_INVALID_VALUE;
	add((uintptr_t)p, size, T_REGISTERED, current, NULL);
	return OK;
}

API CUresult cuMemHostRegister(void *p, size_t size, unsigned int flags)
{
	return cuMemHostRegister_v2(p, size, flags);
}

API CUresult cuMemHostUnregister(void *p)
{
	return drop((uintptr_t)p, T_REGISTERED);
}

struct array_desc { size_t w, h; int format; unsigned int channels; };
struct array3d_desc { size_t w, h, d; int format; unsigned int channels, flags; };

API CUresult cuArrayCreate_v2(CUarray *a, const struct array_desc *d)
{
	CUdeviceptr p;
	if (!a || !d || !d->w)
		return E_INVALID_VALUE;
	CUresult rc = give(&p, d->w * (d->h ? d->h : 1) * d->channels * 4, T_ARRAY);
	if (rc == OK)
		*a = (CUarray)(uintptr_t)p;
	return rc;
}

API CUresult cuArray3DCreate_v2(CUarray *a, const struct array3d_desc *d)
{
	CUdeviceptr p;
	if (!a || !d || !d->w)
		return E_INVALID_VALUE;
	CUresult rc = give(&p, d->w * (d->h ? d->h : 1) * (d->d ? d->d : 1) * d->channels * 4,
			   T_ARRAY);
	if (rc == OK)
		*a = (CUarray)(uintptr_t)p;
	return rc;
}

API CUresult cuArrayDestroy(CUarray a)
{
	return drop((uintptr_t)a, T_ARRAY);
}

API CUresult cuMemAllocAsync(CUdeviceptr *d, size_t size, CUstream s)
{
	return give(d, size, T_DEVICE);
}

API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t size, CUstream s)
{
	return give(d, size, T_DEVICE);
}

API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t size, CUmemoryPool pool, CUstream s)
{
	return pool ? give(d, size, T_DEVICE) : E_INVALID_VALUE;
}

API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *d, size_t size, CUmemoryPool pool,
					  CUstream s)
{
	return cuMemAllocFromPoolAsync(d, size, pool, s);
}

API CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s)
{
	return drop(d, T_DEVICE);
}

API CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s)
{
	return drop(d, T_DEVICE);
}

static int the_pool;

API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d)
{
	if (d != 0)
		return E_INVALID_DEVICE;
	*pool = &the_pool;
	return OK;
}

API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
	return pool ? OK : E_INVALID_VALUE;
}

API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	return pool ? OK : E_INVALID_VALUE;
}

/* ---- graphs: only what graph memory nodes need.  A graph and a node are
 * address-only handles (no host memory); an alloc node's memory is a device
 * block from the moment the node is added (the address is fixed per graph),
 * freed by a free node on it, or later by cuMemFree[Async].  Destroying a
 * graph frees nothing, as in CUDA for an allocation without a free node. ---- */
typedef void *CUgraph;
typedef void *CUgraphNode;

/* CUmemPoolProps_v1 and CUDA_MEM_ALLOC_NODE_PARAMS_v1, as in cuda.h. */
struct pool_props {
	int alloc_type;			/* 1: CU_MEM_ALLOCATION_TYPE_PINNED */
	int handle_types;		/* 0: CU_MEM_HANDLE_TYPE_NONE */
	int location_type;		/* 1: CU_MEM_LOCATION_TYPE_DEVICE */
	int location_id;
	void *win32_security_attributes;
	size_t max_size;
	unsigned short usage;
	unsigned char reserved[54];
};
struct mem_alloc_node_params {
	struct pool_props pool_props;
	const void *access_descs;
	size_t access_desc_count;
	size_t bytesize;
	CUdeviceptr dptr;
};
_Static_assert(sizeof(struct mem_alloc_node_params) == 120, "CUDA_MEM_ALLOC_NODE_PARAMS");

#define MAX_GRAPHS 64
static uint64_t graphs[MAX_GRAPHS];	/* live graph handles (0: free slot) */

static int graph_slot(uint64_t g)
{
	for (int i = 0; i < MAX_GRAPHS; i++)
		if (graphs[i] == g)
			return i;
	return -1;
}

API CUresult cuGraphCreate(CUgraph *g, unsigned int flags)
{
	CUresult rc = need_ctx();
	if (rc)
		return rc;
	if (!g || flags)
		return E_INVALID_VALUE;
	uint64_t handle = fresh_range(1);
	pthread_mutex_lock(&lock);
	int i = graph_slot(0);
	if (i >= 0)
		graphs[i] = handle;
	pthread_mutex_unlock(&lock);
	if (i < 0)
		return E_OUT_OF_MEMORY;
	*g = (CUgraph)(uintptr_t)handle;
	return OK;
}

API CUresult cuGraphDestroy(CUgraph g)
{
	pthread_mutex_lock(&lock);
	int i = g ? graph_slot((uintptr_t)g) : -1;
	if (i >= 0)
		graphs[i] = 0;
	pthread_mutex_unlock(&lock);
	return i < 0 ? E_INVALID_VALUE : OK;
}

static CUresult node_checks(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n)
{
	CUresult rc = need_ctx();
	if (rc)
		return rc;
	if (!node || !g || graph_slot((uintptr_t)g) < 0 || (n && !deps))
		return E_INVALID_VALUE;
	return OK;
}

API CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
				    size_t n, struct mem_alloc_node_params *p)
{
	CUresult rc = node_checks(node, g, deps, n);
	if (rc)
		return rc;
	if (!p || p->pool_props.alloc_type != 1 || p->pool_props.handle_types != 0 ||
	    p->pool_props.location_type != 1 || p->pool_props.location_id != 0)
		return E_INVALID_VALUE;
	rc = give(&p->dptr, p->bytesize, T_DEVICE);
	if (rc)
		return rc;
	*node = (CUgraphNode)(uintptr_t)fresh_range(1);
	return OK;
}

API CUresult cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
				   size_t n, CUdeviceptr d)
{
	CUresult rc = node_checks(node, g, deps, n);
	if (rc)
		return rc;
	rc = drop(d, T_DEVICE);
	if (rc)
		return rc;
	*node = (CUgraphNode)(uintptr_t)fresh_range(1);
	return OK;
}

API CUresult cuDeviceGraphMemTrim(CUdevice d)
{
	return d == 0 ? OK : E_INVALID_DEVICE;
}

/* ---- virtual memory management ---- */

API CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int option)
{
	if (!g)
		return E_INVALID_VALUE;
	*g = 2u << 20;
	return OK;
}

API CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const void *prop,
			 unsigned long long flags)
{
	CUresult rc = need_ctx();
	if (rc)
		return rc;
	if (!h || !size || (size & ((2u << 20) - 1)))
		return E_INVALID_VALUE;
	*h = fresh_range(size);
	add(*h, size, T_HANDLE, NULL, NULL);
	return OK;
}

API CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	return drop(h, T_HANDLE);
}

API CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
				 unsigned long long flags)
{
	if (!p || !size)
		return E_INVALID_VALUE;
	*p = fresh_range(size);
	add(*p, size, T_RESERVED, NULL, NULL);
	return OK;
}

API CUresult cuMemAddressFree(CUdeviceptr p, size_t size)
{
	return drop(p, T_RESERVED);
}

API CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		      unsigned long long flags)
{
	if (!p || !size || offset || !h)
		return E_INVALID_VALUE;
	add(p, size, T_MAPPED, NULL, NULL);
	return OK;
}

/* Unmaps every mapping that starts inside [p, p + size). */
API CUresult cuMemUnmap(CUdeviceptr p, size_t size)
{
	for (uint64_t at = p; at < p + size;) {
		size_t got = 0;
		pthread_mutex_lock(&lock);
		for (struct block *b = blocks; b; b = b->next)
			if (b->addr == at && b->tag == T_MAPPED)
				got = b->size;
		pthread_mutex_unlock(&lock);
		if (!got)
			return at == p ? E_INVALID_VALUE : OK;
		drop(at, T_MAPPED);
		at += got;
	}
	return OK;
}

API CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const void *desc, size_t count)
{
	return p && size && desc && count ? OK : E_INVALID_VALUE;
}

/* ---- errors, export tables ---- */

API CUresult cuGetErrorString(CUresult e, const char **s)
{
	if (!s)
		return E_INVALID_VALUE;
	*s = e == OK ? "no error" : "error (cuda test double)";
	return OK;
}

API CUresult cuGetExportTable(const void **table, const void *id)
{
	return E_NOT_SUPPORTED;
}

/* ---- cuGetProcAddress ---- */

API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
				 unsigned long long flags, int *status);

/* (base name, first version, stream variant: -1 any, 0 legacy, 1 per-thread) */
struct proc {
	const char *name;
	int version;
	int stream;
	void *fn;
};
#define P(name, ver, fn) { name, ver, -1, (void *)fn }
#define PS(name, ver, stream, fn) { name, ver, stream, (void *)fn }
static const struct proc procs[] = {
	P("cuInit", 2000, cuInit),
	P("cuDriverGetVersion", 2020, cuDriverGetVersion),
	P("cuDeviceGetCount", 2000, cuDeviceGetCount),
	P("cuDeviceGet", 2000, cuDeviceGet),
	P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
	P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
	P("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
	P("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
	P("cuCtxCreate", 3020, cuCtxCreate_v2),
	P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
	P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
	P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
	P("cuMemAlloc", 3020, cuMemAlloc_v2),
	P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
	P("cuMemFree", 3020, cuMemFree_v2),
	P("cuMemAllocManaged", 6000, cuMemAllocManaged),
	P("cuMemHostAlloc", 2020, cuMemHostAlloc),
	P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
	P("cuMemFreeHost", 2000, cuMemFreeHost),
	P("cuMemHostRegister", 4000, cuMemHostRegister),
	P("cuMemHostRegister", 6050, cuMemHostRegister_v2),
	P("cuMemHostUnregister", 4000, cuMemHostUnregister),
	P("cuArrayCreate", 3020, cuArrayCreate_v2),
	P("cuArray3DCreate", 3020, cuArray3DCreate_v2),
	P("cuArrayDestroy", 2000, cuArrayDestroy),
	PS("cuMemAllocAsync", 11020, 0, cuMemAllocAsync),
	PS("cuMemAllocAsync", 11020, 1, cuMemAllocAsync_ptsz),
	PS("cuMemAllocFromPoolAsync", 11020, 0, cuMemAllocFromPoolAsync),
	PS("cuMemAllocFromPoolAsync", 11020, 1, cuMemAllocFromPoolAsync_ptsz),
	PS("cuMemFreeAsync", 11020, 0, cuMemFreeAsync),
	PS("cuMemFreeAsync", 11020, 1, cuMemFreeAsync_ptsz),
	P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
	P("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
	P("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
	P("cuGraphCreate", 10000, cuGraphCreate),
	P("cuGraphDestroy", 10000, cuGraphDestroy),
	P("cuGraphAddMemAllocNode", 11040, cuGraphAddMemAllocNode),
	P("cuGraphAddMemFreeNode", 11040, cuGraphAddMemFreeNode),
	P("cuDeviceGraphMemTrim", 11040, cuDeviceGraphMemTrim),
	P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
	P("cuMemCreate", 10020, cuMemCreate),
	P("cuMemRelease", 10020, cuMemRelease),
	P("cuMemAddressReserve", 10020, cuMemAddressReserve),
	P("cuMemAddressFree", 10020, cuMemAddressFree),
	P("cuMemMap", 10020, cuMemMap),
	P("cuMemUnmap", 10020, cuMemUnmap),
	P("cuMemSetAccess", 10020, cuMemSetAccess),
	P("cuGetErrorString", 6000, cuGetErrorString),
	P("cuGetExportTable", 3000, cuGetExportTable),
	P("cuGetProcAddress", 11030, cuGetProcAddress),
	P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
};

/* status: 0 found, 1 symbol not found, 2 version not sufficient. */
static CUresult lookup(const char *symbol, void **pfn, int version, unsigned long long flags,
		       int *status)
{
	const struct proc *best = NULL;
	int known = 0;
	int ptsz = (flags & 2) != 0;
	if (!symbol || !pfn)
		return E_INVALID_VALUE;
	*pfn = NULL;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		const struct proc *p = &procs[i];
		if (strcmp(p->name, symbol) != 0)
			continue;
		known = 1;
		if (p->version > version || (p->stream >= 0 && p->stream != ptsz))
			continue;
		if (!best || p->version > best->version)
			best = p;
	}
	if (status)
		*status = best ? 0 : known ? 2 : 1;
	if (!best)
		return E_NOT_FOUND;
	*pfn = best->fn;
	return OK;
}

API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags)
{
	return lookup(symbol, pfn, version, flags, NULL);
}

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
				 unsigned long long flags, int *status)
{
	return lookup(symbol, pfn, version, flags, status);
}
