/* report/sym_internal.h - what the symbolizer's files share; not an API for other modules. */
#ifndef ML_REPORT_SYM_INTERNAL_H
#define ML_REPORT_SYM_INTERNAL_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "report/symbolize.h"

/* One address range of a compile unit (module-relative, as in DWARF). */
struct sym_cu_range {
	uint64_t lo, hi;	/* [lo, hi) */
	Dwarf_Addr bias;	/* add to lo and hi for the profile's addresses */
	Dwarf_Die *cu;		/* libdwfl's, lives as long as the Dwfl */
};

/* One module of the profile, with its own Dwfl (so that modules whose
 * address ranges overlap, e.g. one dlclose'd and another loaded in its
 * place, never disturb each other). */
struct sym_module {
	char *path;
	uint64_t bias, lo, hi;
	uint32_t flags;
	Dwfl *dwfl;		/* NULL when the file could not be used */
	Dwfl_Module *mod;
	/* libdw's load bias minus ours: 0, except for a fixed-address (ET_EXEC)
	 * executable placed elsewhere in a merged profile (report/merge.c),
	 * which libdw keeps at its own address.  Added to every address
	 * looked up in mod. */
	int64_t delta;
	/* CU ranges from the DIEs, built at the first address that libdw's
	 * .debug_aranges lookup misses (sym_cus.c). */
	struct sym_cu_range *cu_ranges;
	size_t n_cu_ranges;
	bool cu_ranges_built;
	/* The ELF symbols sorted by address, built at the first lookup
	 * (sym_symtab.c); NULL when that ran out of memory. */
	struct sym_symtab *symtab;
	bool symtab_built;
	/* A loaded module at addresses where another file was unloaded
	 * before: its frames there may be the other's (warned once). */
	enum { REUSE_UNKNOWN, REUSE_NO, REUSE_YES, REUSE_WARNED } reuse;
};

struct sym_string {
	char *str;
	uint64_t hash;
};

/* Interned strings: every string a frame points at is either libdw's (lives
 * as long as the module's Dwfl) or one of these. */
struct sym_strtab {
	struct sym_string *slots;
	size_t cap, used;
};

struct sym_cache_entry {
	uint64_t addr;		/* 0: empty slot */
	bool return_address;
	uint32_t n;
	struct ml_frame *frames;
};

struct ml_symbolizer {
	struct sym_module *mods;
	size_t n_mods;
	struct sym_cache_entry *cache;
	size_t cache_cap, cache_used;
	struct sym_strtab strings;
	Dwfl_Callbacks callbacks;
};

/* Returns the interned copy of str (owned by the table), NULL on ENOMEM. */
const char *ml_symi_intern(struct sym_strtab *t, const char *str);
void ml_symi_strtab_free(struct sym_strtab *t);

/* The CU holding pc (an absolute address) in module m, with the bias to
 * subtract from pc for DWARF addresses; NULL when no CU covers pc.  Works
 * without .debug_aranges. */
Dwarf_Die *ml_symi_cu_at(struct sym_module *m, uint64_t pc, Dwarf_Addr *bias);

/* The line table row for pc in module m (*row NULL when there is none) and
 * the CU it comes from (NULL when no CU covers pc). */
Dwarf_Die *ml_symi_line_at(struct sym_module *m, uint64_t pc, Dwarf_Line **row);
void ml_symi_cus_free(struct sym_module *m);

/* The name of the ELF symbol holding pc (an absolute address) in module m,
 * as dwfl_module_addrinfo chooses it, with *off = pc - its address; NULL
 * when there is none.  The name is libdw's (lives as long as the Dwfl). */
const char *ml_symi_symbol_at(struct sym_module *m, uint64_t pc, uint64_t *off);
void ml_symi_symtab_free(struct sym_module *m);

/* The source-level frames at pc (an absolute address, already minus 1 for
 * a return address) in module m: innermost inlined callee first, the real
 * function last.  Fills function, file, line and inlined of at most max
 * frames of out; returns the number written, 0 when the module has no DWARF
 * for pc, or -ENOMEM. */
int ml_symi_dwarf_frames(struct ml_symbolizer *s, struct sym_module *m, uint64_t pc,
			 struct ml_frame *out, size_t max);

/* The display name of a subprogram or inlined-subroutine DIE of module m:
 * its linkage name demangled; for a C++ function without one (internal
 * linkage) the demangled symbol at its entry, else its qualified name
 * without parameters; else its plain name.  NULL if it has none. */
const char *ml_symi_die_name(struct ml_symbolizer *s, struct sym_module *m, Dwarf_Die *die);

/* file as an absolute path: a relative one (as compilers write it for the
 * sources named on their command line) joined to the CU's compile
 * directory, interned.  Returns file itself if it is absolute or NULL. */
const char *ml_symi_source_path(struct ml_symbolizer *s, Dwarf_Die *cu, const char *file);

/* The build-id debug file for build-id id (n bytes) under dir into out:
 * "dir/.build-id/xx/rest.debug", or "" if n cannot name one. */
void ml_symi_build_id_path(char *out, size_t len, const char *dir, const uint8_t *id, size_t n);

/* Dwfl_Callbacks.find_debuginfo: the module's separate debug file, found
 * as elfutils' standard lookup finds it, but only among regular files. */
int ml_symi_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			   Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			   GElf_Word debuglink_crc, char **debuginfo_file_name);

/* Demangles a C++ (Itanium ABI) symbol.  Returns a malloc'd string, or NULL
 * when name is not a mangled name (the caller then uses name as it is). */
char *ml_sym_demangle(const char *name);

#endif
