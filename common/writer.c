/* common/writer.c - writes a profile file (format.h) through a temporary file.
 * Each section is built in a buffer of its own, then goes into one zstd
 * stream (its header first: sizes are known by then); the checksum is taken
 * of the compressed bytes as they are written.  Async-signal-safe: plain
 * syscalls on a caller-provided struct, memory from mmap (zstd's context in
 * a static workspace: it never calls malloc), no stdio, no locks.  It does
 * not build sections' contents: callers do. */
#include "common/writer.h"
#include "common/format.h"
#include "common/sigsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>		/* rename(), a plain syscall wrapper */
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_initStaticCCtx: no malloc */
#include <zstd.h>

/* zstd's level 6: measured on the sections of two real runs (2.6 MB of
 * numpy_step.py's, 3.3 MB of cc1plus's), 9 % and 8 % smaller files than
 * level 3 for 0.02 and 0.06 s more at exit (of a 1.2 and a 5.4 s run);
 * level 9 saves 2 % more and needs a 17 MB context, against 6 MB. */
#define ZSTD_LEVEL 6
/* A sampled run's profile is small and its size matters little: zstd's
 * own default level, which compresses it four times faster for some 4 %
 * more (measured on `import torch`'s sampled sections, 247 KB: 80 KB at
 * level 6, 83 KB at level 3; ~20 M instructions at exit saved). */
#define ZSTD_LEVEL_FAST 3
#define SEC_MIN_CAP (64u << 10)
/* Sections are kept uncompressed until they add up to this much: a profile
 * that fits goes to zstd in one call of known size, which then sizes its
 * tables for it (a few KiB for a small run, not level 6's 6 MB: at exit
 * that was most of a short run's added time, in page faults); past it the
 * stream starts and each later section goes as it ends. */
#define STAGE_MAX (1u << 20)

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

/* Appends stored bytes to the file, through the checksum; -EFBIG, before
 * the kernel would send SIGXFSZ, where they reach past the file size limit. */
static int emit(struct ml_writer *w, const void *data, size_t len)
{
	int rc;

	if (w->error)
		return w->error;
	rc = w->offset + len > w->size_limit ? -EFBIG : write_all(w->fd, data, len);
	if (rc)
		return fail(w, rc);
	w->checksum = ml_fnv1a(w->checksum, data, len);
	w->offset += len;
	return 0;
}

/* Room for len more bytes in the section buffer (mmap, grown by mremap). */
static int sec_reserve(struct ml_writer *w, size_t len)
{
	size_t cap = w->sec_cap ? w->sec_cap : SEC_MIN_CAP;
	void *p;

	if (w->sec_len + len <= w->sec_cap)
		return 0;
	while (cap < w->sec_len + len)
		cap *= 2;
	p = w->sec ? mremap(w->sec, w->sec_cap, cap, MREMAP_MAYMOVE) :
		mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return fail(w, -ENOMEM);
	w->sec = p;
	w->sec_cap = cap;
	return 0;
}

static int sec_append(struct ml_writer *w, const void *data, size_t len)
{
	if (w->error || sec_reserve(w, len))
		return w->error;
	if (len)	/* data may be NULL then */
		memcpy(w->sec + w->sec_len, data, len);
	w->sec_len += len;
	return 0;
}

static int pad8(struct ml_writer *w)
{
	static const unsigned char zeros[ML_FMT_ALIGN];
	size_t rem = w->sec_len % ML_FMT_ALIGN;

	return rem ? sec_append(w, zeros, ML_FMT_ALIGN - rem) : w->error;
}

/* The buffers' mappings go back (commit, abort). */
static void release(struct ml_writer *w)
{
	if (w->sec)
		munmap(w->sec, w->sec_cap);
	if (w->zctx)
		munmap(w->zctx, w->zctx_size);
	w->sec = NULL;
	w->sec_cap = 0;
	w->zctx = NULL;
	w->zctx_size = 0;
}

