/* report/sym_symtab.c - the ELF symbol of an address, from a table sorted
 * once per module (libdw's dwfl_module_addrinfo reads every symbol on every
 * call: seconds on a binary with tens of thousands of them).  The choice
 * follows dwfl_module_addrinfo's, so that names stay as they were:
 *  - symbols with a size that hold the address win; non-local ones (the
 *    symbol table's global part) are tried before local ones;
 *  - among them the one starting closest below the address, then the
 *    stronger binding (global, weak, local), then the smaller size, then
 *    the first in the symbol table;
 *  - else a sizeless one (an assembly label) at or below the address, in
 *    its section, that no other symbol at or below the address starts or
 *    ends above (label_at has the details).
 * Where a lookup cannot be done here (more than MAX_HOLDERS nested
 * symbols, or no memory for the table) libdw's own scan answers. */
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include "report/sym_internal.h"

#define MAX_HOLDERS 64		/* sized symbols holding one address, at most */

struct sym_symbol {
	uint64_t lo, size;
	uint64_t max_end;	/* highest lo + size up to this one in the table */
	const char *name;	/* libdw's */
	uint32_t index;		/* in libdw's symbol table */
	uint8_t rank;		/* 3 global, 2 weak, 1 local, 0 other */
	bool first_pass;	/* in the part searched before the locals */
	bool special;		/* SHN_ABS and the like: only matches exactly */
};

struct sym_symtab {
	struct sym_symbol *sized, *sizeless;
	size_t n_sized, n_sizeless;
	Dwfl_Module *mod;
};

static int rank_of(const GElf_Sym *sym)
{
	switch (GELF_ST_BIND(sym->st_info)) {
	case STB_GLOBAL:
		return 3;
	case STB_WEAK:
		return 2;
	case STB_LOCAL:
		return 1;
	default:
		return 0;
	}
}

static int cmp_symbol(const void *a, const void *b)
{
	const struct sym_symbol *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static int push(struct sym_symbol **arr, size_t *n, size_t *cap, const struct sym_symbol *v)
{
	struct sym_symbol *grown;

	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 1024;
		grown = realloc(*arr, *cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		*arr = grown;
	}
	(*arr)[(*n)++] = *v;
	return 0;
}

/* The ELF section index of addr's section as libdw's own symbol search
 * finds it (with overlapping sections such as .tbss only its binary search
 * says which), 0 for none. */
static size_t section_of(const struct sym_symtab *t, uint64_t addr)
{
	Dwarf_Addr a = addr, bias;
	Elf_Scn *scn = dwfl_module_address_section(t->mod, &a, &bias);

	return scn ? elf_ndxscn(scn) : 0;
}

static void free_table(struct sym_symtab *t)
{
	if (!t)
		return;
	free(t->sized);
	free(t->sizeless);
	free(t);
}

static int build(struct sym_module *m, struct sym_symtab **out)
{
	struct sym_symtab *t = calloc(1, sizeof(*t));
	size_t cap_sized = 0, cap_sizeless = 0;
	int n, first_global, rc = -ENOMEM;
	uint64_t max_end = 0;

	if (!t)
		return -ENOMEM;
	t->mod = m->mod;
	n = dwfl_module_getsymtab(m->mod);
	first_global = dwfl_module_getsymtab_first_global(m->mod);
	if (n < 0 || first_global < 0) {
		*out = t;	/* no symbols: an empty table */
		return 0;
	}
	for (int i = 1; i < n; i++) {
		struct sym_symbol v;
		GElf_Sym sym;
		GElf_Addr value;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &value, &shndx,
							   NULL, NULL);
		int type;

		if (!name || !name[0] || sym.st_shndx == SHN_UNDEF)
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (type == STT_SECTION || type == STT_FILE || type == STT_TLS)
			continue;
		v = (struct sym_symbol){
			.lo = value,
			.size = sym.st_size,
			.name = name,
			.index = (uint32_t)i,
			.rank = (uint8_t)rank_of(&sym),
			.first_pass = first_global == 0 || i >= first_global,
			.special = shndx >= SHN_LORESERVE && shndx != SHN_XINDEX,
		};
		if (sym.st_size ? push(&t->sized, &t->n_sized, &cap_sized, &v) :
				  push(&t->sizeless, &t->n_sizeless, &cap_sizeless, &v))
			goto fail;
	}
	if (t->n_sized)
		qsort(t->sized, t->n_sized, sizeof(*t->sized), cmp_symbol);
	if (t->n_sizeless)
		qsort(t->sizeless, t->n_sizeless, sizeof(*t->sizeless), cmp_symbol);
	for (size_t i = 0; i < t->n_sized; i++) {
		if (t->sized[i].lo + t->sized[i].size > max_end)
			max_end = t->sized[i].lo + t->sized[i].size;
		t->sized[i].max_end = max_end;
	}
	*out = t;
	return 0;
fail:
	free_table(t);
	return rc;
}

