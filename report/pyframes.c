/* report/pyframes.c - Python frames symbolized from the profile alone (the
 * PYCODE records): names, files, lines from the copied line tables; the
 * 3.10 qualified names rebuilt from the source (3.10 code objects carry
 * only co_name); Python functions found by name. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/pyframes.h"
#include "common/pyline.h"
#include "report/source.h"

struct code_info {
	char *qualname;		/* NULL until first needed */
	char *file;		/* absolute where it can be */
	int lo, hi;		/* its lines (ml_pyline_range), once range_done */
	bool range_done;
	bool own;		/* memline's own boot code (@profile's wrappers), or
				 * python -m's launcher (runpy): left out around
				 * the program's frames */
};

struct slot {
	uint64_t key;		/* the tagged address without ENTRY/HIDDEN; 0 empty */
	struct ml_frame *frame;
};

struct source_memo {
	char *file;
	struct ml_source src;
	bool found;
	struct source_memo *next;
};

struct ml_pyframes {
	const struct ml_profile *p;
	struct code_info *codes;	/* parallel to p->pycodes */
	struct slot *slots;
	size_t cap, used;
	const struct ml_module *interp;	/* the module of the eval loop */
	/* The modules by address, with whether each is the interpreter's
	 * (interp, or its standard library's lib-dynload): asked for every
	 * native frame of every Python stack.  NULL when ranges overlap (a
	 * module unloaded and another loaded there): then ml_profile_module. */
	struct mod_range *ranges;
	size_t n_ranges;
	struct ml_frame unknown;
	struct source_memo *sources;
	char *own_dir;		/* "<libmemline's dir>/python/", or NULL */
};

static void drop_dot_segments(char *path);

struct mod_range {
	uint64_t lo, hi;
	bool interpreter;
};

