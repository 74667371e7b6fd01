/* core/unwind.c - the stack walker: x86-64 frames unwound with the rules of
 * unwind_rules.c, reusing the thread's previous walk; libunwind
 * (core/libunwind.c) takes over whatever a rule cannot represent.
 *
 * A walk is a function of its state at each frame, (target, sp, bp), and
 * of the stack words it reads (return addresses, saved rbp).  So if the
 * new walk reaches a frame whose state equals frame j's state in the
 * thread's previous walk, and every word the previous walk read from frame
 * j outwards still holds the value read then, the rest of the new walk is
 * the rest of the previous one, word for word, trie nodes included.  The
 * re-reads have addresses known in advance (no dependent chain), so they
 * cost far less than unwinding: a program that allocates repeatedly under
 * the same callers walks only the frames that changed (bytehound's
 * shadow-stack idea, without patching return addresses).
 *
 * Per walked frame: one probe of a per-thread direct-mapped copy of the
 * rules (the shared cache behind it, .eh_frame behind that), two or three
 * loads.  The record is kept as arrays (outermost frame first) so that the
 * check of the reused part is a tight loop over (address, value) pairs. */
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

/* The frames of a walk in progress, innermost first. */
struct fresh {
	uint64_t sp[WALK_MAX], bp[WALK_MAX];	/* state entering the frame */
	struct word ra[WALK_MAX];		/* its return address */
	struct word bw[WALK_MAX];		/* the saved rbp read; if none, ra again
						 * (so a check needs no branch) */
	uint8_t bits[WALK_MAX];
};

/* Per thread: the previous walk, OUTERMOST FIRST (frame i, innermost = 0,
 * is at index n - 1 - i), so a new walk that shares its outer part keeps
 * those entries where they are and rewrites only the inner ones.  Frame
 * i's target is pc0 for i = 0, else frame i-1's return address - 1. */
struct thread_walk {
	uint32_t n;		/* frames recorded (0: no previous walk) */
	uint32_t nodes;		/* [0, nodes) have their trie node */
	uint32_t limit;		/* the limit it ran with */
	uint32_t end;		/* END_*: how it stopped */
	uint32_t gen;		/* ml_unwind_gen it ran under */
	uint32_t l1_gen;	/* ml_unwind_gen l1 belongs to */
	volatile int busy;	/* a walk is running (a signal handler's must not reuse) */
	uint32_t declined;	/* walks declined in a row (code without usable CFI) */
	uint32_t tick;
	uint64_t pc0;		/* frame 0's target */
	uint64_t end_sp;	/* END_OUTERMOST: the outermost frame's CFA */
	uint64_t home_top;	/* end_sp of the thread's first walk to its root */
	struct l1_slot l1[L1_SLOTS];
	uint64_t sp[WALK_MAX], bp[WALK_MAX];
	struct word ra[WALK_MAX], bw[WALK_MAX];
	uint32_t node[WALK_MAX];	/* the trie node of the path outermost .. here */
	uint16_t rbp_cum[WALK_MAX];	/* frames with an rbp-based CFA in [0, here] */
	uint8_t bits[WALK_MAX];
	struct fresh fresh;
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
	t->walk = w;
	return w;
}

void ml_unwind_thread_reset(void *walk)
{
	struct thread_walk *w = walk;
	if (!w)
		return;
	w->n = 0;
	w->nodes = 0;
	w->home_top = 0;
	w->declined = 0;
	w->busy = 0;
}

/* The first index r in [0, upto] whose words no longer hold what the
 * previous walk read, or upto + 1.  Return-address words only when no
 * frame of [0, upto) finds its CFA from rbp: their return addresses then
 * do not depend on the saved rbp words (frame upto's own CFA comes from
 * the rbp compared equal on entry).  A recorded rbp left stale so can
 * only make a later match fail: rbp is compared only where an rbp-based
 * CFA follows.  Outermost first, four frames per test: independent
 * loads. */
static uint32_t first_changed(const struct thread_walk *w, uint32_t upto)
{
	uint32_t end = upto + 1, r = 0;
#define DIFF(x) (*(const volatile uint64_t *)(uintptr_t)(x).at ^ (x).val)
	if (w->rbp_cum[upto] == ((w->bits[upto] & BIT_RBP_CFA) != 0)) {
		for (; r + 4 <= end; r += 4)
			if (__builtin_expect((DIFF(w->ra[r]) | DIFF(w->ra[r + 1]) |
					      DIFF(w->ra[r + 2]) | DIFF(w->ra[r + 3])) != 0, 0))
				break;
		for (; r < end; r++)
			if (DIFF(w->ra[r]))
				return r;
		return end;
	}
	for (; r + 2 <= end; r += 2)
		if (__builtin_expect((DIFF(w->ra[r]) | DIFF(w->bw[r]) | DIFF(w->ra[r + 1]) |
				      DIFF(w->bw[r + 1])) != 0, 0))
			break;
	for (; r < end; r++)
		if (DIFF(w->ra[r]) | DIFF(w->bw[r]))
			return r;
#undef DIFF
	return end;
}

