/* torch_hooks/write.c - the TORCH section (common/torchformat.h): written
 * only by a process where PyTorch showed itself (a block reported, the
 * hooks called, or schemas read).  Async-signal-safe: no malloc, no stdio. */
#include "torch_hooks/internal.h"

void ml_torch_write(struct ml_writer *w)
{
	struct ml_fmt_torch rec = {
		.flags = __atomic_load_n(&ml_torch.flags, __ATOMIC_RELAXED),
		.block_allocs = __atomic_load_n(&ml_torch.block_allocs, __ATOMIC_RELAXED),
		.block_frees = __atomic_load_n(&ml_torch.block_frees, __ATOMIC_RELAXED),
		.other_reports = __atomic_load_n(&ml_torch.other_reports, __ATOMIC_RELAXED),
		.tensor_frees = __atomic_load_n(&ml_torch.tensor_frees, __ATOMIC_RELAXED),
	};
	/* The schemas are published with their flag, after they were copied. */
	if (rec.flags & ML_TORCH_SCHEMAS) {
		rec.n_schemas = ml_torch.n_schemas;
		rec.schemas_len = ml_torch.schemas_len;
	}
	if (!rec.flags && !rec.block_allocs && !rec.other_reports && !rec.tensor_frees)
		return;
	ml_writer_begin(w, ML_SEC_TORCH);
	ml_writer_put(w, &rec, sizeof(rec));
	if (rec.schemas_len)
		ml_writer_put(w, ml_torch.schemas, rec.schemas_len);
	ml_writer_record(w);
	ml_writer_end(w);
}
