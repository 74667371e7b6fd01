/* core/warn.c - the runtime's one-line diagnostics.  Each is kept for the
 * profile (WARNINGS section: `memline run` shows those the program's stderr
 * did not) and printed on stderr only while descriptor 2 is still the
 * stream it was at start-up: a program that closed stderr and opened a
 * file of its own on descriptor 2 never finds memline's lines in it.
 * Uses write(2) and fstat(2) only: async-signal-safe, never allocates. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/internal.h"
#include "common/sigsafe.h"

volatile int ml_degraded;

#define KEPT_MAX 16u
#define KEPT_LEN 240u

/* What descriptor 2 was at start-up (valid: it was open). */
static struct { dev_t dev; ino_t ino; bool valid; } stderr_id;

/* The warnings of this process, for the profile. */
static struct {
	char text[KEPT_LEN];
	uint32_t len;
	uint32_t flags;		/* ML_WARNING_* */
	volatile int ready;
} kept[KEPT_MAX];
static uint32_t n_kept;		/* slots taken (atomic) */

void ml_warn_init(void)
{
	struct stat st;
	stderr_id.valid = fstat(2, &st) == 0;
	if (stderr_id.valid) {
		stderr_id.dev = st.st_dev;
		stderr_id.ino = st.st_ino;
	}
}

bool ml_stderr_is_ours(void)
{
	struct stat st;
	return stderr_id.valid && fstat(2, &st) == 0 && st.st_dev == stderr_id.dev &&
		st.st_ino == stderr_id.ino;
}

static void keep(const char *msg, size_t len, uint32_t flags)
{
	uint32_t i = __atomic_fetch_add(&n_kept, 1, __ATOMIC_ACQ_REL);
	if (i >= KEPT_MAX) {
		n_kept = KEPT_MAX;
		return;	/* the first ones tell the story */
	}
	if (len > KEPT_LEN)
		len = KEPT_LEN;
	memcpy(kept[i].text, msg, len);
	kept[i].len = (uint32_t)len;
	kept[i].flags = flags;
	__atomic_store_n(&kept[i].ready, 1, __ATOMIC_RELEASE);
}

void ml_warn(const char *msg)
{
	char line[512];
	size_t n = 0, len = strlen(msg);
	static const char prefix[] = "memline: ";
	bool show = !ml_config.quiet && ml_stderr_is_ours();
	keep(msg, len, show ? ML_WARNING_SHOWN : 0);
	if (!show)
		return;
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

void ml_warn_put_section(struct ml_writer *w)
{
	uint32_t n = __atomic_load_n(&n_kept, __ATOMIC_ACQUIRE);
	if (n > KEPT_MAX)
		n = KEPT_MAX;
	if (!n)
		return;
	ml_writer_begin(w, ML_SEC_WARNINGS);
	for (uint32_t i = 0; i < n; i++) {
		if (!__atomic_load_n(&kept[i].ready, __ATOMIC_ACQUIRE))
			continue;
		struct ml_fmt_warning r = { .flags = kept[i].flags, .text_len = kept[i].len };
		ml_writer_put(w, &r, sizeof(r));
		ml_writer_put(w, kept[i].text, kept[i].len);
		ml_writer_record(w);
	}
	ml_writer_end(w);
}

void ml_warn_after_fork(void)
{
	/* The child's profile holds its own warnings only. */
	for (uint32_t i = 0; i < KEPT_MAX; i++)
		kept[i].ready = 0;
	n_kept = 0;
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