/* Whether the previous walk's entry k (of on) has the state (target, bp,
 * bits) of the new walk's frame at the same sp.  rbp is compared only
 * when some frame from there outwards takes its CFA from it. */
static inline bool same_state(const struct thread_walk *w, uint32_t k, uint32_t on,
			      uint64_t target, uint64_t bp, uint32_t bits)
{
	uint64_t old_target = k + 1 == on ? w->pc0 : w->ra[k + 1].val - 1;
	if (old_target != target)
		return false;
	if (!w->rbp_cum[k])
		return true;
	if ((w->bits[k] ^ bits) & BIT_BP_OK)
		return false;
	return !(bits & BIT_BP_OK) || w->bp[k] == bp;
}

/* The new walk's frames fresh[0, n) become entries [keep, keep + n) of the
 * record, after the kept [0, keep).  Nodes stay valid as long as the path
 * is the same as before. */
static void settle(struct thread_walk *w, uint32_t keep, uint32_t n)
{
	const struct fresh *f = &w->fresh;
	uint32_t total = keep + n;
	uint32_t valid = w->nodes < w->n ? w->nodes : w->n;
	uint32_t nodes = valid < keep ? valid : keep;
	bool same = valid >= keep;
	uint32_t cum = keep ? w->rbp_cum[keep - 1] : 0;
	for (uint32_t r = keep; r < total; r++) {
		uint32_t i = total - 1 - r;
		if (same && r < valid && w->ra[r].val == f->ra[i].val)
			nodes = r + 1;	/* the same path as before: same node */
		else
			same = false;
		w->sp[r] = f->sp[i];
		w->bp[r] = f->bp[i];
		w->ra[r] = f->ra[i];
		w->bw[r] = f->bw[i];
		w->bits[r] = f->bits[i];
		cum += (f->bits[i] & BIT_RBP_CFA) != 0;
		w->rbp_cum[r] = (uint16_t)cum;
	}
	w->nodes = nodes;
	w->n = total;
}

