/* core/unwind.c - the stack walker: x86-64 frames unwound with the rules of
 * unwind_rules.c, reusing the thread's previous walk; libunwind
 * (core/libunwind.c) takes over whatever a rule cannot represent.
 *
 * A walk is a function of its state at each frame, (target, sp, bp), and
 * of the stack words it reads (return addresses, saved rbp).  So if the
 * new walk reaches a frame whose state equals a frame's state in the
 * thread's previous walk, and every word the previous walk read from that
 * frame outwards still holds the value read then, the rest of the new walk
 * is the rest of the previous one, word for word, trie nodes included.
 * The re-reads have addresses known in advance (no dependent chain), so
 * they cost far less than unwinding: a program that allocates repeatedly
 * under the same callers walks only the frames that changed (bytehound's
 * shadow-stack idea, without patching return addresses).
 *
 * The record of a walk has two parts: the outer frames (outermost first,
 * kept in place from walk to walk) and the inner frames of the last walk
 * (innermost first, in one of two buffers).  A new walk writes its frames
 * into the other buffer; when it meets an outer frame it keeps the outer
 * part up to there and nothing is copied; when it meets a frame of the
 * last walk's inner part, those frames move to the outer part (each frame
 * moves once).  Per walked frame: one probe of a per-thread direct-mapped
 * copy of the rules (the shared cache behind it, .eh_frame behind that),
 * two or three loads, the stores of its record. */
#include <string.h>
#include "core/internal.h"

#define L1_SLOTS 512u		/* per thread, in front of the shared cache */
#define WALK_MAX ML_CAPTURE_BUF

enum { END_OUTERMOST = 1, END_ZERO_RA, END_LIMIT };

#define BIT_BP_OK 1u		/* rbp's value entering the frame is known */
#define BIT_RBP_CFA 2u		/* the frame's CFA is rbp-based */

struct l1_slot {
	uint64_t key;		/* target + 1; 0: empty */
	struct ml_unwind_rule rule;
};

/* A stack word the walk read: where, and what it held. */
struct word {
	uint64_t at, val;
};

/* The frames of one walk's inner part, innermost first. */
struct inner {
	uint64_t sp[WALK_MAX], bp[WALK_MAX];	/* state entering the frame */
	struct word ra[WALK_MAX];		/* its return address */
	struct word bw[WALK_MAX];		/* the saved rbp read; if none, ra again
						 * (so a check needs no branch) */
	uint32_t node[WALK_MAX];		/* trie node of the path root .. here */
	uint16_t rbp_cum[WALK_MAX];		/* rbp-based CFAs here and outwards */
	uint8_t bits[WALK_MAX];
};

/* Per thread.  The previous walk is, innermost first: x[0 .. nx), then
 * the outer part from index no - 1 down to 0.  Frame p's target (p
 * innermost = 0) is pc0 for p = 0, else frame p-1's return address - 1. */
struct thread_walk {
	uint32_t nx;		/* inner frames of the previous walk (in *x) */
	uint32_t no;		/* outer frames */
	uint32_t onodes;	/* outer [0, onodes) have their trie node */
	uint32_t xnodes;	/* the outermost xnodes of x have theirs */
	uint32_t limit;		/* the limit it ran with */
	uint32_t end;		/* END_*: how it stopped (0: no previous walk) */
	uint32_t gen;		/* ml_unwind_gen it ran under */
	uint32_t l1_gen;	/* ml_unwind_gen l1 belongs to */
	volatile int busy;	/* a walk is running (a signal handler's must not reuse) */
	uint32_t declined;	/* walks declined in a row (code without usable CFI) */
	uint32_t tick;
	uint64_t pc0;		/* frame 0's target */
	uint64_t end_sp;	/* END_OUTERMOST: the outermost frame's CFA */
	uint64_t home_top;	/* end_sp of the thread's first walk to its root */
	struct inner *x, *y;	/* the previous walk's inner part; the next one's */
	struct l1_slot l1[L1_SLOTS];
	/* The outer part, outermost first. */
	uint64_t sp[WALK_MAX], bp[WALK_MAX];
	struct word ra[WALK_MAX], bw[WALK_MAX];
	uint32_t node[WALK_MAX];
	uint16_t rbp_cum[WALK_MAX];		/* rbp-based CFAs in [0, here] */
	uint8_t bits[WALK_MAX];
	struct inner in[2];
};

/* The calling thread's walk record, in its ml_thread (which a later thread
 * may inherit: the record is then reset). */
