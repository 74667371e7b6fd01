/* common/sigsafe.h - helpers for code that runs in signal handlers, at exit
 * and before exec (the runtime's profile writer, its warnings): strings and
 * descriptors; no malloc, no stdio, no locale, async-signal-safe. */
#ifndef ML_COMMON_SIGSAFE_H
#define ML_COMMON_SIGSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Appends src to the NUL-terminated dst at *pos (cap bytes in all),
 * keeping room for the NUL; advances *pos.  Returns false, dst unchanged,
 * when it does not fit. */
bool ml_sigsafe_append(char *dst, size_t cap, size_t *pos, const char *src);

/* Writes v in decimal, NUL-terminated, to out (at most 21 bytes). */
void ml_sigsafe_utoa(char out[24], uint64_t v);

/* Appends the words for errno value err to dst, as ml_sigsafe_append:
 * "No space left on device (ENOSPC)", or "error 4242" for a value glibc
 * has no words for.  From glibc's static tables, untranslated: never
 * allocates (strerror may). */
bool ml_sigsafe_append_errno(char *dst, size_t cap, size_t *pos, int err);
/* Moves a descriptor the runtime opened for a moment to a high number
 * (below 1024 and the descriptor limit), where a program that opens files
 * or dup2()s onto low numbers (3, 4, ...) does not meet it.  Returns the
 * new descriptor (close-on-exec), or fd itself when it cannot move. */
int ml_sigsafe_fd_private(int fd);

#endif
