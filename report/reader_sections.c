/* report/reader_sections.c - parses and validates each section of a profile
 * file, once reader.c has checked its header and section table. */
#include "report/reader_internal.h"
#include "common/varint.h"

#include <stdlib.h>
#include <string.h>

/* Reads n varints from the section's bytes at *at into out (NULL: check
 * only).  False when they run past end. */
static bool get_column(const unsigned char **at, const unsigned char *end, uint64_t *out,
		       uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t v;

		if (!ml_varint_get(at, end, &v))
			return false;
		if (out)
			out[i] = v;
	}
	return true;
}

/* After the columns, only padding: fewer than 8 zero bytes. */
static bool only_padding(const unsigned char *at, const unsigned char *end)
{
	if (end - at >= (ptrdiff_t)ML_FMT_ALIGN)
		return false;
	for (; at < end; at++)
		if (*at)
			return false;
	return true;
}

static int out_of_memory(struct parse *ps)
{
	return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
}

/* count x uint64 of scratch, or NULL (count is bounded by the section's
 * bytes: a varint takes at least one). */
static uint64_t *column_room(const struct span *s, uint32_t columns)
{
	if ((uint64_t)s->count * columns > s->size)
		return NULL;
	return malloc((size_t)s->count * columns * sizeof(uint64_t) + 1);
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
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	for (uint32_t i = 0, at = 0; i < argc; i++) {
		ps->o->argv[i] = (const char *)args + at;
		at += (uint32_t)strlen((const char *)args + at) + 1;
	}
	ps->p->argv = ps->o->argv;
	return 0;
}

int ml_reader_parse_meta(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_META];
	struct cursor c = { s->payload, s->size };
	struct ml_fmt_meta *m = &ps->p->meta;
	const unsigned char *var;

	if (s->count != 1)
		return BAD(ps, "corrupt: META section has %u records, expected 1", s->count);
	if (!ml_reader_peek(&c, m, sizeof(*m)) ||
	    !ml_reader_take_record(&c, m, sizeof(*m), (uint64_t)m->exe_len + m->argv_len, &var) || c.left)
		return BAD(ps, "corrupt: META section size %llu does not match its lengths",
			   (unsigned long long)s->size);
	if (m->end_reason < ML_END_EXIT || m->end_reason > ML_END_THREAD_EXIT)
		return BAD(ps, "corrupt: META end reason %u is unknown", m->end_reason);
	ps->p->exe = ml_reader_copy_string(ps->o, var, m->exe_len);
	if (!ps->p->exe)
		return BAD(ps, "corrupt: META exe path does not fit");
	return parse_argv(ps, var + m->exe_len, m->argv_len, m->argc);
}

static int parse_module(struct parse *ps, struct cursor *c, struct ml_module *mod, uint32_t i)
{
	struct ml_fmt_module fm;
	const unsigned char *var;

	if (!ml_reader_peek(c, &fm, sizeof(fm)) ||
	    !ml_reader_take_record(c, &fm, sizeof(fm), (uint64_t)fm.path_len + fm.build_id_len, &var))
		return BAD(ps, "corrupt: module %u does not fit in the MODULES section", i);
	if (fm.lo > fm.hi)
		return BAD(ps, "corrupt: module %u ends (0x%llx) before it starts (0x%llx)", i,
			   (unsigned long long)fm.hi, (unsigned long long)fm.lo);
	mod->bias = fm.bias;
	mod->lo = fm.lo;
	mod->hi = fm.hi;
	mod->flags = fm.flags;
	mod->path = ml_reader_copy_string(ps->o, var, fm.path_len);
	mod->build_id = fm.build_id_len ? var + fm.path_len : NULL;
	mod->build_id_len = fm.build_id_len;
	if (!mod->path)
		return BAD(ps, "corrupt: module %u path does not fit", i);
	return 0;
}

int ml_reader_parse_modules(struct parse *ps)
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
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
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

