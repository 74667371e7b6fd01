/* cuda_hooks/room.c - the CUDA room's place in the core's registry: a fork
 * child forgets the parent's CUDA blocks (the core forgot its live blocks
 * too; GPU state is not inherited). */
#include "cuda_hooks/internal.h"
#include "cuda_hooks/blocks.h"

static const struct ml_room cuda_room = {
	.name = "cuda",
	.fork_child = ml_cuda_blocks_reset,
};
ML_ROOM(cuda_room)
