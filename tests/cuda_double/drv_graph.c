/* tests/cuda_double/drv_graph.c - graph memory nodes: three alloc nodes in
 * one graph; the first is freed by a free node of the same graph, the third
 * by cuMemFreeAsync after the graph is destroyed, the second never (a leak).
 * Two calls that fail (an alloc node on a bad location, a free node of an
 * unknown address) must record nothing.
 *   drv_graph v2|v1|dlsym
 * v2: cuGetProcAddress_v2 at 12000; v1: cuGetProcAddress at 11040; dlsym:
 * the exported symbols, found with dlsym as a program linked with -lcuda
 * would bind them. */
#include <string.h>
#include "drv_common.h"

typedef void *CUgraph;
typedef void *CUgraphNode;

/* CUmemPoolProps_v1 and CUDA_MEM_ALLOC_NODE_PARAMS_v1 from cuda.h. */
struct pool_props {
	int alloc_type, handle_types, location_type, location_id;
	void *win32_security_attributes;
	size_t max_size;
	unsigned short usage;
	unsigned char reserved[54];
};
struct alloc_params {
	struct pool_props pool_props;
	const void *access_descs;
	size_t access_desc_count;
	size_t bytesize;
	CUdeviceptr dptr;
};

typedef CUresult (*graph_create_t)(CUgraph *, unsigned int);
typedef CUresult (*graph_destroy_t)(CUgraph);
typedef CUresult (*add_alloc_t)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
				struct alloc_params *);
typedef CUresult (*add_free_t)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr);
typedef CUresult (*free_async_t)(CUdeviceptr, void *);

static void *driver;

/* name through the chosen door: cuGetProcAddress, or dlsym of sym. */
static void *find(const char *name, const char *sym, int version)
{
	if (!driver)
		return get(name, version);
	void *p = dlsym(driver, sym);
	if (!p) {
		fprintf(stderr, "no %s\n", sym);
		exit(3);
	}
	return p;
}

static struct alloc_params params(size_t bytes, int device)
{
	struct alloc_params p;
	memset(&p, 0, sizeof(p));
	p.pool_props.alloc_type = 1;		/* CU_MEM_ALLOCATION_TYPE_PINNED */
	p.pool_props.location_type = 1;		/* CU_MEM_LOCATION_TYPE_DEVICE */
	p.pool_props.location_id = device;
	p.bytesize = bytes;
	return p;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "v2";
	open_driver(strcmp(mode, "v1") != 0);
	int ver = strcmp(mode, "v1") == 0 ? 11040 : 12000;
	if (strcmp(mode, "dlsym") == 0) {
		driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!driver)
			return 2;
	}
	CUresult (*retain)(CUcontext *, int) = get("cuDevicePrimaryCtxRetain", 7000);
	CUresult (*set_current)(CUcontext) = get("cuCtxSetCurrent", 4000);
	graph_create_t create = (graph_create_t)find("cuGraphCreate", "cuGraphCreate", ver);
	graph_destroy_t destroy = (graph_destroy_t)find("cuGraphDestroy", "cuGraphDestroy", ver);
	add_alloc_t add_alloc = (add_alloc_t)find("cuGraphAddMemAllocNode",
						  "cuGraphAddMemAllocNode", ver);
	add_free_t add_free = (add_free_t)find("cuGraphAddMemFreeNode", "cuGraphAddMemFreeNode",
					       ver);
	free_async_t free_async = (free_async_t)find("cuMemFreeAsync", "cuMemFreeAsync", ver);

	CUcontext ctx;
	CHECK(retain(&ctx, 0));
	CHECK(set_current(ctx));
	CUgraph g;
	CHECK(create(&g, 0));
	CUgraphNode a, b, c, fa, bad;
	struct alloc_params pa = params(9000, 0), pb = params(9100, 0), pc = params(9200, 0);
	CHECK(add_alloc(&a, g, NULL, 0, &pa));	/* L:graph_freed */
	CHECK(add_alloc(&b, g, &a, 1, &pb));	/* L:graph_leak */
	CHECK(add_alloc(&c, g, &b, 1, &pc));	/* L:graph_later */
	CHECK(add_free(&fa, g, &c, 1, pa.dptr));
	/* Failures: a location the device double lacks; an address freed already. */
	struct alloc_params pbad = params(9300, 7);
	if (add_alloc(&bad, g, NULL, 0, &pbad) == 0)	/* L:graph_bad */
		return 7;
	if (add_free(&bad, g, NULL, 0, pa.dptr) == 0)
		return 7;
	CHECK(destroy(g));
	/* The graph is gone; its third allocation is not until freed. */
	CHECK(free_async(pc.dptr, NULL));
	printf("graph %d\n", pa.dptr && pb.dptr && pc.dptr);
	return 0;
}
