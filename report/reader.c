/* report/reader.c - loads a profile file (common/format.h) and validates every
 * byte of it before anything else looks at it.  Not async-signal-safe: it
 * runs in the report tool, with the ordinary malloc. */
#include "report/profile.h"
#include "common/writer.h"	/* ml_fnv1a */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_SIZE sizeof(struct ml_fmt_header)
#define N_KNOWN_SECTIONS (ML_SEC_FRAMES + 1)

_Static_assert(sizeof(struct ml_fmt_meta) == 64, "meta layout");
_Static_assert(sizeof(struct ml_fmt_module) == 40, "module layout");
_Static_assert(sizeof(struct ml_fmt_stack) == 16, "stack layout");
_Static_assert(sizeof(struct ml_fmt_frame) == 16, "frame layout");
_Static_assert(sizeof(struct ml_fmt_counter) == 72, "counter layout");
_Static_assert(sizeof(struct ml_fmt_total) == 72, "total layout");
_Static_assert(sizeof(struct ml_fmt_timepoint) == 24, "timepoint layout");
_Static_assert(sizeof(struct ml_fmt_sampling) == 48, "sampling layout");
_Static_assert(sizeof(struct ml_fmt_sample) == 24, "sample layout");
_Static_assert(sizeof(struct ml_fmt_region) == 48, "region layout");

/* Everything a profile owns; ml_profile.priv points here. */
struct owned {
	unsigned char *data;	/* the file's bytes; counters and timeline point in */
	char *strings;		/* NUL-terminated copies: path, exe, module paths */
	size_t strings_used, strings_cap;
	const char **argv;
	uint64_t *frames;	/* every stack's frames, rebuilt from the trie */
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
	uint32_t *node_depth;	/* [id]: frames from node id up to the root */
	uint64_t *leaf_at;	/* [id]: where that leaf's frames start, or UINT64_MAX */
};

/* A bounded walk through one section's payload. */
struct cursor {
	const unsigned char *at;
	uint64_t left;
};

static const char *const section_names[N_KNOWN_SECTIONS] = {
	[ML_SEC_META] = "META", [ML_SEC_MODULES] = "MODULES", [ML_SEC_STACKS] = "STACKS",
	[ML_SEC_COUNTERS] = "COUNTERS", [ML_SEC_TOTALS] = "TOTALS", [ML_SEC_TIMELINE] = "TIMELINE",
	[ML_SEC_SAMPLES] = "SAMPLES", [ML_SEC_REGIONS] = "REGIONS", [ML_SEC_FRAMES] = "FRAMES",
};

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

#define BAD(ps, ...) set_err((ps)->err, (ps)->errlen, -EINVAL, __VA_ARGS__)

static uint64_t align8(uint64_t n)
{
	return (n + ML_FMT_ALIGN - 1) & ~(uint64_t)(ML_FMT_ALIGN - 1);
}

/* Takes one record of fixed part fixed_len (copied to out) plus var_len
 * bytes, padded to 8; *var points at the variable part.  False if the
 * record does not fit in what is left of the section. */