static struct thread_walk *walk_get(void)
{
	struct ml_thread *t = ml_thread_self();
	if (__builtin_expect(!t, 0))
		return NULL;
	struct thread_walk *w = t->walk;
	if (__builtin_expect(w != NULL, 1))
		return w;
	if (!(w = ml_arena_alloc(sizeof(*w))))
		return NULL;
	w->x = &w->in[0];
	w->y = &w->in[1];
	t->walk = w;
	return w;
}

void ml_unwind_thread_reset(void *walk)
{
	struct thread_walk *w = walk;
	if (!w)
		return;
	w->end = 0;
	w->nx = w->no = w->onodes = w->xnodes = 0;
	w->home_top = 0;
	w->declined = 0;
	w->busy = 0;
}

#define DIFF(x) (*(const volatile uint64_t *)(uintptr_t)(x).at ^ (x).val)

/* The first index r in [0, upto) of the outer part whose words no longer
 * hold what was read, or upto; saved-rbp words too when bp says so. */
static uint32_t outer_changed(const struct thread_walk *w, uint32_t upto, bool bp)
{
	uint32_t r = 0;
	if (!bp) {
		for (; r + 4 <= upto; r += 4)
			if (__builtin_expect((DIFF(w->ra[r]) | DIFF(w->ra[r + 1]) |
					      DIFF(w->ra[r + 2]) | DIFF(w->ra[r + 3])) != 0, 0))
				break;
		for (; r < upto; r++)
			if (DIFF(w->ra[r]))
				break;
		return r;
	}
	for (; r + 2 <= upto; r += 2)
		if (__builtin_expect((DIFF(w->ra[r]) | DIFF(w->bw[r]) | DIFF(w->ra[r + 1]) |
				      DIFF(w->bw[r + 1])) != 0, 0))
			break;
	for (; r < upto; r++)
		if (DIFF(w->ra[r]) | DIFF(w->bw[r]))
			break;
	return r;
}

/* The position (innermost = 0) of the outermost frame at p or outwards
 * whose words no longer hold what the previous walk read, or -1.
 * Return-address words only when no frame strictly outwards of p finds
 * its CFA from rbp: their return addresses then do not depend on the
 * saved rbp words (frame p's own CFA comes from the rbp compared equal on
 * entry).  A recorded rbp left stale so can only make a later match fail:
 * rbp is compared only where an rbp-based CFA follows.  Outermost first,
 * independent loads. */
static int64_t changed_from(const struct thread_walk *w, uint32_t p)
{
	uint32_t nx = w->nx, no = w->no;
	const struct inner *x = w->x;
	if (p >= nx) {
		uint32_t k = no - 1 - (p - nx);
		bool bp = w->rbp_cum[k] != ((w->bits[k] & BIT_RBP_CFA) != 0);
		uint32_t r = outer_changed(w, k + 1, bp);
		return r <= k ? (int64_t)(nx + no - 1 - r) : -1;
	}
	bool bp = x->rbp_cum[p] != ((x->bits[p] & BIT_RBP_CFA) != 0);
	uint32_t r = outer_changed(w, no, bp);
	if (r < no)
		return (int64_t)(nx + no - 1 - r);
	for (uint32_t i = nx; i-- > p;)
		if (DIFF(x->ra[i]) | (bp ? DIFF(x->bw[i]) : 0))
			return i;
	return -1;
}
#undef DIFF

/* Whether a previous frame (its target, rbp state and rbp_cum) has the
 * state (target, bp, bits) of the new walk's frame at the same sp.  rbp
 * is compared only when some frame from there outwards takes its CFA
 * from it. */
static inline bool same_state(uint64_t old_target, uint64_t old_bp, uint32_t old_bits,
			      uint32_t rbp_cum, uint64_t target, uint64_t bp, uint32_t bits)
{
	if (old_target != target)
		return false;
	if (!rbp_cum)
		return true;
	if ((old_bits ^ bits) & BIT_BP_OK)
		return false;
	return !(bits & BIT_BP_OK) || old_bp == bp;
}

