/* report/reader_internal.h - private to the profile reader (reader.c,
 * reader_sections.c): the parse state, the bounded record cursor, and the
 * per-section parsers.  Not for other modules. */
#ifndef ML_REPORT_READER_INTERNAL_H
#define ML_REPORT_READER_INTERNAL_H

#include "report/profile.h"
#include "common/torchformat.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEADER_SIZE sizeof(struct ml_fmt_header)
#define N_KNOWN_SECTIONS (ML_SEC_SAMPLED + 1)

/* Everything a profile owns; ml_profile.priv points here. */
struct owned {
	unsigned char *data;	/* the file's bytes; counters and timeline point in */
	char *strings;		/* NUL-terminated copies: path, exe, module paths */
	size_t strings_used, strings_cap;
	const char **argv;
	uint64_t *frames;	/* a merged profile's stacks' frames */
	struct ml_fmt_frame *nodes;	/* a file's FRAMES trie (ml_profile.frame_nodes) */
	struct ml_fmt_counter *counters;	/* decoded from COUNTERS' columns */
	const char **notes;	/* NOTES texts (copies in strings) */
	/* A merged profile's own (report/merge.c): its samples' frames and its
	 * timeline (a file's point into data). */
	uint64_t *frames_extra;
	struct ml_fmt_timepoint *timeline;
	void *pyprof;		/* its PYFUNCS and PYLINES records */
};

/* One section as found in the file. */
struct span {
	const unsigned char *payload;
	uint64_t size;
	uint32_t count;
	bool seen;
};

struct parse {
	const unsigned char *data;
	size_t len;
	char *err;
	size_t errlen;
	struct ml_profile *p;
	struct owned *o;
	struct span sec[N_KNOWN_SECTIONS];
	uint32_t n_nodes;	/* FRAMES: nodes 1..n_nodes */
	struct ml_fmt_frame *nodes;	/* [id - 1], decoded from FRAMES and ADDRESSES */
	uint32_t *node_depth;	/* [id]: frames from node id up to the root */
	uint64_t *addresses;	/* ADDRESSES, decoded */
	uint32_t n_addresses;
};

/* A bounded walk through one section's payload. */
struct cursor {
	const unsigned char *at;
	uint64_t left;
};

/* The names of the known section types, for messages; NULL for a gap. */
extern const char *const ml_reader_section_names[N_KNOWN_SECTIONS];

/* Formats one message into err (errlen bytes, may be 0) and returns rc. */
int ml_reader_set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define BAD(ps, ...) ml_reader_set_err((ps)->err, (ps)->errlen, -EINVAL, __VA_ARGS__)

static inline uint64_t align8(uint64_t n)
{
	return (n + ML_FMT_ALIGN - 1) & ~(uint64_t)(ML_FMT_ALIGN - 1);
}

/* Takes one record of fixed part fixed_len (copied to out) plus var_len
 * bytes, padded to 8; *var points at the variable part.  False if the
 * record does not fit in what is left of the section. */
bool ml_reader_take_record(struct cursor *c, void *out, size_t fixed_len, uint64_t var_len,
			   const unsigned char **var);

/* The fixed part alone, for var_len that depends on it: peek, then take. */
bool ml_reader_peek(const struct cursor *c, void *out, size_t len);

/* A NUL-terminated copy of len bytes in the owned string space; NULL when
 * the space is exhausted. */
const char *ml_reader_copy_string(struct owned *o, const unsigned char *src, size_t len);

/* The per-section parsers (reader_sections.c), run in this order after the
 * header and the section table were checked.  Each returns 0 or -errno with
 * a message in ps->err. */
int ml_reader_parse_meta(struct parse *ps);
int ml_reader_parse_modules(struct parse *ps);
int ml_reader_parse_stacks(struct parse *ps);
int ml_reader_parse_counters(struct parse *ps);
int ml_reader_parse_totals(struct parse *ps);
int ml_reader_check_gpu_total(struct parse *ps);
int ml_reader_parse_timeline(struct parse *ps);
int ml_reader_parse_samples(struct parse *ps);
int ml_reader_parse_regions(struct parse *ps);
int ml_reader_parse_runtime(struct parse *ps);
int ml_reader_parse_sampled(struct parse *ps);
int ml_reader_parse_spans(struct parse *ps);
int ml_reader_parse_notes(struct parse *ps);
/* reader_process.c */
int ml_reader_parse_process(struct parse *ps);
int ml_reader_parse_warnings(struct parse *ps);
/* TORCH (reader_torch.c). */
int ml_reader_parse_torch(struct parse *ps);
/* PYTHON and PYCODE (reader_python.c). */
int ml_reader_parse_python(struct parse *ps);
/* PYFUNCS and PYLINES (@profile), after PYTHON and PYCODE. */
int ml_reader_parse_pyprof(struct parse *ps);

/* The deepest stack a profile may hold: max_depth native frames, and with
 * a PYTHON section up to ML_PYFRAMES_MAX Python frames more. */
uint32_t ml_reader_depth_limit(const struct parse *ps);

#endif