/* ADDRESSES: ascending distinct addresses, as deltas. */
static int parse_addresses(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_ADDRESSES];
	const unsigned char *at = s->payload, *end = s->payload + s->size;
	uint64_t *a;

	if (!s->seen)
		return 0;
	if ((uint64_t)s->count > s->size)
		return BAD(ps, "corrupt: ADDRESSES has %u records in %llu bytes", s->count,
			   (unsigned long long)s->size);
	a = ps->addresses = malloc((size_t)s->count * sizeof(*a) + 1);
	if (!a)
		return out_of_memory(ps);
	if (!get_column(&at, end, a, s->count) || !only_padding(at, end))
		return BAD(ps, "corrupt: ADDRESSES does not hold %u varints", s->count);
	for (uint32_t i = 1; i < s->count; i++) {
		if (!a[i] || a[i] > UINT64_MAX - a[i - 1])
			return BAD(ps, "corrupt: ADDRESSES are not ascending at %u", i);
		a[i] += a[i - 1];
	}
	ps->n_addresses = s->count;
	return 0;
}

/* FRAMES: the call-site trie; every parent is an earlier node, so one pass
 * gives every node's depth (the length of its walk to the root). */
static int parse_frames(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_FRAMES];
	const unsigned char *at = s->payload, *end = s->payload + s->size;
	uint64_t *col;
	int rc = parse_addresses(ps);

	if (rc)
		return rc;
	if (!s->seen || !s->count)
		return s->seen && s->size ? BAD(ps, "corrupt: FRAMES section has bytes but no records") : 0;
	col = column_room(s, 2);
	ps->nodes = malloc((size_t)s->count * sizeof(*ps->nodes) + 1);
	ps->node_depth = malloc(((size_t)s->count + 1) * sizeof(*ps->node_depth));
	if (!col || !ps->nodes || !ps->node_depth) {
		free(col);
		return col || (uint64_t)s->count * 2 <= s->size ? out_of_memory(ps) :
			BAD(ps, "corrupt: FRAMES has %u records in %llu bytes", s->count,
			    (unsigned long long)s->size);
	}
	rc = 0;
	if (!get_column(&at, end, col, 2ull * s->count) || !only_padding(at, end))
		rc = BAD(ps, "corrupt: FRAMES does not hold 2 x %u varints", s->count);
	ps->node_depth[0] = 0;
	for (uint32_t id = 1; !rc && id <= s->count; id++) {
		uint64_t back = col[id - 1], index = col[s->count + id - 1];

		if (back == 0 || back > id)
			rc = BAD(ps, "corrupt: frame node %u has parent %lld", id,
				 (long long)id - (long long)back);
		else if (index >= ps->n_addresses)
			rc = BAD(ps, "corrupt: frame node %u has address %llu of %u", id,
				 (unsigned long long)index, ps->n_addresses);
		else {
			ps->nodes[id - 1] = (struct ml_fmt_frame){
				.parent = id - (uint32_t)back, .address = ps->addresses[index] };
			ps->node_depth[id] = ps->node_depth[id - back] + 1;
		}
	}
	free(col);
	ps->n_nodes = rc ? 0 : s->count;
	return rc;
}

