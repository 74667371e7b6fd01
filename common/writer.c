/* common/writer.c - writes a profile file (format.h) through a temporary file.
 * Async-signal-safe: plain syscalls on a caller-provided struct, no malloc,
 * no stdio, no locks.  It does not build sections' contents: callers do. */
#include "common/writer.h"
#include "common/format.h"
#include "common/sigsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>		/* rename(), a plain syscall wrapper */
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FNV_PRIME 0x100000001b3ull
#define HEADER_SIZE ((uint64_t)sizeof(struct ml_fmt_header))
#define SECTION_HEADER_SIZE ((uint64_t)sizeof(struct ml_fmt_section))

_Static_assert(sizeof(struct ml_fmt_header) == 64, "header is 64 bytes");
_Static_assert(sizeof(struct ml_fmt_section) == 16, "section header is 16 bytes");

uint64_t ml_fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= FNV_PRIME;
	}
	return h;
}

/* Writes all of len bytes at the current position, across EINTR and short
 * writes.  Returns 0 or -errno. */
static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* pwrite() counterpart of write_all(). */
static int pwrite_all(int fd, const void *data, size_t len, uint64_t off)
{
	const char *p = data;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Records the first error; every later call sees it. */
static int fail(struct ml_writer *w, int err)
{
	if (!w->error)
		w->error = err;
	return w->error;
}

/* -EFBIG when [off, off + len) reaches past the file size limit. */
static int check_limit(const struct ml_writer *w, uint64_t off, size_t len)
{
	return off + len > w->size_limit ? -EFBIG : 0;
}

static int flush(struct ml_writer *w)
{
	int rc;

	if (w->error)
		return w->error;
	rc = check_limit(w, w->offset - w->buf_len, w->buf_len);
	if (!rc)
		rc = write_all(w->fd, w->buf, w->buf_len);
	if (rc)
		return fail(w, rc);
	w->buf_len = 0;
	return 0;
}

/* Buffered append, with no open-section check (used for headers too). */
static int append(struct ml_writer *w, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len) {
		size_t room = sizeof(w->buf) - w->buf_len;
		size_t n = len < room ? len : room;

		if (w->error)
			return w->error;
		memcpy(w->buf + w->buf_len, p, n);
		w->buf_len += n;
		w->offset += n;
		p += n;
		len -= n;
		if (w->buf_len == sizeof(w->buf) && flush(w))
			return w->error;
	}
	return w->error;
}

static int pad8(struct ml_writer *w)
{
	static const unsigned char zeros[ML_FMT_ALIGN];
	size_t rem = (size_t)(w->offset % ML_FMT_ALIGN);

	return rem ? append(w, zeros, ML_FMT_ALIGN - rem) : w->error;
}