static int cmp_range(const void *a, const void *b)
{
	const struct mod_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static bool interpreter_module(const struct ml_pyframes *pf, const struct ml_module *m)
{
	return m && (m == pf->interp || (m->path && strstr(m->path, "/lib-dynload/")));
}

/* pf->ranges, sorted; left NULL when two modules overlap. */
static void index_modules(struct ml_pyframes *pf)
{
	const struct ml_profile *p = pf->p;
	struct mod_range *r = p->n_modules ? malloc(p->n_modules * sizeof(*r)) : NULL;
	if (!r)
		return;
	for (size_t i = 0; i < p->n_modules; i++)
		r[i] = (struct mod_range){ p->modules[i].lo, p->modules[i].hi,
					   interpreter_module(pf, &p->modules[i]) };
	qsort(r, p->n_modules, sizeof(*r), cmp_range);
	for (size_t i = 1; i < p->n_modules; i++)
		if (r[i].lo < r[i - 1].hi) {
			free(r);
			return;
		}
	pf->ranges = r;
	pf->n_ranges = p->n_modules;
}

int ml_pyframes_open(const struct ml_profile *p, struct ml_pyframes **out)
{
	*out = NULL;
	if (!p->has_python)
		return 0;
	struct ml_pyframes *pf = calloc(1, sizeof(*pf));
	if (!pf)
		return -ENOMEM;
	pf->p = p;
	pf->codes = calloc(p->n_pycodes + 1, sizeof(*pf->codes));
	pf->cap = 1024;
	pf->slots = calloc(pf->cap, sizeof(*pf->slots));
	if (!pf->codes || !pf->slots) {
		ml_pyframes_close(pf);
		return -ENOMEM;
	}
	if (p->python.eval_lo)
		pf->interp = ml_profile_module(p, p->python.eval_lo);
	for (size_t i = 0; i < p->n_modules && !pf->own_dir; i++) {
		const char *path = p->modules[i].path, *slash = path ? strrchr(path, '/') : NULL;
		if ((p->modules[i].flags & ML_MOD_RUNTIME) && slash &&
		    asprintf(&pf->own_dir, "%.*s/python/", (int)(slash - path), path) < 0)
			pf->own_dir = NULL;
	}
	if (pf->own_dir)
		drop_dot_segments(pf->own_dir);
	index_modules(pf);
	pf->unknown = (struct ml_frame){ .function = "[unknown Python code]", .module = ML_PY_MODULE,
					 .python = true };
	*out = pf;
	return 0;
}

void ml_pyframes_close(struct ml_pyframes *pf)
{
	if (!pf)
		return;
	for (size_t i = 0; i < pf->cap; i++)
		free(pf->slots[i].frame);
	for (size_t i = 0; pf->codes && i < pf->p->n_pycodes; i++) {
		free(pf->codes[i].qualname);
		free(pf->codes[i].file);
	}
	for (struct source_memo *s = pf->sources, *next; s; s = next) {
		next = s->next;
		ml_source_free(&s->src);
		free(s->file);
		free(s);
	}
	free(pf->codes);
	free(pf->slots);
	free(pf->own_dir);
	free(pf->ranges);
	free(pf);
}

/* ---- 3.10: qualified names from the source ---- */

/* Columns of leading white space (a tab to the next multiple of 8); -1 for
 * a blank or comment-only line. */
static int indent_of(const char *line)
{
	int col = 0;
	for (; *line == ' ' || *line == '\t'; line++)
		col = *line == '\t' ? (col / 8 + 1) * 8 : col + 1;
	return *line == '\0' || *line == '#' ? -1 : col;
}

/* If line opens a scope ("def f", "async def f", "class C"), copies its
 * name into name and says whether it is a class. */
static bool scope_of(const char *line, char *name, size_t cap, bool *is_class)
{
	while (*line == ' ' || *line == '\t')
		line++;
	if (strncmp(line, "async", 5) == 0 && (line[5] == ' ' || line[5] == '\t')) {
		line += 5;
		while (*line == ' ' || *line == '\t')
			line++;
	}
	size_t kw = strncmp(line, "def", 3) == 0 ? 3 : strncmp(line, "class", 5) == 0 ? 5 : 0;
	if (!kw || (line[kw] != ' ' && line[kw] != '\t'))
		return false;
	*is_class = kw == 5;
	line += kw;
	while (*line == ' ' || *line == '\t')
		line++;
	size_t n = 0;
	while (n + 1 < cap && (line[n] == '_' || (line[n] >= 'a' && line[n] <= 'z') ||
			       (line[n] >= 'A' && line[n] <= 'Z') || (line[n] >= '0' && line[n] <= '9') ||
			       (unsigned char)line[n] >= 0x80))
		n++;
	memcpy(name, line, n);
	name[n] = '\0';
	return n > 0;
}

/* Prepends part (and a dot) to q, a malloc'd string.  NULL on ENOMEM. */
static char *prepend(char *q, const char *part, const char *suffix)
{
	size_t a = strlen(part), b = strlen(suffix), c = strlen(q);
	char *r = malloc(a + b + 1 + c + 1);
	if (r)
		snprintf(r, a + b + c + 2, "%s%s.%s", part, suffix, q);
	free(q);
	return r;
}

/* The qualified name of code co_name starting at firstlineno of src, as
 * the compiler would give it: enclosing classes and functions
 * ("f.<locals>.g"), found by indentation.  NULL when the source does not
 * show the definition. */
static char *rebuild_qualname(const struct ml_source *src, int firstlineno, const char *co_name)
{
	char name[256];
	bool is_class;
	int line = firstlineno;
	if (co_name[0] != '<') {
		/* Decorators come first: the def is at or after firstlineno. */
		for (line = firstlineno; line < firstlineno + 64; line++) {
			const char *text = ml_source_line(src, line);
			if (!text)
				return NULL;
			if (scope_of(text, name, sizeof(name), &is_class) && strcmp(name, co_name) == 0)
				break;
		}
		if (line == firstlineno + 64)
			return NULL;
	}
	const char *text = ml_source_line(src, line);
	int indent = text ? indent_of(text) : -1;
	if (indent < 0)
		return NULL;
	char *q = strdup(co_name);
	for (int l = line - 1; q && l >= 1 && indent > 0; l--) {
		int ind = indent_of(ml_source_line(src, l));
		if (ind < 0 || ind >= indent)
			continue;
		indent = ind;
		if (scope_of(ml_source_line(src, l), name, sizeof(name), &is_class))
			q = prepend(q, name, is_class ? "" : ".<locals>");
	}
	return q;
}

/* The source of file, read once (NULL when it cannot be read). */
static const struct ml_source *source_of(struct ml_pyframes *pf, const char *file)
{
	for (struct source_memo *s = pf->sources; s; s = s->next)
		if (strcmp(s->file, file) == 0)
			return s->found ? &s->src : NULL;
	struct source_memo *s = calloc(1, sizeof(*s));
	if (!s || !(s->file = strdup(file))) {
		free(s);
		return NULL;
	}
	s->found = file[0] != '<' && ml_source_load(file, &s->src) == 0;
	s->next = pf->sources;
	pf->sources = s;
	return s->found ? &s->src : NULL;
}

/* ---- code objects ---- */

/* "/a/./b.py" and "/a//b.py" as "/a/b.py" (Python keeps a script's path
 * as given, joined to the working directory); ".." is left alone (it may
 * cross a symbolic link). */
static void drop_dot_segments(char *path)
{
	char *r = path, *w = path;
	while (*r) {
		if (r[0] == '/' && r[1] == '.' && r[2] == '/')
			r += 2;
		else if (r[0] == '/' && r[1] == '/')
			r++;
		else
			*w++ = *r++;
	}
	*w = '\0';
}

static struct code_info *info_of(struct ml_pyframes *pf, const struct ml_pycode *pc)
{
	struct code_info *ci = &pf->codes[pc - pf->p->pycodes];
	if (ci->file)
		return ci;
	const char *cwd = pc->cwd;
	if (pc->filename[0] == '/' || pc->filename[0] == '<' || !cwd || !cwd[0])
		ci->file = strdup(pc->filename);
	else if (asprintf(&ci->file, "%s/%s", cwd, pc->filename) < 0)
		ci->file = NULL;
	if (!ci->file)
		return NULL;
	drop_dot_segments(ci->file);
	size_t len = strlen(ci->file);
	ci->own = (pf->own_dir && strncmp(ci->file, pf->own_dir, strlen(pf->own_dir)) == 0) ||
		  strcmp(ci->file, "<frozen runpy>") == 0 ||	/* python -m's launcher */
		  (len >= 9 && strcmp(ci->file + len - 9, "/runpy.py") == 0);
	if (pf->p->python.flags & ML_PY_QUALNAME_IS_NAME) {
		const struct ml_source *src = source_of(pf, ci->file);
		ci->qualname = src ? rebuild_qualname(src, pc->firstlineno, pc->name) : NULL;
	}
	if (!ci->qualname)
		ci->qualname = strdup(pc->name);
	if (!ci->qualname) {
		free(ci->file);
		ci->file = NULL;
		return NULL;
	}
	return ci;
}

/* key's home slot in a table of cap (a power of two) slots: the top bits
 * of a multiplicative hash, which every bit of the key reaches (the code
 * id in the high half as much as the instruction offset in the low). */
static size_t slot_of(uint64_t key, size_t cap)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull;
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return (size_t)(h >> 32) & (cap - 1);
}

