/* core/selfsyms.c - libmemline's own exported functions, by name, read from
 * its dynamic symbol table: what libmemline itself defines, whatever the
 * symbol lookup would find first (the program, an earlier preload). */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include "core/internal.h"

static struct {
	uintptr_t base;
	const ElfW(Sym) *symtab;
	const char *strtab;
	const uint32_t *gnu_hash;
	volatile int state;	/* 0 not looked, 1 found, 2 unusable */
} self;

static void find_self(void)
{
	Dl_info info;
	struct link_map *lm = NULL;
	int state = 2;
	if (dladdr1((void *)&find_self, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm) {
		self.base = lm->l_addr;
		for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
			if (d->d_tag == DT_SYMTAB)
				self.symtab = (const void *)ml_dyn_addr(self.base, d->d_un.d_ptr);
			else if (d->d_tag == DT_STRTAB)
				self.strtab = (const void *)ml_dyn_addr(self.base, d->d_un.d_ptr);
			else if (d->d_tag == DT_GNU_HASH)
				self.gnu_hash = (const void *)ml_dyn_addr(self.base, d->d_un.d_ptr);
		}
		if (self.symtab && self.strtab && self.gnu_hash)
			state = 1;
	}
	__atomic_store_n(&self.state, state, __ATOMIC_RELEASE);
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;
	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

void *ml_self_export(const char *name)
{
	if (!__atomic_load_n(&self.state, __ATOMIC_ACQUIRE))
		find_self();
	if (self.state != 1)
		return NULL;
	const uint32_t *ht = self.gnu_hash;
	uint32_t nbuckets = ht[0], symoffset = ht[1], bloom_size = ht[2];
	const uint32_t *buckets = ht + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t h = gnu_hash(name);
	uint32_t i = nbuckets ? buckets[h % nbuckets] : 0;
	if (i < symoffset)
		return NULL;
	for (;; i++) {
		uint32_t h2 = chain[i - symoffset];
		const ElfW(Sym) *sym = &self.symtab[i];
		if ((h | 1) == (h2 | 1) && strcmp(self.strtab + sym->st_name, name) == 0)
			return sym->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym->st_info) == STT_FUNC ?
				(void *)(self.base + sym->st_value) : NULL;
		if (h2 & 1)
			return NULL;
	}
}
