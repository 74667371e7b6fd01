/* core/unwind.c - a fast x86-64 stack walker for the common case, with
 * libunwind (stacktab.c) as the fallback for everything else.
 *
 * How it stays exact: the unwind rule of an instruction address is a pure
 * function of the loaded code's .eh_frame, the same table libunwind reads.
 * For each address seen, we interpret its FDE once (CIE initial
 * instructions, then the FDE's up to that address) and keep only what a
 * walk needs when the rule has the simple form compilers emit:
 *   CFA = rsp + off  or  rbp + off;
 *   return address saved at CFA + off (or undefined: the outermost frame);
 *   rbp unchanged, saved at CFA + off, or undefined.
 * Anything else (a CFA expression such as the signal trampoline's, a
 * register moved to another register, a signal-frame CIE, no FDE at all,
 * a CFA that does not move up the stack) makes the whole capture fall back
 * to libunwind, which then sees the same stack as before.  The walk is
 * then exactly what libunwind's own DWARF walk computes: the same return
 * addresses, the same end.
 *
 * The per-address rules live in a lock-free cache (64K slots, mmap'd):
 * readers never lock; an insert takes a spinlock.  dlclose flushes it (an
 * address may then hold other code). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include "core/internal.h"

#define CACHE_MIN_BITS 12u	/* 64 KiB; doubles at half full */
#define CACHE_MAX_BITS 26u
#define L1_SLOTS 256u		/* per thread, in front of the shared cache */
#define PROBES 32u

#define REG_RBP 6u
#define REG_RSP 7u
#define REG_RA 16u

/* A packed rule: bits 0-31 CFA offset (signed), 32-47 rbp's slot offset
 * from the CFA (signed), 48-55 the return address's offset (signed), 56-63
 * flags.  0 is never a valid rule (F_VALID is always set). */
#define F_CFA_RBP 0x01u		/* CFA is rbp-based (else rsp-based) */
#define F_RBP_SAVED 0x02u	/* caller's rbp is at CFA + rbp offset */
#define F_RBP_UNDEF 0x04u	/* caller's rbp is unknown */
#define F_RA_UNDEF 0x08u	/* no caller: the outermost frame */
#define F_BAD 0x10u		/* not representable: use libunwind */
#define F_VALID 0x80u

struct slot {
	volatile uint64_t key;	/* the address the rule is for; 0 = empty */
	volatile uint64_t rule;
};

/* The shared rule cache.  A full table is replaced by one twice as big;
 * the old ones stay mapped (a reader may still be probing one) and are
 * cleared with the current one by ml_unwind_flush. */
struct rules {
	uint32_t bits;
	uint32_t count;
	struct slot *slots;
};
static struct rules tables[CACHE_MAX_BITS - CACHE_MIN_BITS + 1];
static struct rules *volatile cache;
static ml_spin_t insert_lock;

/* ---- reading DWARF encodings ---- */