/* How many entries of arr (sorted by lo) start at or below addr. */
static size_t count_at_or_below(const struct sym_symbol *arr, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (arr[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int cmp_holder(const void *a, const void *b)
{
	const struct sym_symbol *x = *(const struct sym_symbol *const *)a;
	const struct sym_symbol *y = *(const struct sym_symbol *const *)b;

	if (x->first_pass != y->first_pass)
		return x->first_pass ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* Whether cand, met after best in the symbol table, replaces it. */
static bool replaces(const struct sym_symbol *best, const struct sym_symbol *cand)
{
	if (!best || best->lo < cand->lo || best->rank < cand->rank)
		return true;
	return best->lo == cand->lo && best->size > cand->size && best->rank <= cand->rank;
}

/* The best sized symbol holding addr among holders of one pass. */
static const struct sym_symbol *pick(const struct sym_symbol **holders, size_t n, bool first_pass)
{
	const struct sym_symbol *best = NULL;

	for (size_t i = 0; i < n; i++)
		if (holders[i]->first_pass == first_pass && replaces(best, holders[i]))
			best = holders[i];
	return best;
}

/* Whether libdw would let the sizeless symbol c name addr: absolute ones
 * only at their own address, the others in addr's section (or both in
 * none). */
static bool label_fits(const struct sym_symtab *t, const struct sym_symbol *c, uint64_t addr)
{
	if (c->special)
		return c->lo == addr;
	return section_of(t, c->lo) == section_of(t, addr);
}

/* The label for addr when no sized symbol holds it.  libdw keeps the last
 * sizeless symbol it meets that no range seen so far passes, and accepts
 * it only if no range seen at all passes it; so the answer is a label at
 * the highest address that any symbol at or below addr starts or ends at
 * (min_label), the last one in libdw's search order (first-pass symbols
 * first, then by index) among those that fit addr, or none.  first_only:
 * the search stopped after the first pass, at a label right at addr. */
static const struct sym_symbol *label_at(const struct sym_symtab *t, uint64_t addr,
					 uint64_t min_label, bool first_only)
{
	size_t i = count_at_or_below(t->sizeless, t->n_sizeless, addr);
	const struct sym_symbol *best = NULL;

	while (i-- > 0 && t->sizeless[i].lo >= min_label) {
		const struct sym_symbol *c = &t->sizeless[i];

		if (c->lo != min_label || (first_only && !c->first_pass) || !label_fits(t, c, addr))
			continue;
		/* Walking down by index: the first seen of a pass is its last. */
		if (!best || (best->first_pass && !c->first_pass))
			best = c;
	}
	return best;
}

/* Whether a first-pass label right at addr fits it (libdw then skips the
 * local symbols). */
static bool first_pass_label_at(const struct sym_symtab *t, uint64_t addr)
{
	size_t i = count_at_or_below(t->sizeless, t->n_sizeless, addr);

	while (i-- > 0 && t->sizeless[i].lo == addr)
		if (t->sizeless[i].first_pass && label_fits(t, &t->sizeless[i], addr))
			return true;
	return false;
}

static const struct sym_symbol *lookup(const struct sym_symtab *t, uint64_t addr, bool *unsure)
{
	const struct sym_symbol *holders[MAX_HOLDERS];
	const struct sym_symbol *best;
	size_t n_holders = 0, below = count_at_or_below(t->sized, t->n_sized, addr);
	size_t labels_below = count_at_or_below(t->sizeless, t->n_sizeless, addr);
	uint64_t min_label = below ? t->sized[below - 1].max_end : 0;

	for (size_t i = below; i-- > 0 && t->sized[i].max_end > addr;) {
		if (addr - t->sized[i].lo >= t->sized[i].size)
			continue;
		if (n_holders == MAX_HOLDERS) {
			*unsure = true;
			return NULL;
		}
		holders[n_holders++] = &t->sized[i];
	}
	qsort(holders, n_holders, sizeof(holders[0]), cmp_holder);
	best = pick(holders, n_holders, true);
	if (best)
		return best;
	if (first_pass_label_at(t, addr))
		return label_at(t, addr, addr, true);
	best = pick(holders, n_holders, false);
	if (best)
		return best;
	/* No range holds addr, so every one seen ends at or below it. */
	if (labels_below && t->sizeless[labels_below - 1].lo > min_label)
		min_label = t->sizeless[labels_below - 1].lo;
	return label_at(t, addr, min_label, false);
}

const char *ml_symi_symbol_at(struct sym_module *m, uint64_t pc, uint64_t *off)
{
	const struct sym_symbol *sym;
	bool unsure = false;
	GElf_Off o = 0;
	GElf_Sym esym;
	const char *name;

	if (!m->mod)
		return NULL;
	if (!m->symtab_built) {
		m->symtab_built = true;
		if (build(m, &m->symtab) < 0)
			m->symtab = NULL;	/* out of memory: libdw's scan below */
	}
	if (m->symtab) {
		sym = lookup(m->symtab, pc, &unsure);
		if (!unsure) {
			if (sym)
				*off = pc - sym->lo;
			return sym ? sym->name : NULL;
		}
	}
	name = dwfl_module_addrinfo(m->mod, pc, &o, &esym, NULL, NULL, NULL);
	*off = o;
	return name;
}

void ml_symi_symtab_free(struct sym_module *m)
{
	free_table(m->symtab);
	m->symtab = NULL;
	m->symtab_built = false;
}
