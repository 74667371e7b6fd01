/* core/dump_stacks.c - the profile's ADDRESSES, FRAMES, STACKS and COUNTERS
 * sections (format.h: varint columns): every thread's counters summed per
 * (stack, kind), and the part of the call-site trie their stacks need,
 * renumbered densely.  Scratch memory comes from mmap and goes back after
 * the write; no malloc, no lock held for long: it runs at exit, before exec
 * and in fatal-signal handlers. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "core/internal.h"
#include "common/varint.h"

/* A (stack, kind)'s counters summed over every thread. */
struct agg {
	uint32_t stack, kind;
	uint32_t next;			/* the stack's next kind: index + 1, 0: none */
	uint32_t pad;
	struct ml_counter_sum sum;
};

struct scratch {
	uint32_t *first;		/* per node id: its first agg (index + 1), 0: none */
	uint32_t *file_node;		/* per node id: its FRAMES number, 0: not written */
	uint8_t *root;			/* per node id: its root (ml_stacktab_root) */
	struct agg *aggs;
	struct ml_counter_sum *vars;	/* sampling: aggs[i]'s variance counters, summed */
	uint64_t n_aggs, cap_aggs;
	uint32_t n_nodes;		/* node ids below this are covered */
	uint32_t n_file_nodes;
	uint64_t *addrs;		/* the FRAMES nodes' addresses, sorted, distinct */
	uint64_t n_addrs;
	uint32_t *addr_slots;		/* address -> its index + 1 in addrs (NULL: none) */
	uint64_t addr_mask;		/* addr_slots' size - 1 */
	uint32_t *used;			/* the used stacks' ids, ascending */
	uint32_t *used_aggs;		/* their used aggs (index + 1), in that order */
	uint64_t n_used, n_used_aggs;
	uint64_t final_peak[ML_KIND_COUNT];
	size_t bytes;
	void *base;
};

/* Varints on their way into the open section. */
struct column {
	struct ml_writer *w;
	size_t len;
	unsigned char buf[4096];
};

static void col_put(struct column *c, uint64_t v)
{
	if (c->len + ML_VARINT_MAX > sizeof(c->buf)) {
		ml_writer_put(c->w, c->buf, c->len);
		c->len = 0;
	}
	c->len += ml_varint_put(c->buf + c->len, v);
}

static void col_flush(struct column *c)
{
	ml_writer_put(c->w, c->buf, c->len);
	c->len = 0;
}

static bool scratch_map(struct scratch *s)
{
	s->n_nodes = ml_stacktab_count() + 1;
	uint64_t counters = ml_thread_counter_count();
	s->cap_aggs = counters + counters / 4 + 4096;	/* + those made meanwhile */
	size_t ids = ((size_t)s->n_nodes * sizeof(uint32_t) + 63) & ~(size_t)63;
	size_t addrs = 2 * (size_t)s->n_nodes * sizeof(uint64_t);	/* + radix sort's */
	size_t vars = ml_config.sample_bytes ? s->cap_aggs * sizeof(struct ml_counter_sum) : 0;
	size_t roots = ((size_t)s->n_nodes + 63) & ~(size_t)63;
	size_t lists = 2 * s->cap_aggs * sizeof(uint32_t);	/* used, used_aggs */
	s->bytes = 2 * ids + addrs + s->cap_aggs * sizeof(struct agg) + vars + lists + roots;
	void *p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED)
		return false;
	s->base = p;
	s->first = p;
	s->file_node = (uint32_t *)((char *)p + ids);
	s->addrs = (uint64_t *)((char *)p + 2 * ids);
	s->aggs = (struct agg *)((char *)p + 2 * ids + addrs);
	s->vars = vars ? (struct ml_counter_sum *)(s->aggs + s->cap_aggs) : NULL;
	s->used = (uint32_t *)((char *)(s->aggs + s->cap_aggs) + vars);
	s->used_aggs = s->used + s->cap_aggs;
	s->root = (uint8_t *)p + (s->bytes - roots);
	s->n_aggs = 0;
	for (uint32_t k = 0; k < ML_KIND_COUNT; k++)
		s->final_peak[k] = ml_counters_peak(k);
	return true;
}

