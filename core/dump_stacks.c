/* core/dump_stacks.c - the profile's FRAMES, STACKS and COUNTERS sections:
 * every thread's counters summed per (stack, kind), and the part of the
 * call-site trie their stacks need, renumbered densely.  Scratch memory
 * comes from mmap and goes back after the write; no malloc, no locks held
 * for long: it runs at exit, before exec and in fatal-signal handlers. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "core/internal.h"

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
	struct agg *aggs;
	uint64_t n_aggs, cap_aggs;
	uint32_t n_nodes;		/* node ids below this are covered */
	uint64_t final_peak[ML_KIND_COUNT];
	size_t bytes;
	void *base;
};

static bool scratch_map(struct scratch *s)
{
	s->n_nodes = ml_stacktab_count() + 1;
	s->cap_aggs = ml_thread_counter_count() + 4096;	/* + those made meanwhile */
	size_t ids = ((size_t)s->n_nodes * sizeof(uint32_t) + 63) & ~(size_t)63;
	s->bytes = 2 * ids + s->cap_aggs * sizeof(struct agg);
	void *p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED)
		return false;
	s->base = p;
	s->first = p;
	s->file_node = (uint32_t *)((char *)p + ids);
	s->aggs = (struct agg *)((char *)p + 2 * ids);
	s->n_aggs = 0;
	for (uint32_t k = 0; k < ML_KIND_COUNT; k++)
		s->final_peak[k] = ml_counters_peak(k);
	return true;
}

/* ml_thread_foreach_counter's callback: adds c into its (stack, kind). */
static void gather(const struct ml_counter *c, void *arg)
{
	struct scratch *s = arg;
	if (c->stack >= s->n_nodes || c->kind >= ML_KIND_COUNT)
		return;		/* a stack made after the count: next dump */
	uint32_t *link = &s->first[c->stack];
	while (*link && s->aggs[*link - 1].kind != c->kind)
		link = &s->aggs[*link - 1].next;
	if (!*link) {
		if (s->n_aggs == s->cap_aggs)
			return;	/* made after the count: next dump */
		struct agg *a = &s->aggs[s->n_aggs++];
		memset(a, 0, sizeof(*a));
		a->stack = c->stack;
		a->kind = c->kind;
		*link = (uint32_t)s->n_aggs;
	}
	ml_counters_add(&s->aggs[*link - 1].sum, c, s->final_peak[c->kind]);
}

static bool agg_used(const struct agg *a)
{
	return a->sum.allocs || a->sum.live_blocks;
}

/* Marks the frames of every used stack (file_node = 1), then numbers the
 * marked nodes in id order: a parent (a lower id) before its children. */
static uint32_t number_nodes(struct scratch *s)
{
	for (uint64_t i = 0; i < s->n_aggs; i++) {
		if (!agg_used(&s->aggs[i]))
			continue;
		for (uint32_t id = s->aggs[i].stack; id >= ML_NODE_FIRST && !s->file_node[id];) {
			uint32_t parent, depth;
			uint64_t address;
			s->file_node[id] = 1;
			ml_stacktab_node(id, &parent, &address, &depth);
			id = parent;
		}
	}
	uint32_t n = 0;
	for (uint32_t id = ML_NODE_FIRST; id < s->n_nodes; id++)
		if (s->file_node[id])
			s->file_node[id] = ++n;
	return n;
}

static void put_frames(struct ml_writer *w, const struct scratch *s)
{
	ml_writer_begin(w, ML_SEC_FRAMES);
	for (uint32_t id = ML_NODE_FIRST; id < s->n_nodes; id++) {
		if (!s->file_node[id])
			continue;
		uint32_t parent, depth;
		struct ml_fmt_frame r = { 0 };
		ml_stacktab_node(id, &parent, &r.address, &depth);
		r.parent = parent >= ML_NODE_FIRST ? s->file_node[parent] : 0;
		ml_writer_put(w, &r, sizeof(r));
		ml_writer_record(w);
	}
	ml_writer_end(w);
}

