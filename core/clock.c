/* core/clock.c - timestamps: the TSC on the hot path, converted to
 * nanoseconds against CLOCK_MONOTONIC when the profile is written. */
#include <time.h>
#include "core/internal.h"

static uint64_t start_tsc, start_mono_ns, start_real_ns;

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
	start_tsc = ml_tsc();
}

uint64_t ml_clock_start_tsc(void)
{
	return start_tsc;
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

uint64_t ml_clock_tsc_to_ns(uint64_t tsc_delta)
{
	uint64_t ns_span = ml_clock_elapsed_ns();
	uint64_t tsc_span = ml_tsc() - start_tsc;
	if (tsc_span == 0)
		return 0;
	unsigned __int128 ns = (unsigned __int128)tsc_delta * ns_span / tsc_span;
	return ns > ns_span ? ns_span : (uint64_t)ns;
}
