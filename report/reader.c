/* report/reader.c - loads a profile file (common/format.h) and validates every
 * byte of it before anything else looks at it.  Not async-signal-safe: it
 * runs in the report tool, with the ordinary malloc. */
#include "report/profile.h"
#include "common/writer.h"	/* ml_fnv1a */
#include "report/reader_internal.h"
#include "report/regfile.h"

#include <errno.h>
#include <fcntl.h>
#include <zstd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(struct ml_fmt_meta) == 64, "meta layout");
_Static_assert(sizeof(struct ml_fmt_module) == 40, "module layout");
_Static_assert(sizeof(struct ml_fmt_stack) == 16, "stack layout");
_Static_assert(sizeof(struct ml_fmt_frame) == 16, "frame layout");
_Static_assert(sizeof(struct ml_fmt_counter) == 104, "counter layout");
_Static_assert(sizeof(struct ml_fmt_total) == 72, "total layout");
_Static_assert(sizeof(struct ml_fmt_timepoint) == 24, "timepoint layout");
_Static_assert(sizeof(struct ml_fmt_sampling) == 48, "sampling layout");
_Static_assert(sizeof(struct ml_fmt_sample) == 24, "sample layout");
_Static_assert(sizeof(struct ml_fmt_region) == 48, "region layout");
_Static_assert(sizeof(struct ml_fmt_torch) == 48, "torch layout");
_Static_assert(sizeof(struct ml_fmt_runtime) == 64, "runtime layout");
_Static_assert(sizeof(struct ml_fmt_sampled) == 48, "sampled layout");
_Static_assert(sizeof(struct ml_fmt_header) == 64, "header layout");
_Static_assert(sizeof(struct ml_fmt_process) == 48, "process layout");
_Static_assert(sizeof(struct ml_fmt_warning) == 8, "warning layout");

const char *const ml_reader_section_names[N_KNOWN_SECTIONS] = {
	[ML_SEC_META] = "META", [ML_SEC_MODULES] = "MODULES", [ML_SEC_STACKS] = "STACKS",
	[ML_SEC_COUNTERS] = "COUNTERS", [ML_SEC_TOTALS] = "TOTALS", [ML_SEC_TIMELINE] = "TIMELINE",
	[ML_SEC_SAMPLES] = "SAMPLES", [ML_SEC_REGIONS] = "REGIONS", [ML_SEC_FRAMES] = "FRAMES",
	[ML_SEC_ADDRESSES] = "ADDRESSES", [ML_SEC_RUNTIME] = "RUNTIME",
	[ML_SEC_SAMPLED] = "SAMPLED",
	[ML_SEC_SPANS] = "SPANS",
	[ML_SEC_NOTES] = "NOTES",
	[ML_SEC_PROCESS] = "PROCESS", [ML_SEC_WARNINGS] = "WARNINGS",
	[ML_SEC_TORCH] = "TORCH",
	[ML_SEC_PYTHON] = "PYTHON", [ML_SEC_PYCODE] = "PYCODE",
	[ML_SEC_PYFUNCS] = "PYFUNCS", [ML_SEC_PYLINES] = "PYLINES",
};

int ml_reader_set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Takes one record of fixed part fixed_len (copied to out) plus var_len
 * bytes, padded to 8; *var points at the variable part.  False if the
 * record does not fit in what is left of the section. */
bool ml_reader_take_record(struct cursor *c, void *out, size_t fixed_len, uint64_t var_len,
			const unsigned char **var)
{
	uint64_t total;

	if (c->left < fixed_len)
		return false;
	memcpy(out, c->at, fixed_len);
	if (var_len > c->left - fixed_len)
		return false;
	total = align8(fixed_len + var_len);
	if (total > c->left)
		return false;
	if (var)
		*var = c->at + fixed_len;
	c->at += total;
	c->left -= total;
	return true;
}

/* The fixed part alone, for var_len that depends on it: ml_reader_peek, then take. */
bool ml_reader_peek(const struct cursor *c, void *out, size_t len)
{
	if (c->left < len)
		return false;
	memcpy(out, c->at, len);
	return true;
}

