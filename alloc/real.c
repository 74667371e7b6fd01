/* alloc/real.c - finds the real allocation functions behind the hooks
 * (dlsym RTLD_NEXT), the bootstrap buffer that serves dlsym's own
 * allocations while that lookup runs, and says when another malloc comes
 * first in the symbol lookup. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "core/core.h"
#include "alloc/real.h"

struct ml_real ml_real;
static volatile int resolving;

unsigned char ml_bootstrap[ML_BOOTSTRAP_SIZE] __attribute__((aligned(64)));
static size_t bootstrap_used;

/* A definition that only some library's own scope has (python3 importing
 * torch: libstdc++ loaded RTLD_LOCAL with it), whose calls come to memline
 * first in the global scope: the one they would have reached without
 * memline.  Its module is kept loaded (RTLD_NODELETE): the hook calls it
 * from then on; where it cannot be kept, none (the hook's fallback). */
static void *local_definition(const char *sym)
{
	const char *path;
	void *p = ml_export_anywhere(sym, &path);
	if (p && path && path[0]) {
		static void *cache;
		void *(*real_dlopen)(const char *, int) =
			(void *(*)(const char *, int))ml_next_sym("dlopen", &cache);
		if (!real_dlopen || !real_dlopen(path, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE))
			return NULL;
	}
	return p;
}

void *ml_real_lookup(const char *sym, uint64_t *absent_at)
{
	uint64_t adds, subs;
	ml_modules_load_counts(&adds, &subs);
	uint64_t stamp = adds == UINT64_MAX ? 0 : adds + 1;	/* 0: unknown, always ask */
	if (stamp && __atomic_load_n(absent_at, __ATOMIC_RELAXED) == stamp)
		return NULL;
	void *p = dlsym(RTLD_NEXT, sym);
	if (!p)
		p = local_definition(sym);
	if (!p)
		__atomic_store_n(absent_at, stamp, __ATOMIC_RELAXED);
	return p;
}

void ml_real_resolve(void)
{
	if (ml_real.ready || resolving)
		return;
	resolving = 1;
#define ML_REAL_LOAD(field, sym, ret, params) \
	ml_real.field = (ret (*) params)dlsym(RTLD_NEXT, sym);
	ML_REAL_SYMBOLS(ML_REAL_LOAD)
#undef ML_REAL_LOAD
	resolving = 0;
	ml_real.ready = 1;
	__atomic_and_fetch(&ml_pass_stop, ~ML_PASS_UNREADY, __ATOMIC_SEQ_CST);
}

bool ml_real_resolving(void)
{
	return resolving;
}