/* The previous walk's frames x[from .. nx) move to the outer part. */
static void outer_append(struct thread_walk *w, uint32_t from)
{
	const struct inner *x = w->x;
	uint32_t no = w->no, nx = w->nx;
	bool nodes = w->onodes == no;
	uint32_t cum = no ? w->rbp_cum[no - 1] : 0;
	for (uint32_t i = nx; i-- > from; no++) {
		w->sp[no] = x->sp[i];
		w->bp[no] = x->bp[i];
		w->ra[no] = x->ra[i];
		w->bw[no] = x->bw[i];
		w->node[no] = x->node[i];
		w->bits[no] = x->bits[i];
		cum += (x->bits[i] & BIT_RBP_CFA) != 0;
		w->rbp_cum[no] = (uint16_t)cum;
		if (nodes && nx - i <= w->xnodes)
			w->onodes = no + 1;
	}
	w->no = no;
}

/* Makes the new walk's n frames (in *y) the inner part. */
static void inner_set(struct thread_walk *w, uint32_t n)
{
	struct inner *y = w->y;
	uint32_t cum = w->no ? w->rbp_cum[w->no - 1] : 0;
	for (uint32_t i = n; i-- > 0;) {
		cum += (y->bits[i] & BIT_RBP_CFA) != 0;
		y->rbp_cum[i] = (uint16_t)cum;
	}
	w->y = w->x;
	w->x = y;
	w->nx = n;
	w->xnodes = 0;
}

/* Walks from (pc, sp, bp), pc being the target of the innermost frame,
 * into the thread's record.  Returns the frames recorded, or -1 when a
 * frame's rule is not one it handles. */
static int walk_in(struct thread_walk *w, uint64_t pc, uint64_t sp, uint64_t bp,
		   uint32_t limit)
{
	uint32_t gen = __atomic_load_n(&ml_unwind_gen, __ATOMIC_ACQUIRE);
	if (__builtin_expect(w->l1_gen != gen, 0)) {
		memset(w->l1, 0, sizeof(w->l1));
		w->l1_gen = gen;
	}
	/* Only a walk that ran to the thread's own root is reused: its words
	 * then all lie on this thread's stack, between the matched frame and
	 * that root, which stays mapped while the thread lives.  (A walk on
	 * another stack, a coroutine's say, ends at another root, or is cut
	 * short: never reused.) */
	bool usable = w->end == END_OUTERMOST && w->limit == limit && w->gen == gen &&
		w->end_sp == w->home_top;
	uint32_t nx = usable ? w->nx : 0, no = usable ? w->no : 0;
	const struct inner *x = w->x;
	struct inner *y = w->y;
	uint32_t px = 0;		/* the previous inner frame with the lowest sp >= ours */
	int64_t k = (int64_t)no - 1;	/* the same in the outer part, once px == nx */
	int64_t changed = -2;		/* changed_from(), once needed */
	uint64_t target = pc;
	uint32_t bits = BIT_BP_OK;
	uint32_t n = 0, end;
	for (;;) {
		while (px < nx && x->sp[px] < sp)
			px++;
		if (px < nx) {
			if (x->sp[px] == sp &&
			    same_state(px ? x->ra[px - 1].val - 1 : w->pc0, x->bp[px], x->bits[px],
				       x->rbp_cum[px], target, bp, bits)) {
				if (changed == -2)
					changed = changed_from(w, px);
				if ((int64_t)px > changed && n + (nx - px) + no <= limit) {
					outer_append(w, px);
					break;
				}
			}
		} else if (k >= 0) {
			while (k >= 0 && w->sp[k] < sp)
				k--;
			uint32_t p = nx + (uint32_t)(no - 1 - k);
			if (k >= 0 && w->sp[k] == sp &&
			    same_state(k + 1 < no ? w->ra[k + 1].val - 1 :
				       nx ? x->ra[nx - 1].val - 1 : w->pc0,
				       w->bp[k], w->bits[k], w->rbp_cum[k], target, bp, bits)) {
				if (changed == -2)
					changed = changed_from(w, p);
				if ((int64_t)p > changed && n + (uint32_t)k + 1 <= limit) {
					w->no = (uint32_t)k + 1;
					if (w->onodes > w->no)
						w->onodes = w->no;
					break;
				}
			}
		}
		if (n == limit) {
			end = END_LIMIT;
			goto fresh;
		}
		struct l1_slot *s = &w->l1[(target ^ (target >> 9)) & (L1_SLOTS - 1)];
		if (__builtin_expect(s->key != target + 1, 0)) {
			uint64_t packed = ml_unwind_rule(target);
			memcpy(&s->rule, &packed, sizeof(packed));
			s->key = target + 1;
		}
		struct ml_unwind_rule r = s->rule;
		uint32_t stop = ML_RULE_BAD | ML_RULE_RA_UNDEF | (bits & BIT_BP_OK ? 0 : ML_RULE_CFA_RBP);
		uint64_t cfa = ((r.flags & ML_RULE_CFA_RBP) ? bp : sp) + (uint64_t)(int64_t)r.cfa_off;
		if (cfa <= sp || (cfa & 7))
			return -1;	/* the stack must grow up as we walk out */
		if (__builtin_expect(r.flags & stop, 0)) {
			if (r.flags & (ML_RULE_BAD | ML_RULE_CFA_RBP))
				return -1;
			end = END_OUTERMOST;
			sp = cfa;
			goto fresh;
		}
		uint64_t ra_at = cfa + (uint64_t)(int64_t)r.ra_off;
		uint64_t ra = *(const uint64_t *)(uintptr_t)ra_at;
		y->sp[n] = sp;
		y->bp[n] = bp;
		y->bits[n] = (uint8_t)(bits | (r.flags & ML_RULE_CFA_RBP ? BIT_RBP_CFA : 0));
		y->ra[n].at = ra_at;
		y->ra[n].val = ra;
		uint64_t bw_at = ra_at, bw = ra;
		if (r.flags & ML_RULE_RBP_SAVED) {
			bw_at = cfa + (uint64_t)(int64_t)r.bp_off;
			bp = bw = *(const uint64_t *)(uintptr_t)bw_at;
		} else if (r.flags & ML_RULE_RBP_UNDEF) {
			bits = 0;
		}
		y->bw[n].at = bw_at;
		y->bw[n].val = bw;
		sp = cfa;
		if (ra == 0) {
			end = END_ZERO_RA;
			goto fresh;
		}
		n++;
		target = ra - 1;	/* inside the call instruction */
	}
	/* Reused: the outer part is set, the new frames are its inner part. */
	inner_set(w, n);
	w->pc0 = pc;
	return (int)(n + w->no);
fresh:
	/* A walk of its own: all of it is the inner part. */
	w->no = w->onodes = 0;
	inner_set(w, n);
	w->limit = limit;
	w->end = end;
	w->gen = gen;
	w->pc0 = pc;
	w->end_sp = sp;
	if (end == END_OUTERMOST && !w->home_top)
		w->home_top = sp;
	return (int)n;
}

