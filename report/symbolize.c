/* report/symbolize.c - the symbolizer's modules, its address cache and the
 * fallbacks when there is no DWARF (symbol+offset, then a bare address).
 * The DWARF walk itself is in sym_frames.c, function lookup in sym_source.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <elfutils/libdw.h>
#include "report/regfile.h"
#include "report/sym_internal.h"

#define MAX_FRAMES 64		/* inlined frames of one address, at most */
#define DEFAULT_DEBUG_DIR "/usr/lib/debug"

static const Dwfl_Callbacks *callbacks_for(struct ml_symbolizer *s)
{
	/* Offline: the files are reported by path; separate debug info is
	 * found by build-id under the debug directories, or by debuglink
	 * (sym_debugfile.c: regular files only).  Each Dwfl keeps a pointer
	 * to these: they live in s. */
	s->callbacks.find_elf = dwfl_build_id_find_elf;
	s->callbacks.find_debuginfo = ml_symi_find_debuginfo;
	s->callbacks.section_address = dwfl_offline_section_address;
	return &s->callbacks;
}

/* Paths the loader reports for things that are not files. */
static bool is_pseudo_path(const char *path)
{
	return path[0] == '\0' || path[0] == '[' || strncmp(path, "linux-vdso", 10) == 0 ||
	       strncmp(path, "linux-gate", 10) == 0;
}

/* Reports file into m's own Dwfl.  Returns 0 if libdw took it, or -errno
 * (ML_ENOTREG: not a regular file; -ENOEXEC: not an ELF file libdw can
 * read) with *what naming what was found. */
static int report_file(struct ml_symbolizer *s, struct sym_module *m, const char *file,
		       const char **what)
{
	unsigned char magic[4];
	int fd = ml_regfile_open(file, NULL, what);

	if (fd < 0)
		return fd;
	if (ml_regfile_pread_all(fd, magic, sizeof(magic), 0) < 0 ||
	    memcmp(magic, "\177ELF", 4) != 0) {
		close(fd);
		*what = "not an ELF file";
		return -ENOEXEC;
	}
	m->dwfl = dwfl_begin(callbacks_for(s));
	if (!m->dwfl) {
		close(fd);
		return -ENOMEM;
	}
	dwfl_report_begin(m->dwfl);
	/* add_p_vaddr: base is the load bias, as dl_iterate_phdr gives it.
	 * libdw owns fd from here when it takes the file. */
	m->mod = dwfl_report_elf(m->dwfl, m->path, file, fd, m->bias, true);
	dwfl_report_end(m->dwfl, NULL, NULL);
	GElf_Addr bias;
	if (m->mod && dwfl_module_getelf(m->mod, &bias))
		m->delta = (int64_t)(bias - m->bias);
	if (m->mod)
		return 0;
	*what = dwfl_errmsg(-1);
	close(fd);
	dwfl_end(m->dwfl);
	m->dwfl = NULL;
	return -ENOEXEC;
}

/* When the module's file is gone, its debug file (found by build-id in
 * $MEMLINE_DEBUG_DIR or /usr/lib/debug) still has the symbols and lines. */
static bool report_by_build_id(struct ml_symbolizer *s, struct sym_module *m,
			       const struct ml_module *pm)
{
	const char *dirs[] = { getenv("MEMLINE_DEBUG_DIR"), DEFAULT_DEBUG_DIR };
	const char *what;
	char path[4096];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (!dirs[i] || !dirs[i][0])
			continue;
		ml_symi_build_id_path(path, sizeof(path), dirs[i], pm->build_id, pm->build_id_len);
		if (path[0] && report_file(s, m, path, &what) == 0)
			return true;
	}
	return false;
}

/* A module mapped twice (dlclose'd and loaded again) is warned about once. */
static bool warned_before(const struct ml_symbolizer *s, const struct sym_module *m)
{
	for (const struct sym_module *o = s->mods; o < m; o++)
		if (strcmp(o->path, m->path) == 0)
			return true;
	return false;
}

static void check_build_id(const struct ml_symbolizer *s, const struct sym_module *m,
			   const struct ml_module *pm)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n;

	if (pm->build_id_len == 0 || (pm->flags & ML_MOD_RUNTIME))
		return;		/* nothing recorded; memline's own frames are not shown */
	n = dwfl_module_build_id(m->mod, &bits, &vaddr);
	if (n == (int)pm->build_id_len && memcmp(bits, pm->build_id, (size_t)n) == 0)
		return;
	if (warned_before(s, m))
		return;
	fprintf(stderr, "memline: warning: %s: build-id differs from the profiled binary; "
		"lines may be wrong\n", m->path);
}

