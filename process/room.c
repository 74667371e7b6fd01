/* process/room.c - the process room's place in the core's registry: at
 * start-up it remembers what exec'd programs need (exec_env.c), finds what
 * RTLD_DEEPBIND libraries need (deepbind.c) and registers the
 * at_quick_exit handler that writes the profile. */
#include <stdlib.h>
#include "core/core.h"
#include "process/internal.h"

/* Registered first, so run last: after the program's own handlers. */
static void after_quick_exit_handlers(void)
{
	ml_lifecycle_quick_exit_handlers_done();
}

static void start(void)
{
	ml_proc_env_start();
	ml_proc_deepbind_start();
	if (at_quick_exit(after_quick_exit_handlers) != 0)
		ml_warn("cannot register an at_quick_exit handler; quick_exit writes no profile");
}

static const struct ml_room process_room = {
	.name = "process",
	.start = start,
};
ML_ROOM(process_room)
