/* lineprof/init.c - starts lineprof from the runtime's constructor. */
#include <errno.h>
#include <pthread.h>
#include "lineprof/lineprof.h"
#include "lineprof/internal.h"
#include "alloc/internal.h"	/* ml_warn */

/* A fork child reports only what it did itself. */
static void after_fork_child(void)
{
	ml_lp_regions_reset();
	ml_lp_spans_reset();
	ml_lp_sampler_after_fork();
}

void ml_lineprof_init(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
	ml_lp_config_load();
	if (!ml_lp_config.lines)
		return;
	int rc = ml_lp_sampler_start();
	if (rc < 0 && rc != -EBUSY)
		ml_warn("cannot start the line timer; the program runs without line timing");
}
