/* core/modules.c - the module map (dl_iterate_phdr): path, load bias,
 * PT_LOAD range and GNU build-id of every object seen during the run.
 * Modules that were dlclose'd stay in the map, flagged ML_MOD_UNLOADED. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include "core/internal.h"

#define MAX_MODULES 4096u

static struct ml_module_rec *mods[MAX_MODULES];
static uint32_t n_mods;
static uint32_t generation;
static uint64_t runtime_addr;
static ml_spin_t lock;

void ml_modules_set_runtime(uint64_t addr)
{
	runtime_addr = addr;
}

/* Copies the GNU build-id out of the object's PT_NOTE segments. */
static uint32_t find_build_id(const struct dl_phdr_info *info, uint8_t *out, uint32_t max)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof(*n);
			const char *desc = name + ((n->n_namesz + 3) & ~3u);
			if (desc + n->n_descsz > end)
				break;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0) {
				uint32_t len = n->n_descsz < max ? n->n_descsz : max;
				memcpy(out, desc, len);
				return len;
			}
			p = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 0;
}

static struct ml_module_rec *lookup(const char *path, uint64_t bias)
{
	for (uint32_t i = 0; i < n_mods; i++)
		if (mods[i]->bias == bias && strcmp(mods[i]->path, path) == 0)
			return mods[i];
	return NULL;
}

static void load_range(const struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uint64_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < *lo)
			*lo = a;
		if (a + ph->p_memsz > *hi)
			*hi = a + ph->p_memsz;
	}
	if (*lo == UINT64_MAX)
		*lo = 0;
}

/* Parses a hexadecimal number at *p, moving *p past it. */
static uint64_t parse_hex(const char **p, const char *end)
{
	uint64_t v = 0;
	for (; *p < end; (*p)++) {
		char c = **p;
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v << 4 | (uint64_t)d;
	}
	return v;
}

/* If the /proc/self/maps line [line, end) maps addr, copies its path to
 * out (without " (deleted)") and returns true. */
static bool line_maps(const char *line, const char *end, uint64_t addr, char *out, size_t cap)
{
	const char *p = line;
	uint64_t lo = parse_hex(&p, end);
	if (p == end || *p++ != '-')
		return false;
	uint64_t hi = parse_hex(&p, end);
	if (addr < lo || addr >= hi)
		return false;
	for (int field = 0; field < 4 && p < end; field++) {	/* perms offset dev inode */
		while (p < end && *p == ' ')
			p++;
		while (p < end && *p != ' ')
			p++;
	}
	while (p < end && *p == ' ')
		p++;
	size_t len = (size_t)(end - p);
	if (len >= 10 && memcmp(end - 10, " (deleted)", 10) == 0)
		len -= 10;
	if (len == 0 || *p != '/' || len >= cap)
		return false;
	memcpy(out, p, len);
	out[len] = '\0';
	return true;
}

/* The absolute path of the file mapped at addr, from /proc/self/maps (the
 * kernel's name for it, whatever the directory the program is in now).
 * Async-signal-safe: open, read, close.  Call with the map's lock held
 * (static buffer). */
static bool mapped_path(uint64_t addr, char *out, size_t cap)
{
	static char buf[8192];
	size_t have = 0;
	bool found = false;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		char *line = buf, *nl;
		while (!found && (nl = memchr(line, '\n', have - (size_t)(line - buf))))
			if (!(found = line_maps(line, nl, addr, out, cap)))
				line = nl + 1;
		if (found)
			break;
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf))
			have = 0;	/* a line longer than the buffer: drop it */
	}
	close(fd);
	return found;
}

/* A module's path as the loader has it (dlpi_name), made absolute when the
 * program gave dlopen a relative one ("./libplugin.so"): the report may run
 * in another directory, and the program may have changed its own since. */
static const char *absolute_path(const char *path, uint64_t addr)
{
	static char resolved[PATH_MAX];
	if (!path[0] || path[0] == '/' || !strchr(path, '/') || !addr)
		return path;	/* absolute, or a pseudo name (linux-vdso.so.1) */
	return mapped_path(addr, resolved, sizeof(resolved)) ? resolved : path;
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	bool *first = arg;
	static char exe[PATH_MAX];	/* read once: unreadable after the main thread exits */
	const char *path = info->dlpi_name;
	uint32_t flags = 0;
	if (*first) {
		*first = false;
		flags |= ML_MOD_MAIN;
		if (!exe[0]) {
			ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
			exe[n > 0 ? n : 0] = '\0';
		}
		path = exe;
	}
	if (!path)
		path = "";
	struct ml_module_rec *m = lookup(path, info->dlpi_addr);
	if (!m && n_mods < MAX_MODULES) {
		uint64_t lo, hi;
		load_range(info, &lo, &hi);
		path = absolute_path(path, lo);
		m = lookup(path, info->dlpi_addr);
	}
	if (!m && n_mods < MAX_MODULES) {
		size_t len = strlen(path);
		m = ml_arena_alloc(sizeof(*m) + len + 1);
		if (!m)
			return 0;
		m->bias = info->dlpi_addr;
		load_range(info, &m->lo, &m->hi);
		m->path_len = (uint32_t)len;
		memcpy(m->path, path, len + 1);
		m->build_id_len = find_build_id(info, m->build_id, sizeof(m->build_id));
		m->flags = flags;
		mods[n_mods++] = m;
	}
	if (!m)
		return 0;
	m->seen = generation;
	m->flags &= ~ML_MOD_UNLOADED;
	if (runtime_addr >= m->lo && runtime_addr < m->hi)
		m->flags |= ML_MOD_RUNTIME;
	return 0;
}

