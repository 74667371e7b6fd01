/* cuda_hooks/record.c - what the CUDA hooks record: blocks allocated and
 * freed (in the core's tables and in cuda_hooks/blocks), the context each
 * belongs to, and the size of an array.  The guard is held by the callers. */
#include <stdbool.h>
#include <stdint.h>
#include "cuda_hooks/blocks.h"
#include "cuda_hooks/internal.h"

/* The driver's cuCtxGetCurrent, found once. */
static CUresult (*volatile ctx_get)(CUcontext *);

static void find_ctx_get(void)
{
	void *p = NULL;
	ml_cu_query_result st = 0;
	if (ml_cuda_gpa_v2_real)
		((ml_cu_gpa_v2)ml_cuda_gpa_v2_real)("cuCtxGetCurrent", &p, 4000, 0, &st);
	if (!p && ml_cuda_gpa_v1_real)
		((ml_cu_gpa_v1)ml_cuda_gpa_v1_real)("cuCtxGetCurrent", &p, 4000, 0);
	if (!p)
		p = ml_cuda_next_sym("cuCtxGetCurrent");
	if (p)
		ctx_get = (CUresult (*)(CUcontext *))p;
}

/* The calling thread's current context (NULL if none or unknown).  Guard held. */
void *ml_cuda_current_ctx(void)
{
	CUcontext c = NULL;
	if (!ctx_get)
		find_ctx_get();
	if (ctx_get && ctx_get(&c) != ML_CUDA_SUCCESS)
		c = NULL;
	return c;
}

void ml_cuda_note_alloc(uint64_t addr, size_t size, uint32_t kind, bool with_ctx)
{
	if (!addr)
		return;
	if (GPU_KINDS & BIT(kind))
		ml_track_alloc_also((void *)(uintptr_t)addr, size, (enum ml_kind)kind, K_GPU);
	else
		ml_track_alloc((void *)(uintptr_t)addr, size, (enum ml_kind)kind);
	ml_cuda_blocks_put(addr, kind, with_ctx ? ml_cuda_current_ctx() : NULL);
}

void ml_cuda_free_begin(uint64_t addr, uint32_t kinds, struct pending *p)
{
	p->held.addr = 0;
	p->gpu.addr = 0;
	p->in_blocks = addr && ml_cuda_blocks_take(addr, kinds, &p->kind, &p->ctx);
	if (p->in_blocks) {
		ml_track_detach((void *)(uintptr_t)addr, (enum ml_kind)p->kind, &p->held);
	} else {
		for (uint32_t k = 0; addr && k < ML_KIND_COUNT; k++)
			if ((kinds & BIT(k)) &&
			    ml_track_detach((void *)(uintptr_t)addr, (enum ml_kind)k, &p->held)) {
				p->kind = k;
				break;
			}
	}
	if (p->held.addr && (GPU_KINDS & BIT(p->kind)))
		ml_track_detach((void *)(uintptr_t)addr, K_GPU, &p->gpu);
}

void ml_cuda_free_end(uint64_t addr, const struct pending *p, bool ok)
{
	if (ok) {	/* the GPU total first: it never holds a block its kind lacks */
		ml_track_release(&p->gpu);
		ml_track_release(&p->held);
		return;
	}
	ml_track_reattach(&p->held);
	ml_track_reattach(&p->gpu);
	if (p->in_blocks)
		ml_cuda_blocks_put(addr, p->kind, p->ctx);
}

void ml_cuda_sweep_one(uint64_t addr, uint32_t kind, void *arg)
{
	if (GPU_KINDS & BIT(kind))	/* the GPU total first, as in ml_cuda_free_end */
		ml_track_free((void *)(uintptr_t)addr, K_GPU);
	ml_track_free((void *)(uintptr_t)addr, (enum ml_kind)kind);
}

/* ---- arrays: the logical size, width x height x depth x channels x element ---- */

static size_t element_bytes(int format)
{
	switch (format) {
	case 0x01: case 0x08: case 0xc0: case 0xc6: return 1;	/* int8, unorm/snorm int8x1 */
	case 0x02: case 0x09: case 0x10: case 0xc1: case 0xc3: case 0xc7: case 0xc9:
		return 2;
	case 0x03: case 0x0a: case 0x20: case 0xc2: case 0xc4: case 0xc8: case 0xca:
		return 4;
	case 0xc5: case 0xcb: return 8;
	default: return 1;	/* block-compressed and video formats: 1 byte per element */
	}
}

size_t ml_cuda_array_bytes(size_t w, size_t h, size_t d, int format, unsigned int channels)
{
	return w * (h ? h : 1) * (d ? d : 1) * (channels ? channels : 1) * element_bytes(format);
}