/* Each block is preceded by 16 bytes holding its size. */
void *ml_bootstrap_alloc(size_t size, size_t align)
{
	if (align < 16)
		align = 16;
	for (;;) {
		size_t used = __atomic_load_n(&bootstrap_used, __ATOMIC_RELAXED);
		size_t start = (used + 16 + align - 1) & ~(align - 1);
		size_t end = start + size;
		if (size > ML_BOOTSTRAP_SIZE || end > ML_BOOTSTRAP_SIZE)
			return NULL;
		if (__atomic_compare_exchange_n(&bootstrap_used, &used, end, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			memcpy(ml_bootstrap + start - 16, &size, sizeof(size));
			return ml_bootstrap + start;	/* static storage: already zero */
		}
	}
}

size_t ml_bootstrap_size(const void *p)
{
	size_t size;
	memcpy(&size, (const unsigned char *)p - 16, sizeof(size));
	return size;
}

/* ---- another malloc ahead of memline's ----
 * The program may define malloc itself, or an LD_PRELOAD order may put
 * another allocator first: then the symbol lookup gives every caller that
 * malloc, not memline's hook.  What reaches the hook is still recorded (a
 * wrapper that passes calls on with dlsym(RTLD_NEXT), memline's own
 * operator new); nothing else can be.  Said once, and in the profile. */

static const char *const c_family[] = {
	"malloc", "calloc", "realloc", "free", "reallocarray", "posix_memalign",
	"aligned_alloc", "memalign", "valloc", "pvalloc",
};

/* Appends text to out (cap bytes, NUL-terminated), cutting what does not fit. */
static void append(char *out, size_t cap, size_t *pos, const char *text)
{
	int n = snprintf(out + *pos, cap - *pos, "%s", text);
	if (n > 0)
		*pos += (size_t)n < cap - *pos ? (size_t)n : cap - *pos - 1;
}

/* Appends name to the list in out ("malloc, calloc and free" style). */
static void list_add(char *out, size_t cap, size_t *pos, const char *name, bool last)
{
	if (*pos)
		append(out, cap, pos, last ? " and " : ", ");
	append(out, cap, pos, name);
}

/* Whether the symbol lookup gives calls to name another definition than
 * memline's (*first: what it finds).  A non-PIE program that takes
 * malloc's address has a canonical PLT entry for it (an undefined symbol
 * with a value: Debian's python3): what dlsym finds there is not a
 * definition, its calls reach the first one, memline's. */
static bool shadowed_one(const char *name, void **first)
{
	void *mine = ml_self_export(name);
	Dl_info di;
	const ElfW(Sym) *sym = NULL;
	*first = dlsym(RTLD_DEFAULT, name);
	if (!mine || !*first || *first == mine)
		return false;
	return !(dladdr1(*first, &di, (void **)&sym, RTLD_DL_SYMENT) && sym &&
		 sym->st_shndx == SHN_UNDEF);
}

/* Which of the family come first from elsewhere; *where names the first
 * such module ("" for the program itself). */
static unsigned shadowed(bool is_shadowed[], const char **where)
{
	unsigned n = 0;
	*where = NULL;
	for (size_t i = 0; i < sizeof(c_family) / sizeof(c_family[0]); i++) {
		void *first;
		Dl_info di;
		is_shadowed[i] = shadowed_one(c_family[i], &first);
		if (!is_shadowed[i])
			continue;
		n++;
		if (!*where && dladdr(first, &di))
			*where = di.dli_fname ? di.dli_fname : "";
	}
	if (*where && (*where)[0] != '/') {	/* the program, as its argv[0] named it */
		static char exe[PATH_MAX];
		ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[len > 0 ? len : 0] = '\0';
		*where = exe;
	}
	dlerror();	/* a symbol libc lacks is not the program's error */
	return n;
}

void ml_real_check_first(void)
{
	bool is_shadowed[sizeof(c_family) / sizeof(c_family[0])];
	const char *where;
	unsigned n = shadowed(is_shadowed, &where), listed = 0;
	char note[1024];
	size_t pos = 0;
	if (!n)
		return;
	note[0] = '\0';
	for (size_t i = 0; i < sizeof(c_family) / sizeof(c_family[0]); i++)
		if (is_shadowed[i])
			list_add(note, sizeof(note), &pos, c_family[i], ++listed == n && n > 1);
	append(note, sizeof(note), &pos, n > 1 ? " are defined by " : " is defined by ");
	append(note, sizeof(note), &pos, where && where[0] ? where : "the program itself");
	append(note, sizeof(note), &pos, " ahead of memline: only the calls that reach "
			  "memline (passed on with dlsym(RTLD_NEXT), or from its C++ operator new) "
			  "are recorded");
	ml_core_flag(ML_META_ALLOC_SHADOWED);
	ml_core_note(note);
	ml_warn(note);
}

/* ---- libstdc++'s operator new and delete ----
 * libstdc++ defines them on the C functions: new(n) is malloc(n ? n : 1),
 * calling the new-handler and retrying while malloc fails (throwing
 * std::bad_alloc when there is none); delete(p) is free(p); new[] calls
 * new, sized delete and delete[] call delete, sized delete[] calls
 * delete[], each through the symbol lookup.  When the next definitions
 * of all six are libstdc++'s and every symbol they call reaches memline's
 * hook first, a hook may do what that chain would end in itself
 * (ml_real.malloc, ml_real.free) and leave libstdc++ only malloc's
 * failure: two hooks, two calls and a guard test fewer per new/delete. */

static const char *const cxx_chain[] = { "malloc", "free", "_Znwm", "_ZdlPv", "_ZdaPv" };

static bool in_libstdcxx(void *fn)
{
	Dl_info di;
	if (!fn || !dladdr(fn, &di) || !di.dli_fname)
		return false;
	const char *slash = strrchr(di.dli_fname, '/');
	return strncmp(slash ? slash + 1 : di.dli_fname, "libstdc++.so", 12) == 0;
}

/* Decides ml_real.cxx_direct once the six are known (guard held). */
void ml_real_cxx_decide(void)
{
	static uint64_t absent_at[6];
	void **fields[6] = {
		(void **)&ml_real.new_plain, (void **)&ml_real.new_array,
		(void **)&ml_real.delete_plain, (void **)&ml_real.delete_array,
		(void **)&ml_real.delete_sized, (void **)&ml_real.delete_array_sized,
	};
	static const char *const syms[6] = { "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm",
					     "_ZdaPvm" };
	int direct = 1;
	for (int i = 0; i < 6; i++) {
		if (!*fields[i])
			*fields[i] = ml_real_lookup(syms[i], &absent_at[i]);
		if (!*fields[i])
			return;	/* undecided: libstdc++ may load later */
		if (!in_libstdcxx(*fields[i]))
			direct = -1;
	}
	for (size_t i = 0; direct > 0 && i < sizeof(cxx_chain) / sizeof(cxx_chain[0]); i++) {
		void *first;
		if (shadowed_one(cxx_chain[i], &first))
			direct = -1;
	}
	dlerror();
	__atomic_store_n(&ml_real.cxx_direct, direct, __ATOMIC_RELEASE);
	if (direct > 0)
		__atomic_and_fetch(&ml_pass_stop, ~ML_PASS_NO_CXX, __ATOMIC_SEQ_CST);
}
