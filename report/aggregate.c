/* report/aggregate.c - sums a profile's counters per stack, function and source
 * line: self from the innermost program frame, inclusive once per stack. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/aggregate.h"
#include "report/pystack.h"

/* Open-addressing index: slots hold entry index + 1, 0 is empty. */
struct index {
	size_t *slots;
	size_t cap;	/* a power of two */
	size_t used;
};

/* One frame's function and line, found once per interned frame (the
 * symbolizer gives the same struct ml_frame for the same address). */
struct frame_memo {
	const struct ml_frame *frame;	/* NULL: empty slot */
	long func;
	long line;			/* -1: the frame has no source line */
};

struct agg_priv {
	struct index funcs, lines;
	struct frame_memo *memo;	/* open addressing on the frame pointer */
	size_t memo_cap, memo_used;	/* memo_cap a power of two */
	size_t cap_funcs, cap_lines;
	struct ml_amount *amounts;	/* every stack's amounts (ml_agg_stack.amounts) */
	uint64_t *walk;		/* a stack's addresses from the profile's trie */
	uint32_t *walk_ids;	/* and their entries in addrs */
	uint32_t *walk_nodes;	/* and their nodes (stack_addrs) */
	uint8_t *walk_bits;	/* and ADDR_* answers (stack_bits) */
	size_t walk_cap, walk_depth;
	/* Every address the stacks hold (struct addr_info), hashed (slots:
	 * index + 1, 0 empty); the entry of each node of the profile's trie
	 * (index + 1, 0 until first walked). */
	struct addr_info *addrs;
	size_t n_addrs, cap_addrs;
	uint32_t *addr_slots;
	size_t addr_slots_cap;
	uint32_t *node_ids;
	struct ml_pystack_item *items;	/* a stack with Python frames in order */
	size_t items_cap;
	const struct ml_frame **scratch;	/* a stack's frames as symbolized */
	size_t scratch_cap;
	struct frame_chunk *chunks;	/* every kept stack's and sample's frames */
	/* The kinds the stacks have, in slots (the path's sums), and every
	 * function's and line's amounts (cover_kinds). */
	signed char kind_slot[ML_KIND_COUNT];
	size_t n_slots;
	struct amount_chunk *amount_chunks;
	struct kind_map **maps;	/* every kind_map made (kind_map) */
	size_t n_maps, cap_maps;
	char **names;		/* function names made here (offsets cut off) */
	const char *scratch_name;	/* a name in a caller's buffer, to copy */
	size_t n_names, cap_names;
	/* attribute_stacks: the path of the stack being charged, outermost
	 * frame first, with n_slots amounts per entry (path_sum); and where
	 * each function and line was first met in the stacks' order. */
	struct path_ent *path;
	struct ml_amount *path_sums;
	size_t path_cap;
	uint64_t *func_first, *line_first;
	size_t n_func_first, n_line_first, cap_func_first, cap_line_first;
};

/* An entry of the path attribute_stacks walks: a frame and what it is
 * charged to.  sum: the amounts of every stack through it (its subtree),
 * of the kinds in kinds. */
struct path_ent {
	const struct ml_frame *fr;
	long func, line;		/* line -1: no source line */
	bool top_func, top_line;	/* the outermost entry of its function (line) */
	uint32_t kinds;
};

/* Frames arrays packed one after another, each whole in one chunk. */
struct frame_chunk {
	struct frame_chunk *next;
	size_t used, cap;
	const struct ml_frame *slot[];
};

#define FRAME_CHUNK ((size_t)1 << 20)	/* frames per chunk, at least */

/* Amounts handed out one after another, zeroed. */
struct amount_chunk {
	struct amount_chunk *next;
	size_t used, cap;
	struct ml_amount slot[];
};

#define AMOUNT_CHUNK ((size_t)1 << 14)	/* amounts per chunk, at least */

const struct ml_amount ml_amount_zero;

const signed char ml_kind_slot_identity[ML_KIND_COUNT] = {
	0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
};
_Static_assert(ML_KIND_COUNT == 16, "ml_kind_slot_identity lists every kind");

/* Which amounts a function or line keeps: slot[k] for each kind k of mask
 * (in kind order), -1 for the others.  A function's kinds are those of the
 * stacks through it, so it keeps those only (kind_slot points into its
 * map's slot); most have two or three of the profile's kinds. */
struct kind_map {
	uint32_t mask;
	signed char slot[ML_KIND_COUNT];
};

static const struct kind_map no_kinds = {
	0, { -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1 },
};

static const struct kind_map *map_of(const signed char *kind_slot)
{
	return (const struct kind_map *)(const void *)(kind_slot - offsetof(struct kind_map, slot));
}

/* The map of mask, made on first need and kept until ml_agg_free.  NULL
 * on ENOMEM. */
static const struct kind_map *kind_map(struct agg_priv *pv, uint32_t mask)
{
	for (size_t i = 0; i < pv->n_maps; i++)
		if (pv->maps[i]->mask == mask)
			return pv->maps[i];
	if (pv->n_maps == pv->cap_maps) {
		size_t cap = pv->cap_maps ? pv->cap_maps * 2 : 16;
		struct kind_map **maps = realloc(pv->maps, cap * sizeof(*maps));
		if (!maps)
			return NULL;
		pv->maps = maps;
		pv->cap_maps = cap;
	}
	struct kind_map *m = malloc(sizeof(*m));
	if (!m)
		return NULL;
	m->mask = mask;
	signed char n = 0;
	for (int k = 0; k < ML_KIND_COUNT; k++)
		m->slot[k] = (mask >> k) & 1 ? n++ : -1;
	pv->maps[pv->n_maps++] = m;
	return m;
}

/* n zeroed amounts kept until ml_agg_free, or NULL. */
static struct ml_amount *amount_room(struct agg_priv *pv, size_t n)
{
	struct amount_chunk *c = pv->amount_chunks;
	if (n == 0)
		n = 1;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > AMOUNT_CHUNK ? n : AMOUNT_CHUNK;
		c = calloc(1, sizeof(*c) + cap * sizeof(c->slot[0]));
		if (!c)
			return NULL;
		c->next = pv->amount_chunks;
		c->cap = cap;
		pv->amount_chunks = c;
	}
	c->used += n;
	return &c->slot[c->used - n];
}

/* Makes the amounts *self and *total (kind_slot *ks) hold every kind of
 * kinds too, keeping what they hold.  0 or -ENOMEM. */
static int cover_kinds(struct agg_priv *pv, struct ml_amount **self, struct ml_amount **total,
		       const signed char **ks, uint32_t kinds)
{
	const struct kind_map *old = map_of(*ks);
	if ((old->mask & kinds) == kinds)
		return 0;
	const struct kind_map *m = kind_map(pv, old->mask | kinds);
	if (!m)
		return -ENOMEM;
	size_t n = (size_t)__builtin_popcount(m->mask);
	struct ml_amount *slots = amount_room(pv, 2 * n);
	if (!slots)
		return -ENOMEM;
	for (uint32_t b = old->mask; b; b &= b - 1) {
		int k = __builtin_ctz(b);
		slots[m->slot[k]] = (*self)[old->slot[k]];
		slots[n + m->slot[k]] = (*total)[old->slot[k]];
	}
	*self = slots;
	*total = slots + n;
	*ks = m->slot;
	return 0;
}

static int func_kinds(struct ml_agg *a, long f, uint32_t kinds)
{
	struct ml_agg_func *x = &a->funcs[f];
	return cover_kinds(a->priv, &x->self_slots, &x->total_slots, &x->kind_slot, kinds);
}

static int line_kinds(struct ml_agg *a, long l, uint32_t kinds)
{
	struct ml_agg_line *x = &a->lines[l];
	return cover_kinds(a->priv, &x->self_slots, &x->total_slots, &x->kind_slot, kinds);
}

const char *ml_kind_list(void)
{
	static char list[256];
	if (!list[0])
		for (int k = 0; k < ML_KIND_COUNT; k++) {
			if (k)
				strcat(list, ", ");
			strcat(list, ml_kind_name((enum ml_kind)k));
		}
	return list;
}

struct ml_amount ml_amount_gpu(const struct ml_amount *per_kind)
{
	struct ml_amount sum = { 0 };
	for (int k = 0; k < ML_KIND_COUNT; k++)
		if (ml_kind_is_gpu((enum ml_kind)k))
			ml_amount_add(&sum, &per_kind[k]);
	/* At the combined GPU peak when the profile has the GPU total (the
	 * pseudo-kind counts the same blocks at the same stacks); otherwise
	 * (older profiles) the sum of each kind's own peak. */
	const struct ml_amount *g = &per_kind[ML_KIND_CUDA_GPU];
	if (g->allocs || g->frees || g->live_blocks) {
		sum.peak_bytes = g->peak_bytes;
		sum.peak_blocks = g->peak_blocks;
	}
	return sum;
}

