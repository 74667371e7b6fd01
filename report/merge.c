/* report/merge.c - several profiles summed into one (`memline report
 * --merge`: all DataLoader workers, all ranks, ...).  Each process had its
 * own address space; here every distinct module (same path and build-id)
 * gets one place in a common, made-up address space above 2^48, where
 * every process's frames in it are moved, so that the symbolizer opens each
 * module once and equal stacks of different processes become one stack.
 *
 * What the sums mean: allocations, frees, bytes and what was left at exit
 * add up; a stack's (and a kind's) peak is the sum of each process's own
 * peak, the memory the processes needed at their worst, not a moment when
 * they were all at it; the timeline adds the processes' live bytes at each
 * moment of wall-clock time.  Samples add up when taken with one clock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/merge.h"
#include "report/reader_internal.h"

#define CANON_BASE (1ull << 48)
#define CANON_GAP 0x10000ull

/* A distinct module and its place in the merged address space. */
struct umod {
	const struct ml_module *m;	/* the first process's record */
	uint64_t canon_lo, size;
	uint32_t flags_and, flags_or;
};

/* One process's modules, sorted by lo, each with its umod. */
struct pmod {
	uint64_t lo, hi;
	size_t umod;
};

struct merger {
	const struct ml_profile *const *in;
	size_t n;
	struct umod *umods;
	size_t n_umods;
	struct pmod **pmods;		/* [process] */
	size_t *n_pmods;
	/* stacks, deduplicated by (frames, flags) */
	struct ml_stack *stacks;
	size_t n_stacks, cap_stacks;
	size_t *slots;			/* open addressing: stack index + 1 */
	size_t n_slots;
	uint64_t *frames;
	size_t n_frames, cap_frames;
	uint32_t **stack_map;		/* [process][stack index] -> merged id */
	uint32_t **code_map;		/* [process][PYCODE index] -> merged code id */
	struct ml_pycode *codes;	/* the merged PYCODE records */
	size_t n_codes;
	char *err;
	size_t errlen;
};

static int oom(struct merger *mg)
{
	snprintf(mg->err, mg->errlen, "out of memory");
	return -ENOMEM;
}

static bool same_module(const struct ml_module *a, const struct ml_module *b)
{
	if (strcmp(a->path, b->path) != 0 || a->build_id_len != b->build_id_len)
		return false;
	if (a->build_id_len)
		return memcmp(a->build_id, b->build_id, a->build_id_len) == 0;
	return a->hi - a->lo == b->hi - b->lo && a->lo - a->bias == b->lo - b->bias;
}

