/* core/unwind.c - the stack walker: x86-64 frames unwound with the rules of
 * unwind_rules.c, reusing the thread's previous walk; libunwind
 * (core/libunwind.c) takes over whatever a rule cannot represent.
 *
 * A walk is a function of its state at each frame, (rule, sp, bp), and
 * of the stack words it reads (return addresses, saved rbp); the target
 * (the frame's pc) matters only through its rule, so two calls from one
 * function (the same frame layout at both call sites) have the same
 * state.  So if the new walk reaches a frame whose state equals a frame's
 * state in the thread's previous walk, and every word the previous walk read from that
 * frame outwards still holds the value read then, the rest of the new walk
 * is the rest of the previous one, word for word, trie nodes included.
 * The re-reads have addresses known in advance (no dependent chain), so
 * they cost far less than unwinding: a program that allocates repeatedly
 * under the same callers walks only the frames that changed (bytehound's
 * shadow-stack idea, without patching return addresses).
 *
 * The record of a walk is an array of frames, outermost first: a new walk
 * that shares the outer part of the previous one writes its own frames
 * (innermost first, into a scratch array) and puts them after the part it
 * keeps.  Per walked frame: one probe of a per-thread direct-mapped copy
 * of the rules (the shared cache behind it, .eh_frame behind that), two or
 * three loads, the stores of its record, its copy into place.  A new frame
 * that has the return address of the frame the previous walk had at its
 * depth, below the same frames, keeps that frame's trie node: so only the
 * frames whose path is new are looked up in the stack table.
 *
 * Most allocations need less (walk_near): when the innermost frame, or
 * the frame it leads to, has its recorded state, the record is today's
 * walk once the return addresses that changed are patched in place,
 * provided each one's target has the rule recorded for the frame it leads
 * to (the same rule from the same state: the same CFA, so the rest of the
 * record stands; see patch_words).  That check reads every recorded
 * return-address word (dense copies: four per AVX2 gather where there is
 * one), as the general walk's does.  The stack id of the innermost two
 * levels and the lead comes from one per-thread cache keyed by what lies
 * below them (the near cache); deeper frames' lookups go through slots
 * picked by a hash of their paths, asked for all at once, so that their
 * cache misses overlap instead of following one another.
 *
 * Where neither case holds (a program whose allocating function is called
 * at another depth each time: the innermost frame's sp differs from the
 * record's), a walk from the hook's mark is looked up whole in the walk
 * memo (struct wm_entry): by its start (lead, sp), its words compared with
 * those an earlier walk from there read, its stack id at once. */
#include <immintrin.h>
#include <string.h>
#include "core/internal.h"

#define L1_SLOTS 512u		/* per thread, in front of the shared cache */
#define WALK_MAX ML_CAPTURE_BUF
#define HOT static inline __attribute__((always_inline))

enum { END_OUTERMOST = 1, END_ZERO_RA, END_LIMIT };
#define WALK_MEMO (-2)	/* walk_in: the walk memo had the stack id (*hit) */

#define HOLD_BUSY 1u
#define HOLD_DECLINED 2u

#define BIT_BP_OK 1u		/* rbp's value entering the frame is known */
#define BIT_RBP_CFA 2u		/* the frame's CFA is rbp-based */
#define BIT_LIVE 4u		/* rbp's value entering the frame matters (rbp_live;
				 * in the record only) */

/* A rule as the walk uses it.  The return address is at CFA - 8 (x86-64:
 * the CFA is rsp before the call); a rule that says otherwise is taken as
 * ML_RULE_BAD. */
struct l1_slot {
	uint64_t key;		/* target + 1; 0: empty */
	union {
		struct {
			int32_t cfa_off;
			int16_t bp_off;
			uint8_t fbits;	/* BIT_RBP_CFA when the CFA is rbp-based */
			uint8_t flags;	/* ML_RULE_* */
		};
		uint64_t packed;	/* all of it: equal rules, equal words */
	};
};

/* One frame of a walk. */
struct frame {
	uint64_t sp, bp;	/* state entering the frame (bp: when BIT_BP_OK) */
	uint64_t ra_at, ra;	/* its return address, and where it was read */
	uint64_t bw_at, bw;	/* the saved rbp read where it matters (in the
				 * record: the caller's rbp is live); else no_bw's (so a
				 * check needs no branch) */
	uint64_t rule;		/* its rule (struct l1_slot's packed) */
	uint16_t rbp;		/* frames whose saved-rbp word matters from the outermost
				 * to here (in the scratch array: unset) */
	uint8_t bits;
};

/* The stack ids of the innermost two frames and the lead, by what is
 * below them: (parent, ra0, lead) -> (node0, node), node0 being the child
 * (parent, ra0) and node the child (node0, lead) in the trie.  One probe
 * of one line where the child caches take two (the common allocation
 * changes only these two levels, or none).  Node ids never change, so an
 * entry never goes stale. */
#define NEAR_BITS 10u
struct near_slot {
	uint64_t ra0, lead;
	uint32_t parent, node0, node, pad;
};

/* The path memo: call paths the thread gave nodes, by their return
 * addresses.  After a deep change of the call path (another path through
 * a recursion, another caller far out) the record's changed words would be
 * patched in one at a time, each target's rule looked up (patch_words),
 * and set_nodes would then look up every frame from the change inwards in
 * the stack table, one lookup needing the one before; a path seen before
 * gives all of that from one entry instead: its addresses compared
 * exactly with the words read (memo_patch_avx2), its rules with the
 * record's, its nodes copied into o_node.  A trie node is a function of its
 * path's addresses alone, and node ids never change, so an entry's nodes
 * never go stale (a new thread, new rules, all keep them); its rules are
 * those of one generation.  A longer path keeps its outermost MEMO_MAX
 * frames.  128 entries of 488 bytes per thread. */
#define MEMO_BITS 5u		/* sets */
#define MEMO_WAYS 4u
#define MEMO_MAX 24u
#define MEMO_MIN 4u		/* fewer nodes to find: the stack table's caches */
struct memo_entry {
	uint32_t k;		/* 0 for an empty entry */
	uint32_t gen;		/* ml_unwind_gen of rule */
	uint64_t ra[MEMO_MAX];
	uint32_t node[MEMO_MAX];
	uint64_t rule[MEMO_MAX];	/* the record's rules then (see memo_patch_avx2) */
};
/* A set's ways' hashes side by side (one line tells them apart), and the
 * way it replaces next. */
struct memo_set {
	uint64_t hash[MEMO_WAYS];
	uint32_t next, pad;
};

/* The walk memo: whole walks from the hook's mark, by their start (lead,
 * sp).  A walk from (lead - 1, sp) is a function of the start (and of rbp
 * where its value entering the innermost frame is live: then bp keys it
 * too), of the rules (one generation) and of the words it read that
 * matter: every return-address word and the saved-rbp words the record's
 * bwm list names.  An entry keeps those words' addresses and values and
 * the stack id the walk ended with (after the skip of the runtime's own
 * frames): an allocation from the same start whose words all still hold
 * them (four per AVX2 gather; one at a time without AVX2) has that stack
 * id without a walk, the record left as it was (it is only a cache).
 * Only walks that ran to the thread's root are kept: their words lie
 * between sp and that root, on this thread's stack, mapped while it
 * lives.  A start seen under several callers keeps several walks: a set's
 * ways, picked by a hash of the start. */
#define WM_BITS 6u		/* sets */
#define WM_WAYS 4u
#define WM_WORDS 32u		/* longer walks are not kept */
struct wm_entry {
	uint64_t lead, sp, bp;	/* the start (bp: when bp_in) */
	uint32_t gen, words;	/* ml_unwind_gen of the walk; words in at, val (>= 4) */
	uint32_t bp_in, node;	/* the stack id */
	uint64_t at[WM_WORDS], val[WM_WORDS];
};
/* A set's ways' start sp side by side (0: empty), and the way it replaces
 * next. */
struct wm_set {
	uint64_t sp[WM_WAYS];
	uint32_t next, pad;
};

/* Per thread: the previous walk, outermost first (frame i, innermost = 0,
 * is o[n - 1 - i]).  Frame i's target is pc0 for i = 0, else frame i-1's
 * return address - 1. */
