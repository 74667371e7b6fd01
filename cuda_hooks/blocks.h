/* cuda_hooks/blocks.h - the CUDA blocks memline saw allocated, with the kind
 * and the context of each, so that a free that does not name its kind
 * (cuMemFree, cuMemFreeAsync) finds it, and a destroyed context releases what
 * it held.  Kept apart from the core's live table; never uses malloc. */
#ifndef ML_CUDA_BLOCKS_H
#define ML_CUDA_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>

/* Remembers (addr, kind) allocated in context ctx (may be NULL).  Returns
 * false when the table is full or cannot be mapped (the block is then only
 * in the core's live table).  Thread-safe. */
bool ml_cuda_blocks_put(uint64_t addr, uint32_t kind, void *ctx);

/* Forgets the block at addr whose kind is one of the bits of kinds (tried
 * from the lowest kind up); returns true with *kind and *ctx set, false if
 * none.  Thread-safe. */
bool ml_cuda_blocks_take(uint64_t addr, uint32_t kinds, uint32_t *kind, void **ctx);

/* Forgets every block of context ctx whose kind is in kinds, calling
 * fn(addr, kind, arg) for each (with the table's lock held: fn must not call
 * back into this module).  Returns how many. */
uint64_t ml_cuda_blocks_sweep(void *ctx, uint32_t kinds,
			      void (*fn)(uint64_t addr, uint32_t kind, void *arg), void *arg);

/* Forgets everything (fork child: the GPU state is not inherited). */
void ml_cuda_blocks_reset(void);

#endif