/* A NUL-terminated copy of len bytes in the owned string space. */
const char *ml_reader_copy_string(struct owned *o, const unsigned char *src, size_t len)
{
	char *dst;

	if (len + 1 > o->strings_cap - o->strings_used)
		return NULL;
	dst = o->strings + o->strings_used;
	memcpy(dst, src, len);
	dst[len] = '\0';
	o->strings_used += len + 1;
	return dst;
}

/* Magic, version, header size, file size and reserved fields: everything
 * the first HEADER_SIZE bytes of ps->data (or all of it, when shorter) tell
 * about a file of ps->len bytes.  Reads nothing beyond those bytes, so a
 * loader can reject a file before reading the rest of it. */
static int check_header_fields(struct parse *ps, struct ml_fmt_header *h)
{
	static const unsigned char zeros[sizeof(h->reserved)];
	size_t magic_len = sizeof(h->magic);

	if (ps->len == 0)
		return BAD(ps, "empty file: not a memline profile");
	if (memcmp(ps->data, ML_FMT_MAGIC, ps->len < magic_len ? ps->len : magic_len))
		return BAD(ps, "not a memline profile");
	if (ps->len < HEADER_SIZE) {
		if (ps->len >= offsetof(struct ml_fmt_header, checksum)) {
			memcpy(h, ps->data, offsetof(struct ml_fmt_header, checksum));
			if (h->version == ML_FMT_VERSION && h->file_size > ps->len)
				return BAD(ps, "truncated: %zu of %llu bytes", ps->len,
					   (unsigned long long)h->file_size);
		}
		return BAD(ps, "truncated: %zu bytes, shorter than the %zu-byte header",
			   ps->len, HEADER_SIZE);
	}
	memcpy(h, ps->data, HEADER_SIZE);
	if (h->version != ML_FMT_VERSION)
		return BAD(ps, "profile version %u, this memline reads version %u",
			   h->version, ML_FMT_VERSION);
	if (h->header_size != HEADER_SIZE)
		return BAD(ps, "corrupt: header size %u, expected %zu", h->header_size, HEADER_SIZE);
	if (h->file_size < HEADER_SIZE)
		return BAD(ps, "corrupt: file size %llu is smaller than the header",
			   (unsigned long long)h->file_size);
	if (ps->len < h->file_size)
		return BAD(ps, "truncated: %zu of %llu bytes", ps->len,
			   (unsigned long long)h->file_size);
	if (ps->len > h->file_size)
		return BAD(ps, "corrupt: %zu bytes, the header says %llu", ps->len,
			   (unsigned long long)h->file_size);
	if ((h->flags & ~ML_FMT_ZSTD) || memcmp(h->reserved, zeros, sizeof(zeros)))
		return BAD(ps, "corrupt: reserved header fields are not zero");
	return 0;
}

/* The header's fields, then (unless light) the checksum over the whole file. */
static int check_header(struct parse *ps, struct ml_fmt_header *h, bool light)
{
	int rc = check_header_fields(ps, h);

	if (rc)
		return rc;
	if (!light &&
	    ml_fnv1a(ML_FNV_INIT, ps->data + HEADER_SIZE, ps->len - HEADER_SIZE) != h->checksum)
		return BAD(ps, "corrupt: checksum mismatch");
	if (!(h->flags & ML_FMT_ZSTD) && h->payload_size != ps->len - HEADER_SIZE)
		return BAD(ps, "corrupt: payload of %llu bytes, the header says %llu",
			   (unsigned long long)(ps->len - HEADER_SIZE),
			   (unsigned long long)h->payload_size);
	return 0;
}

/* The most a compressed payload may claim to hold: far above what memline's
 * sections compress to, far below what would exhaust memory on a forged
 * header. */
static uint64_t payload_limit(uint64_t stored)
{
	uint64_t limit = stored * 1024 + (64u << 20);
	return limit < (16ull << 30) ? limit : (16ull << 30);
}