/* zstd's context, in a mapping of its own. */
static int zstd_ready(struct ml_writer *w)
{
	ZSTD_CCtx *cctx;

	if (!w->zctx) {
		size_t size = ZSTD_estimateCStreamSize(w->level);
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return fail(w, -ENOMEM);
		if (!ZSTD_initStaticCCtx(p, size)) {
			munmap(p, size);
			return fail(w, -ENOMEM);
		}
		w->zctx = p;
		w->zctx_size = size;
	}
	cctx = w->zctx;
	if (ZSTD_isError(ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, w->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)))
		return fail(w, -EINVAL);
	return 0;
}

/* Feeds len bytes (none, with ZSTD_e_end: the frame's end) to the stream
 * and writes what comes out. */
static int compress(struct ml_writer *w, const void *data, size_t len, ZSTD_EndDirective how)
{
	ZSTD_inBuffer in = { data, len, 0 };

	if (w->raw)
		return len ? emit(w, data, len) : w->error;
	for (;;) {
		ZSTD_outBuffer out = { w->out, sizeof(w->out), 0 };
		size_t left = ZSTD_compressStream2(w->zctx, &out, &in, how);

		if (ZSTD_isError(left))
			return fail(w, -EIO);
		if (out.pos && emit(w, w->out, out.pos))
			return w->error;
		if (how == ZSTD_e_end ? left == 0 : in.pos == in.size)
			return 0;
	}
}