static bool take_record(struct cursor *c, void *out, size_t fixed_len, uint64_t var_len,
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

/* The fixed part alone, for var_len that depends on it: peek, then take. */
static bool peek(const struct cursor *c, void *out, size_t len)
{
	if (c->left < len)
		return false;
	memcpy(out, c->at, len);
	return true;
}

/* A NUL-terminated copy of len bytes in the owned string space. */
static const char *copy_string(struct owned *o, const unsigned char *src, size_t len)
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

/* Magic, version, header size, file size, checksum, reserved fields. */
static int check_header(struct parse *ps, struct ml_fmt_header *h)
{
	static const unsigned char zeros[sizeof(h->reserved)];
	size_t magic_len = sizeof(h->magic);
	uint64_t sum;

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
	if (h->flags || memcmp(h->reserved, zeros, sizeof(zeros)))
		return BAD(ps, "corrupt: reserved header fields are not zero");
	sum = ml_fnv1a(ML_FNV_INIT, ps->data + HEADER_SIZE, ps->len - HEADER_SIZE);
	if (sum != h->checksum)
		return BAD(ps, "corrupt: checksum mismatch");
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
		if (sh.type > 0 && sh.type < N_KNOWN_SECTIONS && section_names[sh.type]) {
			struct span *s = &ps->sec[sh.type];

			if (s->seen)
				return BAD(ps, "corrupt: two %s sections", section_names[sh.type]);
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

/* Splits argv_len bytes into exactly argc NUL-terminated strings. */
static int parse_argv(struct parse *ps, const unsigned char *args, uint32_t argv_len, uint32_t argc)
{
	uint32_t nuls = 0;

	for (uint32_t i = 0; i < argv_len; i++)
		nuls += args[i] == '\0';
	if (nuls != argc || (argv_len && args[argv_len - 1] != '\0'))
		return BAD(ps, "corrupt: META argv holds %u strings, argc is %u", nuls, argc);
	ps->o->argv = calloc((size_t)argc + 1, sizeof(*ps->o->argv));
	if (!ps->o->argv)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	for (uint32_t i = 0, at = 0; i < argc; i++) {
		ps->o->argv[i] = (const char *)args + at;
		at += (uint32_t)strlen((const char *)args + at) + 1;
	}
	ps->p->argv = ps->o->argv;
	return 0;
}

static int parse_meta(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_META];
	struct cursor c = { s->payload, s->size };
	struct ml_fmt_meta *m = &ps->p->meta;
	const unsigned char *var;

	if (s->count != 1)
		return BAD(ps, "corrupt: META section has %u records, expected 1", s->count);
	if (!peek(&c, m, sizeof(*m)) ||
	    !take_record(&c, m, sizeof(*m), (uint64_t)m->exe_len + m->argv_len, &var) || c.left)
		return BAD(ps, "corrupt: META section size %llu does not match its lengths",
			   (unsigned long long)s->size);
	if (m->end_reason < ML_END_EXIT || m->end_reason > ML_END_THREAD_EXIT)
		return BAD(ps, "corrupt: META end reason %u is unknown", m->end_reason);
	ps->p->exe = copy_string(ps->o, var, m->exe_len);
	if (!ps->p->exe)
		return BAD(ps, "corrupt: META exe path does not fit");
	return parse_argv(ps, var + m->exe_len, m->argv_len, m->argc);
}

static int parse_module(struct parse *ps, struct cursor *c, struct ml_module *mod, uint32_t i)
{
	struct ml_fmt_module fm;
	const unsigned char *var;

	if (!peek(c, &fm, sizeof(fm)) ||
	    !take_record(c, &fm, sizeof(fm), (uint64_t)fm.path_len + fm.build_id_len, &var))
		return BAD(ps, "corrupt: module %u does not fit in the MODULES section", i);
	if (fm.lo > fm.hi)
		return BAD(ps, "corrupt: module %u ends (0x%llx) before it starts (0x%llx)", i,
			   (unsigned long long)fm.hi, (unsigned long long)fm.lo);
	mod->bias = fm.bias;
	mod->lo = fm.lo;
	mod->hi = fm.hi;
	mod->flags = fm.flags;
	mod->path = copy_string(ps->o, var, fm.path_len);
	mod->build_id = fm.build_id_len ? var + fm.path_len : NULL;
	mod->build_id_len = fm.build_id_len;
	if (!mod->path)
		return BAD(ps, "corrupt: module %u path does not fit", i);
	return 0;
}

static int parse_modules(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_MODULES];
	struct cursor c = { s->payload, s->size };
	int rc;

	if (!s->seen || !s->count)
		return s->size ? BAD(ps, "corrupt: MODULES section has bytes but no records") : 0;
	if (s->count > s->size / sizeof(struct ml_fmt_module))
		return BAD(ps, "corrupt: MODULES section too small for %u records", s->count);
	ps->p->modules = calloc(s->count, sizeof(*ps->p->modules));
	if (!ps->p->modules)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	ps->p->n_modules = s->count;
	for (uint32_t i = 0; i < s->count; i++) {
		rc = parse_module(ps, &c, &ps->p->modules[i], i);
		if (rc)
			return rc;
	}
	if (c.left)
		return BAD(ps, "corrupt: %llu stray bytes after the last module",
			   (unsigned long long)c.left);
	return 0;
}

static int compare_stack_ids(const void *a, const void *b)
{
	uint32_t x = ((const struct ml_stack *)a)->id, y = ((const struct ml_stack *)b)->id;

	return (x > y) - (x < y);
}

/* FRAMES: the call-site trie; every parent is an earlier node, so one pass
 * gives every node's depth (the length of its walk to the root). */
static int parse_frames(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_FRAMES];
	const unsigned char *at = s->payload;

	if (!s->seen || !s->count)
		return s->seen && s->size ? BAD(ps, "corrupt: FRAMES section has bytes but no records") : 0;
	if (s->size != (uint64_t)s->count * sizeof(struct ml_fmt_frame))
		return BAD(ps, "corrupt: FRAMES section has %llu bytes for %u records of %zu",
			   (unsigned long long)s->size, s->count, sizeof(struct ml_fmt_frame));
	ps->node_depth = malloc(((size_t)s->count + 1) * sizeof(*ps->node_depth));
	if (!ps->node_depth)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	ps->node_depth[0] = 0;
	for (uint32_t id = 1; id <= s->count; id++, at += sizeof(struct ml_fmt_frame)) {
		struct ml_fmt_frame fr;

		memcpy(&fr, at, sizeof(fr));
		if (fr.parent >= id)
			return BAD(ps, "corrupt: frame node %u has parent %u", id, fr.parent);
		ps->node_depth[id] = ps->node_depth[fr.parent] + 1;
	}
	ps->n_nodes = s->count;
	return 0;
}

