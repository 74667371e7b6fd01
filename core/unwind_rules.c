/* core/unwind_rules.c - the unwind rule of a code address, for the walker
 * (unwind.c): read from the loaded code's .eh_frame, the table libunwind
 * reads, and kept in a shared lock-free cache.
 *
 * How it stays exact: the unwind rule of an instruction address is a pure
 * function of the loaded code's .eh_frame.  For each address seen, we
 * interpret its FDE once (CIE initial instructions, then the FDE's up to
 * that address) and keep only what a walk needs when the rule has the
 * simple form compilers emit:
 *   CFA = rsp + off  or  rbp + off;
 *   return address saved at CFA + off (or undefined: the outermost frame);
 *   rbp unchanged, saved at CFA + off, or undefined.
 * Anything else (a CFA expression such as the signal trampoline's, a
 * register moved to another register, a signal-frame CIE, no FDE at all)
 * is ML_RULE_BAD: the walk hands the whole capture to libunwind.
 *
 * The cache: open addressing by address, 4 Ki slots doubling at half full
 * (the old tables stay mapped for readers still probing them); readers
 * never lock, an insert takes a spinlock.  dlclose flushes it (an address
 * may then hold other code) and bumps ml_unwind_gen, which empties the
 * threads' own first-level copies. */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "core/internal.h"

#define CACHE_MIN_BITS 12u	/* 64 KiB; doubles at half full */
#define CACHE_MAX_BITS 26u
#define PROBES 32u

#define REG_RBP 6u
#define REG_RSP 7u
#define REG_RA 16u

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
volatile uint32_t ml_unwind_gen;

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
	const uint64_t bad = ((uint64_t)(ML_RULE_VALID | ML_RULE_BAD)) << 56;
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
	uint64_t flags = ML_RULE_VALID;
	int64_t rbp_off = 0, ra_off = 0;
	if (s.cfa_reg == REG_RBP)
		flags |= ML_RULE_CFA_RBP;
	if (s.ra.kind == R_UNDEF)
		flags |= ML_RULE_RA_UNDEF;
	else if (s.ra.kind == R_OFFSET && s.ra.off >= INT8_MIN && s.ra.off <= INT8_MAX)
		ra_off = s.ra.off;
	else
		return bad;
	if (s.rbp.kind == R_OFFSET && s.rbp.off >= INT16_MIN && s.rbp.off <= INT16_MAX) {
		flags |= ML_RULE_RBP_SAVED;
		rbp_off = s.rbp.off;
	} else if (s.rbp.kind == R_UNDEF) {
		flags |= ML_RULE_RBP_UNDEF;
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

/* The rule of an address never changes while its code stays mapped: a
 * racing insert of the same key stores the same rule. */
uint64_t ml_unwind_rule(uint64_t target)
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

/* ---- set-up ---- */

int ml_unwind_init(void)
{
	if (cache)
		return 0;
	if (!rules_map(&tables[0], CACHE_MIN_BITS))
		return -ENOMEM;
	cache = &tables[0];
	__atomic_store_n(&ml_unwind_gen, 1, __ATOMIC_RELEASE);	/* on */
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
	__atomic_add_fetch(&ml_unwind_gen, 1, __ATOMIC_RELEASE);
	ml_spin_unlock(&insert_lock);
}

void ml_unwind_after_fork(void)
{
	insert_lock.locked = 0;
}
