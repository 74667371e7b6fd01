/* lineprof/regions.c - named regions (memline.h's push/pop, NVTX ranges) as
 * a tree merged over threads: a node is (parent node, name); each completed
 * begin/end adds its wall time, one to its count, and the heap bytes the
 * thread allocated meanwhile (the core counts them per thread).  Each thread keeps its open regions in TLS. */
#include <string.h>
#include "core/core.h"	/* ml_spin_t, ml_warn_once, ml_tl_alloc_bytes */
#include "lineprof/internal.h"

struct node {
	uint32_t parent;
	uint32_t flags;
	uint32_t name_len;
	char name[ML_LP_REGION_NAME_MAX + 1];
	uint64_t count, total_ns, alloc_bytes, allocs;	/* atomic adds */
};

#define INDEX_SLOTS 8192u	/* > 2 * ML_LP_REGIONS_MAX */

static struct node nodes[ML_LP_REGIONS_MAX + 1];	/* nodes[0] unused: the root */
static uint32_t n_nodes;
static uint32_t index_slots[INDEX_SLOTS];	/* node id, 0 empty */
static ml_spin_t lock;

struct open_region {
	uint32_t node;
	uint64_t t0, bytes0, allocs0;
};

struct thread_regions {
	uint32_t depth;		/* open regions, including those past the limit */
	struct open_region open[ML_LP_REGION_DEPTH];
};

static __thread struct thread_regions tl_regions __attribute__((tls_model("initial-exec")));

/* NVTX start/end ranges still open. */
#define RANGES_MAX 1024u
struct open_range {
	uint64_t id;		/* 0: free */
	uint32_t node;
	uint32_t tid;		/* the thread that started it */
	uint64_t t0;
};
static struct open_range ranges[RANGES_MAX];
static uint64_t next_range_id = 1;
static ml_spin_t ranges_lock;

static uint32_t name_hash(uint32_t parent, const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ parent;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ (h >> 32));
}

/* Per thread, the node last found for a (parent, name pointer), by a hash
 * of the two: a hint only.  A hit is checked against the node itself
 * (nodes never change once published), so a reused name buffer with new
 * contents, a collision or a signal handler interrupting an update (each
 * slot is one 32-bit store) can only cost a miss, never give a wrong node. */
#define NODE_CACHE 16u
static __thread uint32_t tl_node_cache[NODE_CACHE] __attribute__((tls_model("initial-exec")));

static uint32_t cache_slot(uint32_t parent, const char *name)
{
	uint64_t h = ((uint64_t)(uintptr_t)name ^ ((uint64_t)parent << 40)) * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(h >> 60) & (NODE_CACHE - 1);
}

static bool node_is(uint32_t id, uint32_t parent, const char *name, size_t len)
{
	const struct node *n = &nodes[id];
	return n->parent == parent && n->name_len == len && memcmp(n->name, name, len) == 0;
}

/* The node (parent, name), created on first use; 0 when the tree is full.
 * Takes the tree's lock only when this thread's cache misses. */
static uint32_t node_for(uint32_t parent, const char *name, uint32_t flags)
{
	size_t len = name ? strnlen(name, ML_LP_REGION_NAME_MAX) : 0;
	if (!name || !len) {
		name = "(unnamed)";
		len = strlen(name);
	}
	uint32_t *hint = &tl_node_cache[cache_slot(parent, name)];
	uint32_t id = *hint;
	if (id && id <= ML_LP_REGIONS_MAX && node_is(id, parent, name, len))
		return id;
	id = 0;
	ml_spin_lock(&lock);
	for (uint32_t s = name_hash(parent, name, len) & (INDEX_SLOTS - 1);;
	     s = (s + 1) & (INDEX_SLOTS - 1)) {
		uint32_t k = index_slots[s];
		if (!k) {
			if (n_nodes >= ML_LP_REGIONS_MAX)
				break;
			id = ++n_nodes;
			struct node *n = &nodes[id];
			n->parent = parent;
			n->flags = flags;
			n->name_len = (uint32_t)len;
			memcpy(n->name, name, len);
			n->name[len] = '\0';
			index_slots[s] = id;
			break;
		}
		if (node_is(k, parent, name, len)) {
			id = k;
			break;
		}
	}
	ml_spin_unlock(&lock);
	if (!id)
		ml_warn_once("more than 4096 distinct regions; later ones are not recorded");
	*hint = id;
	return id;
}