/* Walks from (pc, sp, bp), pc being the exact current instruction of the
 * innermost frame, into the thread's record.  Returns the frames recorded
 * (w->n), or -1 when a frame's rule is not one it handles. */
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
	uint32_t on = w->n && w->limit == limit && w->gen == gen && w->end == END_OUTERMOST &&
		w->end_sp == w->home_top ? w->n : 0;
	int64_t k = (int64_t)on - 1;	/* the old entry with the lowest sp >= ours */
	uint32_t clean = 0;		/* entries [0, clean) hold their words */
	bool checked = false;
	struct fresh *f = &w->fresh;
	uint64_t target = pc;
	uint32_t bits = BIT_BP_OK;
	uint32_t n = 0, end;
	for (;;) {
		if (k >= 0) {
			while (k >= 0 && w->sp[k] < sp)
				k--;
			if (k >= 0 && w->sp[k] == sp &&
			    same_state(w, (uint32_t)k, on, target, bp, bits)) {
				if (!checked) {
					clean = first_changed(w, (uint32_t)k);
					checked = true;
				}
				if ((uint32_t)k < clean)
					goto reuse;
			}
		}
		if (n == limit) {
			end = END_LIMIT;
			break;
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
		if (__builtin_expect(r.flags & stop, 0)) {
			if (r.flags & (ML_RULE_BAD | ML_RULE_CFA_RBP) || cfa <= sp || (cfa & 7))
				return -1;
			end = END_OUTERMOST;
			sp = cfa;
			break;
		}
		if (cfa <= sp || (cfa & 7))
			return -1;	/* the stack must grow up as we walk out */
		uint64_t ra_at = cfa + (uint64_t)(int64_t)r.ra_off;
		uint64_t ra = *(const uint64_t *)(uintptr_t)ra_at;
		f->sp[n] = sp;
		f->bp[n] = bp;
		f->bits[n] = (uint8_t)(bits | (r.flags & ML_RULE_CFA_RBP ? BIT_RBP_CFA : 0));
		f->ra[n] = (struct word){ ra_at, ra };
		f->bw[n] = (struct word){ ra_at, ra };
		if (r.flags & ML_RULE_RBP_SAVED) {
			uint64_t bw_at = cfa + (uint64_t)(int64_t)r.bp_off;
			bp = *(const uint64_t *)(uintptr_t)bw_at;
			f->bw[n] = (struct word){ bw_at, bp };
		} else if (r.flags & ML_RULE_RBP_UNDEF) {
			bits = 0;
		}
		sp = cfa;
		if (ra == 0) {
			end = END_ZERO_RA;
			break;
		}
		n++;
		target = ra - 1;	/* inside the call instruction */
	}
	/* A full walk: it becomes the thread's record. */
	w->nodes = 0;
	w->n = 0;
	settle(w, 0, n);
	w->limit = limit;
	w->end = end;
	w->gen = gen;
	w->pc0 = pc;
	w->end_sp = sp;
	if (end == END_OUTERMOST && !w->home_top)
		w->home_top = sp;
	return (int)n;

reuse: {
	/* Entries [0, k] of the previous walk are ours from frame n on. */
	uint32_t keep = (uint32_t)k + 1;
	if (n + keep > limit) {
		/* Deeper than the limit: the walk ends at it, so does the record. */
		for (uint32_t i = n; i < limit; i++) {
			uint32_t r = n + keep - 1 - i;
			f->sp[i] = w->sp[r];
			f->bp[i] = w->bp[r];
			f->ra[i] = w->ra[r];
			f->bw[i] = w->bw[r];
			f->bits[i] = w->bits[r];
		}
		w->nodes = 0;
		w->n = 0;
		settle(w, 0, limit);
		w->end = END_LIMIT;
		w->pc0 = pc;
		return (int)limit;
	}
	settle(w, keep, n);
	w->pc0 = pc;
	return (int)w->n;
}
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
		w->n = 0;	/* the record may be half written */
		w->nodes = 0;
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

__thread struct ml_unwind_mark ml_tl_mark __attribute__((tls_model("initial-exec")));

/* The walk's start: the mark if a hook (or ml_thread_on_side_stack) set
 * one, else the given registers (the caller's own frame).  A marked frame
 * is live: we are called from inside it, maybe on the side stack (so not
 * necessarily above us on this stack), and the mark is cleared before it
 * returns. */
static inline void start_point(uint64_t *pc, uint64_t *sp, uint64_t *bp)
{
	struct ml_unwind_mark *m = &ml_tl_mark;
	if (m->sp) {
		*pc = m->pc;
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
	uint64_t pc, sp, bp;
	if (!ml_unwind_gen)
		return -1;
	HERE(pc, sp, bp);
	start_point(&pc, &sp, &bp);
	struct thread_walk *w = walk_get();
	int n = walk(w, pc, sp, bp, limit);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		buf[i] = w->ra[n - 1 - i].val;
	walk_done(w);
	return n;
}

/* Gives entries [w->nodes, w->n) their nodes, outermost first.  False when
 * the stack table has no room (then nodes stay valid up to there). */
static bool set_nodes(struct thread_walk *w, struct ml_intern_cache *ic)
{
	uint32_t parent = w->nodes ? w->node[w->nodes - 1] : ML_NODE_ROOT;
	for (uint32_t r = w->nodes; r < w->n; r++) {
		uint32_t node = ml_stacktab_child_cached(ic, parent, w->ra[r].val);
		if (!node)
			return false;
		w->node[r] = parent = node;
		w->nodes = r + 1;
	}
	return true;
}

int __attribute__((noinline)) ml_unwind_stack(uint32_t max_depth, uint64_t skip_lo,
					      uint64_t skip_hi, uint32_t *stack)
{
	uint64_t pc, sp, bp;
	if (!ml_unwind_gen)
		return -1;
	HERE(pc, sp, bp);
	start_point(&pc, &sp, &bp);
	struct thread_walk *w = walk_get();
	int n = walk(w, pc, sp, bp, max_depth + CAPTURE_SLACK + 1);
	int rc = -1;
	if (n < 0)
		return -1;
	if (w->end != END_LIMIT) {	/* cut at the limit: the caller's slow path */
		/* The innermost frames inside the runtime are not the program's. */
		uint32_t skip = 0;
		while (skip < (uint32_t)n && w->ra[n - 1 - skip].val - skip_lo < skip_hi - skip_lo)
			skip++;
		if ((uint32_t)n - skip <= max_depth) {
			rc = 0;
			if (!set_nodes(w, &ml_tl_thread->intern))
				*stack = ML_NODE_LOST;
			else
				*stack = skip < (uint32_t)n ? w->node[n - 1 - skip] : ML_NODE_ROOT;
		}
	}
	walk_done(w);
	return rc;
}