struct thread_walk {
	uint32_t n;		/* frames recorded (0: no previous walk) */
	uint32_t nodes;		/* o[0, nodes) have their trie node (o_node) */
	uint32_t phs;		/* o_ph[0, min(phs, nodes)) are valid (see set_nodes) */
	uint32_t reuse;		/* the limit it ran with if it may be reused
				 * (see fresh), else 0 */
	uint32_t end;		/* END_*: how it stopped (0: no previous walk) */
	uint32_t gen;		/* ml_unwind_gen of l1 and of the record */
	/* HOLD_BUSY: a walk is running (a signal handler's must not reuse);
	 * above it, the walks declined in a row (code without usable CFI), in
	 * units of HOLD_DECLINED: one test of both on the common path, one
	 * store to release. */
	volatile uint32_t hold;
	uint32_t tick;
	uint32_t general;	/* the last walk_in asked the walk memo and missed */
	uint64_t pc0;		/* frame 0's target */
	uint64_t end_sp;	/* END_OUTERMOST: the outermost frame's CFA */
	uint64_t home_top;	/* end_sp of the thread's first walk to its root */
	struct l1_slot l1[L1_SLOTS];
	struct near_slot near[1u << NEAR_BITS];
	struct frame o[WALK_MAX];	/* the previous walk, outermost first */
	/* o's ra_at and ra again, dense: what the check of the reused frames
	 * reads (four to a 32-byte load, not one 64-byte record each). */
	uint64_t o_at[WALK_MAX], o_ra[WALK_MAX];
	/* The trie node of the path root .. o[p], valid for p < nodes (dense:
	 * the path memo fills them with a few vector copies). */
	uint32_t o_node[WALK_MAX];
	/* The frames whose saved-rbp word matters (frame p's rbp of them are
	 * at o[0, p]), outermost first: where the check reads such words
	 * apart (a main thread's stacks: usually one, below libc's start
	 * code, whose CFA comes from rbp). */
	uint16_t bwm_at[WALK_MAX];
	/* A hash of the path root .. o[p], valid with the node (p < nodes)
	 * where p < phs too: where o[p]'s node lookup is cached (see
	 * set_nodes). */
	uint64_t o_ph[WALK_MAX];
	uint64_t cur[MEMO_MAX];	/* memo_patch_avx2's words read */
	struct memo_set memo_sets[1u << MEMO_BITS];
	struct memo_entry memo[1u << MEMO_BITS][MEMO_WAYS];
	struct frame y[WALK_MAX];	/* the new walk's own frames, innermost first */
	struct wm_set wm_sets[1u << WM_BITS];
	struct wm_entry wm[1u << WM_BITS][WM_WAYS];
};

/* 1 when the CPU (and the kernel) give us AVX2's gathers. */
static int use_gather = -1;

/* The calling thread's walk record, in its ml_thread (which a later thread
 * may inherit: the record is then reset). */
static struct thread_walk *walk_make(struct ml_thread *t)
{
	struct thread_walk *w;
	if (__builtin_expect(use_gather < 0, 0)) {
		__builtin_cpu_init();
		use_gather = __builtin_cpu_supports("avx2") ? 1 : 0;
	}
	if (!t || !(w = ml_arena_alloc(sizeof(*w))))
		return NULL;
	t->walk = w;
	return w;
}

HOT struct thread_walk *walk_get(void)
{
	struct ml_thread *t = ml_thread_self();
	struct thread_walk *w = t ? t->walk : NULL;
	return __builtin_expect(w != NULL, 1) ? w : walk_make(t);
}

void ml_unwind_thread_reset(void *walk)
{
	struct thread_walk *w = walk;
	if (!w)
		return;
	w->end = 0;
	w->reuse = 0;
	w->n = w->nodes = 0;
	w->home_top = 0;
	w->hold = 0;
	/* the walk memo's words lay on the old thread's stack */
	memset(w->wm_sets, 0, sizeof(w->wm_sets));
}

/* rbp's value entering a frame of rule `rule` matters to the walk from
 * there outwards (it is live) when the frame's CFA comes from it, or when
 * the frame leaves rbp as it found it (saves none, does not lose it) and
 * the value matters entering its caller (live_out).  A frame that saves rbp
 * hands its caller the saved word: that word matters (see settle) where
 * live_out, and rbp's value entering the frame no longer does.  So on a
 * thread whose outermost frames take their CFA from rbp (a main thread,
 * below libc's start code), only the saved word of the nearest frame
 * inwards that saves rbp matters, not rbp's value at every frame (code
 * built without frame pointers uses rbp as any other register). */
HOT bool rbp_live(uint64_t rule, bool live_out)
{
	struct l1_slot r = { .packed = rule };
	return (r.flags & ML_RULE_CFA_RBP) ||
	       (!(r.flags & (ML_RULE_RBP_SAVED | ML_RULE_RBP_UNDEF)) && live_out);
}

/* Whether some saved-rbp word from f outwards (f's own included) matters:
 * then the checks read them too.  (Words that do not matter are recorded
 * as no_bw's, so a check that reads them all reads only those that do.
 * A recorded rbp left stale where it did not matter can only make a later
 * match fail where it does: rbp is compared only where it is live.) */
HOT bool bp_matters(const struct frame *f)
{
	return f->rbp != 0;
}

#define WORD(at) (*(const volatile uint64_t *)(uintptr_t)(at))
#define RA_DIFF(f) (WORD((f).ra_at) ^ (f).ra)
#define BW_DIFF(f) (WORD((f).bw_at) ^ (f).bw)
/* The word a frame that saves no rbp checks as its saved-rbp word: always
 * 0, so such a frame's BW_DIFF is 0 whatever its return address does. */
static const uint64_t no_bw;
#define NO_BW_AT ((uint64_t)(uintptr_t)&no_bw)

/* Whether some of frames [0, n) (dense: at, ra; n >= 4) no longer hold
 * the return address read: four words per AVX2 gather, all of them
 * before one test (the common answer is no).  The last four overlap the
 * others when n is not a multiple of four: a word read twice is
 * harmless. */
#define GATHER_DIFF(i) _mm256_xor_si256( \
		_mm256_i64gather_epi64((const long long *)0, \
				       _mm256_loadu_si256((const __m256i *)(const void *)(at + (i))), 1), \
		_mm256_loadu_si256((const __m256i *)(const void *)(ra + (i))))
__attribute__((target("avx2"), noinline)) static bool
changed_gather(const uint64_t *at, const uint64_t *ra, uint32_t n)
{
	__m256i acc = GATHER_DIFF(n - 4);
	uint32_t i = 0;
	for (; i + 8 < n; i += 8)
		acc = _mm256_or_si256(acc, _mm256_or_si256(GATHER_DIFF(i), GATHER_DIFF(i + 4)));
	if (i + 4 < n)
		acc = _mm256_or_si256(acc, GATHER_DIFF(i));
	return !_mm256_testz_si256(acc, acc);
}
#undef GATHER_DIFF

/* The first frame of [w->o, end) whose words no longer hold what was
 * read, or end; saved-rbp words too when bp says so.  Four frames per
 * test: independent loads (with AVX2: first all of them at once, which
 * usually finds none). */
HOT const struct frame *first_changed(const struct thread_walk *w, const struct frame *end,
				      bool bp)
{
	const struct frame *f = w->o;
	if (!bp) {
		if (end - f >= 4 && use_gather > 0 &&
		    !changed_gather(w->o_at, w->o_ra, (uint32_t)(end - f)))
			return end;
		for (; end - f >= 4; f += 4)
			if (__builtin_expect((RA_DIFF(f[0]) | RA_DIFF(f[1]) | RA_DIFF(f[2]) |
					      RA_DIFF(f[3])) != 0, 0))
				break;
		while (f < end && !RA_DIFF(*f))
			f++;
		return f;
	}
	if (end - f >= 4 && use_gather > 0 &&
	    !changed_gather(w->o_at, w->o_ra, (uint32_t)(end - f))) {
		/* the return addresses hold: the saved-rbp words that matter */
		for (uint32_t i = 0, m = end[-1].rbp; i < m; i++) {
			const struct frame *b = w->o + w->bwm_at[i];
			if (__builtin_expect(BW_DIFF(*b) != 0, 0))
				return b;
		}
		return end;
	}
	for (; end - f >= 2; f += 2)
		if (__builtin_expect((RA_DIFF(f[0]) | BW_DIFF(f[0]) | RA_DIFF(f[1]) |
				      BW_DIFF(f[1])) != 0, 0))
			break;
	while (f < end && !(RA_DIFF(*f) | BW_DIFF(*f)))
		f++;
	return f;
}

/* Whether the previous walk's frame old has the state (rule, bp, bits) of
 * the new walk's frame at the same sp.  rbp is compared only where its
 * value entering the frame is live (rbp_live). */
HOT bool same_state(const struct frame *old, uint64_t rule, uint64_t bp, uint32_t bits)
{
	if (old->rule != rule)
		return false;
	if (!(old->bits & BIT_LIVE))
		return true;
	if ((old->bits ^ bits) & BIT_BP_OK)
		return false;
	return !(bits & BIT_BP_OK) || old->bp == bp;
}