/* RLIMIT_FSIZE now (UINT64_MAX: none). */
static uint64_t file_size_limit(void)
{
	struct rlimit rl;
	if (syscall(SYS_prlimit64, 0, RLIMIT_FSIZE, NULL, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	return (uint64_t)rl.rlim_cur;
}

int ml_writer_open(struct ml_writer *w, const char *final_path, unsigned mode)
{
	static const unsigned char zero_header[sizeof(struct ml_fmt_header)];
	char pid[24];
	size_t pos = 0;

	w->fd = -1;
	w->mode = mode & 07777;
	w->size_limit = file_size_limit();
	w->offset = 0;
	w->checksum = ML_FNV_INIT;
	w->section_count = 0;
	w->section_start = 0;
	w->section_type = 0;
	w->section_records = 0;
	w->error = 0;
	w->buf_len = 0;
	w->tmp_path[0] = '\0';

	ml_sigsafe_utoa(pid, (uint64_t)getpid());
	if (!ml_sigsafe_append(w->tmp_path, sizeof(w->tmp_path), &pos, final_path) ||
	    !ml_sigsafe_append(w->tmp_path, sizeof(w->tmp_path), &pos, ".tmp.") ||
	    !ml_sigsafe_append(w->tmp_path, sizeof(w->tmp_path), &pos, pid)) {
		w->tmp_path[0] = '\0';
		return fail(w, -ENAMETOOLONG);
	}
	/* Read-write: the checksum is computed at commit by reading back. */
	w->fd = open(w->tmp_path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		int err = -errno;

		w->tmp_path[0] = '\0';
		return fail(w, err);
	}
	w->fd = ml_sigsafe_fd_private(w->fd);
	/* Placeholder; the real header is written by ml_writer_commit(). */
	return append(w, zero_header, sizeof(zero_header));
}

int ml_writer_begin(struct ml_writer *w, uint32_t type)
{
	static const unsigned char zero_section[sizeof(struct ml_fmt_section)];

	if (w->error)
		return w->error;
	if (w->section_start)
		return fail(w, -EINVAL);	/* a section is already open */
	w->section_start = w->offset;
	w->section_type = type;
	w->section_records = 0;
	/* Placeholder, patched by ml_writer_end() once size and count are known. */
	return append(w, zero_section, sizeof(zero_section));
}

int ml_writer_put(struct ml_writer *w, const void *data, size_t len)
{
	if (w->error)
		return w->error;
	if (!w->section_start)
		return fail(w, -EINVAL);
	return append(w, data, len);
}

int ml_writer_record(struct ml_writer *w)
{
	if (w->error)
		return w->error;
	if (!w->section_start)
		return fail(w, -EINVAL);
	w->section_records++;
	return pad8(w);
}

/* Writes the open section's final header, in the buffer when it is still
 * there, else in the file. */
static int patch_section_header(struct ml_writer *w, const struct ml_fmt_section *sh)
{
	uint64_t buf_start = w->offset - w->buf_len;
	uint64_t in_file = 0;	/* the header's bytes already flushed */
	int rc;

	if (w->section_start < buf_start)
		in_file = buf_start - w->section_start < sizeof(*sh) ?
			buf_start - w->section_start : sizeof(*sh);
	/* A header that straddles the last flush: its head is in the file, its
	 * tail still in the buffer (a later flush would write the buffer's
	 * placeholder bytes over a pwrite of them). */
	if (in_file) {
		rc = check_limit(w, w->section_start, (size_t)in_file);
		if (!rc)
			rc = pwrite_all(w->fd, sh, (size_t)in_file, w->section_start);
		if (rc)
			return fail(w, rc);
	}
	if (in_file < sizeof(*sh))
		memcpy(w->buf + (w->section_start + in_file - buf_start),
		       (const unsigned char *)sh + in_file, sizeof(*sh) - (size_t)in_file);
	return 0;
}

int ml_writer_end(struct ml_writer *w)
{
	struct ml_fmt_section sh;

	if (w->error)
		return w->error;
	if (!w->section_start)
		return fail(w, -EINVAL);
	if (pad8(w))
		return w->error;
	memset(&sh, 0, sizeof(sh));
	sh.type = w->section_type;
	sh.count = w->section_records;
	sh.size = w->offset - w->section_start - SECTION_HEADER_SIZE;
	if (patch_section_header(w, &sh))
		return w->error;
	w->section_count++;
	w->section_start = 0;
	return 0;
}

/* FNV-1a of [HEADER_SIZE, offset) read back from the file, through the
 * (flushed, so free) buffer.  Returns 0 or -errno. */
static int checksum_file(struct ml_writer *w)
{
	uint64_t h = ML_FNV_INIT;
	uint64_t off = HEADER_SIZE;

	while (off < w->offset) {
		uint64_t want = w->offset - off;
		ssize_t n;

		if (want > sizeof(w->buf))
			want = sizeof(w->buf);
		n = pread(w->fd, w->buf, (size_t)want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail(w, -errno);
		if (n == 0)
			return fail(w, -EIO);
		h = ml_fnv1a(h, w->buf, (size_t)n);
		off += (uint64_t)n;
	}
	w->checksum = h;
	return 0;
}

static int write_header(struct ml_writer *w)
{
	struct ml_fmt_header hdr;
	int rc;

	memset(&hdr, 0, sizeof(hdr));
	memcpy(hdr.magic, ML_FMT_MAGIC, sizeof(hdr.magic));
	hdr.version = ML_FMT_VERSION;
	hdr.header_size = (uint32_t)HEADER_SIZE;
	hdr.file_size = w->offset;
	hdr.checksum = w->checksum;
	hdr.section_count = w->section_count;
	rc = pwrite_all(w->fd, &hdr, sizeof(hdr), 0);
	if (!rc && fchmod(w->fd, w->mode) != 0)
		rc = -errno;
	return rc ? fail(w, rc) : 0;
}

/* renameat2(RENAME_NOREPLACE), for file systems without hard links. */
static int rename_noreplace(const char *from, const char *to)
{
#ifdef SYS_renameat2
	if (syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 1u /* RENAME_NOREPLACE */) == 0)
		return 0;
	return -errno;
#else
	return -ENOSYS;
#endif
}

/* Gives the temporary file its final name.  -EEXIST leaves it in place. */
static int publish(struct ml_writer *w, const char *final_path, bool replace)
{
	int rc;

	if (replace)
		return rename(w->tmp_path, final_path) ? -errno : 0;
	if (link(w->tmp_path, final_path) == 0) {
		unlink(w->tmp_path);
		return 0;
	}
	rc = -errno;
	if (rc == -EPERM || rc == -EOPNOTSUPP || rc == -ENOSYS)
		rc = rename_noreplace(w->tmp_path, final_path);
	return rc;
}

int ml_writer_commit(struct ml_writer *w, const char *final_path, bool replace)
{
	int rc;

	if (w->error)
		return w->error;
	if (w->section_start)
		return fail(w, -EINVAL);	/* unfinished section */
	if (flush(w) || checksum_file(w) || write_header(w))
		return w->error;
	/* Not sticky: on -EEXIST the caller may retry with another name. */
	rc = publish(w, final_path, replace);
	if (rc)
		return rc;
	close(w->fd);	/* never retried: on Linux the fd is gone even on EINTR */
	w->fd = -1;
	w->tmp_path[0] = '\0';
	return 0;
}

void ml_writer_abort(struct ml_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	if (w->tmp_path[0])
		unlink(w->tmp_path);
	w->tmp_path[0] = '\0';
	w->buf_len = 0;
	fail(w, -ECANCELED);
}
