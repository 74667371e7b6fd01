/* process/deepbind.c - libraries opened with RTLD_DEEPBIND look their
 * symbols up in their own scope (the library and its dependencies, libc
 * among them) before the global one, so their calls to malloc, free, exit,
 * exec... would reach libc, not memline: a block the program allocates and
 * such a library frees would show as a leak.  After a dlopen with
 * RTLD_DEEPBIND, every module it loaded gets its GOT slots for symbols that
 * libmemline exports pointed at libmemline's, where the library would
 * otherwise reach the very definition memline's hook passes the call on to.
 * (A library whose own scope defines the symbol otherwise, e.g. an
 * allocator of its own, keeps it.)  Allocations made by the library's
 * constructors, during dlopen itself, are not seen; their frees are then
 * frees of unknown blocks, which change nothing. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "core/core.h"
#include "process/internal.h"

typedef void *(*dlopen_fn)(const char *, int);

/* The real dlopen, for the jump in hooks.c; NULL until start-up. */
void *ml_proc_real_dlopen;

/* Finds the real dlopen, for hooks.c's jump. */
void ml_proc_deepbind_start(void)
{
	static void *cache;
	__atomic_store_n(&ml_proc_real_dlopen, ml_next_sym("dlopen", &cache), __ATOMIC_RELEASE);
}

/* ---- patching one module ---- */

struct patch_ctx {
	struct link_map *first;	/* the dlopen'ed library: its scope decides */
	unsigned long n_new;	/* objects this dlopen loaded: first and after */
	long page;
};

/* Whether info is one of the objects the dlopen loaded: the library and
 * what follows it in the loader's list (its dependencies, loaded with it). */
static bool is_new(const struct patch_ctx *ctx, const struct dl_phdr_info *info)
{
	const struct link_map *lm = ctx->first;
	for (unsigned long i = 0; lm && i < ctx->n_new; i++, lm = lm->l_next)
		if (lm->l_addr == info->dlpi_addr && lm->l_name == info->dlpi_name)
			return true;
	return false;
}

/* Writes value into the GOT slot at addr, making a RELRO page writable
 * for the moment it takes. */
static void write_slot(void **slot, void *value, uintptr_t relro_lo, uintptr_t relro_hi, long page)
{
	uintptr_t a = (uintptr_t)slot;
	bool relro = a >= relro_lo && a < relro_hi;
	void *start = (void *)(a & ~(uintptr_t)(page - 1));
	if (relro && mprotect(start, (size_t)page, PROT_READ | PROT_WRITE) != 0)
		return;
	__atomic_store_n(slot, value, __ATOMIC_RELAXED);
	if (relro)
		mprotect(start, (size_t)page, PROT_READ);
}

/* Whether a reference to name from the library would reach the definition
 * memline's hook passes calls on to: then memline's hook takes its place. */
static bool ours_to_take(struct link_map *handle, const char *name)
{
	void *next_cache = NULL;
	void *local = dlsym(handle, name);
	void *next = ml_next_sym(name, &next_cache);
	return local && local == next;
}

struct dyn_tables {
	const ElfW(Sym) *symtab;
	const char *strtab;
	size_t strsz;
	const ElfW(Rela) *rela, *jmprel;
	size_t relasz, jmprelsz;
};

static void read_dynamic(const struct dl_phdr_info *info, const ElfW(Dyn) *d, struct dyn_tables *t)
{
	uintptr_t base = info->dlpi_addr;
	memset(t, 0, sizeof(*t));
	for (; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: t->symtab = (const void *)ml_dyn_addr(base, d->d_un.d_ptr); break;
		case DT_STRTAB: t->strtab = (const void *)ml_dyn_addr(base, d->d_un.d_ptr); break;
		case DT_STRSZ: t->strsz = d->d_un.d_val; break;
		case DT_RELA: t->rela = (const void *)ml_dyn_addr(base, d->d_un.d_ptr); break;
		case DT_RELASZ: t->relasz = d->d_un.d_val; break;
		case DT_JMPREL: t->jmprel = (const void *)ml_dyn_addr(base, d->d_un.d_ptr); break;
		case DT_PLTRELSZ: t->jmprelsz = d->d_un.d_val; break;
		default: break;
		}
	}
}