/* The new walk's n frames (y, innermost first) go after the kept o[0,
 * keep).  A new frame keeps the trie node of the previous frame at its
 * depth while their paths agree.  Outermost first, each gets rbp's
 * liveness (BIT_LIVE) and its saved-rbp word where that matters. */
HOT void settle(struct thread_walk *w, uint32_t keep, uint32_t n)
{
	if (n == 0) {	/* the same frames as last time from here out */
		if (w->nodes > keep)
			w->nodes = keep;
		w->n = keep;
		return;
	}
	struct frame *dst = w->o + keep, *src = w->y + n;
	const struct frame *with_node = w->o + (w->nodes < w->n ? w->nodes : w->n);
	bool same = dst <= with_node;
	uint32_t cum = keep ? dst[-1].rbp : 0, nodes = same ? keep : w->nodes;
	bool live = keep && (dst[-1].bits & BIT_LIVE);	/* entering the caller */
	while (src-- > w->y) {
		same = same && dst < with_node && dst->ra == src->ra;
		*dst = *src;
		struct l1_slot r = { .packed = dst->rule };
		bool bwm = (r.flags & ML_RULE_RBP_SAVED) && live;	/* its saved word matters */
		if (!bwm) {
			dst->bw_at = NO_BW_AT;
			dst->bw = 0;
		}
		live = rbp_live(dst->rule, live);
		dst->bits = (uint8_t)((dst->bits & ~BIT_LIVE) | (live ? BIT_LIVE : 0));
		w->o_at[dst - w->o] = dst->ra_at;
		w->o_ra[dst - w->o] = dst->ra;
		if (bwm)
			w->bwm_at[cum++] = (uint16_t)(dst - w->o);
		dst->rbp = (uint16_t)cum;
		nodes += same;	/* o_node[dst - o] stays */
		dst++;
	}
	w->nodes = nodes;
	w->n = keep + n;
}

/* The rule for key - 1 (a target + 1: the slots' key, 0 being empty),
 * through the thread's first-level copy. */
HOT const struct l1_slot *rule_at(struct thread_walk *w, uint64_t key)
{
	struct l1_slot *s = &w->l1[(key ^ (key >> 9)) & (L1_SLOTS - 1)];
	if (__builtin_expect(s->key != key, 0)) {
		uint64_t packed = ml_unwind_rule(key - 1);
		struct ml_unwind_rule r;
		memcpy(&r, &packed, sizeof(r));
		s->cfa_off = r.cfa_off;
		s->bp_off = r.bp_off;
		s->flags = r.flags;
		if (r.ra_off != -8 && !(r.flags & ML_RULE_RA_UNDEF))
			s->flags |= ML_RULE_BAD;
		s->fbits = r.flags & ML_RULE_CFA_RBP ? BIT_RBP_CFA : 0;
		s->key = key;
	}
	return s;
}

/* The rule of target. */
HOT const struct l1_slot *rule_of(struct thread_walk *w, uint64_t target)
{
	return rule_at(w, target + 1);
}

/* The rule of the code a return address ra (nonzero) returns into: its
 * call instruction's, ra - 1's. */
HOT const struct l1_slot *rule_of_ra(struct thread_walk *w, uint64_t ra)
{
	return rule_at(w, ra);
}

/* A walk that found no previous frame to reuse becomes the record. */
static int fresh(struct thread_walk *w, uint32_t n, uint32_t end, uint64_t pc, uint64_t sp,
		 uint32_t limit)
{
	settle(w, 0, n);
	w->end = end;
	w->pc0 = pc;
	w->end_sp = sp;
	if (end == END_OUTERMOST && !w->home_top)
		w->home_top = sp;
	/* Only a walk that ran to the thread's own root is reused: its words
	 * then all lie on this thread's stack, between the matched frame and
	 * that root, which stays mapped while the thread lives.  (A walk on
	 * another stack, a coroutine's say, ends at another root, or is cut
	 * short: never reused.) */
	w->reuse = end == END_OUTERMOST && sp == w->home_top ? limit : 0;
	return (int)n;
}

HOT struct near_slot *near_slot(struct thread_walk *w, uint32_t parent, uint64_t ra0,
			       uint64_t lead)
{
	uint64_t h = ((ra0 ^ parent) * 0x9e3779b97f4a7c15ull ^ lead) * 0xd6e8feb86659fd93ull;
	return &w->near[h >> (64 - NEAR_BITS)];
}

/* o_ph[p] from o_ph[p - 1] (see set_nodes). */
HOT uint64_t path_hash(const struct thread_walk *w, uint64_t prev, uint32_t p)
{
	uint64_t ph = (prev ^ w->o_ra[p]) * 0x9e3779b97f4a7c15ull;
	return ph ^ (ph >> 31);
}
#define PATH_SEED 0x243f6a8885a308d3ull

/* Frames up to the innermost get their nodes without their path hashes
 * (only a deeper walk's set_nodes needs them, and makes them then): the
 * hashes stay valid below at most p. */
HOT void ph_upto(struct thread_walk *w, uint32_t p)
{
	if (w->phs > p)
		w->phs = p;
}

/* The near cache's answer for (parent, f0's return address, lead), when
 * it has it: f0's node (the record's innermost frame, below parent) and
 * the stack id in *hit.  (Its slot is computed before the check of
 * the words, and read after: the miss, if any, overlaps the check.) */
HOT void near_hit(struct thread_walk *w, const struct near_slot *ns, struct frame *f0,
		  uint32_t parent, uint64_t lead, uint32_t *hit)
{
	if (ns->ra0 == f0->ra && ns->lead == lead && ns->parent == parent) {
		uint32_t n = w->n;
		w->o_node[n - 1] = ns->node0;
		ph_upto(w, n - 1);
		w->nodes = n;
		*hit = ns->node;
	}
}

/* A path's two sets, by its hash: it is kept in either (a set full of
 * other paths seldom keeps it out, as one set alone would). */
HOT uint32_t memo_set_a(uint64_t h)
{
	return (uint32_t)(h >> (64 - MEMO_BITS));
}
HOT uint32_t memo_set_b(uint64_t h)
{
	uint32_t b = (uint32_t)(h >> (64 - 2 * MEMO_BITS)) & ((1u << MEMO_BITS) - 1);
	return b == memo_set_a(h) ? b ^ 1 : b;
}

#define AVX2_INLINE static inline __attribute__((target("avx2"), always_inline))
#define LOAD4(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
/* The memo's hash of a path's addresses ra[0, k) (MEMO_MIN <= k <=
 * MEMO_MAX), with AVX2: four lanes, each word xored in and mixed (a 32-bit
 * multiply of the low half, the high half shifted down) four at a time, the
 * last four overlapping the others where k is not a multiple of four, the
 * lanes then multiplied apart (a path's order counts). */
AVX2_INLINE uint64_t memo_hash_avx2(const uint64_t *ra, uint32_t k)
{
	const __m256i mul = _mm256_set1_epi64x(0x9e3779b1);
#define MIX4(x) _mm256_xor_si256(_mm256_mul_epu32(x, mul), _mm256_srli_epi64(x, 29))
	const uint64_t *last = ra + k - 4;
	__m256i acc = MIX4(LOAD4(last));
	for (const uint64_t *p = ra; p < last; p += 4)
		acc = MIX4(_mm256_xor_si256(acc, LOAD4(p)));
#undef MIX4
	__m128i lo = _mm256_castsi256_si128(acc), hi = _mm256_extracti128_si256(acc, 1);
	uint64_t h = ((uint64_t)_mm_cvtsi128_si64(lo) ^ k) * 0x9e3779b97f4a7c15ull +
		     (uint64_t)_mm_extract_epi64(lo, 1) * 0xd6e8feb86659fd93ull +
		     (uint64_t)_mm_cvtsi128_si64(hi) * 0xc2b2ae3d27d4eb4full +
		     (uint64_t)_mm_extract_epi64(hi, 1) * 0x165667b19e3779f9ull;
	return (h ^ (h >> 32)) * 0x9e3779b97f4a7c15ull;
}

/* The entry that holds the path ra[0, k) whose hash is h, or NULL: both
 * sets' four hashes compared at once, then the addresses four at a time. */