bool ml_agg_has_torch_blocks(const struct ml_agg *a)
{
	return a->totals[ML_KIND_TORCH_CUDA].allocs ||
	       (a->profile->kinds_present & (1u << ML_KIND_TORCH_CUDA));
}

struct ml_amount ml_agg_cuda_mem(const struct ml_agg *a, const struct ml_amount *per_kind)
{
	return ml_agg_has_torch_blocks(a) ? per_kind[ML_KIND_TORCH_CUDA] : ml_amount_gpu(per_kind);
}

bool ml_kind_in_cpu(enum ml_kind kind)
{
	return !ml_kind_is_derived(kind) && ml_kind_peak_of(kind) == ML_KIND_HEAP;
}

bool ml_agg_has_cuda(const struct ml_agg *a)
{
	for (int k = 0; k < ML_KIND_COUNT; k++)
		if (ml_kind_is_cuda((enum ml_kind)k) &&
		    (a->totals[k].allocs || (a->profile->kinds_present & (1u << k))))
			return true;
	return false;
}

void ml_amount_add_counter(struct ml_amount *dst, const struct ml_fmt_counter *c)
{
	dst->allocs += c->allocs;
	dst->alloc_bytes += c->alloc_bytes;
	dst->frees += c->frees;
	dst->freed_bytes += c->freed_bytes;
	dst->live_blocks += c->live_blocks;
	dst->live_bytes += c->live_bytes;
	dst->peak_blocks += c->peak_blocks;
	dst->peak_bytes += c->peak_bytes;
	if (c->samples) {
		dst->estimated = true;
		dst->samples += c->samples;
		dst->var_alloc_bytes += c->var_alloc_bytes;
		dst->var_live_bytes += c->var_live_bytes;
		dst->var_peak_bytes += c->var_peak_bytes;
	}
}

void ml_amount_add(struct ml_amount *dst, const struct ml_amount *src)
{
	dst->allocs += src->allocs;
	dst->alloc_bytes += src->alloc_bytes;
	dst->frees += src->frees;
	dst->freed_bytes += src->freed_bytes;
	dst->live_blocks += src->live_blocks;
	dst->live_bytes += src->live_bytes;
	dst->peak_blocks += src->peak_blocks;
	dst->peak_bytes += src->peak_bytes;
	if (src->estimated) {
		dst->estimated = true;
		dst->samples += src->samples;
		dst->var_alloc_bytes += src->var_alloc_bytes;
		dst->var_live_bytes += src->var_live_bytes;
		dst->var_peak_bytes += src->var_peak_bytes;
	}
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h * 0x100000001b3ull;
}

static bool str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return a == b || strcmp(a, b) == 0;
}

static uint64_t line_hash(const char *file, int line, const char *function)
{
	uint64_t h = hash_str(0xcbf29ce484222325ull, file);
	h = (h ^ (uint64_t)(unsigned)line) * 0x100000001b3ull;
	return hash_str(h, function);
}

static int index_grow(struct index *ix, size_t need)
{
	if (ix->cap && (need + 1) * 4 < ix->cap * 3)
		return 0;
	size_t cap = ix->cap ? ix->cap * 2 : 64;
	size_t *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	free(ix->slots);	/* callers rehash from the entry arrays */
	ix->slots = slots;
	ix->cap = cap;
	return 1;
}

/* Copies *name into the pool when it points into the caller's scratch
 * buffer (pv->scratch_name); names from frames outlive us and are kept. */
static int own_name(struct agg_priv *pv, const char **name)
{
	if (!pv->scratch_name || *name != pv->scratch_name)
		return 0;
	if (pv->n_names == pv->cap_names) {
		size_t cap = pv->cap_names ? pv->cap_names * 2 : 16;
		char **mem = realloc(pv->names, cap * sizeof(*mem));
		if (!mem)
			return -ENOMEM;
		pv->names = mem;
		pv->cap_names = cap;
	}
	char *copy = strdup(*name);
	if (!copy)
		return -ENOMEM;
	pv->names[pv->n_names++] = copy;
	*name = copy;
	return 0;
}

static uint64_t func_hash(const char *name, const char *module, const char *file)
{
	return hash_str(hash_str(hash_str(0, name), module), file);
}

/* Puts every function (line) in its index again (grown or reordered). */
static void index_funcs(struct ml_agg *a)
{
	struct agg_priv *pv = a->priv;
	size_t mask = pv->funcs.cap - 1;
	memset(pv->funcs.slots, 0, pv->funcs.cap * sizeof(*pv->funcs.slots));
	for (size_t i = 0; i < a->n_funcs; i++) {
		const struct ml_agg_func *g = &a->funcs[i];
		size_t s = func_hash(g->name, g->module, g->file) & mask;
		while (pv->funcs.slots[s])
			s = (s + 1) & mask;
		pv->funcs.slots[s] = i + 1;
	}
}

static void index_lines(struct ml_agg *a)
{
	struct agg_priv *pv = a->priv;
	size_t mask = pv->lines.cap - 1;
	memset(pv->lines.slots, 0, pv->lines.cap * sizeof(*pv->lines.slots));
	for (size_t i = 0; i < a->n_lines; i++) {
		const struct ml_agg_line *l = &a->lines[i];
		size_t s = line_hash(l->file, l->line, l->function) & mask;
		while (pv->lines.slots[s])
			s = (s + 1) & mask;
		pv->lines.slots[s] = i + 1;
	}
}

/* Finds or adds the function (name, module, file): two functions of one
 * name (static helpers of two files, or of two modules) stay apart.  file
 * is the frame's source file (NULL without debug info).  Returns its index
 * or -ENOMEM. */
static long func_lookup(struct ml_agg *a, const char *name, const char *module,
			const char *file)
{
	struct agg_priv *pv = a->priv;
	int grown = index_grow(&pv->funcs, a->n_funcs);
	if (grown < 0)
		return -ENOMEM;
	if (grown)
		index_funcs(a);
	size_t mask = pv->funcs.cap - 1;
	size_t s = func_hash(name, module, file) & mask;
	for (; pv->funcs.slots[s]; s = (s + 1) & mask) {
		const struct ml_agg_func *g = &a->funcs[pv->funcs.slots[s] - 1];
		if (str_eq(g->name, name) && str_eq(g->module, module) && str_eq(g->file, file))
			return (long)pv->funcs.slots[s] - 1;
	}
	if (a->n_funcs == pv->cap_funcs) {
		size_t cap = pv->cap_funcs ? pv->cap_funcs * 2 : 64;
		void *mem = realloc(a->funcs, cap * sizeof(*a->funcs));
		if (!mem)
			return -ENOMEM;
		a->funcs = mem;
		pv->cap_funcs = cap;
	}
	if (own_name(pv, &name) < 0)
		return -ENOMEM;
	struct ml_agg_func *f = &a->funcs[a->n_funcs];
	memset(f, 0, sizeof(*f));
	f->kind_slot = no_kinds.slot;	/* amounts come with its first charge */
	f->name = name;
	f->label = name;
	f->module = module;
	f->file = file;
	pv->funcs.slots[s] = a->n_funcs + 1;
	return (long)a->n_funcs++;
}

/* Finds or adds the line (file, line, function).  Index or -ENOMEM. */
static long line_lookup(struct ml_agg *a, const struct ml_frame *fr)
{
	struct agg_priv *pv = a->priv;
	int grown = index_grow(&pv->lines, a->n_lines);
	if (grown < 0)
		return -ENOMEM;
	if (grown)
		index_lines(a);
	size_t mask = pv->lines.cap - 1;
	size_t s = line_hash(fr->file, fr->line, fr->function) & mask;
	for (; pv->lines.slots[s]; s = (s + 1) & mask) {
		const struct ml_agg_line *l = &a->lines[pv->lines.slots[s] - 1];
		if (l->line == fr->line && str_eq(l->file, fr->file) &&
		    str_eq(l->function, fr->function))
			return (long)pv->lines.slots[s] - 1;
	}
	if (a->n_lines == pv->cap_lines) {
		size_t cap = pv->cap_lines ? pv->cap_lines * 2 : 64;
		void *mem = realloc(a->lines, cap * sizeof(*a->lines));
		if (!mem)
			return -ENOMEM;
		a->lines = mem;
		pv->cap_lines = cap;
	}
	struct ml_agg_line *l = &a->lines[a->n_lines];
	memset(l, 0, sizeof(*l));
	l->kind_slot = no_kinds.slot;
	l->file = fr->file;
	l->line = fr->line;
	l->function = fr->function;
	pv->lines.slots[s] = a->n_lines + 1;
	return (long)a->n_lines++;
}

