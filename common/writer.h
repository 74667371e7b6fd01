/* common/writer.h - writes a profile file section by section (see format.h),
 * compressed with zstd.  Used by the runtime at exit, before exec and in
 * fatal-signal handlers, so everything here is async-signal-safe: plain
 * syscalls (mmap for its buffers), no malloc, no stdio. */
#ifndef ML_COMMON_WRITER_H
#define ML_COMMON_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>

struct ml_writer {
	int fd;
	unsigned mode;		/* the file's permission bits, set at commit */
	uint64_t size_limit;	/* RLIMIT_FSIZE at open: never write past it */
	uint64_t offset;	/* bytes in the file so far, header included */
	uint64_t checksum;	/* running FNV-1a 64 of the bytes after the header */
	uint64_t payload_size;	/* the sections' bytes before compression */
	uint32_t section_count;
	uint32_t section_type;
	uint32_t section_records;
	bool section_open;
	bool finished;		/* the stream is complete (commit ran once) */
	bool raw;		/* no compression (tests, the fuzzer's seeds) */
	int level;		/* zstd's compression level (ml_writer_small) */
	int error;		/* first -errno seen; every later call is a no-op */
	bool streaming;		/* sections go to zstd as they end (see ml_writer_end) */
	unsigned char *sec;	/* sections not yet compressed, the open one last,
				 * each its header first (mmap'd) */
	size_t sec_len, sec_cap;
	size_t sec_start;	/* where the open section begins in sec */
	void *zctx;		/* zstd's context in its own mapping */
	size_t zctx_size;
	char tmp_path[PATH_MAX];
	unsigned char out[16384];	/* compressed bytes on their way to the file */
};

/* Opens a temporary file "<final_path>.tmp.<pid>" for writing, on a high
 * descriptor (common/sigsafe.h).  The file gets exactly the permission bits
 * mode (the process's umask does not apply).  A file that would grow past
 * the process's file size limit (RLIMIT_FSIZE) fails with -EFBIG before
 * the kernel would send SIGXFSZ.  Returns 0 or -errno.  The final name is
 * given later, to ml_writer_commit().  Its buffers (mmap'd) go back at
 * commit or abort; w may then be opened again. */
int ml_writer_open(struct ml_writer *w, const char *final_path, unsigned mode);
/* The same, without compression (flags 0 in the header): for tests. */
int ml_writer_open_raw(struct ml_writer *w, const char *final_path, unsigned mode);

/* After open, before the first section is written out: the profile will
 * be small (a sampled run's), and is compressed at a faster level. */
void ml_writer_small(struct ml_writer *w);

/* Starts a section of the given type (enum ml_fmt_section_type).  Returns 0
 * or -errno.  Only one section is open at a time. */
int ml_writer_begin(struct ml_writer *w, uint32_t type);

/* Appends len bytes to the open section.  Returns 0 or -errno. */
int ml_writer_put(struct ml_writer *w, const void *data, size_t len);

/* Pads the open record to 8 bytes and counts it.  Call once per record. */
int ml_writer_record(struct ml_writer *w);

/* Counts n records at once (a section of varint columns) and pads to 8. */
int ml_writer_records(struct ml_writer *w, uint32_t n);

/* Closes the open section, patching its header.  Returns 0 or -errno. */
int ml_writer_end(struct ml_writer *w);

/* Writes the file header and moves the file to final_path.  With replace,
 * an existing file of that name is replaced (rename); without, -EEXIST is
 * returned and the temporary kept, so the caller can try another name.
 * Returns 0 or -errno.  The file is never visible half-written under its
 * final name. */
int ml_writer_commit(struct ml_writer *w, const char *final_path, bool replace);

/* Closes and removes the temporary file. */
void ml_writer_abort(struct ml_writer *w);

/* FNV-1a 64: hash continues from h (start with ML_FNV_INIT). */
#define ML_FNV_INIT 0xcbf29ce484222325ull
uint64_t ml_fnv1a(uint64_t h, const void *data, size_t len);

#endif
