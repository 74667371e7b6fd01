/* report/sym_names.c - the names the symbolizer gives: function names from
 * DWARF (demangled, qualified), absolute source paths, and the string table
 * that owns them. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/sym_internal.h"

static uint64_t hash_str(const char *str)
{
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */

	for (; *str; str++)
		h = (h ^ (unsigned char)*str) * 0x100000001b3ull;
	return h;
}

static size_t strtab_slot(const struct sym_string *slots, size_t cap, const char *str, uint64_t h)
{
	size_t i = h & (cap - 1);

	while (slots[i].str && (slots[i].hash != h || strcmp(slots[i].str, str) != 0))
		i = (i + 1) & (cap - 1);
	return i;
}

static int strtab_grow(struct sym_strtab *t)
{
	size_t cap = t->cap ? 2 * t->cap : 256;
	struct sym_string *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].str)
			slots[strtab_slot(slots, cap, t->slots[i].str, t->slots[i].hash)] = t->slots[i];
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

const char *ml_symi_intern(struct sym_strtab *t, const char *str)
{
	uint64_t h = hash_str(str);
	size_t i;

	if (2 * (t->used + 1) > t->cap && strtab_grow(t) < 0)
		return NULL;
	i = strtab_slot(t->slots, t->cap, str, h);
	if (!t->slots[i].str) {
		t->slots[i].str = strdup(str);
		if (!t->slots[i].str)
			return NULL;
		t->slots[i].hash = h;
		t->used++;
	}
	return t->slots[i].str;
}

void ml_symi_strtab_free(struct sym_strtab *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->slots[i].str);
	free(t->slots);
	t->slots = NULL;
	t->cap = t->used = 0;
}

const char *ml_symi_source_path(struct ml_symbolizer *s, Dwarf_Die *cu, const char *file)
{
	Dwarf_Attribute attr;
	const char *dir;
	char *joined;
	const char *interned;

	if (!file || file[0] == '/' || !cu)
		return file;
	dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &attr));
	if (!dir || asprintf(&joined, "%s/%s", dir, file) < 0)
		return file;
	interned = ml_symi_intern(&s->strings, joined);
	free(joined);
	return interned ? interned : file;
}

/* A string attribute, following abstract origins and specifications (an
 * inlined call or an out-of-line member function has its names there). */
static const char *die_string(Dwarf_Die *die, unsigned int name)
{
	Dwarf_Attribute attr;

	return dwarf_formstring(dwarf_attr_integrate(die, name, &attr));
}

static bool is_cplusplus(Dwarf_Die *die)
{
	Dwarf_Die cu;
	int lang;

	if (!dwarf_diecu(die, &cu, NULL, NULL))
		return false;
	lang = dwarf_srclang(&cu);
	return lang == DW_LANG_C_plus_plus || lang == DW_LANG_C_plus_plus_03 ||
	       lang == DW_LANG_C_plus_plus_11 || lang == DW_LANG_C_plus_plus_14;
}

static const char *intern_demangled(struct ml_symbolizer *s, const char *mangled)
{
	char *dem = ml_sym_demangle(mangled);
	const char *name;

	if (!dem)
		return NULL;
	name = ml_symi_intern(&s->strings, dem);
	free(dem);
	return name;
}

/* A C++ function with internal linkage (static, or in an anonymous
 * namespace) has no linkage name in DWARF, but the symbol table still has
 * its mangled name at its entry. */
static const char *symbol_at_entry(struct ml_symbolizer *s, struct sym_module *m, Dwarf_Die *die)
{
	Dwarf_Addr entry, bias;
	uint64_t off = 0;
	const char *name;

	if (dwarf_tag(die) != DW_TAG_subprogram || dwarf_entrypc(die, &entry) != 0 ||
	    !dwfl_module_getdwarf(m->mod, &bias))
		return NULL;
	name = ml_symi_symbol_at(m, entry + bias, &off);
	if (!name || off != 0)
		return NULL;
	return intern_demangled(s, name);
}

/* The DIE that declares die: past abstract origins and specifications. */
static Dwarf_Die declaration_of(Dwarf_Die *die)
{
	Dwarf_Die decl = *die, next;
	Dwarf_Attribute attr;

	for (int hops = 0; hops < 8; hops++) {
		if (!dwarf_formref_die(dwarf_attr(&decl, DW_AT_abstract_origin, &attr), &next) &&
		    !dwarf_formref_die(dwarf_attr(&decl, DW_AT_specification, &attr), &next))
			break;
		decl = next;
	}
	return decl;
}

/* "ns::Class::name" from the namespaces and classes around the declaration
 * (no parameter list: that would need the types printed). */
static const char *qualified_name(struct ml_symbolizer *s, Dwarf_Die *die)
{
	Dwarf_Die decl = declaration_of(die);
	Dwarf_Die *scopes = NULL;
	const char *name = dwarf_diename(&decl), *result;
	char buf[1024];
	size_t len = 0;
	int n;

	if (!name)
		return NULL;
	n = dwarf_getscopes_die(&decl, &scopes);
	buf[0] = '\0';
	/* scopes[0] is decl itself, scopes[n - 1] the CU. */
	for (int i = n - 2; i >= 1 && len < sizeof(buf); i--) {
		int tag = dwarf_tag(&scopes[i]);
		const char *part = dwarf_diename(&scopes[i]);

		if (tag != DW_TAG_namespace && tag != DW_TAG_class_type &&
		    tag != DW_TAG_structure_type && tag != DW_TAG_union_type)
			continue;
		if (!part)
			part = tag == DW_TAG_namespace ? "(anonymous namespace)" : "(anonymous)";
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s::", part);
	}
	free(scopes);
	if (len >= sizeof(buf))
		return name;
	snprintf(buf + len, sizeof(buf) - len, "%s", name);
	result = ml_symi_intern(&s->strings, buf);
	return result ? result : name;
}

const char *ml_symi_die_name(struct ml_symbolizer *s, struct sym_module *m, Dwarf_Die *die)
{
	const char *linkage = die_string(die, DW_AT_linkage_name);
	const char *name;

	if (!linkage)
		linkage = die_string(die, DW_AT_MIPS_linkage_name);
	name = intern_demangled(s, linkage);
	if (name)
		return name;
	if (is_cplusplus(die)) {
		name = symbol_at_entry(s, m, die);
		return name ? name : qualified_name(s, die);
	}
	name = die_string(die, DW_AT_name);
	return name ? name : linkage;
}
