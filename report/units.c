/* report/units.c - binary units for byte counts (B, KiB, MiB, GiB), never "Mb". */
#include <math.h>
#include <stdio.h>
#include "report/units.h"

static const char *const unit_names[] = { "B", "KiB", "MiB", "GiB" };
#define N_UNITS (sizeof(unit_names) / sizeof(unit_names[0]))

char *ml_units_bytes(uint64_t bytes, char *buf, size_t len)
{
	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	double value = (double)bytes / 1024.0;
	size_t unit = 1;
	/* Move up while the value would print as 1024.00 or more. */
	while (unit + 1 < N_UNITS && value >= 1023.995) {
		value /= 1024.0;
		unit++;
	}
	snprintf(buf, len, "%.2f %s", value, unit_names[unit]);
	return buf;
}

char *ml_units_bytes_signed(int64_t bytes, char *buf, size_t len)
{
	if (bytes >= 0 || len < 2)
		return ml_units_bytes((uint64_t)bytes, buf, len);
	buf[0] = '-';
	ml_units_bytes((uint64_t)0 - (uint64_t)bytes, buf + 1, len - 1);
	return buf;
}

char *ml_units_seconds(uint64_t ns, char *buf, size_t len)
{
	snprintf(buf, len, "%llu.%03llu s", (unsigned long long)(ns / 1000000000ull),
		 (unsigned long long)(ns % 1000000000ull / 1000000ull));
	return buf;
}

uint64_t ml_stddev(uint64_t var)
{
	return (uint64_t)(sqrt((double)var) + 0.5);
}

char *ml_units_estimate(uint64_t bytes, char *buf, size_t len)
{
	char u[ML_UNITS_LEN];
	snprintf(buf, len, "~%s", ml_units_bytes(bytes, u, sizeof(u)));
	return buf;
}