static bool addr_in_runtime(const struct ml_profile *p, uint64_t addr)
{
	for (size_t i = 0; i < p->n_modules; i++) {
		const struct ml_module *m = &p->modules[i];
		if (addr >= m->lo && addr < m->hi)
			return (m->flags & ML_MOD_RUNTIME) != 0;
	}
	return false;
}

static int push_frame(struct ml_agg_stack *st, size_t *cap, const struct ml_frame *fr)
{
	if (st->n_frames == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		void *mem = realloc(st->frames, ncap * sizeof(*st->frames));
		if (!mem)
			return -ENOMEM;
		st->frames = mem;
		*cap = ncap;
	}
	st->frames[st->n_frames++] = fr;
	return 0;
}

/* True for an allocation entry point inlined at the call site: glibc's
 * dynamic loader calls malloc through inline wrappers named malloc, calloc,
 * realloc, free (rtld-malloc.h), so the innermost return address of such
 * an allocation (e.g. allocate_dtv's TLS calloc in pthread_create)
 * symbolizes as "calloc" inlined into the caller.  The runtime already
 * dropped its own frames; this is the allocation entry point of DESIGN.md's
 * attribution rule, which only symbols can show. */
static bool inlined_alloc_entry(const struct ml_frame *fr)
{
	static const char *const names[] = {
		"malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
		"aligned_alloc", "memalign", "valloc", "pvalloc",
	};
	if (!fr->inlined || !fr->function)
		return false;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(fr->function, names[i]) == 0)
			return true;
	return false;
}

/* True for a frame of the global operator new or new[] (any overload):
 * the allocation entry point when the program carries its own copy of
 * libstdc++'s (linked with -static-libstdc++, as GCC's cc1 is).  The
 * runtime's operator new is then not the one called: the program's calls
 * malloc, which memline records, with that copy as the innermost frame.
 * A class's own operator new ("Foo::operator new") is the program's code
 * and stays. */
static bool global_operator_new(const struct ml_frame *fr)
{
	const char *f = fr->function;
	return f && (strncmp(f, "operator new(", 13) == 0 || strncmp(f, "operator new[](", 15) == 0);
}

/* True for a frame of the CUDA runtime, the allocation entry point of a CUDA
 * allocation made through libcudart (docs/cuda.md, "Where the stack
 * starts"): a frame without a source line whose function is one of the
 * runtime's symbols: its API (cuda*), its registration and internal helpers
 * (__cuda*, __cudart*), its C++ internals (cudart::, older toolkits) or its
 * hashed internal functions (libcudart_static_<sha1>, CUDA 13.0).  nvcc's
 * default links libcudart statically into the program, so these frames sit
 * in the program's own module, between the driver call memline hooked and
 * the program's cudaMalloc line.  A frame with a source line is the
 * program's, whatever its name. */