/* Why the module's own file could not be used, in the warning. */
static void warn_unusable(const struct sym_module *m, int err, const char *what)
{
	char why[256];

	if (err == -ENOENT || err == -ENOTDIR)
		snprintf(why, sizeof(why), "not found");
	else if (err == -ENOEXEC)
		snprintf(why, sizeof(why), "%s", what);	/* not ELF, or libdw's reason */
	else if (err == ML_ENOTREG || err == -EISDIR)
		ml_regfile_why(err, what, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "cannot be read: %s", strerror(-err));
	fprintf(stderr, "memline: warning: %s: %s; its frames stay unresolved\n", m->path, why);
}

static int open_module(struct ml_symbolizer *s, struct sym_module *m, const struct ml_module *pm)
{
	const char *what = NULL;
	int err;

	m->path = strdup(pm->path ? pm->path : "");
	if (!m->path)
		return -ENOMEM;
	m->bias = pm->bias;
	m->lo = pm->lo;
	m->hi = pm->hi;
	m->flags = pm->flags;
	if (is_pseudo_path(m->path))
		return 0;
	err = report_file(s, m, m->path, &what);
	if (err == 0) {
		check_build_id(s, m, pm);
		return 0;
	}
	if (err == -ENOMEM)
		return err;
	if (!report_by_build_id(s, m, pm) && !warned_before(s, m))
		warn_unusable(m, err, what);
	return 0;
}

int ml_sym_open(const struct ml_profile *p, struct ml_symbolizer **out)
{
	struct ml_symbolizer *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;

	if (!s)
		return -ENOMEM;
	s->mods = calloc(p->n_modules ? p->n_modules : 1, sizeof(*s->mods));
	if (!s->mods)
		goto fail;
	for (size_t i = 0; i < p->n_modules; i++) {
		s->n_mods = i + 1;
		rc = open_module(s, &s->mods[i], &p->modules[i]);
		if (rc < 0)
			goto fail;
	}
	*out = s;
	return 0;
fail:
	ml_sym_close(s);
	return rc;
}

void ml_sym_close(struct ml_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->cache_cap; i++)
		free(s->cache[i].frames);
	free(s->cache);
	for (size_t i = 0; i < s->n_mods; i++) {
		ml_symi_cus_free(&s->mods[i]);
		ml_symi_symtab_free(&s->mods[i]);
		if (s->mods[i].dwfl)
			dwfl_end(s->mods[i].dwfl);
		free(s->mods[i].path);
	}
	free(s->mods);
	ml_symi_strtab_free(&s->strings);
	free(s);
}

/* Whether another file was unloaded from addresses that m (loaded) covers. */
static bool range_reused(const struct ml_symbolizer *s, const struct sym_module *m)
{
	for (size_t i = 0; i < s->n_mods; i++) {
		const struct sym_module *u = &s->mods[i];

		if ((u->flags & ML_MOD_UNLOADED) && u->lo < m->hi && m->lo < u->hi &&
		    strcmp(u->path, m->path) != 0)
			return true;
	}
	return false;
}

/* Says once that frames at pc, named after the loaded module m, may belong
 * to another file that was unloaded from there before m was loaded: a
 * stack keeps return addresses, not which module held them. */
static void warn_reused(struct ml_symbolizer *s, struct sym_module *m, uint64_t pc)
{
	for (size_t i = 0; i < s->n_mods; i++) {
		const struct sym_module *u = &s->mods[i];

		if ((u->flags & ML_MOD_UNLOADED) && pc >= u->lo && pc < u->hi &&
		    strcmp(u->path, m->path) != 0) {
			fprintf(stderr, "memline: warning: %s was loaded where %s had been "
				"unloaded; frames recorded there before the unload belong to the "
				"second but are shown as the first's\n", m->path, u->path);
			m->reuse = REUSE_WARNED;
			return;
		}
	}
}

/* The module holding pc; a loaded module wins over an unloaded one that
 * once sat at the same place (and says so, once). */
static struct sym_module *find_module(struct ml_symbolizer *s, uint64_t pc)
{
	struct sym_module *found = NULL;

	for (size_t i = 0; i < s->n_mods; i++) {
		struct sym_module *m = &s->mods[i];

		if (pc < m->lo || pc >= m->hi)
			continue;
		if (!(m->flags & ML_MOD_UNLOADED)) {
			if (m->reuse == REUSE_UNKNOWN)
				m->reuse = range_reused(s, m) ? REUSE_YES : REUSE_NO;
			if (m->reuse == REUSE_YES)
				warn_reused(s, m, pc);
			return m;
		}
		if (!found)
			found = m;
	}
	return found;
}

