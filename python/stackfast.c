/* python/stackfast.c - the stack id of a Python object, or of a native
 * allocation under Python, without the full capture (a native
 * allocation: every native frame, as the core's own walk gives them,
 * below the same Python part; see native_below).  A Python object's
 * stack is its native frames up to the innermost eval-loop frame, then
 * the Python frames (room.c's decorate): as a path of the stack trie,
 * outermost first, the Python frames come first and the few native
 * frames hang below them.
 *
 * Per thread (the memo): the chain of Python frames read at the previous
 * object, each frame as what its tagged form is a function of (struct
 * ml_py_raw: the code object's address, which names one code object while
 * ml_py_code_epoch stands (hooks.c starts a new one at every code object
 * freed), the instruction, the owner and entry flags, a shim outside it),
 * with the
 * trie node of the path up to it; and a small table from such a frame to
 * its tagged form, filled from full walks.  A new object's chain is read
 * plainly (no code-table lookup), compared from the outermost frame with
 * the previous one: the equal outer part keeps its nodes, the frames
 * inside it get their tags from the table and their nodes from the trie;
 * a frame the table lacks makes a full walk (walk.c), which fills it.
 * The native frames come from a walk that stops at the eval loop (core:
 * ml_core_native_until, which keeps such walks per thread and names each
 * with a token): the node below the Python part is kept per (token,
 * Python part's node).  The answer is the node the full capture would
 * intern (checked with MEMLINE_VERIFY_UNWIND); where it might not be (a
 * frame that cannot be read, a chain longer than FAST_MAX, the depth
 * limit near), the full capture runs. */
#include <string.h>
#include "core/core.h"
#include "python/internal.h"

#define FAST_MAX 128u		/* Python frames followed; more: the full capture */
#define TAG_SET_BITS 9u		/* sets of two */
#define BELOW_SET_BITS 8u	/* sets of two */
#define NATIVE_SET_BITS 10u	/* sets of two */

struct tag_slot {
	struct ml_py_raw key;
	uint64_t tag;		/* 0: empty */
	uint32_t epoch;		/* ml_py_code_epoch when it was made */
};

struct memo {
	uint32_t valid;		/* raw[cur][0, n) is the previous chain */
	uint32_t cur;
	uint32_t n;
	uint32_t epoch;		/* ml_py_code_epoch of the chain's nodes */
	uint32_t node[FAST_MAX];	/* position p from the outermost: its path's node */
	struct ml_py_raw raw[2][FAST_MAX];	/* innermost first */
	struct tag_slot tags[1u << TAG_SET_BITS][2];	/* [0]: the newer */
	/* (native path's token, the Python part's node) -> the stack's node */
	struct below_slot {
		uint64_t token;
		uint32_t parent, node;
	} below[1u << BELOW_SET_BITS][2];	/* [0]: the newer */
	/* (the native frames' stack id, the Python part's node) -> the
	 * stack's node, for native allocations */
	struct native_slot {
		uint32_t native, parent, node;
	} natives[1u << NATIVE_SET_BITS][2];	/* [0]: the newer */
};
_Static_assert(sizeof(struct memo) <= ML_PY_STACK_MEMO_BYTES, "the room's memo size");

static inline struct tag_slot *tag_set(struct memo *m, const struct ml_py_raw *x)
{
	uint64_t h = (x->code ^ (x->instr << 7) ^ x->bits) * 0x9e3779b97f4a7c15ull;
	return m->tags[h >> (64 - TAG_SET_BITS)];
}

/* x's tag made while the epoch was epoch, or 0. */
static inline uint64_t tag_get(struct memo *m, const struct ml_py_raw *x, uint32_t epoch)
{
	const struct tag_slot *s = tag_set(m, x);
	for (int w = 0; w < 2; w++)
		if (s[w].tag && s[w].epoch == epoch && ml_py_raw_same(&s[w].key, x))
			return s[w].tag;
	return 0;
}

static void tag_put(struct memo *m, const struct ml_py_raw *x, uint64_t tag, uint32_t epoch)
{
	struct tag_slot *s = tag_set(m, x);
	if (!ml_py_raw_same(&s[0].key, x))
		s[1] = s[0];
	s[0] = (struct tag_slot){ *x, tag, epoch };
}

/* The native frames np below parent (the Python part's node). */
static uint32_t below(struct memo *m, struct ml_intern_cache *ic, uint32_t parent,
		      const struct ml_native_path *np)
{
	uint64_t h = (np->token * 0x9e3779b97f4a7c15ull ^ parent) * 0xd6e8feb86659fd93ull;
	struct below_slot *s = m->below[h >> (64 - BELOW_SET_BITS)];
	for (int w = 0; np->token && w < 2; w++)
		if (s[w].token == np->token && s[w].parent == parent)
			return s[w].node;
	uint32_t node = parent;
	for (uint32_t k = np->n; k-- > 0;) {
		if (ml_py_interp_cut(np->ras[k]))	/* room.c's cut_at_eval */
			continue;
		if (!(node = ml_core_stack_child(ic, node, np->ras[k])))
			return ML_CORE_STACK_LOST;
	}
	if (np->token) {
		s[1] = s[0];
		s[0] = (struct below_slot){ np->token, parent, node };
	}
	return node;
}

/* A native allocation's stack below parent (the Python part's node):
 * every native frame, those of the stack id native (the core's walk of
 * them alone), none cut.  0 where the full capture must: more frames in
 * all than a capture keeps.  A miss interns the whole path (with the
 * thread's prefix cache: consecutive misses share most of it). */
