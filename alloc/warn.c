/* alloc/warn.c - the runtime's one-line diagnostics on stderr.  Uses write(2)
 * only, so it is async-signal-safe and never allocates. */
#include <string.h>
#include <unistd.h>
#include "alloc/internal.h"

volatile int ml_degraded;

void ml_warn(const char *msg)
{
	if (ml_config.quiet)
		return;
	char line[512];
	size_t n = 0, len = strlen(msg);
	static const char prefix[] = "memline: ";
	memcpy(line, prefix, sizeof(prefix) - 1);
	n = sizeof(prefix) - 1;
	if (len > sizeof(line) - n - 1)
		len = sizeof(line) - n - 1;
	memcpy(line + n, msg, len);
	n += len;
	line[n++] = '\n';
	ssize_t r = write(2, line, n);
	(void)r;
}

void ml_warn_once(const char *msg)
{
	static int warned;
	__atomic_or_fetch(&ml_core_flags, ML_META_DEGRADED, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&warned, 1, __ATOMIC_ACQ_REL) == 0)
		ml_warn(msg);
}

void ml_degrade(const char *msg)
{
	__atomic_or_fetch(&ml_core_flags, ML_META_DEGRADED, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&ml_degraded, 1, __ATOMIC_ACQ_REL) == 0)
		ml_warn(msg);
}
