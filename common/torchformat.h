/* common/torchformat.h - the TORCH section (format.h, docs/format.md): what
 * the runtime's PyTorch room learnt in a process that used PyTorch, for the
 * report's op names and CUDA columns.  Shared by torch_hooks/ and report/. */
#ifndef ML_COMMON_TORCHFORMAT_H
#define ML_COMMON_TORCHFORMAT_H

#include <stdint.h>

/* Section type; the number is kept apart from other branches' sections. */
#define ML_SEC_TORCH 16u

/*
 * ML_SEC_TORCH payload: one record, struct ml_fmt_torch, then
 * schemas_len bytes of operator schemas, then padding.  The schemas are
 * n_schemas pairs of NUL-terminated strings: the ATen operator's name
 * without its "aten::" namespace ("add", "max_pool2d_with_indices"), then
 * its overload name ("Tensor", "out", or "" for none), as PyTorch's
 * dispatcher lists them ("aten::add.Tensor"; torch_hooks/schemas.c says
 * which call gives them).  The report names the C++ function
 * at::_ops::<name>[_<overload>]::call after them.
 */
struct ml_fmt_torch {
	uint32_t flags;			/* ML_TORCH_* */
	uint32_t n_schemas;
	uint64_t block_allocs;		/* CUDA blocks PyTorch's allocator reported */
	uint64_t block_frees;
	uint64_t other_reports;		/* reports of other devices (CPU: torch.profiler on) */
	uint64_t tensor_frees;		/* CPU tensor storage freed (c10::free_cpu) */
	uint32_t schemas_len;
	uint32_t reserved;
};

/* Which signature of c10::reportMemoryUsageToProfiler was called. */
#define ML_TORCH_SIG_113 0x1u		/* (void*, int64_t, int64_t, int64_t, Device): 1.x */
#define ML_TORCH_SIG_2 0x2u		/* (void*, int64_t, size_t, size_t, Device): 2.x */
/* The real function was not found: torch.profiler's memory events were lost. */
#define ML_TORCH_NO_FORWARD 0x4u
/* The operator schemas were read (n_schemas pairs follow). */
#define ML_TORCH_SCHEMAS 0x8u
/* Reading the schemas failed (torch._C had none of the functions that list
 * them, or it raised); op names then come from the C++ symbols alone. */
#define ML_TORCH_SCHEMAS_FAILED 0x10u
/* More schemas than memline keeps: some were left out. */
#define ML_TORCH_SCHEMAS_TRUNCATED 0x20u
/* torch.autograd.profiler.record_function scopes are recorded as regions. */
#define ML_TORCH_RECORD_FUNCTION 0x40u

#endif