static void put_stacks(struct ml_writer *w, const struct scratch *s)
{
	ml_writer_begin(w, ML_SEC_STACKS);
	for (uint32_t id = ML_NODE_ROOT; id < s->n_nodes; id++) {
		bool used = false;
		for (uint32_t a = s->first[id]; a; a = s->aggs[a - 1].next)
			used |= agg_used(&s->aggs[a - 1]);
		if (!used)
			continue;
		uint32_t parent, depth, root = ml_stacktab_root(id);
		uint64_t address;
		ml_stacktab_node(id, &parent, &address, &depth);
		struct ml_fmt_stack r = {
			.id = id, .depth = depth,
			.flags = root == ML_NODE_ROOT_TRUNCATED ? ML_STACK_TRUNCATED :
				 root == ML_NODE_LOST ? ML_STACK_LOST : 0,
			.leaf = id >= ML_NODE_FIRST ? s->file_node[id] : 0,
		};
		ml_writer_put(w, &r, sizeof(r));
		ml_writer_record(w);
	}
	ml_writer_end(w);
}

static void put_counters(struct ml_writer *w, const struct scratch *s,
			 struct ml_fmt_total *totals)
{
	ml_writer_begin(w, ML_SEC_COUNTERS);
	for (uint32_t id = ML_NODE_ROOT; id < s->n_nodes; id++)
		for (uint32_t i = s->first[id]; i; i = s->aggs[i - 1].next) {
			const struct agg *a = &s->aggs[i - 1];
			if (!agg_used(a))
				continue;
			/* Summed over threads, nothing is negative (one thread's
			 * counter may be: it freed what another allocated). */
			ML_ASSERT(a->sum.live_blocks >= 0 && a->sum.live_bytes >= 0);
			ML_ASSERT(a->sum.peak_blocks >= 0 && a->sum.peak_bytes >= 0);
			ML_ASSERT((uint64_t)a->sum.live_bytes <= a->sum.alloc_bytes);
			ML_ASSERT((uint64_t)a->sum.peak_bytes <= s->final_peak[a->kind]);
			struct ml_fmt_counter r = {
				.stack_id = a->stack, .kind = a->kind,
				.allocs = a->sum.allocs, .alloc_bytes = a->sum.alloc_bytes,
				.frees = a->sum.allocs - (uint64_t)a->sum.live_blocks,
				.freed_bytes = a->sum.alloc_bytes - (uint64_t)a->sum.live_bytes,
				.live_blocks = (uint64_t)a->sum.live_blocks,
				.live_bytes = (uint64_t)a->sum.live_bytes,
				.peak_blocks = (uint64_t)a->sum.peak_blocks,
				.peak_bytes = (uint64_t)a->sum.peak_bytes,
			};
			ml_writer_put(w, &r, sizeof(r));
			ml_writer_record(w);
			struct ml_fmt_total *t = &totals[a->kind];
			t->reserved = 1;	/* seen; cleared before writing */
			t->allocs += r.allocs;
			t->alloc_bytes += r.alloc_bytes;
			t->frees += r.frees;
			t->freed_bytes += r.freed_bytes;
			t->live_blocks += r.live_blocks;
			t->live_bytes += r.live_bytes;
		}
	ml_writer_end(w);
}

int ml_dump_stacks(struct ml_writer *w, struct ml_fmt_total *totals)
{
	struct scratch s;
	if (!scratch_map(&s))
		return -ENOMEM;
	ml_thread_foreach_counter(gather, &s);
	number_nodes(&s);
	put_frames(w, &s);
	put_stacks(w, &s);
	put_counters(w, &s, totals);
	munmap(s.base, s.bytes);
	return 0;
}

void ml_dump_modules_of_stacks(void)
{
	/* For a write from a signal handler: map the modules our frames point
	 * into (dlopen'd ones may be missing since the last refresh).  Every
	 * node is a frame of some stack. */
	uint64_t batch[256];
	uint32_t n = 0, count = ml_stacktab_count();
	for (uint32_t id = ML_NODE_FIRST; id <= count; id++) {
		uint32_t parent, depth;
		ml_stacktab_node(id, &parent, &batch[n], &depth);
		if (++n == 256) {
			ml_modules_add_missing(batch, n);
			n = 0;
		}
	}
	ml_modules_add_missing(batch, n);
}
