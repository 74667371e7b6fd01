/* report/source.c - reads source files for the lines view, line by line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/source.h"

/* Reads the whole file at path.  Returns 0 or -errno. */
static int read_all(const char *path, char **data, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	int err = 0;
	size_t cap = 8192, used = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		size_t got = fread(buf + used, 1, cap - used, f);
		used += got;
		if (used < cap)
			break;
		char *more = realloc(buf, cap * 2 + 1);
		if (!more) {
			err = -ENOMEM;
			goto out;
		}
		buf = more;
		cap *= 2;
	}
	if (ferror(f)) {
		err = -EIO;
		goto out;
	}
	buf[used] = '\0';
	*data = buf;
	*len = used;
	buf = NULL;
out:
	free(buf);
	fclose(f);
	return err;
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
	int err = read_all(path, &out->data, &len);
	if (err == -ENOENT && strchr(path, '/')) {
		found = strrchr(path, '/') + 1;
		if (read_all(found, &out->data, &len) == 0)
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