AVX2_INLINE struct memo_entry *memo_find_avx2(struct thread_walk *w, const uint64_t *ra,
					      uint32_t k, uint64_t h)
{
	_Static_assert(MEMO_WAYS == 4, "a set's hashes: one vector");
	const __m256i hv = _mm256_set1_epi64x((long long)h);
	uint32_t sa = memo_set_a(h), sb = memo_set_b(h);
	__m256i eqa = _mm256_cmpeq_epi64(LOAD4(w->memo_sets[sa].hash), hv);
	__m256i eqb = _mm256_cmpeq_epi64(LOAD4(w->memo_sets[sb].hash), hv);
	uint32_t ma = (uint32_t)_mm256_movemask_pd(_mm256_castsi256_pd(eqa));
	uint32_t mb = (uint32_t)_mm256_movemask_pd(_mm256_castsi256_pd(eqb));
	const uint64_t *last = ra + k - 4;
	for (uint32_t m = ma | mb << MEMO_WAYS; m; m &= m - 1) {
		uint32_t i = (uint32_t)__builtin_ctz(m);
		struct memo_entry *e = i < MEMO_WAYS ? &w->memo[sa][i] : &w->memo[sb][i - MEMO_WAYS];
		if (e->k != k)
			continue;
		const uint64_t *q = e->ra;
		__m256i diff = _mm256_xor_si256(LOAD4(q + k - 4), LOAD4(last));
		for (const uint64_t *p = ra; p < last; p += 4, q += 4)
			diff = _mm256_or_si256(diff, _mm256_xor_si256(LOAD4(q), LOAD4(p)));
		if (_mm256_testz_si256(diff, diff))
			return e;
	}
	return NULL;
}

/* The path memo's lookup of the record's path o_ra[0, k) (MEMO_MIN <= k <=
 * MEMO_MAX): its hash in *hash, and when an entry holds that path, its
 * nodes copied into o_node[0, MEMO_MAX) (where o_node was valid it had
 * these values: the same path, the same nodes). */
__attribute__((target("avx2"), noinline)) static bool
memo_get_avx2(struct thread_walk *w, uint32_t k, uint64_t *hash)
{
	uint64_t h = *hash = memo_hash_avx2(w->o_ra, k);
	struct memo_entry *e = memo_find_avx2(w, w->o_ra, k, h);
	if (!e)
		return false;
	memcpy(w->o_node, e->node, sizeof(e->node));
	return true;
}

/* The same without AVX2, a word at a time (another hash). */
static __attribute__((noinline)) bool memo_get_plain(struct thread_walk *w, uint32_t k,
						     uint64_t *hash)
{
	const uint64_t *ra = w->o_ra;
	uint64_t h = k;
	for (uint32_t i = 0; i < k; i++)
		h = (h ^ ra[i]) * 0x9e3779b97f4a7c15ull;
	*hash = h;
	for (uint32_t j = 0; j < 2 * MEMO_WAYS; j++) {
		uint32_t set = j < MEMO_WAYS ? memo_set_a(h) : memo_set_b(h), way = j % MEMO_WAYS;
		struct memo_entry *e = &w->memo[set][way];
		if (w->memo_sets[set].hash[way] != h || e->k != k)
			continue;
		uint64_t diff = 0;
		for (uint32_t i = 0; i < k; i++)
			diff |= e->ra[i] ^ ra[i];
		if (diff)
			continue;
		memcpy(w->o_node, e->node, sizeof(e->node));
		return true;
	}
	return false;
}

/* Keeps the record's path o[0, k) with its nodes (all valid) and rules
 * under hash: in a free way of either set, else over the first set's next
 * way. */
static __attribute__((noinline)) void memo_put(struct thread_walk *w, uint32_t k, uint64_t hash)
{
	uint32_t set = memo_set_a(hash), way = 0;
	while (way < MEMO_WAYS && w->memo[set][way].k)
		way++;
	if (way == MEMO_WAYS) {
		set = memo_set_b(hash);
		for (way = 0; way < MEMO_WAYS && w->memo[set][way].k; way++)
			;
	}
	if (way == MEMO_WAYS) {	/* both full: the first set's next way */
		set = memo_set_a(hash);
		way = w->memo_sets[set].next;
		w->memo_sets[set].next = (way + 1) % MEMO_WAYS;
	}
	struct memo_entry *e = &w->memo[set][way];
	w->memo_sets[set].hash[way] = hash;
	e->k = k;
	e->gen = w->gen;
	memcpy(e->ra, w->o_ra, sizeof(e->ra));
	memcpy(e->node, w->o_node, sizeof(e->node));
	for (uint32_t p = 0; p < k; p++)
		e->rule[p] = w->o[p].rule;
}

/* patch_words for frames [c, k) of the record, k = n - 1 (all but the
 * innermost), through the path memo: when the words there now are a path
 * the memo holds (read into cur, all k of them: four per gather), the
 * entry's rules, those of the record it was made from, say whether
 * patching would succeed: that record was consistent, so the rule of each
 * of its words' targets was the rule of the frame the word leads to
 * (entry rule[p - 1] for ra[p]; rules of one generation), and if these are
 * the rules of our record's frames, each word that changed has the rule
 * patch_frames requires.  Then the words are patched in and the nodes
 * copied from the entry.  Saved-rbp words that matter (bp) must hold, as
 * in patch_frames.  Returns false, the record untouched, where the memo
 * does not say (patch_words then decides). */
__attribute__((target("avx2"), noinline)) static bool
memo_patch_avx2(struct thread_walk *w, uint32_t c, uint32_t k, bool bp)
{
	uint64_t *cur = w->cur;
#define GATHER4(i) _mm256_storeu_si256((__m256i *)(void *)(cur + (i)), \
		_mm256_i64gather_epi64((const long long *)0, LOAD4(w->o_at + (i)), 1))
	GATHER4(k - 4);
	for (uint32_t i = 0; i + 4 < k; i += 4)
		GATHER4(i);
#undef GATHER4
	uint64_t h = memo_hash_avx2(cur, k);
	struct memo_entry *e = memo_find_avx2(w, cur, k, h);
	if (!e || e->gen != w->gen)
		return false;
	/* the rules of frames [c - 1, k - 1): the frames the words that may
	 * have changed, [c, k), lead to (k - c >= 4) */
	const long long *rules = (const long long *)(const void *)&w->o[0].rule;
	const __m256i stride = _mm256_set_epi64x(24, 16, 8, 0);	/* a frame: 8 words */
	_Static_assert(sizeof(struct frame) == 64, "frames of 8 words");
#define RULE_DIFF(i) _mm256_xor_si256(LOAD4(e->rule + (i)), _mm256_i64gather_epi64( \
		rules + 8 * (i), stride, 8))
	__m256i diff = RULE_DIFF(k - 5);
	for (uint32_t i = c - 1; i + 5 < k; i += 4)
		diff = _mm256_or_si256(diff, RULE_DIFF(i));
#undef RULE_DIFF
	if (!_mm256_testz_si256(diff, diff))
		return false;
	if (bp)
		for (uint32_t i = 0, m = w->o[k - 1].rbp; i < m; i++)
			if (BW_DIFF(w->o[w->bwm_at[i]]))
				return false;
	for (uint32_t p = c; p < k; p++) {
		w->o[p].ra = cur[p];
		w->o_ra[p] = cur[p];
	}
	memcpy(w->o_node, e->node, sizeof(e->node));
	w->nodes = k;
	if (w->phs > c)
		w->phs = c;
	return true;
}
#undef LOAD4

/* Brings frames o[lo, top) of the record up to date where their return
 * addresses changed but not the shape of the stack: a frame p whose
 * return-address word no longer holds what was read now leads to the
 * target word - 1; if that target's rule is the rule recorded for frame
 * p - 1 (the frame it leads to), unwinding frame p - 1 from its recorded
 * state gives what it gave before (the same CFA: bp, where a CFA depends
 * on it, comes from the saved-rbp words, which bp says must hold what was
 * read, or from the innermost frame's state, which the caller compared),
 * so the rest of the record stands and only frame p's return address
 * changes.  Frames [lo, top) are so read (the caller found [0, lo)
 * holding their words), so the record is then exactly the walk of today's
 * words.  Returns false (the general walk takes
 * over) at a change it cannot so absorb: a zero return address, the
 * outermost frame's (what ended the walk is not recorded), another rule,
 * a saved-rbp word that matters; the frames patched until then are
 * consistent with the rest, and their nodes are dropped. */
HOT bool patch_frames(struct thread_walk *w, uint32_t lo, uint32_t top, bool bp)
{
	struct frame *o = w->o;
	uint32_t chg = top;
	bool ok = true;
	for (uint32_t p = top; p-- > lo;) {
		uint64_t v = WORD(w->o_at[p]);
		if (__builtin_expect(bp, 0) && BW_DIFF(o[p])) {
			ok = false;
			break;
		}
		if (v == w->o_ra[p])
			continue;
		if (!v || !p || rule_of_ra(w, v)->packed != o[p - 1].rule) {
			ok = false;
			break;
		}
		o[p].ra = v;
		w->o_ra[p] = v;
		chg = p;
	}
	if (w->nodes > chg)
		w->nodes = chg;
	return ok;
}
HOT bool patch_words(struct thread_walk *w, uint32_t lo, uint32_t top, bool bp)
{
	/* one loop without the saved-rbp words (the common case), one with */
	return bp ? patch_frames(w, lo, top, true) : patch_frames(w, lo, top, false);
}

