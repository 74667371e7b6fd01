/* lineprof/config.c - the line timer's settings, from the environment that
 * `memline run --lines [--clock C] [--rate HZ]` sets. */
#include <stdlib.h>
#include <string.h>
#include "core/core.h"
#include "lineprof/internal.h"

struct ml_lp_config ml_lp_config = {
	.clock = ML_CLOCK_CPU, .rate_hz = ML_LP_RATE_DEFAULT,
	.period_ns = 1000000000ull / ML_LP_RATE_DEFAULT,
};

uint32_t ml_lp_parse_rate(const char *s)
{
	uint64_t v = 0;
	if (!s || !*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > ML_LP_RATE_MAX)
			return 0;
	}
	return v >= ML_LP_RATE_MIN ? (uint32_t)v : 0;
}

uint32_t ml_lp_parse_clock(const char *s)
{
	if (!s)
		return 0;
	if (strcmp(s, "cpu") == 0)
		return ML_CLOCK_CPU;
	if (strcmp(s, "wall") == 0)
		return ML_CLOCK_WALL;
	return 0;
}

void ml_lp_config_load(void)
{
	const char *v = getenv("MEMLINE_LINES");
	ml_lp_config.lines = v && strcmp(v, "1") == 0;
	ml_lp_config.clock = ML_CLOCK_CPU;
	ml_lp_config.rate_hz = ML_LP_RATE_DEFAULT;
	if ((v = getenv("MEMLINE_CLOCK")) && *v) {
		uint32_t c = ml_lp_parse_clock(v);
		if (c)
			ml_lp_config.clock = c;
		else
			ml_warn("MEMLINE_CLOCK is not cpu or wall; using cpu");
	}
	if ((v = getenv("MEMLINE_RATE")) && *v) {
		uint32_t r = ml_lp_parse_rate(v);
		if (r)
			ml_lp_config.rate_hz = r;
		else
			ml_warn("MEMLINE_RATE is not a rate in Hz (1 to 100000); using 997");
	}
	ml_lp_config.period_ns = 1000000000ull / ml_lp_config.rate_hz;
}