/* Runs walk_in with the thread's record held; -1 when busy (a signal
 * handler interrupted a walk on this thread: libunwind serves it) or
 * declined.  On success the record stays held: walk_done releases it. */
static int walk(struct thread_walk *w, uint64_t pc, uint64_t sp, uint64_t bp, uint32_t limit)
{
	if (!w || limit > WALK_MAX || w->busy)
		return -1;
	/* A thread whose stacks keep going through code we decline (JIT code
	 * without CFI, say) tries again only every 64th capture: libunwind
	 * would otherwise follow a wasted partial walk every time. */
	if (w->declined >= 8 && (++w->tick & 63))
		return -1;
	w->busy = 1;
	__asm__ volatile("" ::: "memory");
	int n = walk_in(w, pc, sp, bp, limit);
	if (n < 0) {
		w->end = 0;	/* the record may be half written */
		w->nx = w->no = w->onodes = w->xnodes = 0;
		w->declined++;
		__asm__ volatile("" ::: "memory");
		w->busy = 0;
		return -1;
	}
	w->declined = 0;
	return n;
}

static inline void walk_done(struct thread_walk *w)
{
	__asm__ volatile("" ::: "memory");
	w->busy = 0;
}

/* Frame i's return address (innermost = 0) in the record. */
static inline uint64_t ra_of(const struct thread_walk *w, uint32_t i)
{
	return i < w->nx ? w->x->ra[i].val : w->ra[w->no - 1 - (i - w->nx)].val;
}

__thread struct ml_unwind_mark ml_tl_mark __attribute__((tls_model("initial-exec")));

/* The walk's start: the mark if a hook (or ml_thread_on_side_stack) set
 * one, else the given registers (the caller's own frame).  A marked frame
 * is live: we are called from inside it, maybe on the side stack (so not
 * necessarily above us on this stack), and the mark is cleared before it
 * returns.  *lead: the return address into the marked frame's caller,
 * the stack's first address (0 for registers: the walk's first frame is
 * the caller's own). */