/* A compressed payload becomes the sections, after a copy of the header
 * (so section offsets read the same in both forms); ps then reads them. */
static int decompress(struct parse *ps, const struct ml_fmt_header *h, unsigned char **out)
{
	uint64_t stored = ps->len - HEADER_SIZE, size = h->payload_size;
	unsigned char *buf;
	size_t got;

	*out = NULL;
	if (!(h->flags & ML_FMT_ZSTD))
		return 0;
	if (size > payload_limit(stored) || size > SIZE_MAX - HEADER_SIZE - 1)
		return BAD(ps, "corrupt: the header says %llu bytes of sections in %llu compressed",
			   (unsigned long long)size, (unsigned long long)stored);
	buf = malloc(HEADER_SIZE + size + 1);
	if (!buf)
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	memcpy(buf, ps->data, HEADER_SIZE);
	got = ZSTD_decompress(buf + HEADER_SIZE, size, ps->data + HEADER_SIZE, stored);
	if (ZSTD_isError(got) || got != size) {
		free(buf);
		return BAD(ps, "corrupt: the compressed sections do not decompress to %llu bytes%s%s",
			   (unsigned long long)size, ZSTD_isError(got) ? ": " : "",
			   ZSTD_isError(got) ? ZSTD_getErrorName(got) : "");
	}
	*out = buf;
	return 0;
}

/* Finds every section; known types may appear once, unknown ones are skipped. */
static int walk_sections(struct parse *ps, const struct ml_fmt_header *h)
{
	uint64_t off = HEADER_SIZE, n = 0;

	while (off < ps->len) {
		struct ml_fmt_section sh;

		if (ps->len - off < sizeof(sh))
			return BAD(ps, "corrupt: section header %llu cut short at byte %llu",
				   (unsigned long long)n, (unsigned long long)off);
		memcpy(&sh, ps->data + off, sizeof(sh));
		off += sizeof(sh);
		if (sh.size % ML_FMT_ALIGN || sh.size > ps->len - off)
			return BAD(ps, "corrupt: section %llu (type %u) has size %llu, %llu bytes left",
				   (unsigned long long)n, sh.type, (unsigned long long)sh.size,
				   (unsigned long long)(ps->len - off));
		if (sh.type > 0 && sh.type < N_KNOWN_SECTIONS && ml_reader_section_names[sh.type]) {
			struct span *s = &ps->sec[sh.type];

			if (s->seen)
				return BAD(ps, "corrupt: two %s sections", ml_reader_section_names[sh.type]);
			*s = (struct span){ ps->data + off, sh.size, sh.count, true };
		}
		off += sh.size;
		n++;
	}
	if (n != h->section_count)
		return BAD(ps, "corrupt: %llu sections, the header says %u", (unsigned long long)n,
			   h->section_count);
	if (!ps->sec[ML_SEC_META].seen)
		return BAD(ps, "corrupt: no META section");
	return 0;
}

/* Sets up an empty profile owning data (len bytes) and room for strings. */
static struct ml_profile *profile_new(unsigned char *data, size_t len, const char *path)
{
	struct ml_profile *p = calloc(1, sizeof(*p));
	struct owned *o = calloc(1, sizeof(*o));
	size_t path_len = strlen(path);

	if (!p || !o)
		goto fail;
	/* Every string is a copy of file bytes plus a NUL, and every record
	 * with strings is at least 8 bytes per string (a note, a warning; a
	 * PYCODE record has two in 24): this bound cannot be exceeded. */
	o->strings_cap = len + len / sizeof(struct ml_fmt_note) + path_len + 4;
	o->strings = malloc(o->strings_cap);
	if (!o->strings)
		goto fail;
	o->data = data;
	p->priv = o;
	p->path = ml_reader_copy_string(o, (const unsigned char *)path, path_len);
	return p;
fail:
	free(o);
	free(p);
	return NULL;
}

/* Room in the string space for everything ps->len bytes may hold (it was
 * sized for the stored file); only the path is in it yet. */