/* Patches frames [c, top) (see patch_words; top: n, or n - 1 where the
 * innermost frame was replaced): after a deep change through the path
 * memo. */
HOT bool patch_deep(struct thread_walk *w, uint32_t c, uint32_t top, bool bp)
{
	uint32_t k = w->n - 1;
	if (use_gather > 0 && c > 0 && k <= MEMO_MAX && k >= c + MEMO_MIN &&
	    memo_patch_avx2(w, c, k, bp))
		return top == k || patch_words(w, k, top, bp);
	return patch_words(w, c, top, bp);
}

/* The common cases, without the general walk's bookkeeping:
 * (a) The innermost frame has the state it had in the previous walk (same
 * sp and rule, same bp where a CFA from there out depends on it): the
 * record is today's walk once the frames whose return addresses changed
 * are patched (patch_words).
 * (b) Otherwise the innermost frame is unwound (as the general walk does),
 * and if the frame it leads to has the state of the previous walk's
 * second frame (same sp, the rule of the new return address equal to the
 * one recorded there, same bp where it matters), only the innermost frame
 * is replaced, and the others patched as in (a).
 * Returns the frames recorded, or 0 to leave it to the general walk.
 *
 * With ic (the stack id wanted, lead its innermost address or 0), the near
 * cache is asked for the stack id (see near_hit: *hit, left alone on a
 * miss). */
HOT uint32_t walk_near(struct thread_walk *w, uint64_t pc, uint64_t sp, uint64_t bp,
		       struct ml_intern_cache *ic, uint64_t lead, uint32_t *hit)
{
	uint32_t n = w->n;
	if (n < 2)
		return 0;
	struct frame *f0 = &w->o[n - 1], *f1 = f0 - 1;
	/* f0's rule is pc0's (the record's rules are the current ones) */
	struct l1_slot rule = { .packed = pc == w->pc0 ? f0->rule : rule_of(w, pc)->packed };
	const struct l1_slot *r = &rule;
	const struct near_slot *ns = NULL;
	if (f0->sp == sp && same_state(f0, r->packed, bp, BIT_BP_OK)) {
		/* (a) */
		bool bpm = bp_matters(f0);
		if (ic && lead && w->nodes >= n)
			ns = near_slot(w, w->o_node[n - 2], f0->ra, lead);
		/* f0's own word apart: it changes whenever the innermost
		 * function is called from another site, and then the check of
		 * the others still finds them all holding (no scan for the
		 * first change). */
		const struct frame *c = first_changed(w, f0, bpm);
		if (c == f0 && !(RA_DIFF(*f0) | (bpm ? BW_DIFF(*f0) : 0)))
			c = f0 + 1;
		if (c != f0 + 1 && !patch_deep(w, (uint32_t)(c - w->o), n, bpm))
			return 0;
		if (ns && w->nodes >= n)
			near_hit(w, ns, f0, w->o_node[n - 2], lead, hit);
		w->pc0 = pc;
		return n;
	}
	uint64_t cfa = ((r->fbits & BIT_RBP_CFA) ? bp : sp) + (uint64_t)(int64_t)r->cfa_off;
	if (cfa != f1->sp || cfa <= sp || (cfa & 7) ||
	    (r->flags & (ML_RULE_BAD | ML_RULE_RA_UNDEF)))
		return 0;
	uint64_t ra = *(const uint64_t *)(uintptr_t)(cfa - 8), bw_at = NO_BW_AT, bw = 0, bp1 = bp;
	uint32_t bits1 = BIT_BP_OK;
	/* Where rbp entering f1 matters (f1 live): f0's saved word, if it
	 * saves one, does too, and rbp's value entering f1 is compared; f0's
	 * own liveness as settle gives it.  (Elsewhere same_state compares
	 * f1's rule alone.) */
	bool bwm = false;
	uint32_t live0 = (r->fbits & BIT_RBP_CFA) ? BIT_LIVE : 0;
	if (__builtin_expect((f1->bits & BIT_LIVE) != 0, 0)) {
		if (r->flags & ML_RULE_RBP_SAVED) {
			bwm = true;
			bw_at = cfa + (uint64_t)(int64_t)r->bp_off;
			bp1 = bw = *(const uint64_t *)(uintptr_t)bw_at;
		} else if (r->flags & ML_RULE_RBP_UNDEF) {
			bits1 = 0;
		} else {
			live0 = BIT_LIVE;	/* rbp passes through to f1 */
		}
	}
	if (!ra || !same_state(f1, rule_of_ra(w, ra)->packed, bp1, bits1))
		return 0;
	/* (b): f0 becomes the new innermost frame (f1's state is its). */
	if (ic && lead && w->nodes >= n - 1)
		ns = near_slot(w, w->o_node[n - 2], ra, lead);
	bool node_kept = ra == f0->ra && w->nodes >= n;
	f0->sp = sp;
	f0->bp = bp;
	f0->bits = (uint8_t)(BIT_BP_OK | r->fbits | live0);
	f0->rule = r->packed;
	f0->ra_at = cfa - 8;
	f0->ra = ra;
	w->o_at[n - 1] = cfa - 8;
	w->o_ra[n - 1] = ra;
	f0->bw_at = bw_at;
	f0->bw = bw;
	if (__builtin_expect(bwm, 0))
		w->bwm_at[f1->rbp] = (uint16_t)(n - 1);
	f0->rbp = (uint16_t)(f1->rbp + bwm);
	if (!node_kept && w->nodes >= n)
		w->nodes = n - 1;
	w->pc0 = pc;
	bool bpm = bp_matters(f1);
	const struct frame *c = first_changed(w, f0, bpm);
	if (c != f0 && !patch_deep(w, (uint32_t)(c - w->o), n - 1, bpm))
		return 0;
	if (ns && w->nodes >= n - 1)
		near_hit(w, ns, f0, w->o_node[n - 2], lead, hit);
	return n;
}

HOT uint32_t wm_set_of(uint64_t lead, uint64_t sp)
{
	uint64_t h = (lead ^ (sp * 0x9e3779b97f4a7c15ull)) * 0xd6e8feb86659fd93ull;
	return (uint32_t)(h >> (64 - WM_BITS));
}

/* Whether some of an entry's words no longer hold what was read: four per
 * AVX2 gather where there is one, else one at a time. */
HOT bool wm_changed(const struct wm_entry *e)
{
	if (use_gather > 0)
		return changed_gather(e->at, e->val, e->words);
	uint64_t diff = 0;
	for (uint32_t i = 0; i < e->words; i++)
		diff |= *(const volatile uint64_t *)(uintptr_t)e->at[i] ^ e->val[i];
	return diff != 0;
}

/* The walk memo's stack id for the walk from the mark (lead, sp, bp), 0
 * when no entry has it (see struct wm_entry).  Called with the record held
 * (see walk: a signal handler's walk meanwhile takes libunwind's way and
 * leaves the entries alone).  An entry's innermost two words are compared
 * first, alone: another caller's walk from the same start usually differs
 * there, and then costs no gather. */
static __attribute__((noinline)) uint32_t
wm_get(struct thread_walk *w, uint64_t lead, uint64_t sp, uint64_t bp)
{
	uint32_t set = wm_set_of(lead, sp);
	const uint64_t *t = w->wm_sets[set].sp;
	for (uint32_t way = 0; way < WM_WAYS; way++) {
		const struct wm_entry *e = &w->wm[set][way];
		if (t[way] != sp || e->lead != lead || e->gen != w->gen ||
		    (e->bp_in && e->bp != bp) ||
		    *(const volatile uint64_t *)(uintptr_t)e->at[0] != e->val[0] ||
		    *(const volatile uint64_t *)(uintptr_t)e->at[1] != e->val[1])
			continue;
		if (!wm_changed(e))
			return e->node;
	}
	return 0;
}

/* Keeps the record's walk (today's, from the mark (lead, sp, bp), run to
 * the thread's root) with its stack id node: in a free way of its set,
 * else over the set's next way.  Walks of more words than an entry holds
 * are not kept. */