/* RLIMIT_FSIZE now (UINT64_MAX: none). */
static uint64_t file_size_limit(void)
{
	struct rlimit rl;
	if (syscall(SYS_prlimit64, 0, RLIMIT_FSIZE, NULL, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	return (uint64_t)rl.rlim_cur;
}

static int open_file(struct ml_writer *w, const char *final_path, unsigned mode, bool raw)
{
	static const unsigned char zero_header[sizeof(struct ml_fmt_header)];
	char pid[24];
	size_t pos = 0;

	w->fd = -1;
	w->level = ZSTD_LEVEL;
	w->mode = mode & 07777;
	w->size_limit = file_size_limit();
	w->offset = 0;
	w->checksum = ML_FNV_INIT;
	w->payload_size = 0;
	w->section_count = 0;
	w->section_open = false;
	w->finished = false;
	w->section_type = 0;
	w->section_records = 0;
	w->error = 0;
	w->raw = raw;
	w->streaming = false;
	w->sec = NULL;		/* mappings of a previous file went at its commit/abort */
	w->sec_len = 0;
	w->sec_cap = 0;
	w->sec_start = 0;
	w->zctx = NULL;
	w->zctx_size = 0;
	w->tmp_path[0] = '\0';

	ml_sigsafe_utoa(pid, (uint64_t)getpid());
	if (!ml_sigsafe_append(w->tmp_path, sizeof(w->tmp_path), &pos, final_path) ||
	    !ml_sigsafe_append(w->tmp_path, sizeof(w->tmp_path), &pos, ".tmp.") ||
	    !ml_sigsafe_append(w->tmp_path, sizeof(w->tmp_path), &pos, pid)) {
		w->tmp_path[0] = '\0';
		return fail(w, -ENAMETOOLONG);
	}
	if (!raw && zstd_ready(w))
		return w->error;
	w->fd = open(w->tmp_path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		int err = -errno;

		w->tmp_path[0] = '\0';
		return fail(w, err);
	}
	w->fd = ml_sigsafe_fd_private(w->fd);
	/* Placeholder; the real header is written by ml_writer_commit(). */
	if (sizeof(zero_header) > w->size_limit)
		return fail(w, -EFBIG);
	if (write_all(w->fd, zero_header, sizeof(zero_header)))
		return fail(w, -EIO);
	w->offset = sizeof(zero_header);
	return 0;
}

int ml_writer_open(struct ml_writer *w, const char *final_path, unsigned mode)
{
	return open_file(w, final_path, mode, false);
}

int ml_writer_open_raw(struct ml_writer *w, const char *final_path, unsigned mode)
{
	return open_file(w, final_path, mode, true);
}

void ml_writer_small(struct ml_writer *w)
{
	/* Before the frame's first byte zstd takes a new level (its context,
	 * sized for level 6, has room for a lower one). */
	w->level = ZSTD_LEVEL_FAST;
	if (w->zctx && ZSTD_isError(ZSTD_CCtx_setParameter(w->zctx, ZSTD_c_compressionLevel,
							   w->level)))
		w->level = ZSTD_LEVEL;	/* left as it was */
}

int ml_writer_begin(struct ml_writer *w, uint32_t type)
{
	static const unsigned char zero_section[sizeof(struct ml_fmt_section)];

	if (w->error)
		return w->error;
	if (w->section_open || w->finished)
		return fail(w, -EINVAL);	/* a section is already open */
	w->section_open = true;
	w->section_type = type;
	w->section_records = 0;
	w->sec_start = w->sec_len;
	/* Filled in by ml_writer_end() once size and count are known. */
	return sec_append(w, zero_section, sizeof(zero_section));
}

int ml_writer_put(struct ml_writer *w, const void *data, size_t len)
{
	if (w->error)
		return w->error;
	if (!w->section_open)
		return fail(w, -EINVAL);
	return sec_append(w, data, len);
}

int ml_writer_record(struct ml_writer *w)
{
	if (w->error)
		return w->error;
	if (!w->section_open)
		return fail(w, -EINVAL);
	w->section_records++;
	return pad8(w);
}

int ml_writer_records(struct ml_writer *w, uint32_t n)
{
	if (w->error)
		return w->error;
	if (!w->section_open)
		return fail(w, -EINVAL);
	w->section_records += n;
	return pad8(w);
}

int ml_writer_end(struct ml_writer *w)
{
	struct ml_fmt_section sh;

	if (w->error)
		return w->error;
	if (!w->section_open)
		return fail(w, -EINVAL);
	if (pad8(w))
		return w->error;
	memset(&sh, 0, sizeof(sh));
	sh.type = w->section_type;
	sh.count = w->section_records;
	sh.size = w->sec_len - w->sec_start - SECTION_HEADER_SIZE;
	memcpy(w->sec + w->sec_start, &sh, sizeof(sh));
	w->payload_size += w->sec_len - w->sec_start;
	w->section_count++;
	w->section_open = false;
	if (!w->streaming && w->sec_len < STAGE_MAX)
		return 0;	/* kept: see STAGE_MAX */
	w->streaming = true;
	if (compress(w, w->sec, w->sec_len, ZSTD_e_continue))
		return w->error;
	w->sec_len = 0;
	return 0;
}

/* The stream's end: the sections kept, if any (then the whole payload,
 * its size pledged), go first. */
static int finish_stream(struct ml_writer *w)
{
	if (!w->streaming && !w->raw &&
	    ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(w->zctx, w->sec_len)))
		return fail(w, -EINVAL);
	if (compress(w, w->sec, w->sec_len, ZSTD_e_end))
		return w->error;
	w->sec_len = 0;
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
	hdr.flags = w->raw ? 0 : ML_FMT_ZSTD;
	hdr.payload_size = w->payload_size;
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
	if (w->section_open)
		return fail(w, -EINVAL);	/* unfinished section */
	/* Once: a retry under another name (after -EEXIST) only renames. */
	if (!w->finished && (finish_stream(w) || write_header(w)))
		return w->error;
	w->finished = true;
	/* Not sticky: on -EEXIST the caller may retry with another name. */
	rc = publish(w, final_path, replace);
	if (rc)
		return rc;
	close(w->fd);	/* never retried: on Linux the fd is gone even on EINTR */
	w->fd = -1;
	w->tmp_path[0] = '\0';
	release(w);
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
	w->sec_len = 0;
	w->section_open = false;
	release(w);
	fail(w, -ECANCELED);
}
