/* report/sym_source.c - where a function lives in the source, by name: its
 * file, its declaration line and the last line of its code (for the
 * `lines --function` view). */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/sym_internal.h"

struct source_query {
	const char *name;
	struct sym_module *mod;	/* the module being searched */
	const char *file;
	int first_line, last_line;
	bool found;
	struct ml_sym_source *all;	/* non-NULL: collect every match here */
	size_t max, n;			/* all's room; matches found */
};

/* Past an operator's name ("operator<<", "operator()"), or c itself. */
static const char *skip_operator(const char *full, const char *c)
{
	if (c - full < 8 || strncmp(c - 8, "operator", 8) != 0)
		return c;
	if (strncmp(c, "()", 2) == 0 || strncmp(c, "[]", 2) == 0)
		return c + 2;
	while (*c && strchr("<>=!+-*/%^&|~,", *c))
		c++;
	return c;
}

/* Length of the demangled name without its parameter list ("ns::f" of
 * "ns::f(int) const"): up to the first '(' outside template arguments that
 * belongs neither to "(anonymous namespace)" nor to an operator's name. */
static size_t name_without_params(const char *full)
{
	static const char anon[] = "(anonymous namespace)";
	int depth = 0;

	for (const char *c = full; *c; c++) {
		const char *past = skip_operator(full, c);

		if (past != c) {
			c = past - 1;
			continue;
		}
		if (*c == '<') {
			depth++;
		} else if (*c == '>' && depth > 0) {
			depth--;
		} else if (*c == '(' && depth == 0) {
			if (strncmp(c, anon, sizeof(anon) - 1) == 0) {
				c += sizeof(anon) - 2;
				continue;
			}
			return (size_t)(c - full);
		}
	}
	return strlen(full);
}

/* Where the name starts past a return type ("f<int>" of "void f<int>",
 * as template functions demangle): after the last space at depth 0 that
 * is neither in "(anonymous namespace)" nor after "operator" (as in
 * "operator new" or a conversion "operator int"). */
static size_t name_start(const char *full, size_t len)
{
	static const char anon[] = "(anonymous namespace)";
	size_t start = 0;
	int depth = 0;

	for (size_t i = 0; i < len; i++) {
		if (strncmp(full + i, anon, sizeof(anon) - 1) == 0) {
			i += sizeof(anon) - 2;
		} else if (full[i] == '<' || full[i] == '(') {
			depth++;
		} else if ((full[i] == '>' || full[i] == ')') && depth > 0) {
			depth--;
		} else if (full[i] == ' ' && depth == 0) {
			if (i >= 8 && strncmp(full + i - 8, "operator", 8) == 0)
				break;
			start = i + 1;
		}
	}
	return start;
}

bool ml_sym_name_matches(const char *full, const char *want)
{
	size_t len, start, wlen = strlen(want);

	if (!full)
		return false;
	if (strcmp(full, want) == 0)
		return true;
	len = name_without_params(full);
	if (wlen == len && strncmp(full, want, len) == 0)
		return true;
	start = name_start(full, len);
	return start > 0 && wlen == len - start && strncmp(full + start, want, wlen) == 0;
}

static bool name_matches(struct ml_symbolizer *s, struct sym_module *m, Dwarf_Die *die,
			 const char *want)
{
	return ml_sym_name_matches(ml_symi_die_name(s, m, die), want);
}

/* The highest line of rows in file that lie in the function's ranges. */
static int last_line_of(Dwarf_Die *cu, Dwarf_Die *fn, const char *file, int first)
{
	Dwarf_Addr base, start, end;
	Dwarf_Lines *lines;
	size_t nlines;
	ptrdiff_t off = 0;
	int last = first;

	if (dwarf_getsrclines(cu, &lines, &nlines) != 0)
		return last;
	while ((off = dwarf_ranges(fn, off, &base, &start, &end)) > 0) {
		for (size_t i = 0; i < nlines; i++) {
			Dwarf_Line *row = dwarf_onesrcline(lines, i);
			Dwarf_Addr addr;
			const char *src;
			int lineno;
			bool end_seq = false;

			/* An end-of-sequence row only marks where the code before it
			 * ends; its address may be this function's first byte. */
			if (!row || dwarf_lineaddr(row, &addr) != 0 || addr < start || addr >= end ||
			    dwarf_lineendsequence(row, &end_seq) != 0 || end_seq)
				continue;
			src = dwarf_linesrc(row, NULL, NULL);
			if (dwarf_lineno(row, &lineno) == 0 && src && strcmp(src, file) == 0 &&
			    lineno > last)
				last = lineno;
		}
	}
	return last;
}