static uint64_t hash_addr(uint64_t addr, bool return_address)
{
	uint64_t h = addr ^ (return_address ? 0x9e3779b97f4a7c15ull : 0);

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static struct sym_cache_entry *cache_slot(struct sym_cache_entry *tab, size_t cap,
					  uint64_t addr, bool return_address)
{
	size_t i = hash_addr(addr, return_address) & (cap - 1);

	while (tab[i].frames && (tab[i].addr != addr || tab[i].return_address != return_address))
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

static int cache_grow(struct ml_symbolizer *s)
{
	size_t cap = s->cache_cap ? 2 * s->cache_cap : 1024;
	struct sym_cache_entry *tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < s->cache_cap; i++) {
		struct sym_cache_entry *e = &s->cache[i];

		if (e->frames)
			*cache_slot(tab, cap, e->addr, e->return_address) = *e;
	}
	free(s->cache);
	s->cache = tab;
	s->cache_cap = cap;
	return 0;
}

/* "name+0x12" from the ELF symbol table, or "0x1234" (the module offset, or
 * the absolute address outside every module). */
static int fallback_name(struct ml_symbolizer *s, struct sym_module *m, uint64_t addr,
			 uint64_t pc, struct ml_frame *f)
{
	char buf[64];
	const char *sym = NULL;
	uint64_t off = 0;
	char *dem = NULL;
	char *text = NULL;

	if (m && m->mod) {
		Dwarf_Line *row;
		Dwarf_Die *cu = ml_symi_line_at(m, pc + (uint64_t)m->delta, &row);

		/* Code with lines but no function DIE (assembly, say). */
		if (row && dwarf_lineno(row, &f->line) == 0)
			f->file = ml_symi_source_path(s, cu, dwarf_linesrc(row, NULL, NULL));
		sym = ml_symi_symbol_at(m, pc + (uint64_t)m->delta, &off);
	}
	if (sym) {
		dem = ml_sym_demangle(sym);
		/* The offset is the frame's own address from the symbol, as in
		 * backtrace(3) output, though the lookup used pc. */
		if (asprintf(&text, "%s+0x%" PRIx64, dem ? dem : sym, off + (addr - pc)) < 0)
			text = NULL;
		free(dem);
		if (!text)
			return -ENOMEM;
		f->function = ml_symi_intern(&s->strings, text);
		free(text);
	} else {
		snprintf(buf, sizeof(buf), "0x%" PRIx64, m ? addr - m->bias : addr);
		f->function = ml_symi_intern(&s->strings, buf);
	}
	return f->function ? 0 : -ENOMEM;
}

/* Computes the frames of addr into a fresh array. */
static int compute(struct ml_symbolizer *s, uint64_t addr, bool return_address,
		   struct ml_frame **frames, size_t *n)
{
	struct ml_frame tmp[MAX_FRAMES];
	uint64_t pc = return_address && addr > 0 ? addr - 1 : addr;
	struct sym_module *m = find_module(s, pc);
	int k = 0;

	memset(tmp, 0, sizeof(tmp));
	if (m && m->mod)
		k = ml_symi_dwarf_frames(s, m, pc + (uint64_t)m->delta, tmp, MAX_FRAMES);
	if (k < 0)
		return k;
	if (k == 0) {
		int rc = fallback_name(s, m, addr, pc, &tmp[0]);

		if (rc < 0)
			return rc;
		k = 1;
	}
	for (int i = 0; i < k; i++) {
		tmp[i].module = m ? m->path : NULL;
		tmp[i].module_offset = m ? addr - m->bias : addr;
		tmp[i].runtime = m && (m->flags & ML_MOD_RUNTIME);
	}
	*frames = malloc((size_t)k * sizeof(**frames));
	if (!*frames)
		return -ENOMEM;
	memcpy(*frames, tmp, (size_t)k * sizeof(**frames));
	*n = (size_t)k;
	return 0;
}

int ml_sym_resolve(struct ml_symbolizer *s, uint64_t addr, bool return_address,
		   const struct ml_frame **frames, size_t *n)
{
	struct sym_cache_entry *e;
	struct ml_frame *computed;
	size_t count;
	int rc;

	if (s->cache_cap) {
		e = cache_slot(s->cache, s->cache_cap, addr, return_address);
		if (e->frames) {
			*frames = e->frames;
			*n = e->n;
			return 0;
		}
	}
	rc = compute(s, addr, return_address, &computed, &count);
	if (rc < 0)
		return rc;
	if (2 * (s->cache_used + 1) > s->cache_cap && cache_grow(s) < 0) {
		free(computed);
		return -ENOMEM;
	}
	e = cache_slot(s->cache, s->cache_cap, addr, return_address);
	e->addr = addr;
	e->return_address = return_address;
	e->frames = computed;
	e->n = (uint32_t)count;
	s->cache_used++;
	*frames = computed;
	*n = count;
	return 0;
}