/* The walk from fs's leaf to the root must be exactly fs->depth nodes long. */
static int check_stack(struct parse *ps, const struct ml_fmt_stack *fs, uint32_t i)
{
	uint32_t max_depth = ps->p->meta.max_depth;

	if (fs->id == 0)
		return BAD(ps, "corrupt: stack %u has id 0", i);
	if (max_depth && fs->depth > max_depth)
		return BAD(ps, "corrupt: stack %u is %u frames deep, max_depth is %u",
			   fs->id, fs->depth, max_depth);
	if (fs->leaf > ps->n_nodes)
		return BAD(ps, "corrupt: stack %u has leaf %u, the trie has %u frame nodes",
			   fs->id, fs->leaf, ps->n_nodes);
	if (ps->node_depth ? ps->node_depth[fs->leaf] != fs->depth : fs->depth != 0)
		return BAD(ps, "corrupt: stack %u is %u frames deep, its leaf %u is %u",
			   fs->id, fs->depth, fs->leaf,
			   ps->node_depth ? ps->node_depth[fs->leaf] : 0);
	return 0;
}

/* Rebuilds every stack's frames, innermost first, into one array; stacks
 * with the same leaf share theirs. */
static int rebuild_frames(struct parse *ps, const struct ml_fmt_stack *fs, uint32_t n)
{
	const struct ml_fmt_frame *nodes = (const void *)ps->sec[ML_SEC_FRAMES].payload;
	uint64_t total = 0, at = 0;

	if (ps->n_nodes) {
		ps->leaf_at = malloc(((size_t)ps->n_nodes + 1) * sizeof(*ps->leaf_at));
		if (!ps->leaf_at)
			return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
		memset(ps->leaf_at, 0xff, ((size_t)ps->n_nodes + 1) * sizeof(*ps->leaf_at));
		for (uint32_t i = 0; i < n; i++)
			if (fs[i].leaf && ps->leaf_at[fs[i].leaf] == UINT64_MAX) {
				ps->leaf_at[fs[i].leaf] = 0;
				total += fs[i].depth;
			}
	}
	if (total > SIZE_MAX / sizeof(uint64_t) - 1)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	ps->o->frames = malloc((size_t)total * sizeof(uint64_t) + 1);
	if (!ps->o->frames)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	if (ps->leaf_at)
		memset(ps->leaf_at, 0xff, ((size_t)ps->n_nodes + 1) * sizeof(*ps->leaf_at));
	for (uint32_t i = 0; i < n; i++) {
		struct ml_stack *st = &ps->p->stacks[i];
		uint32_t node = fs[i].leaf;

		st->id = fs[i].id;
		st->depth = fs[i].depth;
		st->flags = fs[i].flags;
		st->frames = ps->o->frames;	/* never NULL, even for depth 0 */
		if (!node)
			continue;
		if (ps->leaf_at[node] == UINT64_MAX) {
			ps->leaf_at[node] = at;
			for (uint32_t f = 0; f < fs[i].depth; f++) {
				struct ml_fmt_frame fr;

				memcpy(&fr, &nodes[node - 1], sizeof(fr));
				ps->o->frames[at++] = fr.address;
				node = fr.parent;
			}
		}
		st->frames = ps->o->frames + ps->leaf_at[fs[i].leaf];
	}
	return 0;
}