static __attribute__((noinline)) void wm_put(struct thread_walk *w, uint64_t lead, uint64_t sp,
					    uint64_t bp, uint32_t node)
{
	uint32_t n = w->n, nb = n ? w->o[n - 1].rbp : 0, words = n + nb;
	if (!n || words > WM_WORDS)
		return;
	uint32_t set = wm_set_of(lead, sp), way = 0;
	struct wm_set *s = &w->wm_sets[set];
	while (way < WM_WAYS && s->sp[way])
		way++;
	if (way == WM_WAYS) {
		way = s->next;
		s->next = (way + 1) % WM_WAYS;
	}
	struct wm_entry *e = &w->wm[set][way];
	for (uint32_t i = 0; i < n; i++) {	/* innermost first (see wm_get) */
		e->at[i] = w->o_at[n - 1 - i];
		e->val[i] = w->o_ra[n - 1 - i];
	}
	for (uint32_t i = 0; i < nb; i++) {
		const struct frame *b = &w->o[w->bwm_at[i]];
		e->at[n + i] = b->bw_at;
		e->val[n + i] = b->bw;
	}
	for (; words < 4; words++) {	/* a gather reads four: the first again */
		e->at[words] = e->at[0];
		e->val[words] = e->val[0];
	}
	e->words = words;
	e->lead = lead;
	e->sp = sp;
	e->bp = bp;
	e->bp_in = (w->o[n - 1].bits & BIT_LIVE) != 0;
	e->gen = w->gen;
	e->node = node;
	s->sp[way] = sp;
}

/* Walks from (pc, sp, bp), pc being the target of the innermost frame,
 * into the thread's record.  Returns the frames recorded, or -1 when a
 * frame's rule is not one it handles. */
HOT int walk_in(struct thread_walk *w, uint64_t pc, uint64_t sp, uint64_t bp, uint32_t limit,
	       struct ml_intern_cache *ic, uint64_t lead, uint32_t *hit)
{
	uint32_t gen = __atomic_load_n(&ml_unwind_gen, __ATOMIC_ACQUIRE);
	if (__builtin_expect(w->gen != gen, 0)) {
		/* New rules: the copies go, and the record with them. */
		memset(w->l1, 0, sizeof(w->l1));
		w->gen = gen;
		w->reuse = 0;
	}
	bool usable = w->reuse == limit;	/* see fresh */
	w->general = 0;
	if (usable) {
		uint32_t near = walk_near(w, pc, sp, bp, ic, lead, hit);
		if (near)
			return (int)near;
	}
	if (ic && lead && pc == lead - 1) {
		/* the walk memo (see struct wm_entry); a walk that ends in the
		 * general walk below offers it its result (unwind_from) */
		uint32_t node = wm_get(w, lead, sp, bp);
		if (node) {
			*hit = node;
			return WALK_MEMO;
		}
		w->general = 1;
	}
	const struct frame *o = w->o, *last = o + (usable ? w->n : 0) - 1;
	const struct frame *k = last;	/* the old frame with the lowest sp >= ours */
	const struct frame *clean = NULL;	/* o[0, clean) hold their words, once known */
	struct frame *y = w->y, *f = y, *fend = y + limit;
	uint64_t target = pc;
	uint32_t bits = BIT_BP_OK;
	uint32_t stop = ML_RULE_BAD | ML_RULE_RA_UNDEF;
	for (;;) {
		const struct l1_slot *r = rule_of(w, target);
		while (k >= o && k->sp < sp)
			k--;
		if (k >= o && k->sp == sp && same_state(k, r->packed, bp, bits)) {
			if (!clean)
				clean = first_changed(w, k + 1, bp_matters(k));
			if (k < clean && (f - y) + (k - o) + 1 <= limit)
				break;
		}
		if (f == fend)
			return fresh(w, (uint32_t)(f - y), END_LIMIT, pc, sp, limit);
		uint64_t cfa = ((r->fbits & BIT_RBP_CFA) ? bp : sp) + (uint64_t)(int64_t)r->cfa_off;
		if (cfa <= sp || (cfa & 7))
			return -1;	/* the stack must grow up as we walk out */
		if (__builtin_expect(r->flags & stop, 0)) {
			if (r->flags & (ML_RULE_BAD | ML_RULE_CFA_RBP))
				return -1;
			return fresh(w, (uint32_t)(f - y), END_OUTERMOST, pc, cfa, limit);
		}
		uint64_t ra = *(const uint64_t *)(uintptr_t)(cfa - 8);
		f->sp = sp;
		f->bp = bp;
		f->bits = (uint8_t)(bits | r->fbits);
		f->rule = r->packed;
		f->ra_at = cfa - 8;
		f->ra = ra;
		f->bw_at = NO_BW_AT;
		f->bw = 0;
		if (r->flags & (ML_RULE_RBP_SAVED | ML_RULE_RBP_UNDEF)) {
			if (r->flags & ML_RULE_RBP_SAVED) {
				f->bw_at = cfa + (uint64_t)(int64_t)r->bp_off;
				bp = f->bw = *(const uint64_t *)(uintptr_t)f->bw_at;
			} else {
				bits = 0;
				stop |= ML_RULE_CFA_RBP;
			}
		}
		sp = cfa;
		if (__builtin_expect(ra == 0, 0))
			return fresh(w, (uint32_t)(f - y), END_ZERO_RA, pc, sp, limit);
		f++;
		target = ra - 1;	/* inside the call instruction */
	}
	/* Reused: o[0 .. k] is the rest of this walk. */
	settle(w, (uint32_t)(k - o) + 1, (uint32_t)(f - y));
	w->pc0 = pc;
	return (int)w->n;
}
#undef RA_DIFF
#undef BW_DIFF
#undef WORD

/* Runs walk_in with the thread's record held; -1 when busy (a signal
 * handler interrupted a walk on this thread: libunwind serves it) or
 * declined.  On success the record stays held: walk_done releases it. */
HOT int walk(struct thread_walk *w, uint64_t pc, uint64_t sp, uint64_t bp, uint32_t limit,
	    struct ml_intern_cache *ic, uint64_t lead, uint32_t *hit)
{
	if (!w || limit > WALK_MAX)
		return -1;
	uint32_t hold = w->hold;
	if (__builtin_expect(hold != 0, 0)) {
		/* A thread whose stacks keep going through code we decline
		 * (JIT code without CFI, say) tries again only every 64th
		 * capture: libunwind would otherwise follow a wasted partial
		 * walk every time. */
		if ((hold & HOLD_BUSY) ||
		    (hold >= 8 * HOLD_DECLINED && (++w->tick & 63)))
			return -1;
		w->hold = hold | HOLD_BUSY;
	} else {
		w->hold = HOLD_BUSY;
	}
	__asm__ volatile("" ::: "memory");
	int n = walk_in(w, pc, sp, bp, limit, ic, lead, hit);
	if (__builtin_expect(n < 0, 0) && n != WALK_MEMO) {
		w->end = 0;	/* the record may be half written */
		w->reuse = 0;
		w->n = w->nodes = 0;
		__asm__ volatile("" ::: "memory");
		/* (a signal handler meanwhile found it busy and left it) */
		uint32_t declined = w->hold & ~HOLD_BUSY;
		if (declined < 8 * HOLD_DECLINED)
			declined += HOLD_DECLINED;
		w->hold = declined;	/* released, one more declined */
		return -1;
	}
	return n;
}

/* Releases the record after a walk that succeeded (no longer declining). */
HOT void walk_done(struct thread_walk *w)
{
	__asm__ volatile("" ::: "memory");
	w->hold = 0;
}

/* Frame i (innermost = 0) of the record. */
HOT const struct frame *frame_at(const struct thread_walk *w, uint32_t i)
{
	return &w->o[w->n - 1 - i];
}


/* The walk's start: the mark if a hook (or ml_thread_on_side_stack) set
 * one, else the given registers (the caller's own frame).  A marked frame
 * is live: we are called from inside it, maybe on the side stack (so not
 * necessarily above us on this stack), and the mark is cleared before it
 * returns.  *lead: the return address into the marked frame's caller,
 * the stack's first address (0 for registers: the walk's first frame is
 * the caller's own). */
HOT void start_point(uint64_t *pc, uint64_t *sp, uint64_t *bp, uint64_t *lead)
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
	uint32_t hit;
	int n = walk(w, pc, sp, bp, limit - (lead != 0), NULL, 0, &hit);
	if (n < 0)
		return -1;
	uint32_t o = 0;
	if (lead)
		buf[o++] = lead;
	for (uint32_t i = 0; i < (uint32_t)n; i++)
		buf[o++] = frame_at(w, i)->ra;
	walk_done(w);
	return (int)o;
}

/* Gives frames o[0, upto) of the record their trie nodes, outermost
 * first; returns o[upto - 1]'s (ML_NODE_ROOT for none), 0 when the stack
 * table has no room (nodes stay valid up to there).  Many of them to find
 * (a deep change): from the path memo if it has the path. */
