/* process/room.c - the process room's place in the core's registry: at
 * start-up it remembers what exec'd programs need (exec_env.c). */
#include "core/core.h"
#include "process/internal.h"

static const struct ml_room process_room = {
	.name = "process",
	.start = ml_proc_env_start,
};
ML_ROOM(process_room)