/* ml_thread_foreach_counter's callback: adds c into its (stack, kind). */
static void gather(const struct ml_counter *c, void *arg)
{
	struct scratch *s = arg;
	uint32_t kind = c->kind % ML_VAR_KIND;	/* a variance counter: its kind's */
	if (c->stack >= s->n_nodes || kind >= ML_KIND_COUNT)
		return;		/* a stack made after the count: next dump */
	uint32_t *link = &s->first[c->stack];
	while (*link && s->aggs[*link - 1].kind != kind)
		link = &s->aggs[*link - 1].next;
	if (!*link) {
		if (s->n_aggs == s->cap_aggs)
			return;	/* made after the count: next dump */
		struct agg *a = &s->aggs[s->n_aggs++];
		memset(a, 0, sizeof(*a));
		a->stack = c->stack;
		a->kind = kind;
		*link = (uint32_t)s->n_aggs;
	}
	uint32_t i = *link - 1;
	if (c->kind < ML_VAR_KIND)
		ml_counters_add(&s->aggs[i].sum, c, s->final_peak[kind]);
	else if (s->vars)
		ml_counters_add(&s->vars[i], c, s->final_peak[kind]);
}

static bool agg_used(const struct agg *a)
{
	return a->sum.allocs || a->sum.live_blocks;
}

/* The used stacks in id order and their used aggs, listed once for the
 * STACKS and COUNTERS columns (each a pass over them, not over every
 * node of the trie: 3 M in python3's import torch). */
static void list_used(struct scratch *s)
{
	s->n_used = s->n_used_aggs = 0;
	for (uint32_t id = ML_NODE_ROOT; id < s->n_nodes; id++) {
		bool any = false;
		for (uint32_t a = s->first[id]; a; a = s->aggs[a - 1].next)
			if (agg_used(&s->aggs[a - 1])) {
				s->used_aggs[s->n_used_aggs++] = a;
				any = true;
			}
		if (any)
			s->used[s->n_used++] = id;
	}
}

/* Marks the frames of every used stack (file_node = 1), then numbers the
 * marked nodes in id order: a parent (a lower id) before its children. */
static void number_nodes(struct scratch *s)
{
	for (uint64_t i = 0; i < s->n_aggs; i++) {
		if (!agg_used(&s->aggs[i]))
			continue;
		for (uint32_t id = s->aggs[i].stack; id >= ML_NODE_FIRST && !s->file_node[id];) {
			uint32_t parent;
			uint64_t address;
			s->file_node[id] = 1;
			ml_stacktab_node(id, &parent, &address);
			id = parent;
		}
	}
	uint32_t n = 0;
	for (uint32_t id = ML_NODE_FIRST; id < s->n_nodes; id++)
		if (s->file_node[id])
			s->file_node[id] = ++n;
	s->n_file_nodes = n;
}

/* Sorts a[0..n) with tmp[0..n) as room: LSD radix (no malloc, unlike
 * qsort), 16 bits a pass for many values, 8 for fewer (a small run's
 * dump then clears 2 KiB per pass, not 512 KiB of fresh pages). */
static void radix_sort(uint64_t *a, uint64_t *tmp, uint64_t n)
{
	static uint64_t count[1 << 16];	/* only the dump's thread: dumps are serialised */
	unsigned bits = n >= (1u << 16) ? 16 : 8;
	uint64_t mask = (1ull << bits) - 1;
	for (unsigned shift = 0; shift < 64; shift += bits) {
		memset(count, 0, sizeof(*count) << bits);
		for (uint64_t i = 0; i < n; i++)
			count[(a[i] >> shift) & mask]++;
		uint64_t at = 0;
		for (uint64_t b = 0; b <= mask; b++) {
			uint64_t c = count[b];
			count[b] = at;
			at += c;
		}
		for (uint64_t i = 0; i < n; i++)
			tmp[count[(a[i] >> shift) & mask]++] = a[i];
		memcpy(a, tmp, n * sizeof(*a));
	}
}

