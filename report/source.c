/* report/source.c - reads source files for the lines views, line by line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "report/regfile.h"
#include "report/source.h"

/* Reads the whole regular file at path (a FIFO or device is refused, not
 * waited on) and its modification time.  Returns 0 or -errno/ML_ENOTREG. */
static int read_all(const char *path, char **data, size_t *len, int64_t *mtime_ns)
{
	struct stat st;
	int fd = ml_regfile_open(path, &st, NULL);
	if (fd < 0)
		return fd;
	int err = 0;
	size_t size = (size_t)st.st_size;
	char *buf = (uint64_t)st.st_size < SIZE_MAX ? malloc(size + 1) : NULL;
	if (!buf)
		err = -ENOMEM;
	else
		err = ml_regfile_pread_all(fd, buf, size, 0);
	close(fd);
	if (err) {
		free(buf);
		return err;
	}
	buf[size] = '\0';
	*data = buf;
	*len = size;
	*mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	return 0;
}

static int split_lines(struct ml_source *s, size_t len)
{
	size_t n = 1;
	for (size_t i = 0; i < len; i++)
		n += s->data[i] == '\n';
	s->lines = calloc(n, sizeof(*s->lines));
	if (!s->lines)
		return -ENOMEM;
	char *p = s->data, *end = s->data + len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *stop = nl ? nl : end;
		if (stop > p && stop[-1] == '\r')
			stop[-1] = '\0';
		*stop = '\0';
		s->lines[s->n_lines++] = p;
		p = stop + 1;
	}
	return 0;
}

int ml_source_load(const char *path, struct ml_source *out)
{
	memset(out, 0, sizeof(*out));
	size_t len = 0;
	const char *found = path;
	int err = read_all(path, &out->data, &len, &out->mtime_ns);
	if (err == -ENOENT && strchr(path, '/')) {
		found = strrchr(path, '/') + 1;
		if (read_all(found, &out->data, &len, &out->mtime_ns) == 0)
			err = 0;
	}
	if (err < 0)
		return err;
	out->path = strdup(found);
	err = out->path ? split_lines(out, len) : -ENOMEM;
	if (err < 0)
		ml_source_free(out);
	return err;
}

const char *ml_source_line(const struct ml_source *s, int n)
{
	return n >= 1 && (size_t)n <= s->n_lines ? s->lines[n - 1] : NULL;
}

void ml_source_free(struct ml_source *s)
{
	free(s->path);
	free(s->data);
	free(s->lines);
	memset(s, 0, sizeof(*s));
}