static int read_counts(struct dl_phdr_info *info, size_t size, void *arg)
{
	uint64_t *counts = arg;
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		counts[0] = info->dlpi_adds;
		counts[1] = info->dlpi_subs;
	}
	return 1;	/* the first object is enough */
}

void ml_modules_load_counts(uint64_t *adds, uint64_t *subs)
{
	uint64_t counts[2] = { UINT64_MAX, UINT64_MAX };	/* unknown */
	dl_iterate_phdr(read_counts, counts);
	*adds = counts[0];
	*subs = counts[1];
}

void ml_modules_refresh(void)
{
	/* The walk costs a lookup per loaded object (hundreds in a Python
	 * program with torch): skipped when the loader has loaded and
	 * unloaded nothing since the last one.  The counts are read before
	 * the walk, so a load during it makes the next refresh walk again. */
	static uint64_t seen_adds = UINT64_MAX, seen_subs = UINT64_MAX;
	uint64_t adds, subs;
	ml_modules_load_counts(&adds, &subs);
	bool first = true;
	ml_spin_lock(&lock);
	if (adds != UINT64_MAX && adds == seen_adds && subs == seen_subs) {
		ml_spin_unlock(&lock);
		return;
	}
	generation++;
	dl_iterate_phdr(visit, &first);
	for (uint32_t i = 0; i < n_mods; i++)
		if (mods[i]->seen != generation)
			mods[i]->flags |= ML_MOD_UNLOADED;
	seen_adds = adds;
	seen_subs = subs;
	ml_spin_unlock(&lock);
}

struct range_query {
	uint64_t addr, lo, hi;
};

static int find_range(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct range_query *q = arg;
	uint64_t lo, hi;
	load_range(info, &lo, &hi);
	if (q->addr >= lo && q->addr < hi) {
		q->lo = lo;
		q->hi = hi;
		return 1;
	}
	return 0;
}

void ml_modules_range_of(uint64_t addr, uint64_t *lo, uint64_t *hi)
{
	struct range_query q = { addr, 0, 0 };
	dl_iterate_phdr(find_range, &q);
	*lo = q.lo;
	*hi = q.hi;
}

void ml_modules_after_fork(void)
{
	lock.locked = 0;
}

void ml_modules_foreach(void (*fn)(const struct ml_module_rec *m, void *arg), void *arg)
{
	ml_spin_lock(&lock);
	for (uint32_t i = 0; i < n_mods; i++)
		fn(mods[i], arg);
	ml_spin_unlock(&lock);
}

/* ---- for signal handlers: no loader lock ---- */

/* True if addr lies in a module already in the map. */
static bool known(uint64_t addr)
{
	for (uint32_t i = 0; i < n_mods; i++)
		if (addr >= mods[i]->lo && addr < mods[i]->hi)
			return true;
	return false;
}

/* Adds the module holding addr, found with _dl_find_object (lock-free,
 * async-signal-safe), its program headers read from its mapped ELF
 * header.  Best effort: an object whose headers are not mapped where
 * expected is skipped. */
static void add_holder(uint64_t addr)
{
	struct dl_find_object fo;
	if (_dl_find_object((void *)(uintptr_t)addr, &fo) != 0 || !fo.dlfo_link_map)
		return;
	const ElfW(Ehdr) *eh = fo.dlfo_map_start;
	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_phentsize != sizeof(ElfW(Phdr)) ||
	    eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr)) > 4096)
		return;	/* headers beyond the first page: not trusted mapped */
	struct dl_phdr_info info;
	memset(&info, 0, sizeof(info));
	info.dlpi_addr = fo.dlfo_link_map->l_addr;
	info.dlpi_name = fo.dlfo_link_map->l_name;
	info.dlpi_phdr = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
	info.dlpi_phnum = eh->e_phnum;
	bool first = false;	/* never the main program: that one is known */
	visit(&info, sizeof(info), &first);
}

void ml_modules_add_missing(const uint64_t *addrs, uint32_t n)
{
	if (__atomic_exchange_n(&lock.locked, 1, __ATOMIC_ACQUIRE))
		return;	/* a refresh was interrupted: leave the map alone */
	for (uint32_t i = 0; i < n; i++)
		if (addrs[i] && !known(addrs[i]))
			add_holder(addrs[i]);
	ml_spin_unlock(&lock);
}
