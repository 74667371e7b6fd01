/* report/sym_cus.c - from an address to its compile unit and line table row,
 * also in files without .debug_aranges (clang emits none unless asked with
 * -gdwarf-aranges, and elfutils before 0.191 finds no CU without them). */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/sym_internal.h"

static int cmp_range(const void *a, const void *b)
{
	const struct sym_cu_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int add_range(struct sym_module *m, size_t *cap, Dwarf_Die *cu, Dwarf_Addr bias,
		     Dwarf_Addr lo, Dwarf_Addr hi)
{
	struct sym_cu_range *grown;

	if (*cap == m->n_cu_ranges) {
		*cap = *cap ? 2 * *cap : 64;
		grown = realloc(m->cu_ranges, *cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		m->cu_ranges = grown;
	}
	m->cu_ranges[m->n_cu_ranges++] = (struct sym_cu_range){ lo, hi, bias, cu };
	return 0;
}

/* Every CU's address ranges (low/high pc or DW_AT_ranges, DWARF 5 rnglists
 * included), sorted by start.  A range starting at 0 is code the linker
 * dropped (its relocation resolved to nothing), not code at address 0. */
static int build_index(struct sym_module *m)
{
	Dwarf_Die *cu = NULL;
	Dwarf_Addr bias, base, lo, hi;
	size_t cap = 0;

	m->cu_ranges_built = true;
	while ((cu = dwfl_module_nextcu(m->mod, cu, &bias)) != NULL) {
		ptrdiff_t off = 0;

		while ((off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0)
			if (lo != 0 && lo < hi && add_range(m, &cap, cu, bias, lo, hi) < 0)
				return -ENOMEM;
	}
	if (m->n_cu_ranges)
		qsort(m->cu_ranges, m->n_cu_ranges, sizeof(*m->cu_ranges), cmp_range);
	return 0;
}

/* The CU whose ranges hold addr (module-relative, i.e. minus bias): the
 * last range starting at or before addr, or one of the few before it when
 * ranges nest or overlap. */
static struct sym_cu_range *index_lookup(struct sym_module *m, Dwarf_Addr pc)
{
	size_t lo = 0, hi = m->n_cu_ranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->cu_ranges[mid].lo + m->cu_ranges[mid].bias <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, seen = 0; i > 0 && seen < 16; i--, seen++) {
		struct sym_cu_range *r = &m->cu_ranges[i - 1];

		if (pc < r->hi + r->bias)
			return r;
	}
	return NULL;
}

Dwarf_Die *ml_symi_cu_at(struct sym_module *m, uint64_t pc, Dwarf_Addr *bias)
{
	Dwarf_Die *cu;
	struct sym_cu_range *r;

	if (!m->mod)
		return NULL;
	/* libdw's own lookup uses .debug_aranges where a CU has them. */
	cu = dwfl_module_addrdie(m->mod, pc, bias);
	if (cu)
		return cu;
	if (!m->cu_ranges_built && build_index(m) < 0)
		return NULL;
	r = index_lookup(m, pc);
	if (!r)
		return NULL;
	*bias = r->bias;
	return r->cu;
}

Dwarf_Die *ml_symi_line_at(struct sym_module *m, uint64_t pc, Dwarf_Line **row)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = ml_symi_cu_at(m, pc, &bias);

	*row = cu ? dwarf_getsrc_die(cu, pc - bias) : NULL;
	return cu;
}

void ml_symi_cus_free(struct sym_module *m)
{
	free(m->cu_ranges);
	m->cu_ranges = NULL;
	m->n_cu_ranges = 0;
	m->cu_ranges_built = false;
}