static int parse_stacks(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_STACKS];
	const struct ml_fmt_stack *fs = (const void *)s->payload;
	struct ml_stack *st;
	int rc = parse_frames(ps);

	if (rc)
		return rc;
	if (!s->seen || !s->count)
		return s->size ? BAD(ps, "corrupt: STACKS section has bytes but no records") : 0;
	if (s->size != (uint64_t)s->count * sizeof(struct ml_fmt_stack))
		return BAD(ps, "corrupt: STACKS section has %llu bytes for %u records of %zu",
			   (unsigned long long)s->size, s->count, sizeof(struct ml_fmt_stack));
	/* 8-aligned: the buffer is malloc'd and every section starts at a multiple of 8. */
	for (uint32_t i = 0; i < s->count; i++) {
		rc = check_stack(ps, &fs[i], i);
		if (rc)
			return rc;
	}
	st = calloc(s->count, sizeof(*st));
	if (!st)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	ps->p->stacks = st;
	ps->p->n_stacks = s->count;
	rc = rebuild_frames(ps, fs, s->count);
	if (rc)
		return rc;
	qsort(st, s->count, sizeof(*st), compare_stack_ids);
	for (uint32_t i = 1; i < s->count; i++)
		if (st[i].id == st[i - 1].id)
			return BAD(ps, "corrupt: stack id %u appears twice", st[i].id);
	return 0;
}

/* A section of count fixed-size records: checks size == count * rec_size. */
static int fixed_records(struct parse *ps, int type, size_t rec_size)
{
	const struct span *s = &ps->sec[type];

	if (!s->seen)
		return 0;
	if (s->size != (uint64_t)s->count * rec_size)
		return BAD(ps, "corrupt: %s section has %llu bytes for %u records of %zu",
			   section_names[type], (unsigned long long)s->size, s->count, rec_size);
	return 0;
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* No two counters for the same (stack, kind). */
static int check_counter_duplicates(struct parse *ps)
{
	size_t n = ps->p->n_counters;
	uint64_t *keys = malloc(n * sizeof(*keys) + 1);
	int rc = 0;

	if (!keys)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		keys[i] = (uint64_t)ps->p->counters[i].stack_id << 32 | ps->p->counters[i].kind;
	qsort(keys, n, sizeof(*keys), compare_u64);
	for (size_t i = 1; i < n && !rc; i++)
		if (keys[i] == keys[i - 1])
			rc = BAD(ps, "corrupt: two counters for stack %u, kind %u",
				 (uint32_t)(keys[i] >> 32), (uint32_t)keys[i]);
	free(keys);
	return rc;
}

static int parse_counters(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_COUNTERS];
	int rc = fixed_records(ps, ML_SEC_COUNTERS, sizeof(struct ml_fmt_counter));

	if (rc || !s->seen || !s->count)
		return rc;
	ps->p->counters = (struct ml_fmt_counter *)(uintptr_t)s->payload;
	ps->p->n_counters = s->count;
	for (uint32_t i = 0; i < s->count; i++) {
		const struct ml_fmt_counter *ct = &ps->p->counters[i];

		if (ct->kind >= ML_KIND_COUNT)
			return BAD(ps, "corrupt: counter %u has kind %u", i, ct->kind);
		if (!ml_profile_stack(ps->p, ct->stack_id))
			return BAD(ps, "corrupt: counter %u refers to unknown stack %u", i,
				   ct->stack_id);
	}
	return check_counter_duplicates(ps);
}