/* The walk from fs's leaf to the root must be exactly fs->depth nodes long. */
static int check_stack(struct parse *ps, const struct ml_fmt_stack *fs, uint32_t i)
{
	uint32_t max_depth = ml_reader_depth_limit(ps);

	if (fs->id == 0)
		return BAD(ps, "corrupt: stack %u has id 0", i);
	if (fs->flags & ~(ML_STACK_EXACT_IP | ML_STACK_TRUNCATED | ML_STACK_LOST))
		return BAD(ps, "corrupt: stack %u has unknown flags 0x%x", fs->id, fs->flags);
	if ((fs->flags & ML_STACK_LOST) && fs->leaf)
		return BAD(ps, "corrupt: stack %u is marked lost but has frames", fs->id);
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

/* Fills the stacks from their records; their frames stay in the trie,
 * which the profile keeps (every walk was checked by check_stack). */
static void fill_stacks(struct parse *ps, const struct ml_fmt_stack *fs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		ps->p->stacks[i] = (struct ml_stack){ .id = fs[i].id, .depth = fs[i].depth,
						      .flags = fs[i].flags, .leaf = fs[i].leaf };
	ps->o->nodes = ps->nodes;
	ps->nodes = NULL;
	ps->p->frame_nodes = ps->o->nodes;
	ps->p->n_frame_nodes = ps->n_nodes;
}

/* STACKS' columns (id deltas, leaves, flags) as ml_fmt_stack records. */
static int decode_stacks(struct parse *ps, struct ml_fmt_stack **out)
{
	const struct span *s = &ps->sec[ML_SEC_STACKS];
	const unsigned char *at = s->payload, *end = s->payload + s->size;
	uint64_t *col = column_room(s, 3), id = 0, leaf = 0;
	struct ml_fmt_stack *fs = malloc((size_t)s->count * sizeof(*fs) + 1);
	int rc = 0;

	*out = fs;
	if (!col || !fs) {
		free(col);
		return col || (uint64_t)s->count * 3 <= s->size ? out_of_memory(ps) :
			BAD(ps, "corrupt: STACKS has %u records in %llu bytes", s->count,
			    (unsigned long long)s->size);
	}
	if (!get_column(&at, end, col, 3ull * s->count) || !only_padding(at, end))
		rc = BAD(ps, "corrupt: STACKS does not hold 3 x %u varints", s->count);
	for (uint32_t i = 0; !rc && i < s->count; i++) {
		uint64_t delta = col[i], flags = col[2ull * s->count + i];

		id += delta;
		leaf += col[s->count + i];	/* modulo 2^64: any order can be written */
		if ((i && !delta) || id > UINT32_MAX)
			rc = BAD(ps, "corrupt: STACKS ids do not ascend at record %u", i);
		else if (leaf > ps->n_nodes)
			rc = BAD(ps, "corrupt: stack %llu has leaf %llu, the trie has %u frame nodes",
				 (unsigned long long)id, (unsigned long long)leaf, ps->n_nodes);
		else if (flags > UINT32_MAX)
			rc = BAD(ps, "corrupt: stack %llu has flags %llu", (unsigned long long)id,
				 (unsigned long long)flags);
		else
			fs[i] = (struct ml_fmt_stack){ .id = (uint32_t)id, .flags = (uint32_t)flags,
				.leaf = (uint32_t)leaf,
				.depth = leaf ? ps->node_depth[leaf] : 0 };
	}
	free(col);
	return rc;
}

int ml_reader_parse_stacks(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_STACKS];
	struct ml_fmt_stack *fs = NULL;
	struct ml_stack *st;
	int rc = parse_frames(ps);

	if (rc)
		return rc;
	if (!s->seen || !s->count)
		return s->size ? BAD(ps, "corrupt: STACKS section has bytes but no records") : 0;
	rc = decode_stacks(ps, &fs);
	for (uint32_t i = 0; !rc && i < s->count; i++)
		rc = check_stack(ps, &fs[i], i);
	st = rc ? NULL : calloc(s->count, sizeof(*st));
	if (!rc && !st)
		rc = out_of_memory(ps);
	if (!rc) {
		ps->p->stacks = st;
		ps->p->n_stacks = s->count;
		fill_stacks(ps, fs, s->count);	/* ids ascend: sorted already */
	}
	free(fs);
	return rc;
}

