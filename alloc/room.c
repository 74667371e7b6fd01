/* alloc/room.c - the allocation room's place in the core's registry: at
 * start-up it checks that memline's malloc is the one the program gets. */
#include "core/core.h"
#include "alloc/real.h"

static const struct ml_room alloc_room = {
	.name = "alloc",
	.start = ml_real_check_first,
};
ML_ROOM(alloc_room)