static int parse_totals(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_TOTALS];
	int rc = fixed_records(ps, ML_SEC_TOTALS, sizeof(struct ml_fmt_total));

	if (rc || !s->seen)
		return rc;
	for (uint32_t i = 0; i < s->count; i++) {
		struct ml_fmt_total t;

		memcpy(&t, s->payload + (size_t)i * sizeof(t), sizeof(t));
		if (t.kind >= ML_KIND_COUNT)
			return BAD(ps, "corrupt: total %u has kind %u", i, t.kind);
		if (ps->p->kinds_present & (1u << t.kind))
			return BAD(ps, "corrupt: two totals for kind %u", t.kind);
		ps->p->totals[t.kind] = t;
		ps->p->kinds_present |= 1u << t.kind;
	}
	return 0;
}

/* The combined GPU total (pseudo-kind ML_KIND_CUDA_GPU, docs/format.md): the
 * runtime counts a block under it only after counting it under its own GPU
 * kind, at the same stack, so every cuda_gpu counter's stack has a counter
 * of a GPU kind, and a cuda_gpu total comes with a total of a GPU kind.
 * (Sums across kinds are not compared: a profile written while other
 * threads allocate may catch one counter of a pair before the other.) */
static bool gpu_part_kind(uint32_t k)
{
	return k == ML_KIND_CUDA_DEVICE || k == ML_KIND_CUDA_MANAGED || k == ML_KIND_CUDA_POOL ||
	       k == ML_KIND_CUDA_VMM || k == ML_KIND_CUDA_ARRAY;
}

static int check_gpu_total(struct parse *ps)
{
	const struct ml_profile *p = ps->p;
	bool any_part = false;
	for (int k = 0; k < ML_KIND_COUNT; k++)
		any_part |= gpu_part_kind((uint32_t)k) && (p->kinds_present & (1u << k));
	if ((p->kinds_present & (1u << ML_KIND_CUDA_GPU)) && !any_part)
		return BAD(ps, "corrupt: a cuda_gpu total without any GPU kind's total");
	bool any_gpu = false;
	for (size_t i = 0; i < p->n_counters && !any_gpu; i++)
		any_gpu = p->counters[i].kind == ML_KIND_CUDA_GPU;
	if (!any_gpu)
		return 0;
	unsigned char *has_part = calloc(p->n_stacks + 1, 1);
	if (!has_part)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < p->n_counters; i++) {
		const struct ml_fmt_counter *c = &p->counters[i];
		if (gpu_part_kind(c->kind))
			has_part[ml_profile_stack(p, c->stack_id) - p->stacks] = 1;
	}
	int rc = 0;
	for (size_t i = 0; i < p->n_counters && !rc; i++) {
		const struct ml_fmt_counter *c = &p->counters[i];
		if (c->kind == ML_KIND_CUDA_GPU &&
		    !has_part[ml_profile_stack(p, c->stack_id) - p->stacks])
			rc = BAD(ps, "corrupt: cuda_gpu counter %zu (stack %u) without a counter of a "
				 "GPU kind on its stack", i, c->stack_id);
	}
	free(has_part);
	return rc;
}

static int parse_timeline(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_TIMELINE];
	int rc = fixed_records(ps, ML_SEC_TIMELINE, sizeof(struct ml_fmt_timepoint));

	if (rc || !s->seen || !s->count)
		return rc;
	ps->p->timeline = (struct ml_fmt_timepoint *)(uintptr_t)s->payload;
	ps->p->n_timeline = s->count;
	for (uint32_t i = 0; i < s->count; i++)
		if (ps->p->timeline[i].kind >= ML_KIND_COUNT)
			return BAD(ps, "corrupt: timeline point %u has kind %u", i,
				   ps->p->timeline[i].kind);
	return 0;
}