/* The written nodes' distinct addresses, ascending. */
static void collect_addresses(struct scratch *s)
{
	uint64_t n = 0;
	for (uint32_t id = ML_NODE_FIRST; id < s->n_nodes; id++)
		if (s->file_node[id]) {
			uint32_t parent;
			ml_stacktab_node(id, &parent, &s->addrs[n++]);
		}
	radix_sort(s->addrs, s->addrs + s->n_nodes, n);
	uint64_t d = 0;
	for (uint64_t i = 0; i < n; i++)
		if (!d || s->addrs[i] != s->addrs[d - 1])
			s->addrs[d++] = s->addrs[i];
	s->n_addrs = d;
}

static inline uint64_t addr_hash(uint64_t address)
{
	uint64_t h = address * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 31);
}

/* A hash index of addrs (2 cache misses a lookup, not a binary search's
 * ~10), in the radix sort's room once the sort is done; none when that
 * room cannot hold one at most half full. */
static void index_addresses(struct scratch *s)
{
	uint64_t size = 1024;
	while (size < 2 * s->n_addrs)
		size <<= 1;
	s->addr_slots = NULL;
	if (size * sizeof(uint32_t) > (uint64_t)s->n_nodes * sizeof(uint64_t) ||
	    s->n_addrs >= UINT32_MAX)
		return;
	uint32_t *slots = (uint32_t *)(s->addrs + s->n_nodes);
	memset(slots, 0, size * sizeof(uint32_t));
	for (uint64_t i = 0; i < s->n_addrs; i++) {
		uint64_t k = addr_hash(s->addrs[i]) & (size - 1);
		while (slots[k])
			k = (k + 1) & (size - 1);
		slots[k] = (uint32_t)(i + 1);
	}
	s->addr_slots = slots;
	s->addr_mask = size - 1;
}

