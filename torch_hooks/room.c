/* torch_hooks/room.c - the PyTorch room's place in the core's registry: in
 * a Python process, once the interpreter runs the program, the audit hook
 * that follows `import torch` (schemas.c); in a fork child, counts of its
 * own; its section in every profile of a process that used PyTorch. */
#include <stdlib.h>
#include <string.h>
#include "torch_hooks/internal.h"

struct ml_torch_state ml_torch;

/* MEMLINE_TORCH_PYTHON=0 leaves Python alone: no audit hook, so no
 * schemas (C++ ids as op names) and no record_function regions.  The hook
 * is added once the interpreter runs the program (python_ready), so that
 * it allocates and frees the hook's entry with one allocator. */
static void python_ready(void)
{
	const char *v = getenv("MEMLINE_TORCH_PYTHON");
	if (v && strcmp(v, "0") == 0)
		return;
	if (ml_torch_pyapi_find())
		ml_torch_schemas_start();
}

/* The child's blocks are its own from here on (the core forgot the live
 * ones); what was learnt of PyTorch stays true. */
static void fork_child(void)
{
	ml_torch.block_allocs = 0;
	ml_torch.block_frees = 0;
	ml_torch.other_reports = 0;
	ml_torch.tensor_frees = 0;
}

static const struct ml_room torch_room = {
	.name = "torch",
	.python_ready = python_ready,
	.fork_child = fork_child,
	.write_sections = ml_torch_write,
};
ML_ROOM(torch_room)