/* SAMPLES: the sampling header, then (tid, stack, count) records. */
static int parse_samples(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_SAMPLES];
	struct cursor c = { s->payload, s->size };
	struct ml_profile *p = ps->p;
	uint32_t max_depth = p->meta.max_depth ? p->meta.max_depth : 256;
	uint64_t sum = 0;

	if (!s->seen)
		return 0;
	if (s->count < 1 || !take_record(&c, &p->sampling, sizeof(p->sampling), 0, NULL))
		return BAD(ps, "corrupt: SAMPLES section has no sampling record");
	if (p->sampling.period_ns == 0 || (p->sampling.clock != ML_CLOCK_CPU &&
					   p->sampling.clock != ML_CLOCK_WALL))
		return BAD(ps, "corrupt: SAMPLES period %llu ns, clock %u",
			   (unsigned long long)p->sampling.period_ns, p->sampling.clock);
	if (s->count - 1 > s->size / sizeof(struct ml_fmt_sample))
		return BAD(ps, "corrupt: SAMPLES section too small for %u records", s->count);
	p->samples = calloc((size_t)s->count, sizeof(*p->samples));
	if (!p->samples)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	p->has_samples = true;
	for (uint32_t i = 1; i < s->count; i++) {
		struct ml_fmt_sample fs;
		const unsigned char *frames;
		struct ml_sample *sm = &p->samples[p->n_samples];

		if (!peek(&c, &fs, sizeof(fs)) ||
		    !take_record(&c, &fs, sizeof(fs), (uint64_t)fs.depth * sizeof(uint64_t), &frames))
			return BAD(ps, "corrupt: sample record %u does not fit in the SAMPLES section", i);
		if (fs.depth == 0 || fs.depth > max_depth)
			return BAD(ps, "corrupt: sample record %u is %u frames deep", i, fs.depth);
		if (fs.count == 0 || fs.count > UINT64_MAX - sum)
			return BAD(ps, "corrupt: sample record %u counts %llu", i,
				   (unsigned long long)fs.count);
		sum += fs.count;
		sm->tid = fs.tid;
		sm->depth = fs.depth;
		sm->flags = fs.flags;
		sm->count = fs.count;
		sm->frames = (const uint64_t *)(const void *)frames;	/* 8-aligned */
		p->n_samples++;
	}
	if (c.left)
		return BAD(ps, "corrupt: %llu stray bytes after the last sample",
			   (unsigned long long)c.left);
	if (sum != p->sampling.samples)
		return BAD(ps, "corrupt: SAMPLES records hold %llu samples, the header says %llu",
			   (unsigned long long)sum, (unsigned long long)p->sampling.samples);
	return 0;
}

/* REGIONS: a tree; every parent is an earlier record. */
static int parse_regions(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_REGIONS];
	struct cursor c = { s->payload, s->size };
	struct ml_profile *p = ps->p;

	if (!s->seen || !s->count)
		return s->seen && s->size ? BAD(ps, "corrupt: REGIONS section has bytes but no records") : 0;
	if (s->count > s->size / sizeof(struct ml_fmt_region))
		return BAD(ps, "corrupt: REGIONS section too small for %u records", s->count);
	p->regions = calloc(s->count, sizeof(*p->regions));
	if (!p->regions)
		return set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->count; i++) {
		struct ml_fmt_region fr;
		const unsigned char *name;
		struct ml_region *r = &p->regions[i];
		bool parent_ok;

		if (!peek(&c, &fr, sizeof(fr)) ||
		    !take_record(&c, &fr, sizeof(fr), fr.name_len, &name))
			return BAD(ps, "corrupt: region %u does not fit in the REGIONS section", i);
		parent_ok = fr.parent == 0;
		for (uint32_t k = 0; k < i; k++) {
			if (p->regions[k].id == fr.id)
				return BAD(ps, "corrupt: region id %u appears twice", fr.id);
			parent_ok = parent_ok || p->regions[k].id == fr.parent;
		}
		if (fr.id == 0 || !parent_ok)
			return BAD(ps, "corrupt: region %u has id %u, parent %u", i, fr.id, fr.parent);
		r->id = fr.id;
		r->parent = fr.parent;
		r->flags = fr.flags;
		r->count = fr.count;
		r->total_ns = fr.total_ns;
		r->alloc_bytes = fr.alloc_bytes;
		r->allocs = fr.allocs;
		r->name = copy_string(ps->o, name, fr.name_len);
		if (!r->name || memchr(name, '\0', fr.name_len))
			return BAD(ps, "corrupt: region %u name", i);
		p->n_regions++;
	}
	if (c.left)
		return BAD(ps, "corrupt: %llu stray bytes after the last region",
			   (unsigned long long)c.left);
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
	/* Every string is a copy of file bytes plus a NUL, and every module
	 * record is at least 40 bytes: this bound cannot be exceeded. */
	o->strings_cap = len + len / sizeof(struct ml_fmt_module) + path_len + 3;
	o->strings = malloc(o->strings_cap);
	if (!o->strings)
		goto fail;
	o->data = data;
	p->priv = o;
	p->path = copy_string(o, (const unsigned char *)path, path_len);
	return p;