static int grow(struct ml_pyframes *pf)
{
	size_t cap = pf->cap * 2;
	struct slot *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < pf->cap; i++) {
		if (!pf->slots[i].key)
			continue;
		size_t s = slot_of(pf->slots[i].key, cap);
		while (slots[s].key)
			s = (s + 1) & (cap - 1);
		slots[s] = pf->slots[i];
	}
	free(pf->slots);
	pf->slots = slots;
	pf->cap = cap;
	return 0;
}

/* A new frame for key (a tagged address); NULL on ENOMEM. */
static struct ml_frame *make_frame(struct ml_pyframes *pf, uint64_t key)
{
	const struct ml_pycode *pc = ml_profile_pycode(pf->p, ml_pyframe_code(key));
	struct code_info *ci = pc ? info_of(pf, pc) : NULL;
	if (!ci)
		return NULL;
	struct ml_frame *fr = calloc(1, sizeof(*fr));
	if (!fr)
		return NULL;
	int line = ml_pyline_at(pc->linetable_format, pc->linetable, pc->linetable_len,
				pc->firstlineno, ml_pyframe_lasti(key));
	*fr = (struct ml_frame){
		.function = ci->qualname, .file = ci->file, .line = line > 0 ? line : 0,
		.module = ML_PY_MODULE, .module_offset = (uint32_t)ml_pyframe_lasti(key),
		.python = true, .own = ci->own,
	};
	return fr;
}