/* The file a function was declared in.  dwarf_decl_file (elfutils 0.188)
 * takes index 0 for "no file", as in DWARF 4; in DWARF 5 it is the line
 * table's first entry, the primary source file, where clang puts most
 * functions.  The index is read in the CU that holds the attribute (an
 * abstract origin may sit in another). */
static const char *decl_file(Dwarf_Die *fn)
{
	Dwarf_Attribute attr;
	Dwarf_Word idx;
	Dwarf_Die cu;
	Dwarf_Half version;
	Dwarf_Files *files;
	size_t nfiles;

	if (dwarf_formudata(dwarf_attr_integrate(fn, DW_AT_decl_file, &attr), &idx) != 0 ||
	    !dwarf_cu_die(attr.cu, &cu, &version, NULL, NULL, NULL, NULL, NULL))
		return NULL;
	if ((idx == 0 && version < 5) || dwarf_getsrcfiles(&cu, &files, &nfiles) != 0 ||
	    idx >= nfiles)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

static bool take_function(struct ml_symbolizer *s, Dwarf_Die *cu, Dwarf_Die *fn,
			  struct source_query *q)
{
	Dwarf_Addr low;
	const char *file;
	int first = 0;

	/* Definitions only: a declaration or an abstract (inline-only) copy has
	 * no code of its own. */
	if (dwarf_lowpc(fn, &low) != 0 && !dwarf_hasattr(fn, DW_AT_ranges))
		return false;
	if (!name_matches(s, q->mod, fn, q->name))
		return false;
	file = decl_file(fn);
	if (!file || dwarf_decl_line(fn, &first) != 0)
		return false;
	q->file = ml_symi_source_path(s, cu, file);
	q->first_line = first;
	q->last_line = last_line_of(cu, fn, file, first);
	q->found = true;
	if (!q->all)
		return true;
	if (q->n < q->max)	/* collecting: keep walking */
		q->all[q->n] = (struct ml_sym_source){ q->file, q->first_line, q->last_line, NULL };
	q->n++;
	return false;
}

/* Walks the DIEs under parent: namespaces, classes and the CU itself may
 * hold function definitions; function bodies are not searched. */
static bool search_children(struct ml_symbolizer *s, Dwarf_Die *cu, Dwarf_Die *parent,
			    struct source_query *q)
{
	Dwarf_Die child;

	if (dwarf_child(parent, &child) != 0)
		return false;
	do {
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
			if (take_function(s, cu, &child, q))
				return true;
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
			if (search_children(s, cu, &child, q))
				return true;
			break;
		default:
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

static bool search_module(struct ml_symbolizer *s, struct sym_module *m, struct source_query *q)
{
	Dwarf_Addr bias;
	Dwarf_Die *cu = NULL;

	if (!m->mod)
		return false;
	q->mod = m;
	while ((cu = dwfl_module_nextcu(m->mod, cu, &bias)) != NULL)
		if (search_children(s, cu, cu, q))
			return true;
	return false;
}

int ml_sym_function_sources(struct ml_symbolizer *s, const char *name,
			    struct ml_sym_source *out, size_t max)
{
	struct source_query q = { .name = name, .all = out, .max = max };

	for (size_t i = 0; i < s->n_mods; i++)
		search_module(s, &s->mods[i], &q);
	if (q.n == 0)
		return -ENOENT;
	return (int)(q.n < max ? q.n : max);
}

int ml_sym_function_source(struct ml_symbolizer *s, const char *name,
			   const char **file, int *first_line, int *last_line)
{
	struct source_query q = { .name = name };
	for (size_t i = 0; i < s->n_mods; i++) {
		if (!search_module(s, &s->mods[i], &q))
			continue;
		*file = q.file;
		*first_line = q.first_line;
		*last_line = q.last_line;
		return 0;
	}
	return -ENOENT;
}
