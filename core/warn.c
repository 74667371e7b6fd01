/* core/warn.c - the runtime's one-line diagnostics on stderr.  Uses write(2)
 * only, so it is async-signal-safe and never allocates. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/internal.h"
#include "common/sigsafe.h"

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

/* ML_ASSERT's failure (debug builds): one line, always printed, then abort.
 * write(2) only: it may fire in a hook or a signal handler. */
void ml_assert_fail(const char *what, const char *file, int line)
{
	char msg[512], num[24];
	size_t pos = 0;
	msg[0] = '\0';
	ml_sigsafe_utoa(num, (uint64_t)(line > 0 ? line : 0));
	const char *parts[] = { "memline: internal check failed: ", what, " (", file, ":", num,
				")\n" };
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		ml_sigsafe_append(msg, sizeof(msg), &pos, parts[i]);
	ssize_t r = write(2, msg, pos);
	(void)r;
	abort();
}

void ml_core_flag(uint32_t flag)
{
	__atomic_or_fetch(&ml_core_flags, flag, __ATOMIC_RELAXED);
}