/* A section of count fixed-size records: checks size == count * rec_size. */
static int fixed_records(struct parse *ps, int type, size_t rec_size)
{
	const struct span *s = &ps->sec[type];

	if (!s->seen)
		return 0;
	if (s->size != (uint64_t)s->count * rec_size)
		return BAD(ps, "corrupt: %s section has %llu bytes for %u records of %zu",
			   ml_reader_section_names[type], (unsigned long long)s->size, s->count, rec_size);
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
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
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

/* A fixed-point block count (sampled profiles) in whole blocks, rounded. */
static uint64_t blocks_of(const struct parse *ps, uint64_t v)
{
	uint64_t unit = ps->p->sampled ? ps->p->alloc_sampling.count_unit : 1;
	return v / unit + (v % unit >= (unit + 1) / 2 && unit > 1);
}

/* COUNTERS' columns (8, or 12 when sampled) as ml_fmt_counter records
 * (frees derived). */
static int decode_counters(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_COUNTERS];
	const unsigned char *at = s->payload, *end = s->payload + s->size;
	uint32_t cols = ps->p->sampled ? 12 : 8;
	uint64_t *col = column_room(s, cols), n = s->count, index = 0;
	struct ml_fmt_counter *ct = ps->o->counters = malloc((size_t)n * sizeof(*ct) + 1);
	int rc = 0;

	if (!col || !ct) {
		free(col);
		return col || n * cols <= s->size ? out_of_memory(ps) :
			BAD(ps, "corrupt: COUNTERS has %u records in %llu bytes", s->count,
			    (unsigned long long)s->size);
	}
	if (!get_column(&at, end, col, cols * n) || !only_padding(at, end))
		rc = BAD(ps, "corrupt: COUNTERS does not hold %u x %u varints", cols, s->count);
	for (uint64_t i = 0; !rc && i < n; i++) {
		const uint64_t *f = col + i;	/* field k of counter i: f[k * n] */
		/* Stored relative to alloc_bytes (ml_fmt_rel_put). */
		uint64_t live_bytes = ml_fmt_rel_get(f[3 * n], f[4 * n], f[5 * n]);
		uint64_t peak_bytes = ml_fmt_rel_get(f[3 * n], f[6 * n], f[7 * n]);

		index += f[0];
		if (index >= ps->p->n_stacks)
			rc = BAD(ps, "corrupt: counter %llu refers to stack %llu of %zu",
				 (unsigned long long)i, (unsigned long long)index, ps->p->n_stacks);
		else if (f[n] >= ML_KIND_COUNT || ml_kind_is_derived((enum ml_kind)f[n]))
			rc = BAD(ps, "corrupt: counter %llu has kind %llu", (unsigned long long)i,
				 (unsigned long long)f[n]);
		else if (f[4 * n] > f[2 * n] || live_bytes > f[3 * n])
			rc = BAD(ps, "corrupt: counter %llu has more live than allocated",
				 (unsigned long long)i);
		else {
			uint64_t allocs = blocks_of(ps, f[2 * n]), live = blocks_of(ps, f[4 * n]);

			ct[i] = (struct ml_fmt_counter){
				.stack_id = ps->p->stacks[index].id, .kind = (uint32_t)f[n],
				.allocs = allocs, .alloc_bytes = f[3 * n],
				.frees = allocs - live, .freed_bytes = f[3 * n] - live_bytes,
				.live_blocks = live, .live_bytes = live_bytes,
				.peak_blocks = blocks_of(ps, f[6 * n]), .peak_bytes = peak_bytes };
			if (cols == 12) {
				ct[i].samples = f[8 * n];
				ct[i].var_alloc_bytes = f[9 * n];
				ct[i].var_live_bytes = f[10 * n];
				ct[i].var_peak_bytes = f[11 * n];
			}
		}
	}
	free(col);
	return rc;
}

int ml_reader_parse_counters(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_COUNTERS];
	int rc;

	if (!s->seen || !s->count)
		return s->seen && s->size ? BAD(ps, "corrupt: COUNTERS section has bytes but no records") : 0;
	rc = decode_counters(ps);
	if (rc)
		return rc;
	ps->p->counters = ps->o->counters;
	ps->p->n_counters = s->count;
	return check_counter_duplicates(ps);
}

