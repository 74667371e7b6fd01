/* lineprof/nvtx.h - NVTX v3 injection entry (used by lineprof/hooks.c). */
#ifndef ML_LINEPROF_NVTX_H
#define ML_LINEPROF_NVTX_H

/* Fills NVTX's core callback table with our range handlers.
 * get_export_table is NVTX's NvtxGetExportTableFunc_t.  Returns 1 on
 * success (NVTX's convention), 0 when the table is not what we expect. */
int ml_lp_nvtx_init(const void *get_export_table);

#endif
