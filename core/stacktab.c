/* core/stacktab.c - call stacks, deduplicated as paths of one call-site trie.
 *
 * A stack is a node of the trie: its frames are the node's address, its
 * parent's, ..., up to a root (outermost frame last).  Stacks that share
 * their outer part share those nodes, so a new stack costs only the nodes
 * of its new inner frames: 12 bytes each plus the index's 6 to 11.  Two
 * roots: ML_NODE_ROOT for whole stacks, ML_NODE_ROOT_TRUNCATED for
 * stacks cut at the depth limit (their outermost frames are missing).
 *
 * Node ids are dense (1, 2, ... in creation order, a parent always before
 * its children) and never reused; nodes live in chunks that never move.
 * Lookups are lock-free: an open-addressing index of node ids keyed by
 * (parent, address), linear probing; an insert takes one lock, and a full
 * index is replaced by one twice its size.  Each slot holds the id in its
 * low 27 bits and 5 more bits of the key's hash (the tag) above them, so a
 * probe reads a node (a cache miss: nodes are 12 bytes in ~100 MB) only
 * where the tag agrees: one slot in 32 that is not the key, instead of
 * every one (perf on python3's import torch: half of the lookup's time
 * was the node read after each probe).  The old index stays mapped for
 * readers still probing it, but its pages are given back (MADV_DONTNEED):
 * such a reader reads empty slots, misses, takes the lock and finds the
 * node in the new one.  Each thread keeps the path it interned last (struct
 * ml_intern_cache), so a stack that shares its outer frames with the
 * previous one on that thread looks up only its new inner frames.
 *
 * Room runs out only at ML_NODES_MAX nodes or when the arena is
 * exhausted.  A stack that cannot get its nodes then is the stack
 * ML_NODE_LOST (a third root, no frames): its allocations are counted
 * there, exactly, and the report says how many lost their stack. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "core/internal.h"

#define CHUNK_BITS 16u
#define CHUNK_NODES (1u << CHUNK_BITS)
#define MAX_CHUNKS (ML_NODES_MAX / CHUNK_NODES)
#define INDEX_MIN_BITS 10u

/* 12 bytes: a node is its frame and its caller (depths are counted when
 * needed: at write time, in tests). */
struct node {
	uint64_t address;
	uint32_t parent;	/* 0 for the roots */
} __attribute__((packed));

#define ID_BITS 27u
#define ID_MASK ((1u << ID_BITS) - 1)
_Static_assert(ML_NODES_MAX == 1u << ID_BITS, "a slot's id bits hold every node id");

struct index {
	uint32_t bits;
	uint32_t *slots;	/* tag << ID_BITS | node id; 0 = empty */
};

static struct node *chunks[MAX_CHUNKS];
static struct index *volatile current;
static uint32_t n_nodes;	/* ids handed out: 1 .. n_nodes (published under lock) */
static ml_spin_t insert_lock;
static volatile int full_warned;

static inline struct node *node_at(uint32_t id)
{
	return &chunks[id >> CHUNK_BITS][id & (CHUNK_NODES - 1)];
}