fail:
	free(o);
	free(p);
	return NULL;
}

/* Validates data (owned by the caller until success or failure: it is
 * always taken over, and freed on failure). */
static int parse_owned(unsigned char *data, size_t len, const char *path,
		       struct ml_profile **out, char *err, size_t errlen)
{
	struct parse ps = { .data = data, .len = len, .err = err, .errlen = errlen };
	struct ml_fmt_header h;
	int rc;

	ps.p = profile_new(data, len, path);
	if (!ps.p) {
		free(data);
		return set_err(err, errlen, -ENOMEM, "out of memory");
	}
	ps.o = ps.p->priv;
	rc = check_header(&ps, &h);
	if (!rc)
		rc = walk_sections(&ps, &h);
	if (!rc)
		rc = parse_meta(&ps);
	if (!rc)
		rc = parse_modules(&ps);
	if (!rc)
		rc = parse_stacks(&ps);
	if (!rc)
		rc = parse_counters(&ps);
	if (!rc)
		rc = parse_totals(&ps);
	if (!rc)
		rc = check_gpu_total(&ps);
	if (!rc)
		rc = parse_timeline(&ps);
	if (!rc)
		rc = parse_samples(&ps);
	if (!rc)
		rc = parse_regions(&ps);
	free(ps.node_depth);
	free(ps.leaf_at);
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
		return set_err(err, errlen, -ENOMEM, "out of memory");
	if (len)
		memcpy(copy, data, len);
	return parse_owned(copy, len, "(buffer)", out, err, errlen);
}

/* Reads all of fd into a malloc'd buffer.  Returns 0 or -errno. */
static int read_all(int fd, size_t size_hint, unsigned char **out, size_t *out_len)
{
	size_t cap = size_hint + 1, len = 0;
	unsigned char *buf = malloc(cap), *bigger;

	while (buf) {
		ssize_t n;

		if (len == cap) {
			bigger = realloc(buf, cap * 2);
			if (!bigger)
				break;
			buf = bigger;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int rc = -errno;

			free(buf);
			return rc;
		}
		if (n == 0) {
			*out = buf;
			*out_len = len;
			return 0;
		}
		len += (size_t)n;
	}
	free(buf);
	return -ENOMEM;
}

int ml_profile_load(const char *path, struct ml_profile **out, char *err, size_t errlen)
{
	unsigned char *data = NULL;
	struct stat st;
	size_t len = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		return set_err(err, errlen, rc, "cannot open: %s", strerror(-rc));
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		set_err(err, errlen, rc, "cannot stat: %s", strerror(-rc));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = set_err(err, errlen, -EISDIR, "is a directory, not a memline profile");
		goto out;
	}
	rc = read_all(fd, S_ISREG(st.st_mode) ? (size_t)st.st_size : 65536, &data, &len);
	if (rc) {
		set_err(err, errlen, rc, "cannot read: %s", strerror(-rc));
		goto out;
	}
	rc = parse_owned(data, len, path, out, err, errlen);
out:
	close(fd);
	return rc;
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
		free(o);
	}
	free(p->modules);
	free(p->stacks);
	free(p->samples);
	free(p->regions);
	free(p);
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
