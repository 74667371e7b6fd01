/* report/source.h - a source file read into memory, split into lines. */
#ifndef ML_REPORT_SOURCE_H
#define ML_REPORT_SOURCE_H

#include <stddef.h>
#include <stdint.h>

struct ml_source {
	char *path;		/* where it was found */
	char *data;		/* the file, lines NUL-terminated in place */
	char **lines;		/* lines[0] is line 1 */
	size_t n_lines;
	int64_t mtime_ns;	/* its modification time, ns since the epoch */
};

/* Reads path; if it is not there, tries its base name in the current
 * directory (a build tree moved since compilation).  Only a regular file is
 * read.  Returns 0 and fills *out (release with ml_source_free), or -errno
 * (ML_ENOTREG for a FIFO, device or socket).  Line ends (\n, \r\n)
 * are removed. */
int ml_source_load(const char *path, struct ml_source *out);

/* The text of line n (1-based), or NULL past the end. */
const char *ml_source_line(const struct ml_source *s, int n);

void ml_source_free(struct ml_source *s);

#endif