static bool cuda_runtime_frame(const struct ml_frame *fr)
{
	static const char *const prefixes[] = { "cuda", "__cuda", "cudart::", "libcudart_static_" };
	if ((fr->file && fr->line > 0) || !fr->function)
		return false;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(fr->function, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

/* True when the stack allocated CUDA memory of any kind (its counters were
 * summed into st before symbolization). */
static bool stack_has_cuda(const struct ml_agg_stack *st)
{
	for (int k = 0; k < ML_KIND_COUNT; k++) {
		if (!ml_kind_is_cuda((enum ml_kind)k))
			continue;
		const struct ml_amount *m = ml_agg_stack_kind(st, k);
		if (m->allocs || m->frees || m->live_blocks)
			return true;
	}
	return false;
}

/* True when the stack holds PyTorch's CUDA blocks (or their frees). */
static bool stack_has_torch_blocks(const struct ml_agg_stack *st)
{
	const struct ml_amount *b = ml_agg_stack_kind(st, ML_KIND_TORCH_CUDA);
	const struct ml_amount *f = ml_agg_stack_kind(st, ML_KIND_TORCH_CUDA_FREED);
	return b->allocs || b->live_blocks || f->allocs;
}

/* True for a frame of PyTorch's CUDA caching allocator (libc10_cuda): the
 * entry point of a block it reports, as malloc is a heap block's.  Its
 * innermost frames are dropped, so a block's self is the code that asked
 * for the memory (docs/torch.md). */
static bool torch_allocator_frame(const struct ml_frame *fr)
{
	const char *base = fr->module ? strrchr(fr->module, '/') : NULL;
	base = base ? base + 1 : fr->module;
	return base && strncmp(base, "libc10_cuda", 11) == 0;
}

/* What the stacks ask of one recorded address (as a return address), each
 * answer found once, when first asked, through the resolver: a profile's
 * stacks hold the same few hundred thousand addresses tens of millions of
 * times. */
struct addr_info {
	uint64_t addr;
	const struct ml_frame *frames;	/* resolve(addr, return address) */
	uint32_t n;			/* 0: no frames (or the resolver failed) */
	uint8_t known, is;		/* ADDR_*: asked, and the answer */
};

enum {
	ADDR_FRAMES = 1,	/* known only: frames and n are set */
	ADDR_RUNTIME = 2,	/* a native frame in memline's runtime */
	ADDR_EVAL = 4,		/* the eval loop (report/pystack.h) */
	ADDR_INTERP = 8,	/* in the interpreter */
	ADDR_OWN = 16,		/* memline's own Python code */
};

static uint64_t addr_hash(uint64_t addr)
{
	uint64_t h = addr * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* The index + 1 of addr's entry in pv->addrs, added on first sight; 0 on
 * ENOMEM. */
static uint32_t addr_id(struct agg_priv *pv, uint64_t addr)
{
	if ((pv->n_addrs + 1) * 2 > pv->addr_slots_cap) {
		size_t cap = pv->addr_slots_cap ? pv->addr_slots_cap * 2 : 4096;
		uint32_t *slots = calloc(cap, sizeof(*slots));
		if (!slots || pv->n_addrs >= UINT32_MAX - 1) {
			free(slots);
			return 0;
		}
		for (size_t i = 0; i < pv->n_addrs; i++) {
			size_t s = addr_hash(pv->addrs[i].addr) & (cap - 1);
			while (slots[s])
				s = (s + 1) & (cap - 1);
			slots[s] = (uint32_t)i + 1;
		}
		free(pv->addr_slots);
		pv->addr_slots = slots;
		pv->addr_slots_cap = cap;
	}
	size_t mask = pv->addr_slots_cap - 1, s = addr_hash(addr) & mask;
	for (; pv->addr_slots[s]; s = (s + 1) & mask)
		if (pv->addrs[pv->addr_slots[s] - 1].addr == addr)
			return pv->addr_slots[s];
	if (pv->n_addrs == pv->cap_addrs) {
		size_t cap = pv->cap_addrs ? pv->cap_addrs * 2 : 1024;
		struct addr_info *mem = realloc(pv->addrs, cap * sizeof(*mem));
		if (!mem)
			return 0;
		pv->addrs = mem;
		pv->cap_addrs = cap;
	}
	pv->addrs[pv->n_addrs] = (struct addr_info){ .addr = addr };
	pv->addr_slots[s] = (uint32_t)++pv->n_addrs;
	return pv->addr_slots[s];
}

/* The frames of address entry id (as a return address). */
static const struct ml_frame *addr_frames(struct ml_agg *a, uint32_t id, size_t *n)
{
	struct agg_priv *pv = a->priv;
	struct addr_info *ai = &pv->addrs[id - 1];
	if (!(ai->known & ADDR_FRAMES)) {
		const struct ml_frame *frames = NULL;
		size_t got = 0;
		if (a->resolver->resolve(a->resolver->ctx, ai->addr, true, &frames, &got) < 0)
			got = 0;
		ai = &pv->addrs[id - 1];
		ai->frames = got ? frames : NULL;
		ai->n = (uint32_t)got;
		ai->known |= ADDR_FRAMES;
	}
	*n = ai->n;
	return ai->frames;
}

/* addr_is when the question was not asked before. */
static bool addr_ask(struct ml_agg *a, uint32_t id, uint8_t q)
{
	struct agg_priv *pv = a->priv;
	const struct ml_resolver *r = a->resolver;
	struct addr_info *ai;
	uint64_t addr = pv->addrs[id - 1].addr;
	const struct ml_frame *frames;
	size_t n;
	bool yes = false;
	if (q == ADDR_RUNTIME) {
		yes = !ml_pyframe_is(addr) && addr_in_runtime(a->profile, addr);
	} else if (q == ADDR_EVAL) {
		frames = addr_frames(a, id, &n);
		yes = r->py_is_eval(r->ctx, addr, false, n ? frames[n - 1].function : NULL);
	} else if (q == ADDR_INTERP) {
		yes = r->py_in_interpreter(r->ctx, addr);
	} else if (q == ADDR_OWN) {
		frames = addr_frames(a, id, &n);
		yes = n > 0 && frames[0].own;
	}
	ai = &pv->addrs[id - 1];
	ai->known |= q;
	if (yes)
		ai->is |= q;
	return yes;
}

/* Answers question q (ADDR_RUNTIME, ADDR_EVAL, ADDR_INTERP, ADDR_OWN) of
 * address entry id. */
static inline bool addr_is(struct ml_agg *a, uint32_t id, uint8_t q)
{
	const struct addr_info *ai = &((struct agg_priv *)a->priv)->addrs[id - 1];
	return (ai->known & q) ? (ai->is & q) != 0 : addr_ask(a, id, q);
}

/* Appends the frames of recorded frame i (address addr, entry id) of ps to
 * st: memline's own removed, the allocation entry point removed, inlined
 * calls expanded.  For a CUDA allocation, the CUDA runtime's innermost
 * frames are the entry point too (cuda_runtime_frame); host mallocs the
 * runtime makes keep them.  For a PyTorch CUDA block, its caching
 * allocator's frames are (torch_allocator_frame).  0 or -ENOMEM. */
static int push_resolved(struct ml_agg *a, const struct ml_stack *ps, uint32_t i, uint64_t addr,
			 uint32_t id, struct ml_agg_stack *st, size_t *cap, bool strip_cudart,
			 bool strip_torch)
{
	if (addr_is(a, id, ADDR_RUNTIME))
		return 0;
	bool ret = !(i == 0 && (ps->flags & ML_STACK_EXACT_IP));
	const struct ml_frame *frames = NULL;
	size_t n = 0;
	if (ret)
		frames = addr_frames(a, id, &n);
	else if (a->resolver->resolve(a->resolver->ctx, addr, ret, &frames, &n) < 0)
		n = 0;
	if (n == 0)
		return 0;	/* the symbolizer reports its own trouble */
	size_t k = 0;
	if (st->n_frames == 0)
		for (; k < n; k++) {
			if (frames[k].runtime)
				continue;
			if (k + 1 < n && inlined_alloc_entry(&frames[k]))
				continue;	/* the entry point, not the program */
			if (global_operator_new(&frames[k]))
				continue;	/* the program's own copy of operator new */
			if (strip_cudart && cuda_runtime_frame(&frames[k]))
				continue;	/* the CUDA runtime: the entry point */
			if (strip_torch && torch_allocator_frame(&frames[k]))
				continue;	/* PyTorch's allocator: the entry point */
			break;
		}
	for (; k < n; k++)
		if (!frames[k].runtime && push_frame(st, cap, &frames[k]) < 0)
			return -ENOMEM;
	return 0;
}

/* report/pystack.h's questions, through the address entries. */
struct py_env {
	struct ml_agg *a;
	const struct ml_stack *ps;
	const uint32_t *ids;		/* the entry of each recorded frame */
	const uint8_t *bits;		/* and its answers (stack_bits) */
};

static bool env_is_eval(void *ctx, uint64_t addr, uint32_t i)
{
	struct py_env *e = ctx;
	const struct ml_resolver *r = e->a->resolver;
	if (!(i == 0 && (e->ps->flags & ML_STACK_EXACT_IP)))
		return e->bits[i] & ADDR_EVAL;
	const struct ml_frame *frames = NULL;
	size_t n = 0;
	const char *fn = NULL;
	if (r->resolve(r->ctx, addr, false, &frames, &n) == 0 && n > 0)
		fn = frames[n - 1].function;
	return r->py_is_eval(r->ctx, addr, true, fn);
}

static bool env_in_interpreter(void *ctx, uint64_t addr, uint32_t i)
{
	struct py_env *e = ctx;
	return e->bits[i] & ADDR_INTERP;
}

/* A stack with Python frames: in program order (report/pystack.h), the
 * frames the default view leaves out left out. */
static int symbolize_mixed(struct ml_agg *a, const struct ml_stack *ps, const uint64_t *addrs,
			   const uint32_t *ids, struct ml_agg_stack *st, size_t *cap,
			   bool strip_cudart, bool strip_torch)
{
	struct agg_priv *pv = a->priv;
	if (ps->depth + 1 > pv->items_cap) {
		struct ml_pystack_item *mem = realloc(pv->items, (ps->depth + 1) * sizeof(*mem));
		if (!mem)
			return -ENOMEM;
		pv->items = mem;
		pv->items_cap = ps->depth + 1;
	}
	struct ml_pystack_item *items = pv->items;
	struct py_env e = { a, ps, ids, &pv->walk_bits[ids - pv->walk_ids] };
	struct ml_pystack_env env = { &e, env_is_eval, env_in_interpreter };
	size_t n = ml_pystack_order(addrs, ps->depth, ps->flags, &env, items);
	int err = 0;
	/* memline's own Python code (@profile's wrappers) between the
	 * program's frames is left out like the interpreter's internals; a
	 * stack of nothing but memline's boot code keeps it, to say so. */
	bool user = false;
	for (size_t k = 0; k < n && !user; k++)
		user = items[k].python && items[k].show == ML_PYSTACK_SHOW &&
		       !addr_is(a, ids[items[k].index], ADDR_OWN);
	for (size_t k = 0; k < n && err == 0; k++) {
		uint32_t id = ids[items[k].index];
		if (items[k].show == ML_PYSTACK_NEVER ||
		    (items[k].show == ML_PYSTACK_NATIVE_ONLY && !a->opts.native) ||
		    (user && items[k].python && !a->opts.native && addr_is(a, id, ADDR_OWN)))
			continue;
		err = push_resolved(a, ps, items[k].index, items[k].addr, id, st, cap,
				    strip_cudart, strip_torch);
	}
	return err;
}

/* Room for a stack of depth frames in the walk buffers.  0 or -ENOMEM. */
static int walk_room(struct agg_priv *pv, size_t depth)
{
	if (depth <= pv->walk_cap)
		return 0;
	size_t cap = pv->walk_cap ? pv->walk_cap : 64;
	while (cap < depth)
		cap *= 2;
	uint64_t *mem = realloc(pv->walk, cap * sizeof(*mem));
	if (mem)
		pv->walk = mem;
	uint32_t *ids = realloc(pv->walk_ids, cap * sizeof(*ids));
	if (ids)
		pv->walk_ids = ids;
	uint32_t *nodes = realloc(pv->walk_nodes, cap * sizeof(*nodes));
	if (nodes)
		pv->walk_nodes = nodes;
	uint8_t *bits = realloc(pv->walk_bits, cap);
	if (bits)
		pv->walk_bits = bits;
	if (!mem || !ids || !nodes || !bits)
		return -ENOMEM;
	pv->walk_cap = cap;
	pv->walk_depth = 0;	/* the last walk moved */
	return 0;
}

/* The addresses of ps, innermost first, and their entries (*ids): a stack
 * of the profile's trie finds them through its nodes, each node's entry
 * found once.  The buffers hold a walk at their end, its outermost frame
 * last, so the next stack's walk stops at the first node it shares with
 * it (the rest of the path to the root is the same).  NULL on ENOMEM. */
static const uint64_t *stack_addrs(struct ml_agg *a, const struct ml_stack *ps,
				   const uint32_t **ids, uint32_t *fresh)
{
	struct agg_priv *pv = a->priv;
	const struct ml_profile *p = a->profile;
	if (walk_room(pv, ps->depth) < 0)
		return NULL;
	size_t at = pv->walk_cap - ps->depth;	/* frame d is at at + d */
	*ids = &pv->walk_ids[at];
	*fresh = ps->depth;
	if (ps->frames) {
		pv->walk_depth = 0;
		for (uint32_t d = 0; d < ps->depth; d++)
			if (!(pv->walk_ids[at + d] = addr_id(pv, ps->frames[d])))
				return NULL;
		return ps->frames;
	}
	if (!pv->node_ids && p->n_frame_nodes &&
	    !(pv->node_ids = calloc(p->n_frame_nodes, sizeof(*pv->node_ids))))
		return NULL;
	uint32_t node = ps->leaf;
	size_t last = pv->walk_depth;	/* frames at the buffers' end from the last walk */
	for (uint32_t d = 0; d < ps->depth && node; d++) {
		size_t from_root = ps->depth - 1 - d;
		if (from_root < last && pv->walk_nodes[at + d] == node) {
			*fresh = d;
			break;
		}
		const struct ml_fmt_frame *fr = &p->frame_nodes[node - 1];
		uint32_t *id = &pv->node_ids[node - 1];
		if (!*id && !(*id = addr_id(pv, fr->address))) {
			pv->walk_depth = 0;
			return NULL;
		}
		pv->walk[at + d] = fr->address;
		pv->walk_ids[at + d] = *id;
		pv->walk_nodes[at + d] = node;
		node = fr->parent;
	}
	pv->walk_depth = ps->depth;
	return &pv->walk[at];
}

/* The answers the stack's frames [0, fresh) need, into pv->walk_bits (the
 * frames past fresh are the last walk's, with its answers: a stack shares
 * frames only with one of the same outermost frame, so of the same kind):
 * runtime, and for a stack with Python frames (mixed) the eval loop and the
 * interpreter, asked in the frames' order as ml_pystack_order asks. */
static void stack_bits(struct ml_agg *a, const struct ml_stack *ps, const uint64_t *addrs,
		       const uint32_t *ids, uint32_t fresh, bool mixed)
{
	struct agg_priv *pv = a->priv;
	uint8_t *bits = &pv->walk_bits[ids - pv->walk_ids];
	bool exact = ps->flags & ML_STACK_EXACT_IP;	/* frame 0: env_is_eval asks */
	if (fresh == 0 && ps->depth)
		fresh = 1;	/* the last stack's frame 0 may have been exact */
	for (uint32_t d = 0; d < fresh; d++) {
		uint8_t b = 0;
		if (!ml_pyframe_is(addrs[d])) {
			b |= addr_is(a, ids[d], ADDR_RUNTIME) ? ADDR_RUNTIME : 0;
			if (mixed) {
				if (d || !exact)
					b |= addr_is(a, ids[d], ADDR_EVAL) ? ADDR_EVAL : 0;
				b |= addr_is(a, ids[d], ADDR_INTERP) ? ADDR_INTERP : 0;
			}
		}
		bits[d] = b;
	}
}

/* The program frames of ps, innermost first (push_resolved), into
 * st->frames: *cap of them allocated (realloc'd as it grows). */
static int symbolize_stack(struct ml_agg *a, const struct ml_stack *ps, struct ml_agg_stack *st,
			   size_t *cap)
{
	bool strip_cudart = stack_has_cuda(st);
	bool strip_torch = stack_has_torch_blocks(st);
	if (ps->depth == 0)
		return 0;
	const uint32_t *ids;
	uint32_t fresh;
	const uint64_t *addrs = stack_addrs(a, ps, &ids, &fresh);
	if (!addrs)
		return -ENOMEM;
	bool mixed = ps->depth && ml_pyframe_is(addrs[ps->depth - 1]) && a->resolver->py_is_eval &&
		     a->resolver->py_in_interpreter;
	stack_bits(a, ps, addrs, ids, fresh, mixed);
	if (mixed)
		return symbolize_mixed(a, ps, addrs, ids, st, cap, strip_cudart, strip_torch);
	for (uint32_t i = 0; i < ps->depth; i++)
		if (push_resolved(a, ps, i, addrs[i], ids[i], st, cap, strip_cudart, strip_torch) < 0)
			return -ENOMEM;
	return 0;
}

/* The index of the stack with this id in p->stacks (sorted by id), or -1.
 * *hint: the index found last (counters come in stack order, mostly):
 * that one and the next are tried first. */
static long find_stack(const struct ml_profile *p, uint32_t id, size_t *hint)
{
	if (*hint < p->n_stacks && p->stacks[*hint].id == id)
		return (long)*hint;
	if (*hint + 1 < p->n_stacks && p->stacks[*hint + 1].id == id)
		return (long)++*hint;
	size_t lo = 0, hi = p->n_stacks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->stacks[mid].id == id) {
			*hint = mid;
			return (long)mid;
		}
		if (p->stacks[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* The aggregated stack for a counter's stack id, added on first sight.
 * slot_of maps profile stack index -> aggregated index + 1. */
static struct ml_agg_stack *stack_for(struct ml_agg *a, size_t *slot_of, uint32_t id,
				      size_t *hint)
{
	long ps = find_stack(a->profile, id, hint);
	if (ps >= 0 && slot_of[ps])
		return &a->stacks[slot_of[ps] - 1];
	if (ps < 0)	/* a stack id the file lacks: rare, searched linearly */
		for (size_t k = 0; k < a->n_stacks; k++)
			if (a->stacks[k].id == id)
				return &a->stacks[k];
	struct ml_agg_stack *st = &a->stacks[a->n_stacks++];
	st->id = id;
	if (ps >= 0)
		slot_of[ps] = a->n_stacks;
	return st;
}

/* A copy of frames[0..n) kept until ml_agg_free (NULL for none), or NULL
 * with *err = -ENOMEM. */
static const struct ml_frame **keep_frames(struct agg_priv *pv, const struct ml_frame **frames,
					   size_t n, int *err)
{
	struct frame_chunk *c = pv->chunks;
	if (n == 0)
		return NULL;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > FRAME_CHUNK ? n : FRAME_CHUNK;
		c = malloc(sizeof(*c) + cap * sizeof(c->slot[0]));
		if (!c) {
			*err = -ENOMEM;
			return NULL;
		}
		c->next = pv->chunks;
		c->used = 0;
		c->cap = cap;
		pv->chunks = c;
	}
	const struct ml_frame **out = &c->slot[c->used];
	memcpy(out, frames, n * sizeof(*frames));
	c->used += n;
	return out;
}

/* Symbolizes stack ps into a->stacks[k], whose frames then lie in the
 * chunks, shared with the stack before it when they are the same: distinct
 * stacks often symbolize alike (Python stacks that differ only in the
 * interpreter's frames, which are left out), and such stacks come one
 * after another (torch.mlp: 450 k of its 465 k).  0 or -ENOMEM. */
static int symbolize_kept(struct ml_agg *a, const struct ml_stack *ps, size_t k)
{
	struct agg_priv *pv = a->priv;
	struct ml_agg_stack *st = &a->stacks[k];
	size_t cap = pv->scratch_cap;
	st->frames = pv->scratch;
	int err = symbolize_stack(a, ps, st, &cap);
	const struct ml_frame **frames = st->frames;
	pv->scratch = st->frames;
	pv->scratch_cap = cap;
	st->frames = NULL;
	if (err < 0 || st->n_frames == 0)
		return err;
	const struct ml_agg_stack *o = k ? &a->stacks[k - 1] : NULL;
	if (o && o->n_frames == st->n_frames &&
	    memcmp(o->frames, frames, st->n_frames * sizeof(*frames)) == 0) {
		st->frames = o->frames;
		return 0;
	}
	st->frames = keep_frames(pv, frames, st->n_frames, &err);
	return err;
}

/* One aggregated stack per stack id that has counters. */
static int collect_stacks(struct ml_agg *a)
{
	const struct ml_profile *p = a->profile;
	size_t hint = 0;
	size_t *slot_of = calloc(p->n_stacks + 1, sizeof(*slot_of));
	a->stacks = calloc(p->n_counters ? p->n_counters : 1, sizeof(*a->stacks));
	if (!a->stacks || !slot_of) {
		free(slot_of);
		return -ENOMEM;
	}
	/* Which kinds each stack has, then one pool of amounts for them all:
	 * a stack holds only its own kinds' amounts. */
	size_t n_amounts = 0;
	for (size_t i = 0; i < p->n_counters; i++) {
		const struct ml_fmt_counter *c = &p->counters[i];
		if (c->kind >= ML_KIND_COUNT || ml_kind_is_derived((enum ml_kind)c->kind))
			continue;
		struct ml_agg_stack *st = stack_for(a, slot_of, c->stack_id, &hint);
		n_amounts += !((st->kinds >> c->kind) & 1);
		st->kinds |= 1u << c->kind;
		if (ml_kind_in_cpu((enum ml_kind)c->kind)) {	/* derived: heap + python */
			n_amounts += !((st->kinds >> ML_KIND_CPU) & 1);
			st->kinds |= 1u << ML_KIND_CPU;
		}
	}
	/* A stack with one of the kinds cpu sums has cpu's amount in it. */
	for (size_t k = 0; k < a->n_stacks; k++) {
		struct ml_agg_stack *st = &a->stacks[k];
		uint32_t in_cpu = 0;
		for (int kind = 0; kind < ML_KIND_COUNT; kind++)
			if (((st->kinds >> kind) & 1) && ml_kind_in_cpu((enum ml_kind)kind))
				in_cpu |= 1u << kind;
		if (__builtin_popcount(in_cpu) == 1) {
			st->cpu_of = (uint32_t)__builtin_ctz(in_cpu) + 1;
			n_amounts--;
		}
	}
	struct agg_priv *pv = a->priv;
	pv->amounts = calloc(n_amounts ? n_amounts : 1, sizeof(*pv->amounts));
	if (!pv->amounts) {
		free(slot_of);
		return -ENOMEM;
	}
	for (size_t k = 0, at = 0; k < a->n_stacks; k++) {
		a->stacks[k].amounts = &pv->amounts[at];
		at += (size_t)__builtin_popcount(a->stacks[k].kinds) - (a->stacks[k].cpu_of != 0);
	}
	for (size_t i = 0; i < p->n_counters; i++) {
		const struct ml_fmt_counter *c = &p->counters[i];
		if (c->kind >= ML_KIND_COUNT)
			continue;
		struct ml_agg_stack *st = stack_for(a, slot_of, c->stack_id, &hint);
		ml_amount_add_counter((struct ml_amount *)ml_agg_stack_kind(st, c->kind), c);
		ml_amount_add_counter(&a->totals[c->kind], c);
		if (ml_kind_in_cpu((enum ml_kind)c->kind)) {
			if (!st->cpu_of)
				ml_amount_add_counter((struct ml_amount *)ml_agg_stack_kind(st, ML_KIND_CPU), c);
			ml_amount_add_counter(&a->totals[ML_KIND_CPU], c);
		}
	}
	free(slot_of);
	for (size_t k = 0; k < a->n_stacks; k++) {
		long ps = find_stack(p, a->stacks[k].id, &hint);
		if (ps < 0)
			continue;
		a->stacks[k].truncated = (p->stacks[ps].flags & ML_STACK_TRUNCATED) != 0;
		if (symbolize_kept(a, &p->stacks[ps], k) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Adds stack st's amounts into per-slot amounts dst (every kind a stack
 * has has a slot). */
static void add_kinds(struct ml_amount *dst, const signed char *kind_slot,
		      const struct ml_agg_stack *st)
{
	const struct ml_amount *src = st->amounts;
	for (uint32_t m = st->kinds; m; m &= m - 1) {
		int k = __builtin_ctz(m);
		if (k == ML_KIND_CPU && st->cpu_of)	/* kept as another kind's */
			ml_amount_add(&dst[kind_slot[k]], ml_agg_stack_kind(st, k));
		else
			ml_amount_add(&dst[kind_slot[k]], src++);
	}
}

/* The name a frame's function is grouped under: a symbol without debug
 * info comes as "sym+0x1f" from the symbolizer; every offset is one
 * function, so the offset is cut off (into key). */
static const char *function_key(const struct ml_frame *fr, char *key, size_t len)
{
	const char *name = fr->function ? fr->function : ML_AGG_UNKNOWN;
	const char *plus = strrchr(name, '+');
	if (fr->file || !plus || plus == name || strncmp(plus, "+0x", 3) != 0 || !plus[3] ||
	    strspn(plus + 3, "0123456789abcdefABCDEF") != strlen(plus + 3) ||
	    (size_t)(plus - name) >= len)
		return name;
	memcpy(key, name, (size_t)(plus - name));
	key[plus - name] = '\0';
	return key;
}

static size_t memo_slot(const struct frame_memo *memo, size_t cap, const struct ml_frame *fr)
{
	uint64_t h = ((uint64_t)(uintptr_t)fr >> 3) * 0x9e3779b97f4a7c15ull;
	size_t s = (size_t)(h >> 32) & (cap - 1);
	while (memo[s].frame && memo[s].frame != fr)
		s = (s + 1) & (cap - 1);
	return s;
}

/* The function (*func) and line (*line, -1 without a source line) frame fr
 * is charged to; looked up once per frame pointer.  0 or -ENOMEM. */
static int frame_target(struct ml_agg *a, const struct ml_frame *fr, long *func, long *line)
{
	struct agg_priv *pv = a->priv;
	if ((pv->memo_used + 1) * 4 >= pv->memo_cap * 3) {
		size_t cap = pv->memo_cap ? pv->memo_cap * 2 : 256;
		struct frame_memo *memo = calloc(cap, sizeof(*memo));
		if (!memo)
			return -ENOMEM;
		for (size_t i = 0; i < pv->memo_cap; i++)
			if (pv->memo[i].frame)
				memo[memo_slot(memo, cap, pv->memo[i].frame)] = pv->memo[i];
		free(pv->memo);
		pv->memo = memo;
		pv->memo_cap = cap;
	}
	size_t s = memo_slot(pv->memo, pv->memo_cap, fr);
	if (pv->memo[s].frame) {
		*func = pv->memo[s].func;
		*line = pv->memo[s].line;
		return 0;
	}
	char key[512];
	const char *name = function_key(fr, key, sizeof(key));
	pv->scratch_name = key;
	long f = func_lookup(a, name, fr->module, fr->file);
	pv->scratch_name = NULL;
	if (f < 0)
		return -ENOMEM;
	long l = -1;
	if (fr->file && fr->line > 0) {
		l = line_lookup(a, fr);
		if (l < 0)
			return -ENOMEM;
	}
	pv->memo[s] = (struct frame_memo){ .frame = fr, .func = f, .line = l };
	pv->memo_used++;
	*func = f;
	*line = l;
	return 0;
}

/* Notes that function or line idx was met at frame i (innermost first) of
 * stack si: the first meeting, in the order the stacks and their frames
 * come, orders the functions and lines (sort_first).  0 or -ENOMEM. */
static int note_first(uint64_t **first, size_t *n, size_t *cap, long idx, size_t si, size_t i)
{
	uint64_t key = (uint64_t)si << 32 | (uint32_t)i;
	if ((size_t)idx < *n) {
		if ((*first)[idx] >> 32 == si && key < (*first)[idx])
			(*first)[idx] = key;
		return 0;
	}
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		uint64_t *mem = realloc(*first, ncap * sizeof(*mem));
		if (!mem)
			return -ENOMEM;
		*first = mem;
		*cap = ncap;
	}
	(*first)[(*n)++] = key;	/* idx == *n: made just now */
	return 0;
}

static struct ml_amount *path_sum(struct agg_priv *pv, size_t d)
{
	return &pv->path_sums[d * pv->n_slots];
}

/* Room on the path for n entries.  0 or -ENOMEM. */
static int path_room(struct agg_priv *pv, size_t n)
{
	if (n <= pv->path_cap)
		return 0;
	size_t cap = pv->path_cap ? pv->path_cap : 64;
	while (cap < n)
		cap *= 2;
	struct path_ent *path = realloc(pv->path, cap * sizeof(*path));
	if (path)
		pv->path = path;
	struct ml_amount *sums = realloc(pv->path_sums, cap * (pv->n_slots ? pv->n_slots : 1) *
					 sizeof(*sums));
	if (sums)
		pv->path_sums = sums;
	if (!path || !sums)
		return -ENOMEM;
	pv->path_cap = cap;
	return 0;
}

/* Adds the amounts of the kinds in kinds of per-slot amounts src (slots
 * src_slot) to dst (slots dst_slot). */
static void add_slots(struct ml_amount *dst, const signed char *dst_slot,
		      const struct ml_amount *src, const signed char *src_slot, uint32_t kinds)
{
	for (uint32_t m = kinds; m; m &= m - 1) {
		int k = __builtin_ctz(m);
		ml_amount_add(&dst[dst_slot[k]], &src[src_slot[k]]);
	}
}

/* Puts frame fr (frame i, innermost first, of stack si) on the path at
 * depth d.  0 or -ENOMEM. */
static int path_push(struct ml_agg *a, size_t d, const struct ml_frame *fr, size_t si, size_t i)
{
	struct agg_priv *pv = a->priv;
	long f, l;
	if (frame_target(a, fr, &f, &l) < 0 ||
	    note_first(&pv->func_first, &pv->n_func_first, &pv->cap_func_first, f, si, i) < 0 ||
	    (l >= 0 &&
	     note_first(&pv->line_first, &pv->n_line_first, &pv->cap_line_first, l, si, i) < 0))
		return -ENOMEM;
	pv->path[d] = (struct path_ent){
		.fr = fr, .func = f, .line = l,
		.top_func = a->funcs[f].seen++ == 0,
		.top_line = l >= 0 && a->lines[l].seen++ == 0,
	};
	memset(path_sum(pv, d), 0, pv->n_slots * sizeof(struct ml_amount));
	return 0;
}

/* Takes the path's entry at depth d off: its sum is charged to its
 * function and line where it is their outermost entry, and added to its
 * parent's. */
static int path_pop(struct ml_agg *a, size_t d)
{
	struct agg_priv *pv = a->priv;
	const struct path_ent *e = &pv->path[d];
	const struct ml_amount *sum = path_sum(pv, d);
	if (e->top_func) {
		struct ml_agg_func *f = &a->funcs[e->func];
		if (func_kinds(a, e->func, e->kinds) < 0)
			return -ENOMEM;
		add_slots(f->total_slots, f->kind_slot, sum, pv->kind_slot, e->kinds);
	}
	a->funcs[e->func].seen--;
	if (e->line >= 0) {
		struct ml_agg_line *l = &a->lines[e->line];
		if (e->top_line) {
			if (line_kinds(a, e->line, e->kinds) < 0)
				return -ENOMEM;
			add_slots(l->total_slots, l->kind_slot, sum, pv->kind_slot, e->kinds);
		}
		l->seen--;
	}
	if (d > 0) {
		add_slots(path_sum(pv, d - 1), pv->kind_slot, sum, pv->kind_slot, e->kinds);
		pv->path[d - 1].kinds |= e->kinds;
	}
	return 0;
}

/* Charges every stack to its innermost function and line (self), and once
 * to every function and line on it (inclusive).  The stacks are walked as
 * one path from the outermost frame: a stack shares its outer frames with
 * the one before it (stacks come in the profile's order, and programs'
 * stacks differ near their leaves), so only the frames where it differs
 * are looked up, and an entry's amounts are those of every stack through
 * it, charged once when it leaves the path; to a function (line) only at
 * its outermost entry, as a stack counts once in its total. */
static int attribute_stacks(struct ml_agg *a)
{
	struct agg_priv *pv = a->priv;
	size_t depth = 0;
	for (size_t si = 0; si < a->n_stacks; si++) {
		const struct ml_agg_stack *st = &a->stacks[si];
		size_t n = st->n_frames;
		if (n == 0) {
			long f = func_lookup(a, ML_AGG_UNKNOWN, NULL, NULL);
			if (f < 0 || note_first(&pv->func_first, &pv->n_func_first,
						&pv->cap_func_first, f, si, 0) < 0 ||
			    func_kinds(a, f, st->kinds) < 0)
				return -ENOMEM;
			add_kinds(a->funcs[f].self_slots, a->funcs[f].kind_slot, st);
			add_kinds(a->funcs[f].total_slots, a->funcs[f].kind_slot, st);
			continue;
		}
		size_t k = 0, shared = n < depth ? n : depth;
		while (k < shared && pv->path[k].fr == st->frames[n - 1 - k])
			k++;
		while (depth > k)
			if (path_pop(a, --depth) < 0)
				return -ENOMEM;
		if (path_room(pv, n) < 0)
			return -ENOMEM;
		for (; depth < n; depth++)
			if (path_push(a, depth, st->frames[n - 1 - depth], si, n - 1 - depth) < 0)
				return -ENOMEM;
		struct path_ent *leaf = &pv->path[n - 1];
		add_kinds(path_sum(pv, n - 1), pv->kind_slot, st);
		leaf->kinds |= st->kinds;
		if (func_kinds(a, leaf->func, st->kinds) < 0 ||
		    (leaf->line >= 0 && line_kinds(a, leaf->line, st->kinds) < 0))
			return -ENOMEM;
		add_kinds(a->funcs[leaf->func].self_slots, a->funcs[leaf->func].kind_slot, st);
		if (leaf->line >= 0)
			add_kinds(a->lines[leaf->line].self_slots, a->lines[leaf->line].kind_slot, st);
	}
	while (depth > 0)
		if (path_pop(a, --depth) < 0)
			return -ENOMEM;
	return 0;
}

/* Order of entries by their first meeting (qsort_r's context: the keys). */
static int cmp_first(const void *x, const void *y, void *ctx)
{
	const uint64_t *first = ctx;
	uint64_t a = first[*(const size_t *)x], b = first[*(const size_t *)y];
	return a < b ? -1 : a > b;
}

/* The new index of every entry (new_of[old]) when entries [0, n) are put
 * in the order they were first met, or NULL when they already are (or on
 * ENOMEM, with *err set). */
static size_t *first_order(const uint64_t *first, size_t n, int *err)
{
	size_t i = 1;
	while (i < n && first[i - 1] < first[i])
		i++;
	if (i >= n)
		return NULL;
	size_t *order = malloc(n * sizeof(*order)), *new_of = malloc(n * sizeof(*new_of));
	if (!order || !new_of) {
		free(order);
		free(new_of);
		*err = -ENOMEM;
		return NULL;
	}
	for (i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_first, (void *)first);
	for (i = 0; i < n; i++)
		new_of[order[i]] = i;
	free(order);
	return new_of;
}

/* Puts the functions and lines in the order the stacks first meet them
 * (stack by stack, each innermost frame first): the order a charge of
 * every frame of every stack would have made them in, which the views'
 * ties keep.  attribute_stacks meets them in another order. */
static int sort_first(struct ml_agg *a)
{
	struct agg_priv *pv = a->priv;
	int err = 0;
	size_t *func_of = first_order(pv->func_first, a->n_funcs, &err);
	size_t *line_of = err ? NULL : first_order(pv->line_first, a->n_lines, &err);
	if (err || (!func_of && !line_of)) {
		free(func_of);
		return err;
	}
	size_t n = a->n_funcs > a->n_lines ? a->n_funcs : a->n_lines;
	size_t each = sizeof(*a->funcs) > sizeof(*a->lines) ? sizeof(*a->funcs) : sizeof(*a->lines);
	char *tmp = malloc(n * each + 1);
	if (!tmp) {
		free(func_of);
		free(line_of);
		return -ENOMEM;
	}
	if (func_of) {
		struct ml_agg_func *fs = (struct ml_agg_func *)tmp;
		for (size_t i = 0; i < a->n_funcs; i++)
			fs[func_of[i]] = a->funcs[i];
		memcpy(a->funcs, fs, a->n_funcs * sizeof(*fs));
		index_funcs(a);
	}
	if (line_of) {
		struct ml_agg_line *ls = (struct ml_agg_line *)tmp;
		for (size_t i = 0; i < a->n_lines; i++)
			ls[line_of[i]] = a->lines[i];
		memcpy(a->lines, ls, a->n_lines * sizeof(*ls));
		index_lines(a);
	}
	for (size_t i = 0; i < pv->memo_cap; i++) {
		struct frame_memo *m = &pv->memo[i];
		if (!m->frame)
			continue;
		if (func_of)
			m->func = (long)func_of[m->func];
		if (line_of && m->line >= 0)
			m->line = (long)line_of[m->line];
	}
	free(tmp);
	free(func_of);
	free(line_of);
	return 0;
}

/* Whether basename of path is the C library (or its threads part). */
static bool is_libc(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;
	base = base ? base + 1 : path;
	return base && (strncmp(base, "libc.so", 7) == 0 || strncmp(base, "libc-", 5) == 0 ||
			strncmp(base, "libpthread", 10) == 0);
}

/* True when sample sm caught a Python thread waiting for the GIL: its
 * innermost native frames are the C library's condition variable or mutex
 * (CPython's take_gil waits on the GIL's condition; drop_gil hands it over
 * through its mutex and condition), called by the interpreter.  The
 * interpreter's other locks are semaphores. */
static bool gil_wait(struct ml_agg *a, const struct ml_sample *sm)
{
	const struct ml_resolver *r = a->resolver;
	bool cond = false;
	if (!r->py_in_interpreter)
		return false;
	for (uint32_t i = 0; i < sm->depth && !ml_pyframe_is(sm->frames[i]); i++) {
		uint64_t addr = sm->frames[i];
		if (r->py_in_interpreter(r->ctx, addr))
			return cond;
		const struct ml_frame *frames = NULL;
		size_t n = 0;
		bool ret = !(i == 0 && (sm->flags & ML_STACK_EXACT_IP));
		if (r->resolve(r->ctx, addr, ret, &frames, &n) < 0 || n == 0 ||
		    !is_libc(frames[n - 1].module))
			return false;
		for (size_t k = 0; k < n; k++) {
			const char *fn = frames[k].function;
			if (fn && (strstr(fn, "pthread_cond_") || strstr(fn, "pthread_mutex_") ||
				   strstr(fn, "__lll_lock")))
				cond = true;
		}
	}
	return false;
}

/* In the default view a GIL wait is charged to "[waiting for the GIL]":
 * the C library's frames before the first Python frame go. */
static void drop_wait_frames(struct ml_agg_stack *st)
{
	size_t k = 0;
	while (k < st->n_frames && !st->frames[k]->python)
		k++;
	if (k == st->n_frames)
		return;
	memmove(st->frames, st->frames + k, (st->n_frames - k) * sizeof(*st->frames));
	st->n_frames -= k;
}

/* Charges one sample record: self to its innermost program function and
 * line, inclusive once to every function and line on its stack (a line's
 * time includes the calls made from it, as line_profiler's does).  A
 * sample of a thread waiting for the GIL is also counted as such on every
 * function and line of its stack, and its self goes to "[waiting for the
 * GIL]". */
static int attribute_sample(struct ml_agg *a, size_t si)
{
	const struct ml_sample *sm = &a->profile->samples[si];
	const struct ml_stack ps = { .id = 0, .depth = sm->depth, .flags = sm->flags,
				     .frames = sm->frames };
	struct agg_priv *pv = a->priv;
	struct ml_agg_stack st = { .frames = pv->scratch };
	size_t cap = pv->scratch_cap;
	int err = symbolize_stack(a, &ps, &st, &cap);
	pv->scratch = st.frames;	/* st.frames stays the scratch's */
	pv->scratch_cap = cap;
	bool gil = err == 0 && gil_wait(a, sm);
	long wait_func = -1;
	a->total_samples += sm->count;
	if (gil) {
		a->gil_samples += sm->count;
		if (!a->opts.native)
			drop_wait_frames(&st);
		wait_func = func_lookup(a, ML_AGG_GIL_WAIT, NULL, NULL);
		if (wait_func < 0)
			return -ENOMEM;
		a->funcs[wait_func].self_samples += sm->count;
		a->funcs[wait_func].total_samples += sm->count;
		a->funcs[wait_func].gil_samples += sm->count;
	}
	if (err < 0 || st.n_frames == 0) {
		long f = err < 0 ? err : func_lookup(a, ML_AGG_UNKNOWN, NULL, NULL);
		if (f >= 0) {
			a->funcs[f].self_samples += sm->count;
			a->funcs[f].total_samples += sm->count;
		}
		return f < 0 ? -ENOMEM : 0;
	}
	const struct ml_frame **kept = keep_frames(pv, st.frames, st.n_frames, &err);
	if (err < 0)
		return err;
	a->samples[si] = (struct ml_agg_sample){ kept, st.n_frames, sm->count };
	for (size_t i = 0; i < st.n_frames && err == 0; i++) {
		long f, l;
		if (frame_target(a, st.frames[i], &f, &l) < 0) {
			err = -ENOMEM;
			break;
		}
		if (i == 0 && !gil)
			a->funcs[f].self_samples += sm->count;
		if (a->funcs[f].seen_sample != si + 1) {
			a->funcs[f].seen_sample = si + 1;
			a->funcs[f].total_samples += sm->count;
			a->funcs[f].gil_samples += gil ? sm->count : 0;
		}
		if (l < 0)
			continue;
		if (i == 0 && !gil)
			a->lines[l].self_samples += sm->count;
		if (a->lines[l].seen_sample != si + 1) {
			a->lines[l].seen_sample = si + 1;
			a->lines[l].total_samples += sm->count;
			a->lines[l].gil_samples += gil ? sm->count : 0;
		}
	}
	return err;
}

int ml_agg_sample_stack(const struct ml_agg *a, size_t i, struct ml_agg_stack *out)
{
	const struct ml_sample *sm = &a->profile->samples[i];
	const struct ml_stack ps = { .id = 0, .depth = sm->depth, .flags = sm->flags,
				     .frames = sm->frames };
	memset(out, 0, sizeof(*out));
	size_t cap = 0;
	int err = symbolize_stack((struct ml_agg *)a, &ps, out, &cap);
	if (err < 0) {
		free(out->frames);
		out->frames = NULL;
		out->n_frames = 0;
	}
	return err;
}

/* Keeps a string made here until ml_agg_free.  0 or -ENOMEM (s freed). */
static int pool_keep(struct agg_priv *pv, char *str)
{
	if (pv->n_names == pv->cap_names) {
		size_t cap = pv->cap_names ? pv->cap_names * 2 : 16;
		char **mem = realloc(pv->names, cap * sizeof(*mem));
		if (!mem) {
			free(str);
			return -ENOMEM;
		}
		pv->names = mem;
		pv->cap_names = cap;
	}
	pv->names[pv->n_names++] = str;
	return 0;
}

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;
	return slash ? slash + 1 : path;
}

/* Function indexes into the aggregation ctx, by name, then by index. */
static int cmp_func_name(const void *x, const void *y, void *ctx)
{
	const struct ml_agg *agg = ctx;
	const struct ml_agg_func *a = &agg->funcs[*(const size_t *)x];
	const struct ml_agg_func *b = &agg->funcs[*(const size_t *)y];
	int c = strcmp(a->name, b->name);
	return c ? c : (*(const size_t *)x > *(const size_t *)y) - (*(const size_t *)x < *(const size_t *)y);
}

/* Sets the label of functions that share their name with another one:
 * "name (file)" by the source file's base name, or the module's for a
 * function without debug info; "name (file, module)" in full when that
 * still collides.  Other functions keep label == name. */
static int label_collisions(struct ml_agg *a)
{
	struct agg_priv *pv = a->priv;
	size_t *order = calloc(a->n_funcs + 1, sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_funcs; i++)
		order[i] = i;
	qsort_r(order, a->n_funcs, sizeof(*order), cmp_func_name, a);
	int err = 0;
	for (size_t i = 0; i < a->n_funcs && err == 0;) {
		size_t end = i + 1;
		while (end < a->n_funcs &&
		       strcmp(a->funcs[order[end]].name, a->funcs[order[i]].name) == 0)
			end++;
		for (size_t k = i; end - i > 1 && k < end && err == 0; k++) {
			struct ml_agg_func *f = &a->funcs[order[k]];
			const char *where = f->file ? base_name(f->file) : base_name(f->module);
			bool unique = true;
			for (size_t m = i; m < end; m++) {
				const struct ml_agg_func *g = &a->funcs[order[m]];
				const char *gw = g->file ? base_name(g->file) : base_name(g->module);
				if (m != k && str_eq(where, gw))
					unique = false;
			}
			char *label = NULL;
			int len = unique ? asprintf(&label, "%s (%s)", f->name, where ? where : "?")
					 : asprintf(&label, "%s (%s, %s)", f->name,
						    f->file ? f->file : "?", f->module ? f->module : "?");
			if (len < 0)
				err = -ENOMEM;
			else if ((err = pool_keep(pv, label)) == 0)
				f->label = label;
		}
		i = end;
	}
	free(order);
	return err;
}

int ml_agg_build(const struct ml_profile *p, const struct ml_resolver *r, struct ml_agg **out)
{
	return ml_agg_build_opts(p, r, NULL, out);
}

int ml_agg_build_opts(const struct ml_profile *p, const struct ml_resolver *r,
		      const struct ml_agg_opts *opts, struct ml_agg **out)
{
	int err = -ENOMEM;
	struct ml_agg *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	if (opts)
		a->opts = *opts;
	a->priv = calloc(1, sizeof(struct agg_priv));
	if (!a->priv)
		goto fail;
	a->profile = p;
	a->resolver = r;
	err = collect_stacks(a);
	if (err < 0)
		goto fail;
	struct agg_priv *pv = a->priv;
	uint32_t kinds = 0;
	for (size_t i = 0; i < a->n_stacks; i++)
		kinds |= a->stacks[i].kinds;
	for (int k = 0; k < ML_KIND_COUNT; k++)
		pv->kind_slot[k] = (kinds >> k) & 1 ? (signed char)pv->n_slots++ : -1;
	err = attribute_stacks(a);
	if (err == 0)
		err = sort_first(a);
	if (err < 0)
		goto fail;
	a->samples = calloc(p->n_samples + 1, sizeof(*a->samples));
	if (!a->samples) {
		err = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		err = attribute_sample(a, i);
		if (err < 0)
			goto fail;
	}
	err = label_collisions(a);
	if (err < 0)
		goto fail;
	*out = a;
	return 0;
fail:
	ml_agg_free(a);
	return err;
}

void ml_agg_free(struct ml_agg *a)
{
	if (!a)
		return;
	struct agg_priv *pv = a->priv;
	if (pv) {
		free(pv->funcs.slots);
		free(pv->lines.slots);
		free(pv->memo);
		free(pv->path);
		free(pv->path_sums);
		free(pv->func_first);
		free(pv->line_first);
		free(pv->walk);
		free(pv->walk_ids);
		free(pv->walk_nodes);
		free(pv->walk_bits);
		free(pv->addrs);
		free(pv->addr_slots);
		free(pv->node_ids);
		free(pv->items);
		free(pv->scratch);
		while (pv->chunks) {
			struct frame_chunk *next = pv->chunks->next;
			free(pv->chunks);
			pv->chunks = next;
		}
		free(pv->amounts);
		while (pv->amount_chunks) {
			struct amount_chunk *next = pv->amount_chunks->next;
			free(pv->amount_chunks);
			pv->amount_chunks = next;
		}
		for (size_t i = 0; i < pv->n_names; i++)
			free(pv->names[i]);
		free(pv->names);
		for (size_t i = 0; i < pv->n_maps; i++)
			free(pv->maps[i]);
		free(pv->maps);
		free(pv);
	}
	free(a->stacks);
	free(a->samples);
	free(a->funcs);
	free(a->lines);
	free(a);
}

const struct ml_agg_func *ml_agg_find_func(const struct ml_agg *a, const char *name)
{
	for (size_t i = 0; i < a->n_funcs; i++)
		if (strcmp(a->funcs[i].name, name) == 0)
			return &a->funcs[i];
	return NULL;
}
