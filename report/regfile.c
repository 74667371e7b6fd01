/* report/regfile.c - opening the files a report reads: regular files only,
 * never blocking on a FIFO or a device (see regfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "report/regfile.h"

const char *ml_regfile_kind(mode_t mode)
{
	if (S_ISREG(mode))
		return "a regular file";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

int ml_regfile_open(const char *path, struct stat *st, const char **what)
{
	struct stat own;
	struct stat *s = st ? st : &own;
	/* O_NONBLOCK: opening a FIFO without a writer would wait for one. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	int err;

	if (what)
		*what = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, s) < 0) {
		err = -errno;
		goto fail;
	}
	if (!S_ISREG(s->st_mode)) {
		if (what)
			*what = ml_regfile_kind(s->st_mode);
		err = S_ISDIR(s->st_mode) ? -EISDIR : ML_ENOTREG;
		goto fail;
	}
	/* Regular file reads never block; clear it so reads behave plainly. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		err = -errno;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return err;
}

const char *ml_regfile_why(int err, const char *what, char *buf, size_t len)
{
	if ((err == ML_ENOTREG || err == -EISDIR) && what)
		snprintf(buf, len, "is %s, not a regular file", what);
	else if (err == ML_ENOTREG || err == -EISDIR)
		snprintf(buf, len, "is not a regular file");
	else
		snprintf(buf, len, "%s", strerror(-err));
	return buf;
}

int ml_regfile_pread_all(int fd, void *buf, size_t len, size_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}
