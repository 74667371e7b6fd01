/* report/sym_frames.c - one address to its source-level frames with libdw:
 * the chain of inlined calls, with their files and lines. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/sym_internal.h"

#define MAX_SCOPES 256		/* nested functions, inlined calls and blocks */

/* The file and line an inlined call was made from. */
static void call_site(struct ml_symbolizer *s, Dwarf_Die *inlined, const char **file, int *line)
{
	Dwarf_Attribute attr;
	Dwarf_Word idx = 0, lineno = 0;
	Dwarf_Files *files;
	size_t nfiles;
	Dwarf_Die cu;

	*file = NULL;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &lineno) == 0)
		*line = (int)lineno;
	if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &idx) != 0)
		return;
	if (!dwarf_diecu(inlined, &cu, NULL, NULL) || dwarf_getsrcfiles(&cu, &files, &nfiles) != 0)
		return;
	if (idx < nfiles)
		*file = ml_symi_source_path(s, &cu, dwarf_filesrc(files, idx, NULL, NULL));
}

static bool is_function(int tag)
{
	return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram ||
	       tag == DW_TAG_entry_point;
}

/* Fills path with the scopes under parent that hold addr, outermost
 * first, from depth on; returns the new depth.  One walk down the CU:
 * siblings are skipped unless they hold addr (namespaces and classes,
 * which have no addresses, are looked into).  dwarf_getscopes would do
 * more: past an inlined instance it walks to the abstract definition's
 * scopes, which are not the call chain. */
static int descend(Dwarf_Die *parent, Dwarf_Addr addr, Dwarf_Die *path, int depth, int max)
{
	Dwarf_Die child;
	int found;

	if (depth >= max || dwarf_child(parent, &child) != 0)
		return depth;
	do {
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
		case DW_TAG_entry_point:
		case DW_TAG_lexical_block:
			if (dwarf_haspc(&child, addr) == 1) {
				path[depth] = child;
				return descend(&child, addr, path, depth + 1, max);
			}
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_module:
			found = descend(&child, addr, path, depth, max);
			if (found > depth)
				return found;
			break;
		default:
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return depth;
}

int ml_symi_dwarf_frames(struct ml_symbolizer *s, struct sym_module *m, uint64_t pc,
			 struct ml_frame *out, size_t max)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = ml_symi_cu_at(m, pc, &bias);
	Dwarf_Die path[MAX_SCOPES];
	Dwarf_Line *row;
	const char *file = NULL;
	int line = 0, depth;
	size_t k = 0;

	if (!cu)
		return 0;
	depth = descend(cu, pc - bias, path, 0, MAX_SCOPES);
	/* The line table row is the innermost inlined callee's position; each
	 * inlined instance's call site is the position in the function around it. */
	row = dwarf_getsrc_die(cu, pc - bias);
	if (row && dwarf_lineno(row, &line) == 0)
		file = ml_symi_source_path(s, cu, dwarf_linesrc(row, NULL, NULL));
	for (int i = depth - 1; i >= 0 && k < max; i--) {
		Dwarf_Die *scope = &path[i];
		int tag = dwarf_tag(scope);

		if (!is_function(tag))
			continue;
		out[k].function = ml_symi_die_name(s, m, scope);
		out[k].file = file;
		out[k].line = line;
		out[k].inlined = tag == DW_TAG_inlined_subroutine;
		if (!out[k].function)
			out[k].function = "??";
		k++;
		if (tag != DW_TAG_inlined_subroutine)
			break;
		call_site(s, scope, &file, &line);
	}
	return (int)k;
}