static uint32_t native_below(struct memo *m, struct ml_intern_cache *ic, uint32_t parent,
			     uint32_t native)
{
	uint64_t h = ((uint64_t)native << 32 | parent) * 0x9e3779b97f4a7c15ull;
	struct native_slot *s = m->natives[h >> (64 - NATIVE_SET_BITS)];
	for (int w = 0; w < 2; w++)
		if (s[w].node && s[w].native == native && s[w].parent == parent)
			return s[w].node;
	uint32_t node = ml_core_stack_join(ic, parent, native);
	if (!node || node == ML_CORE_STACK_LOST)
		return node;
	s[1] = s[0];
	s[0] = (struct native_slot){ native, parent, node };
	return node;
}

/* The chain now[0, n) with a full walk: its tags into the table and its
 * nodes into the memo, when the walk gives a tag for each frame (else,
 * some frame lost, the walk's frames alone: what the full capture
 * interns).  Returns the Python part's node, 0 when out of room. */
static uint32_t __attribute__((noinline))
walk_full(struct memo *m, struct ml_intern_cache *ic, struct ml_py_raw *now, uint32_t n,
	  uint32_t epoch)
{
	uint64_t out[FAST_MAX];
	uint32_t flags = 0, frames = 0, parent = ML_CORE_STACK_ROOT;
	uint32_t k = ml_py_walk_unchecked(out, 0, FAST_MAX, &flags, 0);
	for (uint32_t i = 0; i < n; i++)
		frames += !(now[i].bits & ML_PY_RAW_SHIM);
	m->valid = 0;
	if (k != frames) {
		while (k-- > 0)
			if (!(parent = ml_core_stack_child(ic, parent, out[k])))
				return 0;
		return parent;
	}
	for (uint32_t p = 0; p < n; p++) {
		const struct ml_py_raw *x = &now[n - 1 - p];
		if (!(x->bits & ML_PY_RAW_SHIM)) {
			uint64_t tag = out[--k];
			tag_put(m, x, tag, epoch);
			if (!(parent = ml_core_stack_child(ic, parent, tag)))
				return 0;
		}
		m->node[p] = parent;
	}
	m->cur ^= 1;
	m->n = n;
	m->epoch = epoch;
	m->valid = 1;
	return parent;
}

uint32_t ml_py_stack_id(void *memo, struct ml_intern_cache *ic)
{
	struct memo *m = memo;
	uint64_t buf[ML_DEPTH_MAX];
	struct ml_native_path np;
	/* The native frames below the Python part's node */
#define FINISH(parent) (native ? native_below(m, ic, (parent), native) : below(m, ic, (parent), &np))
	if (!ml_py.walking || ml_config.max_depth < 2)
		return 0;
	int k = 0;
	uint32_t native = 0;
	if (ml_tl_py_object) {
		/* Native frames to the eval loop: fewer than the depth limit, so
		 * the full capture cuts there and is not truncated. */
		k = ml_core_native_until(&np, buf, ml_config.max_depth - 1, ml_py.eval_lo,
					 ml_py.eval_hi - ml_py.eval_lo);
		if (k <= 0)
			return 0;
	} else {
		/* A native allocation: all its native frames, the Python ones
		 * outside them (room.c's decorate, which cuts nothing) */
		native = ml_core_native_stack(ic);
		if (!native || native == ML_CORE_STACK_LOST)
			return native;
		if (!ml_py.api.this_thread_state())
			return native;	/* a thread without Python frames */
	}
	/* A code object's entry is the one it had while no address got a new
	 * entry (codetab.c): then the table's tags and the chain's nodes
	 * stand.  Read before the chain (a new entry made meanwhile, by
	 * another thread, is made during this capture). */
	uint32_t epoch = __atomic_load_n(&ml_py_code_epoch, __ATOMIC_SEQ_CST);
	bool usable = m->valid && m->epoch == epoch;
	struct ml_py_raw *now = m->raw[m->cur ^ 1];
	const struct ml_py_raw *was = m->raw[m->cur];
	uint32_t old = usable ? m->n : 0, top;
	int got = ml_py_chain(now, FAST_MAX, was, old, &top);
	if (got < 0 || (uint32_t)k + (uint32_t)got > ML_DEPTH_MAX)
		return 0;
	uint32_t n = (uint32_t)got, p = 0;
	if (usable) {
		/* The equal outer part: of the same depth, past the outermost
		 * frame that differs; else compared from the outermost. */
		if (old == n) {
			p = n - top;
			if (p == n)
				return FINISH(n ? m->node[n - 1] : ML_CORE_STACK_ROOT);
		} else {
			uint32_t same = old < n ? old : n;
			while (p < same && ml_py_raw_same(&now[n - 1 - p], &was[old - 1 - p]))
				p++;
		}
	}
	uint32_t parent = p ? m->node[p - 1] : ML_CORE_STACK_ROOT;
	for (; p < n; p++) {
		const struct ml_py_raw *x = &now[n - 1 - p];
		if (!(x->bits & ML_PY_RAW_SHIM)) {
			uint64_t tag = tag_get(m, x, epoch);
			if (!tag) {
				parent = walk_full(m, ic, now, n, epoch);
				return parent ? FINISH(parent) : ML_CORE_STACK_LOST;
			}
			if (!(parent = ml_core_stack_child(ic, parent, tag))) {
				m->valid = 0;
				return ML_CORE_STACK_LOST;
			}
		}
		m->node[p] = parent;
	}
	m->cur ^= 1;
	m->n = n;
	m->epoch = epoch;
	m->valid = 1;
	return FINISH(parent);
#undef FINISH
}