static uint64_t address_index(const struct scratch *s, uint64_t address)
{
	if (s->addr_slots)
		for (uint64_t k = addr_hash(address) & s->addr_mask;; k = (k + 1) & s->addr_mask) {
			uint32_t i = s->addr_slots[k];
			if (!i)
				break;	/* not there (cannot be): the search below says so */
			if (s->addrs[i - 1] == address)
				return i - 1;
		}
	uint64_t lo = 0, hi = s->n_addrs;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (s->addrs[mid] <= address)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static void put_addresses(struct ml_writer *w, const struct scratch *s)
{
	struct column c = { .w = w };
	ml_writer_begin(w, ML_SEC_ADDRESSES);
	for (uint64_t i = 0; i < s->n_addrs; i++)
		col_put(&c, i ? s->addrs[i] - s->addrs[i - 1] : s->addrs[0]);
	col_flush(&c);
	ml_writer_records(w, (uint32_t)s->n_addrs);
	ml_writer_end(w);
}

static void put_frames(struct ml_writer *w, const struct scratch *s)
{
	struct column c = { .w = w };
	ml_writer_begin(w, ML_SEC_FRAMES);
	for (uint32_t id = ML_NODE_FIRST; id < s->n_nodes; id++)	/* number - parent */
		if (s->file_node[id]) {
			uint32_t parent;
			uint64_t address;
			ml_stacktab_node(id, &parent, &address);
			uint32_t p = parent >= ML_NODE_FIRST ? s->file_node[parent] : 0;
			col_put(&c, s->file_node[id] - p);
		}
	for (uint32_t id = ML_NODE_FIRST; id < s->n_nodes; id++)	/* address index */
		if (s->file_node[id]) {
			uint32_t parent;
			uint64_t address;
			ml_stacktab_node(id, &parent, &address);
			col_put(&c, address_index(s, address));
		}
	col_flush(&c);
	ml_writer_records(w, s->n_file_nodes);
	ml_writer_end(w);
}

/* Every node's root, in one pass: a parent's id is below its child's. */
static void find_roots(struct scratch *s)
{
	for (uint32_t id = ML_NODE_ROOT; id < s->n_nodes && id < ML_NODE_FIRST; id++)
		s->root[id] = (uint8_t)id;
	for (uint32_t id = ML_NODE_FIRST; id < s->n_nodes; id++) {
		uint32_t parent;
		uint64_t address;
		ml_stacktab_node(id, &parent, &address);
		s->root[id] = parent < ML_NODE_FIRST ? (uint8_t)parent : s->root[parent];
	}
}

static uint32_t stack_flags(const struct scratch *s, uint32_t id)
{
	uint32_t root = s->root[id];
	return root == ML_NODE_ROOT_TRUNCATED ? ML_STACK_TRUNCATED :
		root == ML_NODE_LOST ? ML_STACK_LOST : 0;
}

/* Stacks in the order of their leaves (node ids and file numbers ascend
 * together; the empty and the lost stack first), with ids 1, 2, ...: both
 * columns are small deltas. */
static void put_stacks(struct ml_writer *w, const struct scratch *s)
{
	struct column c = { .w = w };
	uint32_t prev = 0;
	ml_writer_begin(w, ML_SEC_STACKS);
	for (uint64_t k = 0; k < s->n_used; k++)
		col_put(&c, 1);		/* id: k + 1 */
	for (uint64_t k = 0; k < s->n_used; k++) {
		uint32_t id = s->used[k];
		uint32_t leaf = id >= ML_NODE_FIRST ? s->file_node[id] : 0;
		col_put(&c, leaf - prev);
		prev = leaf;
	}
	for (uint64_t k = 0; k < s->n_used; k++)
		col_put(&c, stack_flags(s, s->used[k]));
	col_flush(&c);
	ml_writer_records(w, (uint32_t)s->n_used);
	ml_writer_end(w);
}

/* One COUNTERS column: field f of every used counter, in stack order. */
enum { F_STACK, F_KIND, F_ALLOCS, F_ALLOC_BYTES, F_LIVE_BLOCKS, F_LIVE_BYTES,
       F_PEAK_BLOCKS, F_PEAK_BYTES, N_EXACT,
       F_SAMPLES = N_EXACT, F_VAR_ALLOC, F_VAR_LIVE, F_VAR_PEAK, N_SAMPLED };

static uint64_t field(const struct scratch *s, const struct agg *a, int f)
{
	const struct ml_counter_sum *v = s->vars ? &s->vars[a - s->aggs] : NULL;
	switch (f) {
	case F_KIND: return a->kind;
	case F_ALLOCS: return a->sum.allocs;
	case F_ALLOC_BYTES: return a->sum.alloc_bytes;
	case F_LIVE_BLOCKS: return (uint64_t)a->sum.live_blocks;
	case F_LIVE_BYTES:
		return ml_fmt_rel_put(a->sum.alloc_bytes, (uint64_t)a->sum.live_blocks,
				      (uint64_t)a->sum.live_bytes);
	case F_PEAK_BLOCKS: return (uint64_t)a->sum.peak_blocks;
	case F_PEAK_BYTES:
		return ml_fmt_rel_put(a->sum.alloc_bytes, (uint64_t)a->sum.peak_blocks,
				      (uint64_t)a->sum.peak_bytes);
	case F_SAMPLES: return v ? v->allocs : 0;
	case F_VAR_ALLOC: return v ? v->alloc_bytes : 0;
	case F_VAR_LIVE: return v ? (uint64_t)v->live_bytes : 0;
	default: return v ? (uint64_t)v->peak_bytes : 0;
	}
}

/* Adds a's sums into its kind's totals (reserved = 1: the kind was seen). */
static void add_total(struct ml_fmt_total *totals, const struct agg *a)
{
	struct ml_fmt_total *t = &totals[a->kind];
	t->reserved = 1;	/* seen; cleared before writing */
	t->allocs += a->sum.allocs;
	t->alloc_bytes += a->sum.alloc_bytes;
	t->frees += a->sum.allocs - (uint64_t)a->sum.live_blocks;	/* (sampled: 1/unit blocks) */
	t->freed_bytes += a->sum.alloc_bytes - (uint64_t)a->sum.live_bytes;
	t->live_blocks += (uint64_t)a->sum.live_blocks;
	t->live_bytes += (uint64_t)a->sum.live_bytes;
}

static void put_counters(struct ml_writer *w, const struct scratch *s,
			 struct ml_fmt_total *totals)
{
	struct column c = { .w = w };
	uint32_t n = 0;
	ml_writer_begin(w, ML_SEC_COUNTERS);
	for (int f = 0; f < (ml_config.sample_bytes ? N_SAMPLED : N_EXACT); f++) {
		uint32_t index = 0, prev = 0;	/* the stack's index in STACKS */
		uint64_t k = 0;			/* in used_aggs */
		for (uint64_t u = 0; u < s->n_used; u++) {
			uint32_t stack = s->used[u];
			for (; k < s->n_used_aggs && s->aggs[s->used_aggs[k] - 1].stack == stack; k++) {
				const struct agg *a = &s->aggs[s->used_aggs[k] - 1];
				if (f == F_STACK) {
					/* Summed over threads nothing is negative (one
					 * thread's counter may be: it freed what another
					 * allocated). */
					ML_ASSERT(a->sum.live_blocks >= 0 && a->sum.live_bytes >= 0);
					ML_ASSERT(a->sum.peak_blocks >= 0 && a->sum.peak_bytes >= 0);
					ML_ASSERT((uint64_t)a->sum.live_bytes <= a->sum.alloc_bytes);
					ML_ASSERT((uint64_t)a->sum.peak_bytes <= s->final_peak[a->kind]);
					col_put(&c, index - prev);
					prev = index;
					add_total(totals, a);
					n++;
				} else {
					col_put(&c, field(s, a, f));
				}
			}
			index++;
		}
	}
	col_flush(&c);
	ml_writer_records(w, n);
	ml_writer_end(w);
}

/* SAMPLED: how the run sampled and what it counted exactly. */
static void put_sampled(struct ml_writer *w, const struct scratch *s)
{
	struct ml_fmt_sampled r = { .rate_bytes = ml_config.sample_bytes,
				    .seed = ml_sampling_seed(), .count_unit = ML_SAMPLE_UNIT };
	for (uint64_t i = 0; i < s->n_aggs; i++)
		r.samples += s->vars ? s->vars[i].allocs : 0;
	ml_thread_all_allocs(&r.allocs, &r.alloc_bytes);
	ml_writer_begin(w, ML_SEC_SAMPLED);
	ml_writer_put(w, &r, sizeof(r));
	ml_writer_record(w);
	ml_writer_end(w);
}

int ml_dump_stacks(struct ml_writer *w, struct ml_fmt_total *totals)
{
	struct scratch s;
	if (!scratch_map(&s))
		return -ENOMEM;
	ml_thread_foreach_counter(gather, &s);
	list_used(&s);
	number_nodes(&s);
	find_roots(&s);
	collect_addresses(&s);
	index_addresses(&s);
	put_addresses(w, &s);
	put_frames(w, &s);
	put_stacks(w, &s);
	put_counters(w, &s, totals);
	if (ml_config.sample_bytes)
		put_sampled(w, &s);
	munmap(s.base, s.bytes);
	return 0;
}

void ml_dump_modules_of_stacks(void)
{
	/* For a write from a signal handler: map the modules our frames point
	 * into (dlopen'd ones may be missing since the last refresh).  Every
	 * node past the roots is a frame of some stack. */
	uint64_t batch[256];
	uint32_t n = 0, count = ml_stacktab_count();
	for (uint32_t id = ML_NODE_FIRST; id <= count; id++) {
		uint32_t parent;
		ml_stacktab_node(id, &parent, &batch[n]);
		if (++n == 256) {
			ml_modules_add_missing(batch, n);
			n = 0;
		}
	}
	ml_modules_add_missing(batch, n);
}