static int strings_room(struct parse *ps)
{
	size_t cap = ps->len + ps->len / sizeof(struct ml_fmt_module) + ps->o->strings_used + 3;
	char *bigger;

	if (cap <= ps->o->strings_cap)
		return 0;
	bigger = realloc(ps->o->strings, cap);
	if (!bigger)
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	ps->o->strings = bigger;
	ps->o->strings_cap = cap;
	ps->p->path = bigger;	/* the one string copied so far */
	return 0;
}

/* The sections after META that light loads skip, in order. */
static int parse_body(struct parse *ps)
{
	int (*const parsers[])(struct parse *) = {
		ml_reader_parse_modules, ml_reader_parse_stacks, ml_reader_parse_sampled,
		ml_reader_parse_counters,
		ml_reader_parse_totals, ml_reader_check_gpu_total, ml_reader_parse_timeline,
		ml_reader_parse_samples, ml_reader_parse_regions, ml_reader_parse_spans,
		ml_reader_parse_python, ml_reader_parse_pyprof,
	};
	for (size_t i = 0; i < sizeof(parsers) / sizeof(parsers[0]); i++) {
		int rc = parsers[i](ps);
		if (rc)
			return rc;
	}
	return 0;
}

/* Validates data (owned by the caller until success or failure: it is
 * always taken over, and freed on failure). */
static int parse_owned(unsigned char *data, size_t len, const char *path, bool light,
		       struct ml_profile **out, char *err, size_t errlen)
{
	struct parse ps = { .data = data, .len = len, .err = err, .errlen = errlen };
	struct ml_fmt_header h;
	int rc;

	ps.p = profile_new(data, len, path);
	if (!ps.p) {
		free(data);
		return ml_reader_set_err(err, errlen, -ENOMEM, "out of memory");
	}
	ps.o = ps.p->priv;
	rc = check_header(&ps, &h, light);
	if (!rc) {
		unsigned char *sections;

		rc = decompress(&ps, &h, &sections);
		if (!rc && sections) {
			/* From here on the profile owns (and points into) the
			 * sections; strings copied from them need more room. */
			free(ps.o->data);
			ps.o->data = sections;
			ps.data = sections;
			ps.len = HEADER_SIZE + h.payload_size;
			rc = strings_room(&ps);
		}
	}
	if (!rc)
		rc = walk_sections(&ps, &h);
	if (!rc)
		rc = ml_reader_parse_meta(&ps);
	if (!rc && light)
		rc = ml_reader_parse_sampled(&ps);
	if (!rc)
		rc = light ? ml_reader_parse_totals(&ps) : parse_body(&ps);
	if (!rc)
		rc = ml_reader_parse_process(&ps);
	if (!rc)
		rc = ml_reader_parse_warnings(&ps);
	if (!rc)
		rc = ml_reader_parse_notes(&ps);
	if (!rc)
		rc = ml_reader_parse_runtime(&ps);
	if (!rc)
		rc = ml_reader_parse_torch(&ps);
	free(ps.node_depth);
	free(ps.nodes);
	free(ps.addresses);
	if (rc) {
		ml_profile_free(ps.p);
		return rc;
	}
	*out = ps.p;
	return 0;
}

int ml_profile_parse(const void *data, size_t len, struct ml_profile **out, char *err, size_t errlen)
{
	/* +1: malloc(0) may return NULL. */
	unsigned char *copy = malloc(len + 1);

	if (!copy)
		return ml_reader_set_err(err, errlen, -ENOMEM, "out of memory");
	if (len)
		memcpy(copy, data, len);
	return parse_owned(copy, len, "(buffer)", false, out, err, errlen);
}

/* Reads the profile in the regular file fd (size bytes): its header first,
 * so that a file that is not a profile, or whose header disagrees with its
 * size, is rejected before the rest is read. */
static int load_fd(int fd, size_t size, const char *path, bool light,
		   struct ml_profile **out, char *err, size_t errlen)
{
	unsigned char head[HEADER_SIZE];
	size_t head_len = size < HEADER_SIZE ? size : HEADER_SIZE;
	struct parse ps = { .data = head, .len = size, .err = err, .errlen = errlen };
	struct ml_fmt_header h;
	unsigned char *data;
	int rc = ml_regfile_pread_all(fd, head, head_len, 0);