HOT uint32_t set_nodes(struct thread_walk *w, struct ml_intern_cache *ic, uint32_t upto)
{
	uint32_t p = w->nodes;
	if (p >= upto)
		return upto ? w->o_node[upto - 1] : ML_NODE_ROOT;
	uint32_t k = 0;
	uint64_t hash = 0;
	if (__builtin_expect(upto - p >= MEMO_MIN, 0)) {
		k = upto < MEMO_MAX ? upto : MEMO_MAX;
		if (use_gather > 0 ? memo_get_avx2(w, k, &hash) : memo_get_plain(w, k, &hash)) {
			ph_upto(w, p);	/* o_ph past p: not made */
			w->nodes = p = k;
			k = 0;
			if (p >= upto)
				return w->o_node[upto - 1];
		}
	}
	/* First the slots of all the lookups, by a hash of each frame's path
	 * (no node needed): their lines are asked for together, and the
	 * lookups, each needing its parent's node, then find them on the way. */
	uint32_t q = w->phs < p ? w->phs : p;	/* o_ph valid below q */
	uint64_t ph = q ? w->o_ph[q - 1] : PATH_SEED;
	for (; q < upto; q++) {
		w->o_ph[q] = ph = path_hash(w, ph, q);
		__builtin_prefetch(&ic->l0[ph >> (64 - 12)]);
	}
	w->phs = upto;
	uint32_t parent = p ? w->o_node[p - 1] : ML_NODE_ROOT;
	for (; p < upto; p++) {
		parent = ml_stacktab_child_at(ic, w->o_ph[p], parent, w->o_ra[p]);
		if (!parent)
			break;
		w->o_node[p] = parent;
	}
	w->nodes = p;
	if (k && p >= k)
		memo_put(w, k, hash);
	return parent;
}

/* The stack id of the record's frames below lead (the innermost address):
 * frame 0's node and lead's through the near cache. */
HOT uint32_t lead_node(struct thread_walk *w, struct ml_intern_cache *ic, uint64_t lead)
{
	uint32_t n = w->n;
	uint32_t parent = set_nodes(w, ic, n - 1);
	if (!parent)
		return 0;
	struct frame *f0 = &w->o[n - 1];
	struct near_slot *s = near_slot(w, parent, f0->ra, lead);
	if (s->ra0 == f0->ra && s->lead == lead && s->parent == parent) {
		w->o_node[n - 1] = s->node0;
		ph_upto(w, n - 1);
		w->nodes = n;
		return s->node;
	}
	uint32_t node0 = w->nodes >= n ? w->o_node[n - 1] :
		ml_stacktab_child_cached(ic, parent, f0->ra);
	if (!node0)
		return 0;
	w->o_node[n - 1] = node0;
	ph_upto(w, n - 1);
	w->nodes = n;
	uint32_t node = ml_stacktab_child_cached(ic, node0, lead);
	if (node)
		*s = (struct near_slot){ f0->ra, lead, parent, node0, node, 0 };
	return node;
}

/* The stack id of the walk from (pc, sp, bp), lead being the mark's
 * return address (0: none, the walk starts at the caller's own frame),
 * with the thread's record w (ML_NODE_LOST without room for a node), or 0
 * for the slow path. */
HOT uint32_t unwind_from(struct thread_walk *w, struct ml_intern_cache *ic, uint64_t pc,
			 uint64_t sp, uint64_t bp, uint64_t lead)
{
	uint32_t max_depth = ml_config.max_depth;
	uint32_t hit = 0, limit = max_depth + CAPTURE_SLACK + (lead == 0);
	int n = walk(w, pc, sp, bp, limit, ic, lead, &hit);
	if (n == WALK_MEMO) {	/* the walk memo's stack id */
		walk_done(w);
		return hit;
	}
	if (n < 0)
		return 0;
	uint32_t node = 0;
	if (w->end != END_LIMIT) {	/* cut at the limit: the slow path */
		/* The innermost frames inside the runtime are not the program's:
		 * the lead (if any) is address 0, frame i's return address is
		 * address i + 1 (without a lead: i). */
		uint64_t skip_lo = ml_skip.lo, range = ml_skip.range;
		uint32_t lead_n = lead != 0, total = (uint32_t)n + lead_n, skip = 0;
		if (!lead || lead - skip_lo < range) {
			skip = lead_n;
			while (skip < total && frame_at(w, skip - lead_n)->ra - skip_lo < range)
				skip++;
		}
		if (total - skip <= max_depth) {
			if (!skip && lead && n)
				node = hit ? hit : lead_node(w, ic, lead);
			else if ((node = set_nodes(w, ic, w->n)) && !skip && lead)
				node = ml_stacktab_child_cached(ic, node, lead);
			else if (node && skip > lead_n)
				node = skip - lead_n < (uint32_t)n ?
					w->o_node[w->n - 1 - (skip - lead_n)] : ML_NODE_ROOT;
			if (!node)
				node = ML_NODE_LOST;
		}
	}
	if (w->general && node && node != ML_NODE_LOST && w->end == END_OUTERMOST &&
	    w->reuse == limit)
		wm_put(w, lead, sp, bp, node);
	walk_done(w);
	return node;
}

/* The walk of ml_unwind_stack: from the mark, else from here. */
HOT uint32_t unwind_stack(struct ml_intern_cache *ic)
{
	uint64_t pc, sp, bp, lead;
	HERE(pc, sp, bp);
	start_point(&pc, &sp, &bp, &lead);
	return unwind_from(walk_get(), ic, pc, sp, bp, lead);
}

/* Decorating rooms, MEMLINE_VERIFY_UNWIND, the walker off or declining. */
static uint32_t __attribute__((noinline)) unwind_stack_other(struct ml_intern_cache *ic)
{
	if (ml_rooms_decorating)
		return ml_stacktab_here_rooms(ic);
	uint32_t node = 0;
	if (ml_config.fast_unwind && ml_unwind_gen)
		node = unwind_stack(ic);
	if (!node)
		return ml_stacktab_here_slow(ic);
	if (ml_config.verify_unwind && node != ML_NODE_LOST)
		ml_stacktab_verify(node);
	return node;
}

/* Without a frame pointer of its own (one register more, no frame set up:
 * its CFI describes its frame; rbp, untouched, keeps its caller's). */
#if defined(__GNUC__) && !defined(__clang__)
#define OWN_FRAME_OMITTED __attribute__((optimize("omit-frame-pointer")))
#else
#define OWN_FRAME_OMITTED
#endif
uint32_t __attribute__((noinline)) OWN_FRAME_OMITTED
ml_unwind_stack(struct ml_intern_cache *ic)
{
	if (__builtin_expect(!ml_capture_fast || ml_rooms_decorating, 0))
		return unwind_stack_other(ic);
	uint32_t node = unwind_stack(ic);
	if (__builtin_expect(!node, 0))
		return ml_stacktab_here_slow(ic);
	return node;
}

/* ml_unwind_stack's other cases: the walker off or declining, decorating
 * rooms, MEMLINE_VERIFY_UNWIND. */
static uint32_t __attribute__((noinline)) unwind_stack_rest(struct ml_intern_cache *ic)
{
	if (__builtin_expect(!ml_capture_fast || ml_rooms_decorating, 0))
		return unwind_stack_other(ic);
	return ml_stacktab_here_slow(ic);
}

/* The common allocation on the side stack (ml_track_alloc_heap's target:
 * the heap, exact mode, the hook's mark set, t the calling thread's
 * state): the walk from the mark inline, with t's record and cache, then
 * the bookkeeping in a tail call (ml_track_heap_stack): one frame, whose
 * registers the walk alone uses.  errno is kept from here, the walk's
 * slow paths included. */
long ml_unwind_heap_event(uint64_t ptr, uint64_t size, void *arg)
{
	struct ml_thread *t = arg;
	int *e = t->errno_at, saved = *e;
	const struct ml_unwind_mark *m = &ml_tl_mark;
	uint64_t lead = m->ra;
	struct thread_walk *w = t->walk;
	uint32_t node = 0;
	if (__builtin_expect(ml_capture_fast && w != NULL && lead != 0, 1))	/* (rooms: off) */
		node = unwind_from(w, &t->intern, lead - 1, m->sp, m->bp, lead);
	if (__builtin_expect(!node, 0))
		node = w ? unwind_stack_rest(&t->intern) : ml_unwind_stack(&t->intern);
	return ml_track_heap_stack(ptr, size, t, node, saved);
}

/* ml_core_native_stack (core.h): the walk of ml_unwind_heap_event, asked
 * by a room that decorates (whose captures otherwise take the full path). */
uint32_t ml_unwind_native_stack(struct ml_intern_cache *ic)
{
	const struct ml_unwind_mark *m = &ml_tl_mark;
	if (!m->sp || !m->ra || !ml_unwind_gen)
		return 0;
	struct thread_walk *w = walk_get();
	return w ? unwind_from(w, ic, m->ra - 1, m->sp, m->bp, m->ra) : 0;
}

/* ---- a room's native frames: from the mark to an address range ---- */

