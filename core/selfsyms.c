/* core/selfsyms.c - exported functions by name, read from dynamic symbol
 * tables: libmemline's own (what libmemline itself defines, whatever the
 * symbol lookup would find first: the program, an earlier preload), and
 * the first loaded module's that defines one, in whatever scope it was
 * loaded (the real C++ operators where only an extension's local scope
 * has libstdc++). */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include "core/internal.h"

/* A loaded module's dynamic symbol table, read through its GNU hash table
 * (a module with only the old SysV table is not read). */
struct dynsyms {
	uintptr_t base;
	const ElfW(Sym) *symtab;
	const char *strtab;
	const uint32_t *gnu_hash;
};

static bool read_dynsyms(uintptr_t base, const ElfW(Dyn) *d, struct dynsyms *t)
{
	memset(t, 0, sizeof(*t));
	t->base = base;
	for (; d && d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_SYMTAB)
			t->symtab = (const void *)ml_dyn_addr(base, d->d_un.d_ptr);
		else if (d->d_tag == DT_STRTAB)
			t->strtab = (const void *)ml_dyn_addr(base, d->d_un.d_ptr);
		else if (d->d_tag == DT_GNU_HASH)
			t->gnu_hash = (const void *)ml_dyn_addr(base, d->d_un.d_ptr);
	}
	return t->symtab && t->strtab && t->gnu_hash;
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;
	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* The function t's module defines and exports as name, or NULL. */
static void *function_in(const struct dynsyms *t, const char *name)
{
	const uint32_t *ht = t->gnu_hash;
	uint32_t nbuckets = ht[0], symoffset = ht[1], bloom_size = ht[2];
	const uint32_t *buckets = ht + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t h = gnu_hash(name);
	uint32_t i = nbuckets ? buckets[h % nbuckets] : 0;
	if (i < symoffset)
		return NULL;
	for (;; i++) {
		uint32_t h2 = chain[i - symoffset];
		const ElfW(Sym) *sym = &t->symtab[i];
		if ((h | 1) == (h2 | 1) && strcmp(t->strtab + sym->st_name, name) == 0)
			return sym->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym->st_info) == STT_FUNC ?
				(void *)(t->base + sym->st_value) : NULL;
		if (h2 & 1)
			return NULL;
	}
}

static struct {
	struct dynsyms t;
	volatile int state;	/* 0 not looked, 1 found, 2 unusable */
} self;

static void find_self(void)
{
	Dl_info info;
	struct link_map *lm = NULL;
	int state = 2;
	if (dladdr1((void *)&find_self, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm &&
	    read_dynsyms(lm->l_addr, lm->l_ld, &self.t))
		state = 1;
	__atomic_store_n(&self.state, state, __ATOMIC_RELEASE);
}

void *ml_self_export(const char *name)
{
	if (!__atomic_load_n(&self.state, __ATOMIC_ACQUIRE))
		find_self();
	return self.state == 1 ? function_in(&self.t, name) : NULL;
}

struct anywhere {
	const char *name;
	bool (*pick)(const char *path);
	void *found;
	const char *path;
};

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct anywhere *q = arg;
	const ElfW(Dyn) *dyn = NULL;
	struct dynsyms t;
	uintptr_t here = (uintptr_t)&visit;
	(void)size;
	if (q->pick && !q->pick(info->dlpi_name ? info->dlpi_name : ""))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && here - lo < ph->p_memsz)
			return 0;	/* memline's own: its hooks, not the real ones */
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const void *)lo;
	}
	if (!dyn || !read_dynsyms(info->dlpi_addr, dyn, &t))
		return 0;
	q->found = function_in(&t, q->name);
	q->path = info->dlpi_name;
	return q->found != NULL;
}

void *ml_export_among(const char *name, const char **path, bool (*pick)(const char *path))
{
	struct anywhere q = { name, pick, NULL, NULL };
	dl_iterate_phdr(visit, &q);
	*path = q.found ? q.path : NULL;
	return q.found;
}

void *ml_export_anywhere(const char *name, const char **path)
{
	return ml_export_among(name, path, NULL);
}