	if (rc)
		return ml_reader_set_err(err, errlen, rc, "cannot read: %s",
					 rc == -EIO ? "the file shrank while it was read" : strerror(-rc));
	rc = check_header_fields(&ps, &h);
	if (rc)
		return rc;
	/* +1: malloc(0) may return NULL. */
	data = malloc(size + 1);
	if (!data)
		return ml_reader_set_err(err, errlen, -ENOMEM, "out of memory (%zu bytes)", size);
	rc = ml_regfile_pread_all(fd, data, size, 0);
	if (rc) {
		free(data);
		return ml_reader_set_err(err, errlen, rc, "cannot read: %s",
					 rc == -EIO ? "the file shrank while it was read" : strerror(-rc));
	}
	return parse_owned(data, size, path, light, out, err, errlen);
}

static int load(const char *path, bool light, struct ml_profile **out, char *err, size_t errlen)
{
	const char *what;
	struct stat st;
	int fd = ml_regfile_open(path, &st, &what);
	int rc;

	if (fd == -EISDIR)
		return ml_reader_set_err(err, errlen, fd, "is a directory, not a memline profile");
	if (fd == ML_ENOTREG)	/* reading a FIFO or a device could block or never end */
		return ml_reader_set_err(err, errlen, -EINVAL, "is %s; memline reads profiles "
					 "from regular files only", what);
	if (fd < 0)
		return ml_reader_set_err(err, errlen, fd, "cannot open: %s", strerror(-fd));
	if ((uint64_t)st.st_size > SIZE_MAX - 1)
		rc = ml_reader_set_err(err, errlen, -EFBIG, "too large to read");
	else
		rc = load_fd(fd, (size_t)st.st_size, path, light, out, err, errlen);
	close(fd);
	return rc;
}

int ml_profile_load(const char *path, struct ml_profile **out, char *err, size_t errlen)
{
	return load(path, false, out, err, errlen);
}

int ml_profile_load_meta(const char *path, struct ml_profile **out, char *err, size_t errlen)
{
	return load(path, true, out, err, errlen);
}

void ml_profile_free(struct ml_profile *p)
{
	struct owned *o;

	if (!p)
		return;
	o = p->priv;
	if (o) {
		free(o->data);
		free(o->strings);
		free(o->argv);
		free(o->frames);
		free(o->nodes);
		free(o->counters);
		free(o->notes);
		free(o->frames_extra);
		free(o->timeline);
		free(o->pyprof);
		free(o);
	}
	free(p->modules);
	free(p->stacks);
	free(p->samples);
	free(p->regions);
	free(p->torch.schemas);
	free(p->warnings);
	free(p->merged);
	free(p->pycodes);
	free(p);
}

const uint64_t *ml_profile_stack_frames(const struct ml_profile *p, const struct ml_stack *st,
					uint64_t *buf)
{
	uint32_t node = st->leaf;

	if (st->frames)
		return st->frames;
	for (uint32_t d = 0; d < st->depth && node; d++) {
		buf[d] = p->frame_nodes[node - 1].address;
		node = p->frame_nodes[node - 1].parent;
	}
	return buf;
}

const struct ml_stack *ml_profile_stack(const struct ml_profile *p, uint32_t id)
{
	size_t lo = 0, hi = p->n_stacks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->stacks[mid].id == id)
			return &p->stacks[mid];
		if (p->stacks[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Linear: modules may overlap (one unloaded, another loaded at its place);
 * the first in file order wins.  Callers cache per address if it matters. */
const struct ml_module *ml_profile_module(const struct ml_profile *p, uint64_t addr)
{
	for (size_t i = 0; i < p->n_modules; i++)
		if (addr >= p->modules[i].lo && addr < p->modules[i].hi)
			return &p->modules[i];
	return NULL;
}