static void patch_relocs(const struct dl_phdr_info *info, const struct dyn_tables *t,
			 const ElfW(Rela) *r, size_t bytes, uintptr_t relro_lo, uintptr_t relro_hi,
			 struct patch_ctx *ctx)
{
	for (size_t i = 0; r && i < bytes / sizeof(*r); i++) {
		uint32_t type = ELF64_R_TYPE(r[i].r_info), sym = ELF64_R_SYM(r[i].r_info);
		if (!sym || (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
			     !(type == R_X86_64_64 && r[i].r_addend == 0)))
			continue;
		const ElfW(Sym) *s = &t->symtab[sym];
		if (s->st_shndx != SHN_UNDEF || s->st_name >= t->strsz)
			continue;	/* the module's own definition */
		const char *name = t->strtab + s->st_name;
		void *mine = ml_self_export(name);
		void **slot = (void **)(info->dlpi_addr + r[i].r_offset);
		if (!mine || *slot == mine || !ours_to_take(ctx->first, name))
			continue;
		write_slot(slot, mine, relro_lo, relro_hi, ctx->page);
	}
}

static int patch_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct patch_ctx *ctx = arg;
	const ElfW(Dyn) *dyn = NULL;
	uintptr_t relro_lo = 0, relro_hi = 0;
	struct dyn_tables t;
	(void)size;
	if (!is_new(ctx, info))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const void *)(info->dlpi_addr + ph->p_vaddr);
		if (ph->p_type == PT_GNU_RELRO) {
			/* As the loader protects it: whole pages, the last
			 * partial one left writable. */
			relro_lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(ctx->page - 1);
			relro_hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) &
				   ~(uintptr_t)(ctx->page - 1);
		}
	}
	if (!dyn)
		return 0;
	read_dynamic(info, dyn, &t);
	if (!t.symtab || !t.strtab)
		return 0;
	patch_relocs(info, &t, t.rela, t.relasz, relro_lo, relro_hi, ctx);
	patch_relocs(info, &t, t.jmprel, t.jmprelsz, relro_lo, relro_hi, ctx);
	return 0;
}

/* ---- the caller's view of the file name ---- */

/* Where the caller's dlopen(file) would look: its namespace, and for a name
 * without a slash the first file found along the caller's search path
 * (RPATH, LD_LIBRARY_PATH, RUNPATH, the system directories), in out.
 * Returns the name to open (out, or file itself: ld.so.cache then decides,
 * as for any caller). */
static const char *as_the_caller(const char *file, const void *caller, char *out, size_t cap,
				 Lmid_t *ns)
{
	Dl_info info;
	struct link_map *lm = NULL;
	Dl_serinfo size;
	*ns = LM_ID_BASE;
	if (!file || !dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return file;
	if (dlinfo(lm, RTLD_DI_LMID, ns) != 0)
		*ns = LM_ID_BASE;
	union { Dl_serinfo si; char bytes[2048]; } buf;
	if (strchr(file, '/') || dlinfo(lm, RTLD_DI_SERINFOSIZE, &size) != 0 ||
	    size.dls_size > sizeof(buf))
		return file;
	buf.si.dls_size = size.dls_size;
	buf.si.dls_cnt = size.dls_cnt;
	if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &buf.si) != 0 || dlinfo(lm, RTLD_DI_SERINFO, &buf.si) != 0)
		return file;
	for (unsigned i = 0; i < buf.si.dls_cnt; i++) {
		int n = snprintf(out, cap, "%s/%s", buf.si.dls_serpath[i].dls_name, file);
		if (n > 0 && (size_t)n < cap && access(out, F_OK) == 0)
			return out;
	}
	return file;
}

/* The number of objects ever loaded, for telling whether a dlopen loaded
 * anything. */
static int count_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

void *ml_proc_dlopen_slow(const char *file, int mode, void *caller)
{
	dlopen_fn real = __atomic_load_n(&ml_proc_real_dlopen, __ATOMIC_ACQUIRE);
	if (!real)
		real = ML_NEXT(dlopen_fn, "dlopen");
	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	if (!(mode & RTLD_DEEPBIND) || !ml_core_active)
		return real(file, mode);	/* before start-up: the caller is ours */
	char path[PATH_MAX];
	Lmid_t ns;
	unsigned long long adds_before = 0, adds_after = 0;
	bool guarded = ml_guard_enter_always();
	const char *name = as_the_caller(file, caller, path, sizeof(path), &ns);
	dl_iterate_phdr(count_adds, &adds_before);
	if (guarded)
		ml_guard_exit();
	void *h = ns == LM_ID_BASE ? real(name, mode) : dlmopen(ns, name, mode);
	if (!h || !file)
		return h;
	guarded = ml_guard_enter_always();
	dl_iterate_phdr(count_adds, &adds_after);
	struct link_map *lm = NULL;
	if (adds_after > adds_before && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm) {
		struct patch_ctx ctx = { lm, (unsigned long)(adds_after - adds_before),
					 sysconf(_SC_PAGESIZE) };
		dl_iterate_phdr(patch_module, &ctx);
	}
	dlerror();	/* our lookups' misses are not the program's errors */
	if (guarded)
		ml_guard_exit();
	return h;
}