int ml_reader_parse_totals(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_TOTALS];
	int rc = fixed_records(ps, ML_SEC_TOTALS, sizeof(struct ml_fmt_total));

	if (rc || !s->seen)
		return rc;
	for (uint32_t i = 0; i < s->count; i++) {
		struct ml_fmt_total t;

		memcpy(&t, s->payload + (size_t)i * sizeof(t), sizeof(t));
		if (t.kind >= ML_KIND_COUNT || ml_kind_is_derived((enum ml_kind)t.kind))
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

int ml_reader_check_gpu_total(struct parse *ps)
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
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
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

int ml_reader_parse_timeline(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_TIMELINE];
	int rc = fixed_records(ps, ML_SEC_TIMELINE, sizeof(struct ml_fmt_timepoint));

	if (rc || !s->seen || !s->count)
		return rc;
	ps->p->timeline = (struct ml_fmt_timepoint *)(uintptr_t)s->payload;
	ps->p->n_timeline = s->count;
	for (uint32_t i = 0; i < s->count; i++)
		if (ps->p->timeline[i].kind >= ML_KIND_COUNT ||
		    ml_kind_is_derived((enum ml_kind)ps->p->timeline[i].kind))
			return BAD(ps, "corrupt: timeline point %u has kind %u", i,
				   ps->p->timeline[i].kind);
	return 0;
}

/* SAMPLES: the sampling header, then (tid, stack, count) records. */
int ml_reader_parse_samples(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_SAMPLES];
	struct cursor c = { s->payload, s->size };
	struct ml_profile *p = ps->p;
	uint32_t max_depth = p->meta.max_depth ? ml_reader_depth_limit(ps) : 256 + ML_PYFRAMES_MAX;
	uint64_t sum = 0;

	if (!s->seen)
		return 0;
	if (s->count < 1 || !ml_reader_take_record(&c, &p->sampling, sizeof(p->sampling), 0, NULL))
		return BAD(ps, "corrupt: SAMPLES section has no sampling record");
	if (p->sampling.period_ns == 0 || (p->sampling.clock != ML_CLOCK_CPU &&
					   p->sampling.clock != ML_CLOCK_WALL))
		return BAD(ps, "corrupt: SAMPLES period %llu ns, clock %u",
			   (unsigned long long)p->sampling.period_ns, p->sampling.clock);
	if (s->count - 1 > s->size / sizeof(struct ml_fmt_sample))
		return BAD(ps, "corrupt: SAMPLES section too small for %u records", s->count);
	p->samples = calloc((size_t)s->count, sizeof(*p->samples));
	if (!p->samples)
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	p->has_samples = true;
	for (uint32_t i = 1; i < s->count; i++) {
		struct ml_fmt_sample fs;
		const unsigned char *frames;
		struct ml_sample *sm = &p->samples[p->n_samples];

		if (!ml_reader_peek(&c, &fs, sizeof(fs)) ||
		    !ml_reader_take_record(&c, &fs, sizeof(fs), (uint64_t)fs.depth * sizeof(uint64_t), &frames))
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
int ml_reader_parse_regions(struct parse *ps)
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
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->count; i++) {
		struct ml_fmt_region fr;
		const unsigned char *name;
		struct ml_region *r = &p->regions[i];
		bool parent_ok;

		if (!ml_reader_peek(&c, &fr, sizeof(fr)) ||
		    !ml_reader_take_record(&c, &fr, sizeof(fr), fr.name_len, &name))
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
		r->name = ml_reader_copy_string(ps->o, name, fr.name_len);
		if (!r->name || memchr(name, '\0', fr.name_len))
			return BAD(ps, "corrupt: region %u name", i);
		p->n_regions++;
	}
	if (c.left)
		return BAD(ps, "corrupt: %llu stray bytes after the last region",
			   (unsigned long long)c.left);
	return 0;
}


int ml_reader_parse_runtime(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_RUNTIME];
	int rc = fixed_records(ps, ML_SEC_RUNTIME, sizeof(struct ml_fmt_runtime));

	if (rc || !s->seen)
		return rc;
	if (s->count != 1)
		return BAD(ps, "corrupt: RUNTIME section has %u records, expected 1", s->count);
	memcpy(&ps->p->runtime, s->payload, sizeof(ps->p->runtime));
	ps->p->has_runtime = true;
	return 0;
}