void ml_lp_region_push(const char *name, uint32_t flags)
{
	struct thread_regions *t = &tl_regions;
	uint32_t d = t->depth++;
	if (d >= ML_LP_REGION_DEPTH)
		return;		/* too deep: counted on pop, not recorded */
	uint32_t parent = d ? t->open[d - 1].node : 0;
	struct open_region *o = &t->open[d];
	o->node = parent || !d ? node_for(parent, name, flags) : 0;
	o->t0 = ml_lp_now_ns();
	o->bytes0 = ml_tl_alloc_bytes;
	o->allocs0 = ml_tl_allocs;
}

static void close_node(uint32_t id, uint64_t ns, uint64_t bytes, uint64_t allocs)
{
	if (!id)
		return;
	struct node *n = &nodes[id];
	__atomic_fetch_add(&n->count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n->total_ns, ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n->alloc_bytes, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n->allocs, allocs, __ATOMIC_RELAXED);
}

void ml_lp_region_pop(void)
{
	struct thread_regions *t = &tl_regions;
	if (!t->depth)
		return;		/* an end without a begin */
	uint32_t d = --t->depth;
	if (d >= ML_LP_REGION_DEPTH)
		return;
	const struct open_region *o = &t->open[d];
	uint64_t now = ml_lp_now_ns();
	close_node(o->node, now - o->t0, ml_tl_alloc_bytes - o->bytes0,
		   ml_tl_allocs - o->allocs0);
	ml_lp_span_add(o->node, ml_lp_span_tid(), o->t0, now);
}

uint64_t ml_lp_range_start(const char *name, uint32_t flags)
{
	struct thread_regions *t = &tl_regions;
	uint32_t d = t->depth < ML_LP_REGION_DEPTH ? t->depth : ML_LP_REGION_DEPTH;
	uint32_t parent = d ? t->open[d - 1].node : 0;
	uint32_t node = node_for(parent, name, flags);
	uint64_t id = 0;
	if (!node)
		return 0;
	ml_spin_lock(&ranges_lock);
	for (uint32_t i = 0; i < RANGES_MAX; i++)
		if (!ranges[i].id) {
			id = next_range_id++;
			ranges[i] = (struct open_range){ id, node, ml_lp_span_tid(), ml_lp_now_ns() };
			break;
		}
	ml_spin_unlock(&ranges_lock);
	if (!id)
		ml_warn_once("more than 1024 NVTX ranges open at once; later ones are not recorded");
	return id;
}

void ml_lp_range_end(uint64_t id)
{
	struct open_range r = { 0 };
	if (!id)
		return;
	ml_spin_lock(&ranges_lock);
	for (uint32_t i = 0; i < RANGES_MAX; i++)
		if (ranges[i].id == id) {
			r = ranges[i];
			ranges[i].id = 0;
			break;
		}
	ml_spin_unlock(&ranges_lock);
	if (r.id) {
		uint64_t now = ml_lp_now_ns();
		close_node(r.node, now - r.t0, 0, 0);
		ml_lp_span_add(r.node, r.tid, r.t0, now);
	}
}

void ml_lp_regions_foreach(void (*fn)(const struct ml_lp_region_info *r, void *arg), void *arg)
{
	uint32_t n = __atomic_load_n(&n_nodes, __ATOMIC_ACQUIRE);
	/* Ids grow, and a parent is always created before its children. */
	for (uint32_t id = 1; id <= n; id++) {
		const struct node *nd = &nodes[id];
		struct ml_lp_region_info r = {
			.id = id, .parent = nd->parent, .flags = nd->flags, .name = nd->name,
			.count = __atomic_load_n(&nd->count, __ATOMIC_RELAXED),
			.total_ns = __atomic_load_n(&nd->total_ns, __ATOMIC_RELAXED),
			.alloc_bytes = __atomic_load_n(&nd->alloc_bytes, __ATOMIC_RELAXED),
			.allocs = __atomic_load_n(&nd->allocs, __ATOMIC_RELAXED),
		};
		fn(&r, arg);
	}
}

uint32_t ml_lp_regions_count(void)
{
	return __atomic_load_n(&n_nodes, __ATOMIC_ACQUIRE);
}

void ml_lp_regions_reset(void)
{
	for (uint32_t id = 1; id <= n_nodes; id++)
		nodes[id].count = nodes[id].total_ns = nodes[id].alloc_bytes = nodes[id].allocs = 0;
	memset(ranges, 0, sizeof(ranges));
	lock.locked = 0;
	ranges_lock.locked = 0;
}
