/* cuda_hooks/driver.h - the few CUDA driver API types memline needs, declared
 * from the public driver API documentation (cuda.h), so that the runtime
 * builds without the toolkit and never links libcuda.  64-bit only. */
#ifndef ML_CUDA_DRIVER_H
#define ML_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;			/* enum cudaError_enum */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;	/* CUdeviceptr_v2 */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUarray_st *CUarray;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;

#define ML_CUDA_SUCCESS 0
#define ML_CUDA_ERROR_INVALID_VALUE 1
#define ML_CUDA_ERROR_NOT_INITIALIZED 3
#define ML_CUDA_ERROR_NOT_FOUND 500

/* cuGetProcAddress flags (CUdriverProcAddress_flags). */
#define ML_CU_GET_PROC_ADDRESS_DEFAULT 0
#define ML_CU_GET_PROC_ADDRESS_LEGACY_STREAM 1
#define ML_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2

/* CUdriverProcAddressQueryResult. */
typedef int ml_cu_query_result;

/* CUDA_ARRAY_DESCRIPTOR_v2 and CUDA_ARRAY3D_DESCRIPTOR_v2. */
struct ml_cu_array_desc {
	size_t Width;
	size_t Height;
	int Format;			/* CUarray_format */
	unsigned int NumChannels;
};
struct ml_cu_array3d_desc {
	size_t Width;
	size_t Height;
	size_t Depth;
	int Format;
	unsigned int NumChannels;
	unsigned int Flags;
};

/* CUmemPoolProps_v1: only its size matters to memline (88 bytes). */
struct ml_cu_mem_pool_props {
	int allocType;			/* CUmemAllocationType */
	int handleTypes;		/* CUmemAllocationHandleType */
	struct {
		int type;		/* CUmemLocationType */
		int id;
	} location;			/* CUmemLocation */
	void *win32SecurityAttributes;
	size_t maxSize;
	unsigned short usage;
	unsigned char reserved[54];
};

/* CUDA_MEM_ALLOC_NODE_PARAMS_v1 (cuGraphAddMemAllocNode): bytesize in,
 * dptr out (the address the graph's allocation will have). */
struct ml_cu_mem_alloc_node_params {
	struct ml_cu_mem_pool_props poolProps;
	const void *accessDescs;	/* const CUmemAccessDesc * */
	size_t accessDescCount;
	size_t bytesize;
	CUdeviceptr dptr;
};
_Static_assert(sizeof(struct ml_cu_mem_pool_props) == 88, "CUmemPoolProps layout");
_Static_assert(offsetof(struct ml_cu_mem_alloc_node_params, bytesize) == 104 &&
		       offsetof(struct ml_cu_mem_alloc_node_params, dptr) == 112,
	       "CUDA_MEM_ALLOC_NODE_PARAMS layout");

/* cuGetProcAddress (CUDA 11.3 - 11.8 ABI) and cuGetProcAddress_v2 (12.0+). */
typedef CUresult (*ml_cu_gpa_v1)(const char *symbol, void **pfn, int version, uint64_t flags);
typedef CUresult (*ml_cu_gpa_v2)(const char *symbol, void **pfn, int version, uint64_t flags,
				 ml_cu_query_result *status);

#endif