static inline uint64_t hash_of(uint32_t parent, uint64_t address)
{
	uint64_t h = (address ^ ((uint64_t)parent << 32 | parent)) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

uint64_t ml_stacktab_hash(uint32_t parent, uint64_t address)
{
	return hash_of(parent, address);
}

/* The slot's tag bits for hash h (the hash's top bits: the probe's start
 * uses its low ones). */
static inline uint32_t tag_of(uint64_t h)
{
	return (uint32_t)(h >> (64 - (32 - ID_BITS))) << ID_BITS;
}

static struct index *index_new(uint32_t bits)
{
	struct index *ix = ml_arena_alloc(sizeof(*ix));
	void *p = mmap(NULL, (size_t)sizeof(uint32_t) << bits, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (!ix || p == MAP_FAILED)
		return NULL;
	ml_want_huge_pages(p, (size_t)sizeof(uint32_t) << bits);
	ix->bits = bits;
	ix->slots = p;
	return ix;
}

/* The node id (parent, address) in ix, or 0.  Lock-free. */
static inline uint32_t find(const struct index *ix, uint32_t parent, uint64_t address)
{
	uint64_t mask = (1ull << ix->bits) - 1, h = hash_of(parent, address);
	uint32_t tag = tag_of(h);
	for (uint64_t i = h & mask;; i = (i + 1) & mask) {
		uint32_t slot = __atomic_load_n(&ix->slots[i], __ATOMIC_ACQUIRE);
		if (!slot)
			return 0;
		if ((slot & ~ID_MASK) != tag)
			continue;
		uint32_t id = slot & ID_MASK;
		const struct node *n = node_at(id);
		if (n->address == address && n->parent == parent)
			return id;
	}
}

static void index_put(struct index *ix, uint32_t id)
{
	const struct node *n = node_at(id);
	uint64_t mask = (1ull << ix->bits) - 1, h = hash_of(n->parent, n->address);
	for (uint64_t i = h & mask;; i = (i + 1) & mask)
		if (!ix->slots[i]) {
			__atomic_store_n(&ix->slots[i], tag_of(h) | id, __ATOMIC_RELEASE);
			return;
		}
}

/* Puts nodes 1 .. end-1 into ix.  Each put is a store to a random slot
 * (a cache miss: 2.8 % of import torch's samples); the slot of the node
 * PREFETCH_AHEAD places on is fetched meanwhile, so that the misses
 * overlap instead of following one another.  (A prefetch only reads.) */
#define PREFETCH_AHEAD 16u
static void rehash(struct index *ix, uint32_t end)
{
	uint64_t mask = (1ull << ix->bits) - 1;
	for (uint32_t k = 1; k < end; k++) {
		if (k + PREFETCH_AHEAD < end) {
			const struct node *n = node_at(k + PREFETCH_AHEAD);
			__builtin_prefetch(&ix->slots[hash_of(n->parent, n->address) & mask], 1);
		}
		index_put(ix, k);
	}
}

/* Under insert_lock: a new node, or 0 when out of room. */
static uint32_t make_node(uint32_t parent, uint64_t address)
{
	uint32_t id = n_nodes + 1;
	if (id >= ML_NODES_MAX)
		return 0;
	if (!chunks[id >> CHUNK_BITS] &&
	    !(chunks[id >> CHUNK_BITS] = ml_arena_alloc(CHUNK_NODES * sizeof(struct node))))
		return 0;
	struct index *ix = current;
	if ((uint64_t)id * 10 > (7ull << ix->bits)) {
		/* 70% full: a new index twice the size.  The old one stays
		 * mapped (a reader may still be probing it) but empty: its
		 * pages go back to the system, and reads there find zeros,
		 * which a reader takes for a miss. */
		struct index *bigger = index_new(ix->bits + 1);
		if (!bigger)
			return 0;
		rehash(bigger, id);
		__atomic_store_n(&current, bigger, __ATOMIC_RELEASE);
		madvise(ix->slots, sizeof(uint32_t) << ix->bits, MADV_DONTNEED);
		ix = bigger;
	}
	struct node *n = node_at(id);
	n->address = address;
	n->parent = parent;
	__atomic_store_n(&n_nodes, id, __ATOMIC_RELEASE);
	index_put(ix, id);
	return id;
}

int ml_stacktab_init(void)
{
	if (current) {
		ml_stacktab_set_mode();
		return 0;
	}
	struct index *ix = index_new(INDEX_MIN_BITS);
	if (!ix || !(chunks[0] = ml_arena_alloc(CHUNK_NODES * sizeof(struct node))))
		return -ENOMEM;
	current = ix;
	/* Node 0 is unused; 1, 2 and 3 are the roots (no frame: address 0). */
	n_nodes = ML_NODE_LOST;
	if (ml_unwind_init() < 0)
		ml_config.fast_unwind = false;
	ml_libunwind_init(false);	/* else at the constructor */
	ml_stacktab_set_mode();
	return 0;
}

uint32_t ml_stacktab_child(uint32_t parent, uint64_t address)
{
	uint32_t id = find(__atomic_load_n(&current, __ATOMIC_ACQUIRE), parent, address);
	if (__builtin_expect(id != 0, 1))
		return id;
	ml_spin_lock(&insert_lock);
	id = find(current, parent, address);
	if (!id)
		id = make_node(parent, address);
	ml_spin_unlock(&insert_lock);
	if (!id && !__atomic_exchange_n(&full_warned, 1, __ATOMIC_RELAXED)) {
		__atomic_or_fetch(&ml_core_flags, ML_META_DEGRADED, __ATOMIC_RELAXED);
		ml_warn("out of memory for new call stacks: their allocations are still counted, "
			"without a stack (the report says how many)");
	}
	return id;
}

uint32_t ml_stacktab_child_l1(struct ml_intern_cache *c, uint32_t parent, uint64_t address)
{
	uint64_t h = (address ^ parent) * 0x9e3779b97f4a7c15ull;
	struct ml_child_slot *set = c->child[h >> (64 - 11)];
	_Static_assert(ML_CHILD_SETS == 1u << 11, "11 bits");
	if (set[0].address == address && set[0].parent == parent)
		return set[0].node;
	if (set[1].address == address && set[1].parent == parent)
		return set[1].node;
	uint32_t node = ml_stacktab_child(parent, address);
	if (node) {
		set[1] = set[0];
		set[0] = (struct ml_child_slot){ address, parent, node };
	}
	return node;
}

uint32_t ml_stacktab_intern(struct ml_intern_cache *cache, const uint64_t *frames,
			    uint32_t depth, uint32_t flags)
{
	uint32_t root = flags & ML_STACK_TRUNCATED ? ML_NODE_ROOT_TRUNCATED : ML_NODE_ROOT;
	if (depth > ML_DEPTH_MAX)
		depth = ML_DEPTH_MAX;
	/* The path is outermost first: position p holds frames[depth - 1 - p]. */
	uint32_t p = 0;
	if (cache->root == root) {
		uint32_t same = cache->depth < depth ? cache->depth : depth;
		while (p < same && cache->frames[p] == frames[depth - 1 - p])
			p++;
	}
	uint32_t node = p ? cache->nodes[p - 1] : root;
	for (; p < depth; p++) {
		uint64_t a = frames[depth - 1 - p];
		uint32_t next = ml_stacktab_child_cached(cache, node, a);
		if (__builtin_expect(!next, 0)) {
			cache->depth = p;	/* what the cache holds is still right */
			cache->root = root;
			return ML_NODE_LOST;
		}
		node = next;
		cache->frames[p] = a;
		cache->nodes[p] = node;
	}
	cache->depth = depth;
	cache->root = root;
	return node;
}

uint32_t ml_stacktab_count(void)
{
	return __atomic_load_n(&n_nodes, __ATOMIC_ACQUIRE);
}

void ml_stacktab_node(uint32_t id, uint32_t *parent, uint64_t *address)
{
	const struct node *n = node_at(id);
	*parent = n->parent;
	*address = n->address;
}

uint32_t ml_stacktab_depth(uint32_t id)
{
	uint32_t depth = 0;
	for (; id > ML_NODE_LOST; id = node_at(id)->parent)
		depth++;
	return depth;
}

uint32_t ml_stacktab_root(uint32_t id)
{
	while (id > ML_NODE_LOST)
		id = node_at(id)->parent;
	return id;
}

uint64_t ml_stacktab_bytes(void)
{
	uint64_t chunks_used = (ml_stacktab_count() >> CHUNK_BITS) + 1;
	uint64_t index = sizeof(uint32_t) << current->bits;	/* the old ones are given back */
	return chunks_used * CHUNK_NODES * sizeof(struct node) + index;
}

void ml_stacktab_after_fork(void)
{
	insert_lock.locked = 0;
}