int ml_reader_parse_sampled(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_SAMPLED];
	bool flagged = (ps->p->meta.flags & ML_META_SAMPLED) != 0;
	int rc = fixed_records(ps, ML_SEC_SAMPLED, sizeof(struct ml_fmt_sampled));

	if (rc)
		return rc;
	if (flagged != s->seen)
		return BAD(ps, "corrupt: META says %ssampled, %s SAMPLED section",
			   flagged ? "" : "not ", s->seen ? "but there is a" : "but there is no");
	if (!s->seen)
		return 0;
	if (s->count != 1)
		return BAD(ps, "corrupt: SAMPLED section has %u records, expected 1", s->count);
	memcpy(&ps->p->alloc_sampling, s->payload, sizeof(ps->p->alloc_sampling));
	if (!ps->p->alloc_sampling.count_unit || !ps->p->alloc_sampling.rate_bytes)
		return BAD(ps, "corrupt: SAMPLED has a zero rate or count unit");
	ps->p->sampled = true;
	return 0;
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* SPANS: a header, then spans of known regions, each start <= end. */
int ml_reader_parse_spans(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_SPANS];
	struct ml_profile *p = ps->p;
	struct ml_fmt_spans_header h;

	if (!s->seen)
		return 0;
	if (s->count < 1 || s->size < sizeof(h) ||
	    (s->size - sizeof(h)) / sizeof(struct ml_fmt_span) != s->count - 1 ||
	    (s->size - sizeof(h)) % sizeof(struct ml_fmt_span))
		return BAD(ps, "corrupt: SPANS section of %llu bytes for %u records",
			   (unsigned long long)s->size, s->count);
	memcpy(&h, s->payload, sizeof(h));
	p->spans_dropped = h.dropped;
	p->spans = (const struct ml_fmt_span *)(uintptr_t)(s->payload + sizeof(h));
	p->n_spans = s->count - 1;
	uint32_t *ids = calloc(p->n_regions + 1, sizeof(*ids));
	if (!ids)
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	for (size_t k = 0; k < p->n_regions; k++)
		ids[k] = p->regions[k].id;
	qsort(ids, p->n_regions, sizeof(*ids), cmp_u32);
	int rc = 0;
	for (size_t i = 0; i < p->n_spans && !rc; i++) {
		const struct ml_fmt_span *sp = &p->spans[i];
		if (!bsearch(&sp->region, ids, p->n_regions, sizeof(*ids), cmp_u32) ||
		    sp->end_ns < sp->start_ns)
			rc = BAD(ps, "corrupt: span %zu of region %u (%llu..%llu ns)", i, sp->region,
				 (unsigned long long)sp->start_ns, (unsigned long long)sp->end_ns);
	}
	free(ids);
	return rc;
}

/* NOTES: sentences for the report to show; no NUL or newline inside. */
int ml_reader_parse_notes(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_NOTES];
	struct cursor c = { s->payload, s->size };
	struct ml_profile *p = ps->p;

	if (!s->seen || !s->count)
		return s->seen && s->size ? BAD(ps, "corrupt: NOTES section has bytes but no records") : 0;
	if (s->count > s->size / sizeof(struct ml_fmt_note))
		return BAD(ps, "corrupt: NOTES section too small for %u records", s->count);
	ps->o->notes = calloc(s->count, sizeof(*ps->o->notes));
	if (!ps->o->notes)
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	p->notes = ps->o->notes;
	for (uint32_t i = 0; i < s->count; i++) {
		struct ml_fmt_note fn;
		const unsigned char *text;

		if (!ml_reader_peek(&c, &fn, sizeof(fn)) ||
		    !ml_reader_take_record(&c, &fn, sizeof(fn), fn.len, &text))
			return BAD(ps, "corrupt: note %u does not fit in the NOTES section", i);
		if (memchr(text, '\0', fn.len) || memchr(text, '\n', fn.len))
			return BAD(ps, "corrupt: note %u holds a NUL or a newline", i);
		ps->o->notes[i] = ml_reader_copy_string(ps->o, text, fn.len);
		if (!ps->o->notes[i])
			return BAD(ps, "corrupt: note %u does not fit", i);
		p->n_notes++;
	}
	if (c.left)
		return BAD(ps, "corrupt: %llu stray bytes after the last note",
			   (unsigned long long)c.left);
	return 0;
}