static int cmp_pmod(const void *a, const void *b)
{
	const struct pmod *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Gives every distinct module its place; indexes each process's modules. */
static int place_modules(struct merger *mg)
{
	size_t total = 0;
	for (size_t i = 0; i < mg->n; i++)
		total += mg->in[i]->n_modules;
	mg->umods = calloc(total + 1, sizeof(*mg->umods));
	mg->pmods = calloc(mg->n, sizeof(*mg->pmods));
	mg->n_pmods = calloc(mg->n, sizeof(*mg->n_pmods));
	if (!mg->umods || !mg->pmods || !mg->n_pmods)
		return oom(mg);
	uint64_t next = CANON_BASE;
	for (size_t i = 0; i < mg->n; i++) {
		const struct ml_profile *p = mg->in[i];
		mg->pmods[i] = calloc(p->n_modules + 1, sizeof(**mg->pmods));
		if (!mg->pmods[i])
			return oom(mg);
		for (size_t k = 0; k < p->n_modules; k++) {
			const struct ml_module *m = &p->modules[k];
			size_t u = 0;
			while (u < mg->n_umods && !same_module(mg->umods[u].m, m))
				u++;
			if (u == mg->n_umods) {
				uint64_t size = m->hi > m->lo ? m->hi - m->lo : 0;
				mg->umods[u] = (struct umod){ m, next, size, m->flags, m->flags };
				next += (size + CANON_GAP) & ~(CANON_GAP - 1);
				next += CANON_GAP;
				mg->n_umods++;
			}
			mg->umods[u].flags_and &= m->flags;
			mg->umods[u].flags_or |= m->flags;
			mg->pmods[i][k] = (struct pmod){ m->lo, m->hi, u };
		}
		mg->n_pmods[i] = p->n_modules;
		qsort(mg->pmods[i], p->n_modules, sizeof(**mg->pmods), cmp_pmod);
	}
	return 0;
}

/* A Python frame of process i with its code object's merged id. */
static uint64_t move_pyframe(const struct merger *mg, size_t i, uint64_t addr)
{
	const struct ml_pycode *pc = ml_profile_pycode(mg->in[i], ml_pyframe_code(addr));
	uint32_t id = pc && mg->code_map ? mg->code_map[i][pc - mg->in[i]->pycodes] : 0;
	return (addr & ~((uint64_t)ML_PYFRAME_CODE_MAX << 32)) | ((uint64_t)id << 32);
}

/* addr of process i in the merged address space (an address outside every
 * module stays as it is: it cannot be symbolized anyway). */
static uint64_t move_addr(const struct merger *mg, size_t i, uint64_t addr)
{
	if (ml_pyframe_is(addr))
		return move_pyframe(mg, i, addr);
	const struct pmod *pm = mg->pmods[i];
	size_t lo = 0, hi = mg->n_pmods[i];
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (pm[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* pm[lo - 1] is the last module starting at or below addr; modules
	 * unloaded and replaced may overlap, so look back a little. */
	for (size_t k = lo; k-- > 0 && lo - k <= 8;)
		if (addr >= pm[k].lo && addr < pm[k].hi)
			return mg->umods[pm[k].umod].canon_lo + (addr - pm[k].lo);
	return addr;
}

static uint64_t hash_stack(const uint64_t *f, uint32_t depth, uint32_t flags)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ depth ^ ((uint64_t)flags << 32);
	for (uint32_t d = 0; d < depth; d++)
		h = (h ^ f[d]) * 0xff51afd7ed558ccdull;
	return h ^ (h >> 29);
}

static int grow_slots(struct merger *mg);

/* The merged id of the stack frames[0..depth) (moved addresses), made if new. */
static int intern_stack(struct merger *mg, const uint64_t *frames, uint32_t depth,
			uint32_t flags, uint32_t *id)
{
	if (2 * (mg->n_stacks + 1) > mg->n_slots && grow_slots(mg) < 0)
		return oom(mg);
	uint64_t h = hash_stack(frames, depth, flags);
	size_t mask = mg->n_slots - 1, s = (size_t)h & mask;
	for (; mg->slots[s]; s = (s + 1) & mask) {
		const struct ml_stack *st = &mg->stacks[mg->slots[s] - 1];
		if (st->depth == depth && st->flags == flags &&
		    memcmp(st->frames, frames, depth * sizeof(uint64_t)) == 0) {
			*id = st->id;
			return 0;
		}
	}
	if (mg->n_frames + depth > mg->cap_frames || mg->n_stacks == mg->cap_stacks)
		return -EAGAIN;	/* caller sized both: cannot happen */
	uint64_t *copy = mg->frames + mg->n_frames;
	memcpy(copy, frames, depth * sizeof(uint64_t));
	mg->n_frames += depth;
	struct ml_stack *st = &mg->stacks[mg->n_stacks++];
	*st = (struct ml_stack){ .id = (uint32_t)mg->n_stacks, .depth = depth, .flags = flags,
				 .frames = copy };
	mg->slots[s] = mg->n_stacks;
	*id = st->id;
	return 0;
}

static int grow_slots(struct merger *mg)
{
	size_t n = mg->n_slots ? mg->n_slots * 2 : 1024;
	size_t *slots = calloc(n, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t k = 0; k < mg->n_stacks; k++) {
		const struct ml_stack *st = &mg->stacks[k];
		size_t s = (size_t)hash_stack(st->frames, st->depth, st->flags) & (n - 1);
		while (slots[s])
			s = (s + 1) & (n - 1);
		slots[s] = k + 1;
	}
	free(mg->slots);
	mg->slots = slots;
	mg->n_slots = n;
	return 0;
}

/* Moves every stack of every process; fills stack_map. */
static int merge_stacks(struct merger *mg)
{
	size_t stacks = 0, frames = 0;
	for (size_t i = 0; i < mg->n; i++) {
		stacks += mg->in[i]->n_stacks;
		for (size_t k = 0; k < mg->in[i]->n_stacks; k++)
			frames += mg->in[i]->stacks[k].depth;
	}
	mg->stacks = calloc(stacks + 1, sizeof(*mg->stacks));
	mg->frames = calloc(frames + 1, sizeof(*mg->frames));
	mg->stack_map = calloc(mg->n, sizeof(*mg->stack_map));
	if (!mg->stacks || !mg->frames || !mg->stack_map)
		return oom(mg);
	mg->cap_stacks = stacks;
	mg->cap_frames = frames;
	uint64_t buf[4096], *walk = NULL;
	size_t walk_cap = 0;
	for (size_t i = 0; i < mg->n; i++) {
		const struct ml_profile *p = mg->in[i];
		mg->stack_map[i] = calloc(p->n_stacks + 1, sizeof(**mg->stack_map));
		if (!mg->stack_map[i]) {
			free(walk);
			return oom(mg);
		}
		for (size_t k = 0; k < p->n_stacks; k++) {
			const struct ml_stack *st = &p->stacks[k];
			uint32_t depth = st->depth < 4096 ? st->depth : 4096;
			if (!st->frames && st->depth > walk_cap) {
				uint64_t *mem = realloc(walk, st->depth * sizeof(*walk));
				if (!mem) {
					free(walk);
					return oom(mg);
				}
				walk = mem;
				walk_cap = st->depth;
			}
			const uint64_t *addrs = ml_profile_stack_frames(p, st, walk);
			for (uint32_t d = 0; d < depth; d++)
				buf[d] = move_addr(mg, i, addrs[d]);
			int rc = intern_stack(mg, buf, depth, st->flags, &mg->stack_map[i][k]);
			if (rc < 0) {
				free(walk);
				return rc;
			}
		}
	}
	free(walk);
	return 0;
}

/* The merged id of process i's stack id (stacks are sorted by id). */
static uint32_t map_id(const struct merger *mg, size_t i, uint32_t id)
{
	const struct ml_stack *st = ml_profile_stack(mg->in[i], id);
	return st ? mg->stack_map[i][st - mg->in[i]->stacks] : 0;
}

static int cmp_counter(const void *a, const void *b)
{
	const struct ml_fmt_counter *x = a, *y = b;
	if (x->stack_id != y->stack_id)
		return x->stack_id < y->stack_id ? -1 : 1;
	return x->kind < y->kind ? -1 : x->kind > y->kind;
}

/* Counters of equal (stack, kind) summed, in one array (returned in *out). */
static int merge_counters(struct merger *mg, struct ml_fmt_counter **out, size_t *n_out)
{
	size_t total = 0;
	for (size_t i = 0; i < mg->n; i++)
		total += mg->in[i]->n_counters;
	struct ml_fmt_counter *c = calloc(total + 1, sizeof(*c));
	if (!c)
		return oom(mg);
	size_t n = 0;
	for (size_t i = 0; i < mg->n; i++)
		for (size_t k = 0; k < mg->in[i]->n_counters; k++) {
			c[n] = mg->in[i]->counters[k];
			c[n].stack_id = map_id(mg, i, c[n].stack_id);
			n++;
		}
	qsort(c, n, sizeof(*c), cmp_counter);
	size_t w = 0;
	for (size_t r = 0; r < n; r++) {
		if (w && c[w - 1].stack_id == c[r].stack_id && c[w - 1].kind == c[r].kind) {
			struct ml_fmt_counter *d = &c[w - 1];
			d->allocs += c[r].allocs;
			d->alloc_bytes += c[r].alloc_bytes;
			d->frees += c[r].frees;
			d->freed_bytes += c[r].freed_bytes;
			d->live_blocks += c[r].live_blocks;
			d->live_bytes += c[r].live_bytes;
			d->peak_blocks += c[r].peak_blocks;
			d->peak_bytes += c[r].peak_bytes;
			/* Sampled inputs: independent estimates, variances add. */
			d->samples += c[r].samples;
			d->var_alloc_bytes += c[r].var_alloc_bytes;
			d->var_live_bytes += c[r].var_live_bytes;
			d->var_peak_bytes += c[r].var_peak_bytes;
		} else {
			c[w++] = c[r];
		}
	}
	*out = c;
	*n_out = w;
	return 0;
}

struct tl_event {
	uint64_t t;		/* wall-clock ns */
	size_t proc;
	uint64_t live;
};

static int cmp_event(const void *a, const void *b)
{
	const struct tl_event *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->proc < y->proc ? -1 : x->proc > y->proc;
}

/* The sum, at every moment, of the processes' live bytes of kind: a point
 * wherever one of them changes.  Appends to tl (room for every point). */
static int merge_timeline_kind(struct merger *mg, uint32_t kind, uint64_t t0,
			       struct ml_fmt_timepoint *tl, size_t *n_tl)
{
	size_t n = 0;
	for (size_t i = 0; i < mg->n; i++)
		for (size_t k = 0; k < mg->in[i]->n_timeline; k++)
			n += mg->in[i]->timeline[k].kind == kind;
	if (!n)
		return 0;
	struct tl_event *ev = calloc(n, sizeof(*ev));
	uint64_t *cur = calloc(mg->n, sizeof(*cur));
	if (!ev || !cur) {
		free(ev);
		free(cur);
		return oom(mg);
	}
	n = 0;
	for (size_t i = 0; i < mg->n; i++)
		for (size_t k = 0; k < mg->in[i]->n_timeline; k++) {
			const struct ml_fmt_timepoint *tp = &mg->in[i]->timeline[k];
			if (tp->kind == kind)
				ev[n++] = (struct tl_event){
					mg->in[i]->meta.start_realtime_ns + tp->time_ns, i, tp->live_bytes };
		}
	qsort(ev, n, sizeof(*ev), cmp_event);
	uint64_t sum = 0;
	for (size_t k = 0; k < n; k++) {
		sum = sum - cur[ev[k].proc] + ev[k].live;
		cur[ev[k].proc] = ev[k].live;
		if (k + 1 < n && ev[k + 1].t == ev[k].t)
			continue;	/* one point per moment */
		tl[(*n_tl)++] = (struct ml_fmt_timepoint){ .kind = kind,
			.time_ns = ev[k].t - t0, .live_bytes = sum };
	}
	free(ev);
	free(cur);
	return 0;
}

/* Samples of every process, counted in the first sampled one's period. */
static int merge_samples(struct merger *mg, struct ml_profile *out)
{
	size_t n = 0, frames = 0;
	const struct ml_profile *first = NULL;
	for (size_t i = 0; i < mg->n; i++) {
		const struct ml_profile *p = mg->in[i];
		if (!p->has_samples)
			continue;
		if (!first)
			first = p;
		if (p->sampling.clock != first->sampling.clock) {
			snprintf(mg->err, mg->errlen, "cannot merge samples of the CPU clock "
				 "with samples of the wall clock (%s, %s)", first->path, p->path);
			return -EINVAL;
		}
		n += p->n_samples;
		for (size_t k = 0; k < p->n_samples; k++)
			frames += p->samples[k].depth;
	}
	if (!first)
		return 0;
	out->samples = calloc(n + 1, sizeof(*out->samples));
	uint64_t *f = calloc(frames + 1, sizeof(*f));
	if (!out->samples || !f) {
		free(f);
		return oom(mg);
	}
	((struct owned *)out->priv)->frames_extra = f;
	out->has_samples = true;
	out->sampling = first->sampling;
	out->sampling.samples = out->sampling.dropped = 0;
	out->sampling.threads = 0;
	for (size_t i = 0; i < mg->n; i++) {
		const struct ml_profile *p = mg->in[i];
		if (!p->has_samples)
			continue;
		/* Counts in first's period (rounded): time is what adds up. */
		double scale = (double)p->sampling.period_ns / (double)first->sampling.period_ns;
		for (size_t k = 0; k < p->n_samples; k++) {
			const struct ml_sample *s = &p->samples[k];
			uint64_t count = (uint64_t)((double)s->count * scale + 0.5);
			if (!count)
				continue;
			struct ml_sample *d = &out->samples[out->n_samples++];
			*d = *s;
			d->count = count;
			d->frames = f;
			for (uint32_t x = 0; x < s->depth; x++)
				*f++ = move_addr(mg, i, s->frames[x]);
			out->sampling.samples += count;
		}
		out->sampling.dropped += (uint64_t)((double)p->sampling.dropped * scale + 0.5);
		out->sampling.threads += p->sampling.threads;
		out->sampling.flags |= p->sampling.flags;
	}
	return 0;
}

/* Regions merged by name under the same (merged) parent. */
static int merge_regions(struct merger *mg, struct ml_profile *out)
{
	size_t n = 0;
	for (size_t i = 0; i < mg->n; i++)
		n += mg->in[i]->n_regions;
	if (!n)
		return 0;
	out->regions = calloc(n, sizeof(*out->regions));
	uint32_t *map = calloc(n, sizeof(*map));
	if (!out->regions || !map) {
		free(map);
		return oom(mg);
	}
	size_t base = 0;
	for (size_t i = 0; i < mg->n; i++) {
		const struct ml_profile *p = mg->in[i];
		for (size_t k = 0; k < p->n_regions; k++) {
			const struct ml_region *r = &p->regions[k];
			uint32_t parent = 0;
			for (size_t q = 0; q < k; q++)	/* parents come first */
				if (p->regions[q].id == r->parent)
					parent = map[base + q];
			size_t m = 0;
			while (m < out->n_regions && !(out->regions[m].parent == parent &&
			       out->regions[m].flags == r->flags &&
			       strcmp(out->regions[m].name, r->name) == 0))
				m++;
			if (m == out->n_regions) {
				out->regions[m] = *r;
				out->regions[m].id = (uint32_t)(m + 1);
				out->regions[m].parent = parent;
				out->regions[m].count = out->regions[m].total_ns = 0;
				out->regions[m].alloc_bytes = out->regions[m].allocs = 0;
				out->n_regions++;
			}
			struct ml_region *d = &out->regions[m];
			d->count += r->count;
			d->total_ns += r->total_ns;
			d->alloc_bytes += r->alloc_bytes;
			d->allocs += r->allocs;
			map[base + k] = d->id;
		}
		base += p->n_regions;
	}
	free(map);
	return 0;
}

/* META, PROCESS and warnings of the merged profile. */
static int merge_meta(struct merger *mg, struct ml_profile *out)
{
	const struct ml_profile *first = mg->in[0];
	uint64_t t0 = UINT64_MAX, t1 = 0;
	size_t warnings = 0;
	out->meta = first->meta;
	out->meta.pid = out->meta.ppid = 0;
	out->meta.flags = 0;
	out->meta.end_reason = 0;
	out->meta.end_status = 0;
	out->process = first->process;
	for (size_t i = 0; i < mg->n; i++) {
		const struct ml_profile *p = mg->in[i];
		uint64_t s = p->meta.start_realtime_ns;
		t0 = s < t0 ? s : t0;
		t1 = s + p->meta.duration_ns > t1 ? s + p->meta.duration_ns : t1;
		out->meta.flags |= p->meta.flags & (ML_META_DEGRADED | ML_META_TRUNCATED_STACKS |
						    ML_META_SAMPLED);
		if (p->sampled) {
			/* The first sampled one's settings; the counts summed. */
			if (!out->sampled)
				out->alloc_sampling = p->alloc_sampling;
			else {
				out->alloc_sampling.samples += p->alloc_sampling.samples;
				out->alloc_sampling.allocs += p->alloc_sampling.allocs;
				out->alloc_sampling.alloc_bytes += p->alloc_sampling.alloc_bytes;
			}
			out->sampled = true;
		}
		if (p->meta.max_depth > out->meta.max_depth)
			out->meta.max_depth = p->meta.max_depth;
		if (p->process.rank != out->process.rank)
			out->process.rank = out->process.local_rank = -1;
		if (strcmp(p->process.host, out->process.host) != 0)
			out->process.host = "";
		if (strcmp(p->exe, out->exe ? out->exe : first->exe) != 0)
			out->exe = "";
		warnings += p->n_warnings;
	}
	out->meta.start_realtime_ns = t0;
	out->meta.duration_ns = t1 - t0;
	if (!out->exe)
		out->exe = first->exe;
	out->argv = first->argv;
	out->meta.argc = first->meta.argc;
	out->warnings = calloc(warnings + 1, sizeof(*out->warnings));
	out->merged = calloc(mg->n, sizeof(*out->merged));
	if (!out->warnings || !out->merged)
		return oom(mg);
	for (size_t i = 0; i < mg->n; i++) {
		for (size_t w = 0; w < mg->in[i]->n_warnings; w++)
			out->warnings[out->n_warnings++] = mg->in[i]->warnings[w];
		out->merged[i] = mg->in[i];
	}
	out->n_merged = mg->n;
	return 0;
}

static bool same_code(const struct ml_pycode *a, const struct ml_pycode *b)
{
	return a->firstlineno == b->firstlineno && a->linetable_format == b->linetable_format &&
	       a->linetable_len == b->linetable_len && strcmp(a->filename, b->filename) == 0 &&
	       strcmp(a->name, b->name) == 0 && strcmp(a->cwd, b->cwd) == 0 &&
	       memcmp(a->linetable, b->linetable, a->linetable_len) == 0;
}

static uint64_t hash_code(const struct ml_pycode *c)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)(uint32_t)c->firstlineno;
	for (const char *s = c->name; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	for (const char *s = c->filename; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* PYTHON and PYCODE: the processes' code objects, each distinct one once
 * under a new id (code ids are each process's own); the interpreter's eval
 * loop moved like any address; what is lost, summed. */
static int merge_python(struct merger *mg, struct ml_profile *out)
{
	size_t total = 0, n_slots = 16;
	const struct ml_profile *first = NULL;
	for (size_t i = 0; i < mg->n; i++)
		if (mg->in[i]->has_python) {
			first = first ? first : mg->in[i];
			total += mg->in[i]->n_pycodes;
		}
	if (!first)
		return 0;
	while (n_slots < total * 2)
		n_slots *= 2;
	size_t *slots = calloc(n_slots, sizeof(*slots));
	mg->codes = calloc(total + 1, sizeof(*mg->codes));
	mg->code_map = calloc(mg->n, sizeof(*mg->code_map));
	if (!slots || !mg->codes || !mg->code_map) {
		free(slots);
		return oom(mg);
	}
	out->has_python = true;
	out->python = first->python;
	out->python.frames_lost = 0;
	out->python_cwd = first->python_cwd;
	for (size_t i = 0; i < mg->n; i++) {
		const struct ml_profile *p = mg->in[i];
		if (!p->has_python)
			continue;
		out->python.flags |= p->python.flags;
		out->python.frames_lost += p->python.frames_lost;
		mg->code_map[i] = calloc(p->n_pycodes + 1, sizeof(**mg->code_map));
		if (!mg->code_map[i]) {
			free(slots);
			return oom(mg);
		}
		for (size_t k = 0; k < p->n_pycodes; k++) {
			const struct ml_pycode *c = &p->pycodes[k];
			size_t s = (size_t)hash_code(c) & (n_slots - 1);
			while (slots[s] && !same_code(&mg->codes[slots[s] - 1], c))
				s = (s + 1) & (n_slots - 1);
			if (!slots[s]) {
				mg->codes[mg->n_codes] = *c;
				mg->codes[mg->n_codes].id = (uint32_t)mg->n_codes + 1;
				slots[s] = ++mg->n_codes;
			}
			mg->code_map[i][k] = (uint32_t)slots[s];
		}
	}
	free(slots);
	/* The eval loop of the first Python process, moved (the others' is the
	 * same module's). */
	size_t fi = 0;
	while (mg->in[fi] != first)
		fi++;
	if (first->python.eval_hi > first->python.eval_lo) {
		out->python.eval_lo = move_addr(mg, fi, first->python.eval_lo);
		out->python.eval_hi = move_addr(mg, fi, first->python.eval_hi - 1) + 1;
	}
	out->pycodes = mg->codes;
	out->n_pycodes = mg->n_codes;
	out->python.codes = mg->n_codes;
	mg->codes = NULL;
	return 0;
}

/* The merged code id of process i's Python code id (0: none). */
static uint32_t merged_code(const struct merger *mg, size_t i, uint32_t id)
{
	const struct ml_pycode *pc = ml_profile_pycode(mg->in[i], id);
	return pc && mg->code_map && mg->code_map[i] ? mg->code_map[i][pc - mg->in[i]->pycodes] : 0;
}

/* PYFUNCS and PYLINES (@profile): each decorated code object once under
 * its merged id (calls summed, entry bytes the most of any process), every
 * process's lines under the merged ids (the lines view sums them). */
static int merge_pyprof(struct merger *mg, struct ml_profile *out)
{
	size_t nf = 0, nl = 0;
	const struct ml_profile *first = NULL;
	for (size_t i = 0; i < mg->n; i++)
		if (mg->in[i]->has_pyprof) {
			first = first ? first : mg->in[i];
			nf += mg->in[i]->n_pyfuncs;
			nl += mg->in[i]->n_pylines;
		}
	if (!first)
		return 0;
	struct ml_fmt_pyfunc *f = calloc(1, (nf + 1) * sizeof(*f) + nl * sizeof(struct ml_fmt_pyline));
	if (!f)
		return oom(mg);
	struct ml_fmt_pyline *l = (struct ml_fmt_pyline *)(f + nf + 1);
	size_t n_f = 0, n_l = 0;
	((struct owned *)out->priv)->pyprof = f;
	out->pyprof = first->pyprof;
	out->pyprof.events = out->pyprof.dropped = 0;
	for (size_t i = 0; i < mg->n; i++) {
		const struct ml_profile *p = mg->in[i];
		if (!p->has_pyprof)
			continue;
		out->pyprof.events += p->pyprof.events;
		out->pyprof.dropped += p->pyprof.dropped;
		for (size_t k = 0; k < p->n_pyfuncs; k++) {
			const struct ml_fmt_pyfunc *in = &p->pyfuncs[k];
			uint32_t id = merged_code(mg, i, in->code_id);
			size_t d = 0;
			while (d < n_f && f[d].code_id != id)
				d++;
			if (!id)
				continue;
			if (d == n_f) {
				f[n_f] = *in;
				f[n_f++].code_id = id;
				continue;
			}
			f[d].calls += in->calls;
			f[d].flags |= in->flags;
			f[d].entry_cpu = in->entry_cpu > f[d].entry_cpu ? in->entry_cpu : f[d].entry_cpu;
			f[d].entry_cuda = in->entry_cuda > f[d].entry_cuda ? in->entry_cuda
									    : f[d].entry_cuda;
		}
		for (size_t k = 0; k < p->n_pylines; k++) {
			uint32_t id = merged_code(mg, i, p->pylines[k].code_id);
			if (!id)
				continue;
			l[n_l] = p->pylines[k];
			l[n_l++].code_id = id;
		}
	}
	out->pyfuncs = f;
	out->n_pyfuncs = n_f;
	out->pylines = l;
	out->n_pylines = n_l;
	out->has_pyprof = true;
	return 0;
}

static int build(struct merger *mg, struct ml_profile *out)
{
	int rc = place_modules(mg);
	if (!rc)
		rc = merge_python(mg, out);
	if (!rc)
		rc = merge_pyprof(mg, out);
	if (!rc)
		rc = merge_stacks(mg);
	if (rc)
		return rc;
	out->modules = calloc(mg->n_umods + 1, sizeof(*out->modules));
	if (!out->modules)
		return oom(mg);
	for (size_t u = 0; u < mg->n_umods; u++) {
		const struct umod *um = &mg->umods[u];
		struct ml_module *m = &out->modules[u];
		*m = *um->m;
		/* The file address (addr - bias) of each moved frame is kept. */
		m->bias = um->m->bias + (um->canon_lo - um->m->lo);
		m->lo = um->canon_lo;
		m->hi = um->canon_lo + um->size;
		m->flags = (um->flags_or & (ML_MOD_MAIN | ML_MOD_RUNTIME)) |
			(um->flags_and & ML_MOD_UNLOADED);
	}
	out->n_modules = mg->n_umods;
	out->stacks = mg->stacks;
	out->n_stacks = mg->n_stacks;
	mg->stacks = NULL;
	((struct owned *)out->priv)->frames = mg->frames;
	mg->frames = NULL;
	struct ml_fmt_counter *counters;
	size_t n_counters;
	rc = merge_counters(mg, &counters, &n_counters);
	if (rc)
		return rc;
	((struct owned *)out->priv)->data = (unsigned char *)counters;
	out->counters = counters;
	out->n_counters = n_counters;
	for (size_t i = 0; i < mg->n; i++)
		for (uint32_t k = 0; k < ML_KIND_COUNT; k++) {
			const struct ml_fmt_total *t = &mg->in[i]->totals[k];
			if (!(mg->in[i]->kinds_present & (1u << k)))
				continue;
			struct ml_fmt_total *d = &out->totals[k];
			d->kind = k;
			d->allocs += t->allocs;
			d->alloc_bytes += t->alloc_bytes;
			d->frees += t->frees;
			d->freed_bytes += t->freed_bytes;
			d->live_blocks += t->live_blocks;
			d->live_bytes += t->live_bytes;
			d->peak_bytes += t->peak_bytes;	/* each one's own peak */
			out->kinds_present |= 1u << k;
		}
	rc = merge_meta(mg, out);
	size_t points = 0;
	for (size_t i = 0; i < mg->n; i++)
		points += mg->in[i]->n_timeline;
	out->timeline = calloc(points + 1, sizeof(*out->timeline));
	if (!rc && !out->timeline)
		rc = oom(mg);
	((struct owned *)out->priv)->timeline = out->timeline;
	for (uint32_t k = 0; !rc && k < ML_KIND_COUNT; k++)
		rc = merge_timeline_kind(mg, k, out->meta.start_realtime_ns, out->timeline,
					 &out->n_timeline);
	if (!rc)
		rc = merge_samples(mg, out);
	if (!rc)
		rc = merge_regions(mg, out);
	return rc;
}

static void merger_free(struct merger *mg)
{
	for (size_t i = 0; mg->pmods && i < mg->n; i++)
		free(mg->pmods[i]);
	for (size_t i = 0; mg->stack_map && i < mg->n; i++)
		free(mg->stack_map[i]);
	for (size_t i = 0; mg->code_map && i < mg->n; i++)
		free(mg->code_map[i]);
	free(mg->code_map);
	free(mg->codes);
	free(mg->pmods);
	free(mg->n_pmods);
	free(mg->stack_map);
	free(mg->umods);
	free(mg->stacks);
	free(mg->frames);
	free(mg->slots);
}

int ml_profile_merge(const struct ml_profile *const *in, size_t n, const char *name,
		     struct ml_profile **out, char *err, size_t errlen)
{
	struct merger mg = { .in = in, .n = n, .err = err, .errlen = errlen };
	struct ml_profile *p = calloc(1, sizeof(*p));
	struct owned *o = calloc(1, sizeof(*o));
	if (!p || !o || !n) {
		free(p);
		free(o);
		snprintf(err, errlen, n ? "out of memory" : "nothing to merge");
		return n ? -ENOMEM : -EINVAL;
	}
	p->priv = o;
	p->path = name;
	int rc = build(&mg, p);
	merger_free(&mg);
	if (rc) {
		ml_profile_free(p);
		return rc;
	}
	*out = p;
	return 0;
}
