/* report/regfile.h - opening the files a report reads (profiles, modules,
 * debug files, sources, coverage data): regular files only, never blocking
 * on a FIFO or a device. */
#ifndef ML_REPORT_REGFILE_H
#define ML_REPORT_REGFILE_H

#include <stddef.h>
#include <sys/stat.h>

/* Returned for a path that exists but is not a regular file (a FIFO, a
 * device, a socket; -EISDIR for a directory). */
#define ML_ENOTREG (-4096)	/* beyond every errno value */

/* Opens path read-only (close-on-exec) if it is a regular file, without
 * blocking whatever it is.  Returns the descriptor (blocking reads, the
 * caller closes it) with *st filled when st is not NULL, or -errno, or
 * ML_ENOTREG; on a negative return what names the kind of file found
 * when what is not NULL ("a FIFO", "a directory", ...). */
int ml_regfile_open(const char *path, struct stat *st, const char **what);

/* The kind of file mode describes, for messages: "a FIFO", "a character
 * device", "a block device", "a socket", "a directory", "a regular file". */
const char *ml_regfile_kind(mode_t mode);

/* A one-line reason for a negative return of ml_regfile_open, in words:
 * "is a FIFO, not a regular file", "No such file or directory", ... */
const char *ml_regfile_why(int err, const char *what, char *buf, size_t len);

/* Reads exactly len bytes at offset off of fd into buf.  Returns 0, or
 * -errno, or -EIO when the file ends first. */
int ml_regfile_pread_all(int fd, void *buf, size_t len, size_t off);

#endif
