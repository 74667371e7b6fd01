/* core/notes.c - sentences the runtime wants every report of this profile
 * to show (ML_SEC_NOTES): why some calls could not be seen, say.  Added at
 * start-up; a fork child keeps its parent's, an exec'd image starts anew. */
#include <string.h>
#include "core/internal.h"

#define NOTES_BYTES 4096u
#define NOTES_MAX 16u

static char text[NOTES_BYTES];
static uint32_t used;
static uint32_t len[NOTES_MAX];
static uint32_t n_notes;
static ml_spin_t lock;

void ml_core_note(const char *note)
{
	size_t n = strnlen(note, 1024);
	ml_spin_lock(&lock);
	if (n_notes < NOTES_MAX && used + n <= NOTES_BYTES) {
		memcpy(text + used, note, n);
		len[n_notes++] = (uint32_t)n;
		used += (uint32_t)n;
	}
	ml_spin_unlock(&lock);
}

void ml_notes_write(struct ml_writer *w)
{
	if (!n_notes)
		return;
	ml_writer_begin(w, ML_SEC_NOTES);
	for (uint32_t i = 0, at = 0; i < n_notes; at += len[i], i++) {
		struct ml_fmt_note r = { .len = len[i] };
		ml_writer_put(w, &r, sizeof(r));
		ml_writer_put(w, text + at, len[i]);
		ml_writer_record(w);
	}
	ml_writer_end(w);
}

void ml_notes_after_fork(void)
{
	lock.locked = 0;
}