static inline void start_point(uint64_t *pc, uint64_t *sp, uint64_t *bp, uint64_t *lead)
{
	const struct ml_unwind_mark *m = &ml_tl_mark;
	*lead = 0;
	if (m->sp) {
		*lead = m->ra;
		*pc = m->ra - 1;
		*sp = m->sp;
		*bp = m->bp;
	}
}

/* This very instruction's address and the registers there: the CFI of the
 * function it is inlined into describes sp and bp as read. */
#define HERE(pc, sp, bp) \
	__asm__ volatile("lea 0(%%rip), %0\n\t" \
			 "mov %%rsp, %1\n\t" \
			 "mov %%rbp, %2" \
			 : "=&r"(pc), "=&r"(sp), "=&r"(bp))

int __attribute__((noinline)) ml_unwind_fast(uint64_t *buf, uint32_t limit)
{
	uint64_t pc, sp, bp, lead;
	if (!ml_unwind_gen || !limit)
		return -1;
	HERE(pc, sp, bp);
	start_point(&pc, &sp, &bp, &lead);
	struct thread_walk *w = walk_get();
	int n = walk(w, pc, sp, bp, limit - (lead != 0));
	if (n < 0)
		return -1;
	uint32_t o = 0;
	if (lead)
		buf[o++] = lead;
	for (uint32_t i = 0; i < (uint32_t)n; i++)
		buf[o++] = ra_of(w, i);
	walk_done(w);
	return (int)o;
}

/* Gives every frame of the record its trie node, outermost first.  False
 * when the stack table has no room (nodes stay valid up to there). */
static bool set_nodes(struct thread_walk *w, struct ml_intern_cache *ic)
{
	uint32_t parent = w->onodes ? w->node[w->onodes - 1] : ML_NODE_ROOT;
	for (uint32_t r = w->onodes; r < w->no; r++) {
		uint32_t node = ml_stacktab_child_cached(ic, parent, w->ra[r].val);
		if (!node)
			return false;
		w->node[r] = parent = node;
		w->onodes = r + 1;
	}
	struct inner *x = w->x;
	if (w->xnodes)
		parent = x->node[w->nx - w->xnodes];
	for (uint32_t i = w->nx - w->xnodes; i-- > 0;) {
		uint32_t node = ml_stacktab_child_cached(ic, parent, x->ra[i].val);
		if (!node)
			return false;
		x->node[i] = parent = node;
		w->xnodes++;
	}
	return true;
}

/* Frame i's node (innermost = 0; set_nodes has run), ML_NODE_ROOT past
 * the end. */
static inline uint32_t node_of(const struct thread_walk *w, uint32_t i)
{
	if (i < w->nx)
		return w->x->node[i];
	i -= w->nx;
	return i < w->no ? w->node[w->no - 1 - i] : ML_NODE_ROOT;
}

int __attribute__((noinline)) ml_unwind_stack(uint32_t max_depth, uint64_t skip_lo,
					      uint64_t skip_hi, uint32_t *stack)
{
	uint64_t pc, sp, bp, lead;
	if (!ml_unwind_gen)
		return -1;
	HERE(pc, sp, bp);
	start_point(&pc, &sp, &bp, &lead);
	struct thread_walk *w = walk_get();
	int n = walk(w, pc, sp, bp, max_depth + CAPTURE_SLACK + (lead == 0));
	if (n < 0)
		return -1;
	int rc = -1;
	if (w->end != END_LIMIT) {	/* cut at the limit: the caller's slow path */
		/* The innermost frames inside the runtime are not the program's:
		 * the lead (if any) is address 0, frame i's return address is
		 * address i + 1 (without a lead: i). */
		uint32_t total = (uint32_t)n + (lead != 0), skip = 0;
		uint64_t range = skip_hi - skip_lo;
		if (lead && lead - skip_lo < range) {
			skip = 1;
			while (skip < total && ra_of(w, skip - 1) - skip_lo < range)
				skip++;
		} else if (!lead) {
			while (skip < total && ra_of(w, skip) - skip_lo < range)
				skip++;
		}
		if (total - skip <= max_depth) {
			rc = 0;
			if (!set_nodes(w, &ml_tl_thread->intern))
				*stack = ML_NODE_LOST;
			else if (lead && !skip)
				*stack = ml_stacktab_child_cached(&ml_tl_thread->intern, node_of(w, 0),
								  lead);
			else
				*stack = node_of(w, skip - (lead != 0));
			if (!*stack)
				*stack = ML_NODE_LOST;
		}
	}
	walk_done(w);
	return rc;
}