/* The frames of a room's stack below its own (the Python room: a Python
 * object's native frames end at the innermost eval-loop frame): from the
 * hook's mark outwards, only as far as the first return address in
 * [lo, lo + span), with the rules and the thread's copies of them that
 * every walk uses (the words are those the full walk reads, so the
 * addresses are those it finds).  The record is left alone: it stays the
 * previous full walk's.
 *
 * Such a walk is a function of its start (the mark's return address, sp
 * and, where a CFA comes from it before a saved rbp replaces it, rbp) and
 * of the words it reads that matter (return addresses; saved rbp values
 * some CFA comes from): a per-thread cache keyed by the start keeps the
 * walk's words and addresses, and a start found there whose words still
 * hold them has its walk without a rule looked up. */
#define UNTIL_SET_BITS 5u
#define UNTIL_WAYS 4u		/* starts alike, other words: other callers */
#define UNTIL_FRAMES 12u		/* longer walks are not kept */
#define UNTIL_WORDS (2u * UNTIL_FRAMES)

struct until_entry {
	uint64_t lead, sp, bp;	/* the start (bp: when bp_in) */
	uint64_t token;		/* 0: empty */
	uint32_t gen, n, words, bp_in;
	uint64_t at[UNTIL_WORDS], val[UNTIL_WORDS];
	uint64_t ras[UNTIL_FRAMES];
};

struct ml_until_cache {
	uint64_t serial;	/* tokens handed out */
	uint8_t next[1u << UNTIL_SET_BITS];	/* the way a set replaces next */
	/* Each way's start sp, side by side: a set's ways are told apart on
	 * one line before one entry is read (0: empty). */
	uint64_t sp[1u << UNTIL_SET_BITS][UNTIL_WAYS];
	struct until_entry e[1u << UNTIL_SET_BITS][UNTIL_WAYS];
};

void ml_unwind_until_reset(void *cache)
{
	if (cache)
		memset(cache, 0, sizeof(struct ml_until_cache));
}

HOT uint32_t until_set(uint64_t lead, uint64_t sp)
{
	uint64_t h = (lead ^ (sp * 0x9e3779b97f4a7c15ull)) * 0xd6e8feb86659fd93ull;
	return (uint32_t)(h >> (64 - UNTIL_SET_BITS));
}

/* Whether e is the walk from (lead, sp, bp) as it would be now. */
HOT bool until_holds(const struct until_entry *e, uint64_t lead, uint64_t sp, uint64_t bp,
		     uint32_t gen)
{
	if (!e->token || e->lead != lead || e->sp != sp || (e->bp_in && e->bp != bp) ||
	    e->gen != gen)
		return false;
	uint64_t diff = 0;
	for (uint32_t i = 0; i < e->words; i++)
		diff |= *(const volatile uint64_t *)(uintptr_t)e->at[i] ^ e->val[i];
	return !diff;
}

/* The walk itself into ras[0, max) (see ml_unwind_until); e gets what a
 * later start may check to reuse it (its token then left to the caller),
 * or is emptied. */
static int __attribute__((noinline))
until_walk(uint64_t *ras, uint32_t max, uint64_t lo, uint64_t span, uint64_t lead, uint64_t sp,
	   uint64_t bp, struct until_entry *e)
{
	bool keep = true;
	uint64_t lead0 = lead, sp0 = sp, bp0 = bp;
	struct thread_walk *w = walk_get();
	if (!w)
		return -1;
	uint32_t hold = w->hold;
	if (hold & HOLD_BUSY)
		return -1;
	w->hold = hold | HOLD_BUSY;	/* l1 is ours (see walk) */
	__asm__ volatile("" ::: "memory");
	uint32_t gen = __atomic_load_n(&ml_unwind_gen, __ATOMIC_ACQUIRE);
	if (__builtin_expect(w->gen != gen, 0)) {
		memset(w->l1, 0, sizeof(w->l1));
		w->gen = gen;
		w->reuse = 0;
	}
	/* The words read, and whether each matters (a saved rbp only when a
	 * CFA comes from it); bp_src: the word rbp holds now, -1 the start's. */
	uint64_t at[UNTIL_WORDS], val[UNTIL_WORDS];
	bool used[UNTIL_WORDS];
	uint32_t words = 0, bp_in = 0;
	int bp_src = -1;
	int n = 0;
	ras[n++] = lead;
	uint64_t target = lead - 1;
	uint32_t stop = ML_RULE_BAD | ML_RULE_RA_UNDEF;
	while (lead - 1 - lo >= span) {
		if ((uint32_t)n == max) {
			n = -1;
			break;
		}
		const struct l1_slot *r = rule_of(w, target);
		uint64_t cfa = ((r->fbits & BIT_RBP_CFA) ? bp : sp) + (uint64_t)(int64_t)r->cfa_off;
		/* As walk_in; its outermost frame too: the range was not met. */
		if (cfa <= sp || (cfa & 7) || (r->flags & stop)) {
			n = -1;
			break;
		}
		if (r->fbits & BIT_RBP_CFA) {
			if (bp_src < 0)
				bp_in = 1;
			else
				used[bp_src] = true;
		}
		lead = *(const uint64_t *)(uintptr_t)(cfa - 8);
		if (words < UNTIL_WORDS) {
			at[words] = cfa - 8;
			val[words] = lead;
			used[words++] = true;
		} else {
			keep = false;
		}
		if (r->flags & ML_RULE_RBP_SAVED) {
			uint64_t bw_at = cfa + (uint64_t)(int64_t)r->bp_off;
			bp = *(const uint64_t *)(uintptr_t)bw_at;
			if (words < UNTIL_WORDS) {
				at[words] = bw_at;
				val[words] = bp;
				used[words] = false;
				bp_src = (int)words++;
			} else {
				keep = false;
			}
		} else if (r->flags & ML_RULE_RBP_UNDEF) {
			stop |= ML_RULE_CFA_RBP;
		}
		sp = cfa;
		if (!lead) {
			n = -1;
			break;
		}
		ras[n++] = lead;
		target = lead - 1;
	}
	__asm__ volatile("" ::: "memory");
	w->hold = hold;
	e->token = 0;
	if (keep && n > 0 && (uint32_t)n <= UNTIL_FRAMES) {
		uint32_t k = 0;
		for (uint32_t i = 0; i < words; i++)
			if (used[i]) {
				e->at[k] = at[i];
				e->val[k++] = val[i];
			}
		e->words = k;
		e->bp_in = bp_in;
		e->gen = gen;
		e->n = (uint32_t)n;
		memcpy(e->ras, ras, (size_t)n * sizeof(*ras));
		e->lead = lead0;
		e->sp = sp0;
		e->bp = bp0;
		e->token = 1;
	}
	return n;
}

int ml_unwind_until(struct ml_native_path *out, uint64_t *buf, uint32_t max, uint64_t lo,
		    uint64_t span)
{
	const struct ml_unwind_mark *m = &ml_tl_mark;
	if (!m->sp || !max || !ml_unwind_gen)
		return -1;
	uint64_t lead = m->ra, sp = m->sp, bp = m->bp;
	if (!lead || lead - ml_skip.lo < ml_skip.range)
		return -1;	/* the runtime's own frames first: the full capture */
	struct ml_thread *t = ml_thread_self();
	struct ml_until_cache *c = t ? t->until : NULL;
	if (__builtin_expect(!c, 0) && t)
		c = t->until = ml_arena_alloc(sizeof(*c));
	struct until_entry scratch, *e = &scratch;	/* without a cache: kept nowhere */
	if (c) {
		uint32_t set = until_set(lead, sp);
		uint32_t gen = __atomic_load_n(&ml_unwind_gen, __ATOMIC_ACQUIRE);
		struct until_entry *ways = c->e[set];
		for (uint32_t i = 0; i < UNTIL_WAYS; i++)
			if (c->sp[set][i] == sp && until_holds(&ways[i], lead, sp, bp, gen) &&
			    ways[i].n <= max) {
				out->ras = ways[i].ras;
				out->n = ways[i].n;
				out->token = ways[i].token;
				return (int)ways[i].n;
			}
		uint32_t way = c->next[set];
		c->next[set] = (uint8_t)((way + 1) % UNTIL_WAYS);
		c->sp[set][way] = 0;
		e = &ways[way];
		int n = until_walk(buf, max, lo, span, lead, sp, bp, e);
		out->ras = buf;
		out->n = n > 0 ? (uint32_t)n : 0;
		out->token = 0;
		if (e->token) {
			out->token = e->token = ++c->serial;
			c->sp[set][way] = sp;
		}
		return n;
	}
	int n = until_walk(buf, max, lo, span, lead, sp, bp, e);
	out->ras = buf;
	out->n = n > 0 ? (uint32_t)n : 0;
	out->token = 0;
	return n;
}
