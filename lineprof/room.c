/* lineprof/room.c - the line timer's and the regions' place in the core's
 * registry (struct ml_room, core/core.h): start-up, fork children, the
 * program taking SIGPROF, and the SAMPLES / REGIONS sections. */
#include <errno.h>
#include <signal.h>
#include "core/core.h"
#include "lineprof/internal.h"

/* Starts the sampler when MEMLINE_LINES=1 (MEMLINE_CLOCK, MEMLINE_RATE).
 * Never fails: trouble is a warning and the program runs without line
 * timing.  Regions need no start. */
static void start(void)
{
	ml_lp_config_load();
	if (!ml_lp_config.lines)
		return;
	int rc = ml_lp_sampler_start();
	if (rc < 0 && rc != -EBUSY)
		ml_warn("cannot start the line timer; the program runs without line timing");
}

/* A fork child reports only what it did itself. */
static void fork_child(void)
{
	ml_lp_regions_reset();
	ml_lp_spans_reset();
	ml_lp_sampler_after_fork();
}

/* SIGPROF belongs to the program if it asks (sigaction, signal; setitimer
 * is lineprof/hooks.c's). */
static void signal_taken(int sig)
{
	if (sig == SIGPROF)
		ml_lp_step_aside();
}

static const struct ml_room lineprof_room = {
	.name = "lineprof",
	.start = start,
	.fork_child = fork_child,
	.thread_end = ml_lp_sampler_thread_end,
	.signal_taken = signal_taken,
	.write_sections = ml_lp_write_sections,
};
ML_ROOM(lineprof_room)