const struct ml_frame *ml_pyframes_resolve(struct ml_pyframes *pf, uint64_t addr)
{
	uint64_t key = addr & ~(ML_PYFRAME_ENTRY | ML_PYFRAME_HIDDEN);
	if (!pf)
		return NULL;
	if ((pf->used + 1) * 4 > pf->cap * 3 && grow(pf) < 0)
		return &pf->unknown;
	size_t s = slot_of(key, pf->cap);
	for (; pf->slots[s].key; s = (s + 1) & (pf->cap - 1))
		if (pf->slots[s].key == key)
			return pf->slots[s].frame;
	struct ml_frame *fr = make_frame(pf, key);
	if (!fr)
		return &pf->unknown;
	pf->slots[s] = (struct slot){ key, fr };
	pf->used++;
	return fr;
}

/* ---- functions by name ---- */

bool ml_pyframes_name_matches(const char *qualname, const char *name)
{
	size_t q = strlen(qualname), n = strlen(name);
	if (q == n)
		return strcmp(qualname, name) == 0;
	return q > n && qualname[q - n - 1] == '.' && strcmp(qualname + q - n, name) == 0;
}

int ml_pyframes_function_sources(struct ml_pyframes *pf, const char *name,
				 struct ml_sym_source *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; pf && i < pf->p->n_pycodes && n < max; i++) {
		const struct ml_pycode *pc = &pf->p->pycodes[i];
		struct code_info *ci = info_of(pf, pc);
		if (!ci || !ml_pyframes_name_matches(ci->qualname, name))
			continue;
		if (!ci->range_done) {
			ml_pyline_range(pc->linetable_format, pc->linetable, pc->linetable_len,
					pc->firstlineno, &ci->lo, &ci->hi);
			ci->range_done = true;
		}
		int first = pc->firstlineno < ci->lo ? pc->firstlineno : ci->lo;
		bool dup = first <= 0;
		for (size_t k = 0; k < n && !dup; k++)
			dup = out[k].first_line == first && strcmp(out[k].file, ci->file) == 0 &&
			      strcmp(out[k].name, ci->qualname) == 0;
		if (!dup)
			out[n++] = (struct ml_sym_source){ .file = ci->file, .first_line = first,
							   .last_line = ci->hi, .name = ci->qualname };
	}
	return n ? (int)n : -ENOENT;
}

/* ---- native frames around Python ---- */

bool ml_pyframes_in_interpreter(struct ml_pyframes *pf, uint64_t addr)
{
	if (!pf)
		return false;
	if (pf->interp && addr >= pf->interp->lo && addr < pf->interp->hi &&
	    (pf->ranges || ml_profile_module(pf->p, addr) == pf->interp))
		return true;	/* most of them */
	if (!pf->ranges)
		return interpreter_module(pf, ml_profile_module(pf->p, addr));
	size_t lo = 0, hi = pf->n_ranges;	/* the last range with lo <= addr */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (pf->ranges[mid].lo <= addr)
			lo = mid;
		else
			hi = mid;
	}
	const struct mod_range *r = &pf->ranges[lo];
	return addr >= r->lo && addr < r->hi && r->interpreter;
}

bool ml_pyframes_is_eval(struct ml_pyframes *pf, uint64_t addr, bool exact, const char *fn)
{
	if (!pf)
		return false;
	uint64_t at = exact ? addr : addr - 1;
	if (at >= pf->p->python.eval_lo && at < pf->p->python.eval_hi)
		return true;
	return fn && strncmp(fn, "_PyEval_EvalFrameDefault", 24) == 0;
}