struct cursor {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t uleb(struct cursor *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	for (;;) {
		if (c->p >= c->end || shift > 63) {
			c->bad = true;
			return 0;
		}
		uint8_t b = *c->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
}

static int64_t sleb(struct cursor *c)
{
	int64_t v = 0;
	unsigned shift = 0;
	uint8_t b;
	do {
		if (c->p >= c->end || shift > 63) {
			c->bad = true;
			return 0;
		}
		b = *c->p++;
		v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= -((int64_t)1 << shift);
	return v;
}

static uint64_t fixed(struct cursor *c, unsigned n)
{
	uint64_t v = 0;
	if ((size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	memcpy(&v, c->p, n);	/* little endian */
	c->p += n;
	return v;
}

/* A DW_EH_PE_* encoded pointer; datarel is relative to base. */
static uint64_t encoded(struct cursor *c, uint8_t enc, uint64_t base)
{
	const uint8_t *at = c->p;
	uint64_t v;
	if (enc == 0xff)	/* omit */
		return 0;
	switch (enc & 0x0f) {
	case 0x00: v = fixed(c, 8); break;
	case 0x01: v = uleb(c); break;
	case 0x02: v = fixed(c, 2); break;
	case 0x03: v = fixed(c, 4); break;
	case 0x04: v = fixed(c, 8); break;
	case 0x09: v = (uint64_t)sleb(c); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)fixed(c, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)fixed(c, 4); break;
	case 0x0c: v = fixed(c, 8); break;
	default: c->bad = true; return 0;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += (uint64_t)(uintptr_t)at; break;		/* pcrel */
	case 0x30: v += base; break;				/* datarel */
	default: c->bad = true; return 0;
	}
	if (enc & 0x80)		/* indirect: never used for what we read */
		c->bad = true;
	return v;
}

/* ---- finding the FDE of an address (.eh_frame_hdr's sorted table) ---- */

/* The FDE covering addr, or NULL. */
static const uint8_t *find_fde(uint64_t addr)
{
	struct dl_find_object fo;
	if (_dl_find_object((void *)(uintptr_t)addr, &fo) != 0 || !fo.dlfo_eh_frame)
		return NULL;
	const uint8_t *hdr = fo.dlfo_eh_frame;
	if (hdr[0] != 1 || hdr[3] != 0x3b)	/* version 1, table datarel sdata4 */
		return NULL;
	struct cursor c = { hdr + 4, hdr + 64, false };
	uint64_t base = (uint64_t)(uintptr_t)hdr;
	encoded(&c, hdr[1], base);		/* eh_frame_ptr: unused */
	uint64_t count = encoded(&c, hdr[2], base);
	if (c.bad || hdr[2] == 0xff || count == 0)
		return NULL;
	const int32_t *table = (const int32_t *)(const void *)c.p;	/* pairs */
	uint64_t lo = 0, hi = count;	/* last entry with start <= addr */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (base + (uint64_t)(int64_t)table[2 * mid] <= addr)
			lo = mid;
		else
			hi = mid;
	}
	if (base + (uint64_t)(int64_t)table[2 * lo] > addr)
		return NULL;
	return (const uint8_t *)(uintptr_t)(base + (uint64_t)(int64_t)table[2 * lo + 1]);
}

/* ---- interpreting CFA instructions ---- */

enum { R_SAME, R_UNDEF, R_OFFSET, R_OTHER };

struct regrule {
	uint8_t kind;
	int64_t off;
};

struct state {
	uint64_t cfa_reg;
	int64_t cfa_off;
	bool cfa_bad;
	struct regrule rbp, ra;
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	bool signal;
	bool has_aug_data;	/* 'z': FDEs carry an augmentation length */
	const uint8_t *insns, *insns_end;
};

static struct regrule *track(struct state *s, const struct cie *cie, uint64_t reg)
{
	if (reg == REG_RBP)
		return &s->rbp;
	if (reg == cie->ra_reg)
		return &s->ra;
	return NULL;
}

/* Runs insns until the location passes target.  Returns false on an
 * instruction we cannot follow. */
static bool run(struct cursor *c, const struct cie *cie, struct state *s,
		const struct state *initial, uint64_t loc, uint64_t target)
{
	struct state saved[8];
	unsigned n_saved = 0;
	while (c->p < c->end && !c->bad) {
		uint8_t op = *c->p++;
		uint64_t reg, delta = 0;
		struct regrule *r;
		switch (op & 0xc0) {
		case 0x40:
			delta = (op & 0x3f) * cie->code_align;
			goto advance;
		case 0x80:
			if ((r = track(s, cie, op & 0x3f))) {
				r->kind = R_OFFSET;
				r->off = (int64_t)uleb(c) * cie->data_align;
			} else {
				uleb(c);
			}
			continue;
		case 0xc0:
			if ((r = track(s, cie, op & 0x3f)))
				*r = *track((struct state *)initial, cie, op & 0x3f);
			continue;
		}
		switch (op) {
		case 0x00: continue;				/* nop */
		case 0x02: delta = fixed(c, 1) * cie->code_align; goto advance;
		case 0x03: delta = fixed(c, 2) * cie->code_align; goto advance;
		case 0x04: delta = fixed(c, 4) * cie->code_align; goto advance;
		case 0x05:					/* offset_extended */
		case 0x11:					/* offset_extended_sf */
		case 0x2f: {					/* GNU_negative_offset_extended */
			reg = uleb(c);
			int64_t off = op == 0x11 ? sleb(c) * cie->data_align :
				(int64_t)uleb(c) * cie->data_align;
			if (op == 0x2f)
				off = -off;
			if ((r = track(s, cie, reg))) {
				r->kind = R_OFFSET;
				r->off = off;
			}
			continue;
		}
		case 0x06:					/* restore_extended */
			reg = uleb(c);
			if ((r = track(s, cie, reg)))
				*r = *track((struct state *)initial, cie, reg);
			continue;
		case 0x07:					/* undefined */
		case 0x08:					/* same_value */
			reg = uleb(c);
			if ((r = track(s, cie, reg)))
				r->kind = op == 0x07 ? R_UNDEF : R_SAME;
			continue;
		case 0x09:					/* register */
			reg = uleb(c);
			uleb(c);
			if ((r = track(s, cie, reg)))
				r->kind = R_OTHER;
			continue;
		case 0x0a:					/* remember_state */
			if (n_saved == 8)
				return false;
			saved[n_saved++] = *s;
			continue;
		case 0x0b:					/* restore_state */
			if (n_saved == 0)
				return false;
			*s = saved[--n_saved];	/* the whole row, CFA included */
			continue;
		case 0x0c:					/* def_cfa */
			s->cfa_reg = uleb(c);
			s->cfa_off = (int64_t)uleb(c);
			s->cfa_bad = false;
			continue;
		case 0x0d:					/* def_cfa_register */
			s->cfa_reg = uleb(c);
			continue;
		case 0x0e:					/* def_cfa_offset */
			s->cfa_off = (int64_t)uleb(c);
			continue;
		case 0x0f: {					/* def_cfa_expression */
			uint64_t len = uleb(c);
			s->cfa_bad = true;
			if ((uint64_t)(c->end - c->p) < len)
				return false;
			c->p += len;
			continue;
		}
		case 0x10:					/* expression */
		case 0x16: {					/* val_expression */
			reg = uleb(c);
			uint64_t len = uleb(c);
			if ((r = track(s, cie, reg)))
				r->kind = R_OTHER;
			if ((uint64_t)(c->end - c->p) < len)
				return false;
			c->p += len;
			continue;
		}
		case 0x12:					/* def_cfa_sf */
			s->cfa_reg = uleb(c);
			s->cfa_off = sleb(c) * cie->data_align;
			s->cfa_bad = false;
			continue;
		case 0x13:					/* def_cfa_offset_sf */
			s->cfa_off = sleb(c) * cie->data_align;
			continue;
		case 0x14:					/* val_offset */
		case 0x15:					/* val_offset_sf */
			reg = uleb(c);
			if (op == 0x14)
				uleb(c);
			else
				sleb(c);
			if ((r = track(s, cie, reg)))
				r->kind = R_OTHER;
			continue;
		case 0x2e:					/* GNU_args_size */
			uleb(c);
			continue;
		default:					/* set_loc and the rest */
			return false;
		}
advance:
		loc += delta;
		if (loc > target)
			return !c->bad;
	}
	return !c->bad;
}

/* Parses the CIE at p. */
static bool parse_cie(const uint8_t *p, struct cie *cie)
{
	uint32_t len;
	memcpy(&len, p, 4);
	if (len == 0 || len == 0xffffffffu)
		return false;
	struct cursor c = { p + 4, p + 4 + len, false };
	if (fixed(&c, 4) != 0)		/* CIE id */
		return false;
	uint8_t version = (uint8_t)fixed(&c, 1);
	if (version != 1 && version != 3)
		return false;
	const char *aug = (const char *)c.p;
	size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
	if (aug_len == (size_t)(c.end - c.p))
		return false;
	c.p += aug_len + 1;
	cie->code_align = uleb(&c);
	cie->data_align = sleb(&c);
	cie->ra_reg = version == 1 ? fixed(&c, 1) : uleb(&c);
	cie->fde_enc = 0;	/* absptr */
	cie->signal = false;
	cie->has_aug_data = aug[0] == 'z';
	if (aug[0] == 'z') {
		uint64_t n = uleb(&c);
		const uint8_t *data_end = c.p + n;
		if (c.bad || data_end > c.end)
			return false;
		for (const char *a = aug + 1; *a; a++) {
			if (*a == 'R')
				cie->fde_enc = (uint8_t)fixed(&c, 1);
			else if (*a == 'L')
				fixed(&c, 1);
			else if (*a == 'P')	/* skipped: may be indirect */
				encoded(&c, (uint8_t)fixed(&c, 1) & 0x7f, 0);
			else if (*a == 'S')
				cie->signal = true;
			else
				return false;
		}
		c.p = data_end;
	} else if (aug[0]) {
		return false;
	}
	cie->insns = c.p;
	cie->insns_end = c.end;
	return !c.bad;
}

/* The packed rule for code address target. */
static uint64_t compute(uint64_t target)
{
	const uint64_t bad = ((uint64_t)(F_VALID | F_BAD)) << 56;
	const uint8_t *fde = find_fde(target);
	if (!fde)
		return bad;
	uint32_t len, cie_off;
	memcpy(&len, fde, 4);
	if (len == 0 || len == 0xffffffffu)
		return bad;
	memcpy(&cie_off, fde + 4, 4);
	if (cie_off == 0)	/* that is a CIE, not an FDE */
		return bad;
	struct cie cie;
	if (!parse_cie(fde + 4 - cie_off, &cie) || cie.signal)
		return bad;
	struct cursor c = { fde + 8, fde + 4 + len, false };
	uint64_t start = encoded(&c, cie.fde_enc, 0);
	uint64_t range = encoded(&c, cie.fde_enc & 0x0f, 0);
	if (c.bad || target < start || target - start >= range)
		return bad;
	if (cie.has_aug_data) {
		uint64_t aug_len = uleb(&c);
		if (aug_len > (uint64_t)(c.end - c.p))
			return bad;
		c.p += aug_len;
	}
	if (c.bad || c.p > c.end)
		return bad;

	struct state s = { .cfa_reg = REG_RSP, .cfa_off = 0, .cfa_bad = true,
			   .rbp = { R_SAME, 0 }, .ra = { R_SAME, 0 } };
	struct cursor ci = { cie.insns, cie.insns_end, false };
	if (!run(&ci, &cie, &s, &s, 0, UINT64_MAX))
		return bad;
	struct state initial = s;
	if (!run(&c, &cie, &s, &initial, start, target))
		return bad;

	if (s.cfa_bad || (s.cfa_reg != REG_RSP && s.cfa_reg != REG_RBP) ||
	    s.cfa_off < INT32_MIN || s.cfa_off > INT32_MAX)
		return bad;
	uint64_t flags = F_VALID;
	int64_t rbp_off = 0, ra_off = 0;
	if (s.cfa_reg == REG_RBP)
		flags |= F_CFA_RBP;
	if (s.ra.kind == R_UNDEF)
		flags |= F_RA_UNDEF;
	else if (s.ra.kind == R_OFFSET && s.ra.off >= INT8_MIN && s.ra.off <= INT8_MAX)
		ra_off = s.ra.off;
	else
		return bad;
	if (s.rbp.kind == R_OFFSET && s.rbp.off >= INT16_MIN && s.rbp.off <= INT16_MAX) {
		flags |= F_RBP_SAVED;
		rbp_off = s.rbp.off;
	} else if (s.rbp.kind == R_UNDEF) {
		flags |= F_RBP_UNDEF;
	} else if (s.rbp.kind != R_SAME) {
		return bad;
	}
	return (uint64_t)(uint32_t)(int32_t)s.cfa_off |
		((uint64_t)(uint16_t)(int16_t)rbp_off << 32) |
		((uint64_t)(uint8_t)(int8_t)ra_off << 48) | (flags << 56);
}

/* Slots are indexed by key = target + 1: for a return address that is the
 * address itself (no multiply on the walk's critical path). */
static inline uint32_t slot_of(uint64_t key, uint32_t bits)
{
	return (uint32_t)(key ^ (key >> 13)) & ((1u << bits) - 1);
}

/* The rule of key in t, 0 if absent.  Lock-free. */
static inline uint64_t rules_find(const struct rules *t, uint64_t key)
{
	uint32_t mask = (1u << t->bits) - 1;
	for (uint32_t n = 0, i = slot_of(key, t->bits); n < PROBES; n++, i = (i + 1) & mask) {
		uint64_t k = __atomic_load_n(&t->slots[i].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return __atomic_load_n(&t->slots[i].rule, __ATOMIC_ACQUIRE);	/* 0: a flush raced */
		if (!k)
			break;
	}
	return 0;
}

/* Under insert_lock: puts (key, rule) into t unless there or no room. */
static void rules_put(struct rules *t, uint64_t key, uint64_t rule)
{
	uint32_t mask = (1u << t->bits) - 1;
	for (uint32_t n = 0, i = slot_of(key, t->bits); n < PROBES; n++, i = (i + 1) & mask) {
		uint64_t k = t->slots[i].key;
		if (k == key)
			return;
		if (!k) {
			__atomic_store_n(&t->slots[i].rule, rule, __ATOMIC_RELEASE);
			__atomic_store_n(&t->slots[i].key, key, __ATOMIC_RELEASE);
			t->count++;
			return;
		}
	}
}

static bool rules_map(struct rules *t, uint32_t bits)
{
	void *p = mmap(NULL, sizeof(struct slot) << bits, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return false;
	t->bits = bits;
	t->count = 0;
	t->slots = p;
	return true;
}

/* Under insert_lock: the current table, replaced by one twice as big when
 * half full (NULL: at the largest size and full, or no memory). */
static struct rules *rules_room(void)
{
	struct rules *t = cache;
	if (t->count * 2u < (1u << t->bits))
		return t;
	if (t->bits == CACHE_MAX_BITS)
		return t->count * 4u < (3u << t->bits) ? t : NULL;
	struct rules *bigger = &tables[t->bits + 1 - CACHE_MIN_BITS];
	if (!rules_map(bigger, t->bits + 1))
		return NULL;
	for (uint32_t i = 0; i < (1u << t->bits); i++)
		if (t->slots[i].key && t->slots[i].rule)
			rules_put(bigger, t->slots[i].key, t->slots[i].rule);
	__atomic_store_n(&cache, bigger, __ATOMIC_RELEASE);
	return bigger;
}

/* The rule for code address target, from the cache or computed (and
 * cached).  The rule of an address never changes while its code stays
 * mapped: a racing insert of the same key stores the same rule. */
static uint64_t rule_shared(uint64_t target)
{
	uint64_t key = target + 1;
	uint64_t r = rules_find(__atomic_load_n(&cache, __ATOMIC_ACQUIRE), key);
	if (__builtin_expect(r != 0, 1))
		return r;
	r = compute(target);
	ml_spin_lock(&insert_lock);
	struct rules *t = rules_room();
	if (t)
		rules_put(t, key, r);	/* else: correct, just slower */
	ml_spin_unlock(&insert_lock);
	return r;
}

/* The per-thread first level: a direct-mapped copy of the rules this
 * thread used last (one probe, no sharing); cleared by a flush. */
struct l1_slot {
	uint64_t key, rule;
};

/* ---- the walk, and its reuse of the thread's previous walk ----
 *
 * A walk is a function of its state at each frame, (target, sp, bp), and
 * of the stack words it reads (return addresses, saved rbp).  So if the
 * new walk reaches a frame whose state equals frame j's state in the
 * thread's previous walk, and every word the previous walk read from
 * frame j outwards still holds the value read then, the rest of the new
 * walk is the rest of the previous one, word for word.  Those re-reads
 * have addresses known in advance (no dependent chain), so they cost far
 * less than unwinding.  A program that allocates repeatedly under the same
 * callers (a loop, a batch) unwinds only the frames that changed. */

struct frame_rec {
	uint64_t sp, bp;	/* state entering the frame (its target: below) */
	uint64_t ra_addr, ra;	/* the return address, and where it was read */
	uint64_t bp_addr, bp_val;	/* the saved rbp read; if none, ra's again
					 * (so a check needs no branch) */
	uint32_t node;		/* the stack table's node of this frame's path */
	uint16_t rbp_cfa;	/* this frame's CFA is rbp-based */
	uint16_t rbp_cum;	/* rec[]: frames with rbp_cfa from the outermost to here */
};

enum { END_OUTERMOST = 1, END_ZERO_RA, END_LIMIT };

/* Per thread.  rec[] holds the previous walk OUTERMOST FIRST, so a new
 * walk that shares its outer part keeps those records where they are and
 * rewrites only the inner ones.  Frame i (innermost = 0) of the walk is
 * rec[n - 1 - i]; its target is pc0 for i = 0, else frame i-1's ra - 1. */
struct thread_walk {
	uint32_t n;		/* frames recorded (0: no previous walk) */
	uint32_t nodes;		/* rec[0 .. nodes) have their node (ml_unwind_stack) */
	uint32_t limit;		/* the limit it ran with */
	uint32_t end;		/* END_*: how it stopped */
	uint32_t gen;		/* flush generation it ran under */
	uint64_t pc0;		/* frame 0's target */
	volatile int busy;	/* a walk is running (a signal handler's must not reuse) */
	uint32_t declined;	/* walks declined in a row (code without usable CFI) */
	uint32_t tick;
	uint64_t end_sp;	/* END_OUTERMOST: the outermost frame's CFA */
	uint64_t home_top;	/* end_sp of the thread's first walk to its root */
	uint64_t zero_addr;	/* END_ZERO_RA: where the 0 was read */
	uint32_t l1_gen;	/* flush generation l1 belongs to */
	struct l1_slot l1[L1_SLOTS];
	struct frame_rec rec[ML_CAPTURE_BUF];
	struct frame_rec scratch[ML_CAPTURE_BUF];	/* the new walk's inner frames */
	uint8_t bp_ok[ML_CAPTURE_BUF];			/* per scratch frame */
	uint8_t rec_bp_ok[ML_CAPTURE_BUF];		/* per rec slot */
};

static volatile uint32_t flush_gen;

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
	w->home_top = 0;
	w->declined = 0;
	w->busy = 0;
}

/* Frame j's target in w's record (j < w->n). */
static inline uint64_t rec_target(const struct thread_walk *w, uint32_t j)
{
	return j == 0 ? w->pc0 : w->rec[w->n - j].ra - 1;
}

/* The largest index m >= from (innermost = 0) whose words in w no longer
 * hold what was read, or -1 if all do; the end's zero counts as index n. */
static int64_t last_changed(const struct thread_walk *w, uint32_t from)
{
	if (w->end == END_ZERO_RA && *(const volatile uint64_t *)(uintptr_t)w->zero_addr != 0)
		return w->n;
	/* Outermost first, four frames per test: the words are independent
	 * loads, and a program rarely changes them. */
#define WORD_DIFF(f) ((*(const volatile uint64_t *)(uintptr_t)(f)->ra_addr ^ (f)->ra) | \
		      (*(const volatile uint64_t *)(uintptr_t)(f)->bp_addr ^ (f)->bp_val))
	uint32_t end = w->n - from, r = 0;
	if (end && !w->rec[end - 1].rbp_cum) {
		/* No frame of these finds its CFA from rbp: the walk's return
		 * addresses do not depend on the saved rbp words, only the ra
		 * words need to hold (a stale recorded rbp can only make a
		 * later match fail). */
		for (; r + 4 <= end; r += 4) {
			const struct frame_rec *f = &w->rec[r];
#define RA_DIFF(f) (*(const volatile uint64_t *)(uintptr_t)(f)->ra_addr ^ (f)->ra)
			if (__builtin_expect((RA_DIFF(f) | RA_DIFF(f + 1) | RA_DIFF(f + 2) |
					      RA_DIFF(f + 3)) != 0, 0))
				break;
		}
		for (; r < end; r++)
			if (RA_DIFF(&w->rec[r]))
				return (int64_t)(w->n - 1 - r);
#undef RA_DIFF
		return -1;
	}
	for (; r + 4 <= end; r += 4) {
		const struct frame_rec *f = &w->rec[r];
		if (__builtin_expect((WORD_DIFF(f) | WORD_DIFF(f + 1) | WORD_DIFF(f + 2) |
				      WORD_DIFF(f + 3)) != 0, 0))
			break;
	}
	for (; r < end; r++)
		if (WORD_DIFF(&w->rec[r]))
			return (int64_t)(w->n - 1 - r);
#undef WORD_DIFF
	return -1;
}

/* Walks from (pc, sp, bp), pc being the exact current instruction of the
 * innermost frame.  See ml_unwind_fast. */
static int walk_in(struct thread_walk *w, uint64_t pc, uint64_t sp, uint64_t bp,
		   uint64_t *buf, uint32_t limit)
{
	uint32_t gen = __atomic_load_n(&flush_gen, __ATOMIC_ACQUIRE);
	if (__builtin_expect(w->l1_gen != gen, 0)) {
		memset(w->l1, 0, sizeof(w->l1));
		w->l1_gen = gen;
	}
	/* Only a walk that ran to the thread's own root is reused: its words
	 * then all lie on this thread's stack, between the matched frame and
	 * that root, which stays mapped while the thread lives.  (A walk on
	 * another stack, a coroutine's say, ends at another root, or is cut
	 * short: never reused.) */
	bool usable = w->n && w->limit == limit && w->gen == gen &&
		w->end == END_OUTERMOST && w->end_sp == w->home_top;
	uint32_t j = 0;		/* the previous walk's frame with sp >= ours */
	int64_t changed = -2;	/* last_changed(), once needed */
	uint64_t target = pc;
	bool bp_ok = true;
	uint32_t n = 0;
	uint32_t end;
	for (;;) {
		if (usable) {
			while (j < w->n && w->rec[w->n - 1 - j].sp < sp)
				j++;
			const struct frame_rec *p = j < w->n ? &w->rec[w->n - 1 - j] : NULL;
			if (p && p->sp == sp && rec_target(w, j) == target &&
			    w->rec_bp_ok[w->n - 1 - j] == bp_ok && (!bp_ok || p->bp == bp)) {
				if (changed == -2)
					changed = last_changed(w, j);
				if (changed < (int64_t)j &&
				    (w->end != END_LIMIT || n + (w->n - j) >= limit))
					goto reuse;
			}
		}
		if (n == limit) {
			end = END_LIMIT;
			break;
		}
		struct l1_slot *l1 = &w->l1[(target ^ (target >> 9)) & (L1_SLOTS - 1)];
		uint64_t r = l1->rule;
		if (__builtin_expect(l1->key != target + 1, 0)) {
			r = rule_shared(target);
			l1->key = target + 1;
			l1->rule = r;
		}
		uint32_t flags = (uint32_t)(r >> 56);
		if (flags & F_BAD)
			return -1;
		if ((flags & F_CFA_RBP) && !bp_ok)
			return -1;
		uint64_t cfa = ((flags & F_CFA_RBP) ? bp : sp) + (uint64_t)(int64_t)(int32_t)r;
		if (cfa <= sp || (cfa & 7))
			return -1;	/* the stack must grow up as we walk out */
		if (flags & F_RA_UNDEF) {
			end = END_OUTERMOST;
			sp = cfa;
			break;
		}
		struct frame_rec *f = &w->scratch[n];
		f->sp = sp;
		f->bp = bp;
		w->bp_ok[n] = bp_ok;
		f->rbp_cfa = (flags & F_CFA_RBP) != 0;
		f->ra_addr = cfa + (uint64_t)(int64_t)(int8_t)(r >> 48);
		uint64_t ra = *(const uint64_t *)(uintptr_t)f->ra_addr;
		f->bp_addr = f->ra_addr;
		f->bp_val = ra;
		if (flags & F_RBP_SAVED) {
			f->bp_addr = cfa + (uint64_t)(int64_t)(int16_t)(r >> 32);
			bp = f->bp_val = *(const uint64_t *)(uintptr_t)f->bp_addr;
		} else if (flags & F_RBP_UNDEF) {
			bp_ok = false;
		}
		sp = cfa;
		if (ra == 0) {
			w->zero_addr = f->ra_addr;
			end = END_ZERO_RA;
			break;
		}
		f->ra = ra;
		if (buf)
			buf[n] = ra;
		n++;
		target = ra - 1;	/* inside the call instruction */
	}
full:
	/* A full walk: it becomes the thread's record. */
	for (uint32_t i = 0; i < n; i++) {
		w->rec[n - 1 - i] = w->scratch[i];
		w->rec_bp_ok[n - 1 - i] = w->bp_ok[i];
	}
	for (uint32_t r = 0; r < n; r++)
		w->rec[r].rbp_cum = (uint16_t)((r ? w->rec[r - 1].rbp_cum : 0) + w->rec[r].rbp_cfa);
	w->n = n;
	w->nodes = 0;
	w->limit = limit;
	w->end = end;
	w->gen = gen;
	w->pc0 = pc;
	w->end_sp = sp;
	if (end == END_OUTERMOST && !w->home_top)
		w->home_top = sp;
	return (int)n;

reuse: {
	/* Frames j.. of the previous walk are ours from frame n on. */
	uint32_t keep = w->n - j;	/* records rec[0 .. keep) stay */
	uint32_t total = n + keep;
	if (total > limit) {
		/* Deeper than the limit: the walk ends at it, so does the record. */
		for (uint32_t i = n; i < limit; i++) {
			w->scratch[i] = w->rec[total - 1 - i];
			w->bp_ok[i] = w->rec_bp_ok[total - 1 - i];
			if (buf)
				buf[i] = w->scratch[i].ra;
		}
		n = limit;
		end = END_LIMIT;
		goto full;
	}
	if (buf)
		for (uint32_t i = n; i < total; i++)
			buf[i] = w->rec[total - 1 - i].ra;
	for (uint32_t i = 0; i < n; i++) {
		w->rec[total - 1 - i] = w->scratch[i];
		w->rec_bp_ok[total - 1 - i] = w->bp_ok[i];
	}
	for (uint32_t r = keep; r < total; r++)
		w->rec[r].rbp_cum = (uint16_t)((r ? w->rec[r - 1].rbp_cum : 0) + w->rec[r].rbp_cfa);
	if (w->nodes > keep)
		w->nodes = keep;
	w->n = total;
	w->pc0 = pc;
	return (int)total;
}
}

/* Takes the thread's record for one walk; -1 if busy (a signal handler
 * interrupted a walk on this thread: libunwind serves it). */
static int walk(uint64_t pc, uint64_t sp, uint64_t bp, uint64_t *buf, uint32_t limit)
{
	struct thread_walk *w = walk_get();
	if (!w || limit > ML_CAPTURE_BUF || w->busy)
		return -1;
	/* A thread whose stacks keep going through code we decline (JIT code
	 * without CFI, say) tries again only every 64th capture: libunwind
	 * would otherwise follow a wasted partial walk every time. */
	if (w->declined >= 8 && (++w->tick & 63))
		return -1;
	w->busy = 1;
	__asm__ volatile("" ::: "memory");
	int n = walk_in(w, pc, sp, bp, buf, limit);
	__asm__ volatile("" ::: "memory");
	if (n < 0) {
		w->n = 0;	/* the record may be half written */
		w->nodes = 0;
		w->declined++;
	} else {
		w->declined = 0;
	}
	w->busy = 0;
	return n;
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
	if (!cache)
		return -1;
	HERE(pc, sp, bp);
	start_point(&pc, &sp, &bp);
	return walk(pc, sp, bp, buf, limit);
}

/* Gives rec[w->nodes .. w->n) their nodes, outermost first.  False when
 * the stack table has no room (then nodes stay valid up to there). */
static bool set_nodes(struct thread_walk *w, struct ml_intern_cache *ic)
{
	for (uint32_t r = w->nodes; r < w->n; r++) {
		uint32_t parent = r ? w->rec[r - 1].node : ML_NODE_ROOT;
		uint32_t node = ml_stacktab_child_cached(ic, parent, w->rec[r].ra);
		if (!node)
			return false;
		w->rec[r].node = node;
		w->nodes = r + 1;
	}
	return true;
}

int __attribute__((noinline)) ml_unwind_stack(uint32_t max_depth, uint64_t skip_lo,
					      uint64_t skip_hi, uint32_t *stack)
{
	uint64_t pc, sp, bp;
	if (!cache)
		return -1;
	HERE(pc, sp, bp);
	start_point(&pc, &sp, &bp);
	struct thread_walk *w = walk_get();
	uint32_t limit = max_depth + CAPTURE_SLACK + 1;
	if (!w || limit > ML_CAPTURE_BUF || w->busy)
		return -1;
	if (w->declined >= 8 && (++w->tick & 63))
		return -1;
	w->busy = 1;
	__asm__ volatile("" ::: "memory");
	int n = walk_in(w, pc, sp, bp, NULL, limit);
	int rc = -1;
	if (n < 0) {
		w->n = 0;
		w->nodes = 0;
		w->declined++;
	} else if (w->end != END_LIMIT) {	/* cut at the limit: the caller's slow path */
		w->declined = 0;
		/* The innermost frames inside the runtime are not the program's. */
		uint32_t skip = 0;
		while (skip < (uint32_t)n && w->rec[n - 1 - skip].ra >= skip_lo &&
		       w->rec[n - 1 - skip].ra < skip_hi)
			skip++;
		if ((uint32_t)n - skip <= max_depth) {
			rc = 0;
			if (!set_nodes(w, &ml_tl_thread->intern))
				*stack = ML_NODE_LOST;
			else
				*stack = skip < (uint32_t)n ? w->rec[n - 1 - skip].node : ML_NODE_ROOT;
		}
	}
	__asm__ volatile("" ::: "memory");
	w->busy = 0;
	return rc;
}

/* ---- set-up ---- */

int ml_unwind_init(void)
{
	if (cache)
		return 0;
	if (!rules_map(&tables[0], CACHE_MIN_BITS))
		return -ENOMEM;
	cache = &tables[0];
	return 0;
}

void ml_unwind_flush(void)
{
	if (!cache)
		return;
	ml_spin_lock(&insert_lock);
	for (uint32_t k = 0; k <= CACHE_MAX_BITS - CACHE_MIN_BITS; k++) {
		struct rules *t = &tables[k];
		for (uint32_t i = 0; t->slots && i < (1u << t->bits); i++)
			if (t->slots[i].key) {
				__atomic_store_n(&t->slots[i].key, 0, __ATOMIC_RELEASE);
				t->slots[i].rule = 0;
			}
		t->count = 0;
	}
	__atomic_add_fetch(&flush_gen, 1, __ATOMIC_RELEASE);
	ml_spin_unlock(&insert_lock);
}

void ml_unwind_after_fork(void)
{
	insert_lock.locked = 0;
}
