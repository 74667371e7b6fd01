/* core/clock.c - timestamps: the start-up clocks the profile counts from
 * (the hot path reads the coarse monotonic clock, core/timeline.c). */
#include <time.h>
#include "core/internal.h"

static uint64_t start_mono_ns, start_real_ns;

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void ml_clock_start(void)
{
	start_mono_ns = now_ns(CLOCK_MONOTONIC);
	start_real_ns = now_ns(CLOCK_REALTIME);
}

uint64_t ml_clock_start_realtime_ns(void)
{
	return start_real_ns;
}

uint64_t ml_clock_start_mono_ns(void)
{
	return start_mono_ns;
}

uint64_t ml_clock_elapsed_ns(void)
{
	return now_ns(CLOCK_MONOTONIC) - start_mono_ns;
}
