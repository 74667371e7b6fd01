/* python/codetab.c - the code objects seen on stacks: a lock-free table from
 * the object's address to an id, with its file name, qualified name, first
 * line and line table copied once (the report decodes lines from them).
 *
 * Identity: a code object's address is reused after it dies.  An entry
 * remembers the objects its code pointed to (co_filename, co_qualname or
 * co_name, co_linetable); each lookup compares them with what the code at
 * that address points to now, and a difference makes a new entry (a new
 * id).  A reused address that points to the very same name, file and line
 * table objects is the same function for every line the report prints. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "core/core.h"
#include "python/internal.h"

#define SLOT_BITS 18u
#define SLOTS (1u << SLOT_BITS)
#define SLOT_LIMIT (SLOTS / 4u * 3u)
#define NAME_MAX_CHARS 4096u		/* longer names and paths are cut */
#define LINETABLE_MAX (1u << 20)

static struct ml_py_code *volatile *slots;

/* Per thread: the code objects of the frames its last walks read, by frame
 * address.  A frame holds its code object alive, so a frame at the same
 * address that points to the same code, with the same line table and
 * first line, has the same entry; a loop that allocates under the same
 * Python callers finds every outer frame here.  Plain reads only (never
 * from a signal handler: the sampler's safe walks do not use it). */
#define MEMO_SLOTS 64u
struct code_memo {
	uint64_t frame, code, linetable;
	const struct ml_py_code *entry;
	int32_t lasti[2], unit[2];	/* the last two offsets seen, their lines' first units */
	uint32_t run;			/* the line run of lasti[0] (ml_pyline_canon_near) */
};
static __thread struct code_memo ml_tl_code_memo[MEMO_SLOTS] __attribute__((tls_model("initial-exec")));
static struct ml_py_code *all;
uint32_t ml_py_code_epoch;
static uint32_t next_id = 1;
static uint32_t n_codes;
static pid_t self_pid;

int ml_py_codetab_init(void)
{
	if (slots)
		return 0;
	void *p = mmap(NULL, SLOTS * sizeof(*slots), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	slots = p;
	self_pid = (pid_t)syscall(SYS_getpid);
	return 0;
}

void ml_py_codetab_after_fork(void)
{
	self_pid = (pid_t)syscall(SYS_getpid);
}

bool ml_py_read(struct ml_py_reader *r, void *out, uint64_t addr, size_t len)
{
	if (r->failed || !addr)
		return r->failed = true, false;
	if (!r->safe) {
		memcpy(out, (const void *)(uintptr_t)addr, len);
		return true;
	}
	pid_t pid = __atomic_load_n(&self_pid, __ATOMIC_RELAXED);
	struct iovec local = { out, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = syscall(SYS_process_vm_readv, pid, &local, 1ul, &remote, 1ul, 0ul);
	if (n != (ssize_t)len)
		return r->failed = true, false;
	return true;
}

static uint64_t rd_ptr(struct ml_py_reader *r, uint64_t addr)
{
	uint64_t v = 0;
	ml_py_read(r, &v, addr, sizeof(v));
	return v;
}

/* ---- copying str and bytes contents ---- */

/* Appends the UTF-8 form of code point c to out[*n..cap). */
static void put_utf8(char *out, uint32_t cap, uint32_t *n, uint32_t c)
{
	char b[4];
	uint32_t len;
	if (c < 0x80) {
		b[0] = (char)c;
		len = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xc0 | (c >> 6));
		b[1] = (char)(0x80 | (c & 0x3f));
		len = 2;
	} else if (c < 0x10000) {
		b[0] = (char)(0xe0 | (c >> 12));
		b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		b[2] = (char)(0x80 | (c & 0x3f));
		len = 3;
	} else {
		b[0] = (char)(0xf0 | (c >> 18));
		b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		b[3] = (char)(0x80 | (c & 0x3f));
		len = 4;
	}
	if (*n + len > cap)
		return;
	memcpy(out + *n, b, len);
	*n += len;
}

/* A str object's shape: where its characters are, how many, how wide. */
struct str_shape {
	uint64_t data;
	uint32_t chars;
	uint32_t width;		/* 1, 2 or 4 bytes; 0: not a compact str */
	bool ascii;
};

static struct str_shape str_shape(struct ml_py_reader *r, uint64_t obj)
{
	const struct ml_py_layout *L = ml_py.layout;
	struct str_shape s = { 0, 0, 0, false };
	int64_t length = 0;
	uint32_t state = 0;
	if (!obj || !ml_py_read(r, &length, obj + L->str_length, sizeof(length)) ||
	    !ml_py_read(r, &state, obj + L->str_state, sizeof(state)))
		return s;
	/* state: interned:2, kind:3, compact:1, ascii:1 (3.10 to 3.13). */
	uint32_t kind = (state >> 2) & 7u, compact = (state >> 5) & 1u;
	s.ascii = (state >> 6) & 1u;
	if (!compact || length < 0 || (kind != 1 && kind != 2 && kind != 4))
		return s;
	s.chars = length > NAME_MAX_CHARS ? NAME_MAX_CHARS : (uint32_t)length;
	s.width = kind;
	s.data = obj + (s.ascii ? L->str_ascii_size : L->str_compact_size);
	return s;
}

/* Bytes the UTF-8 form of s needs at most. */
static uint32_t str_room(const struct str_shape *s)
{
	return s->ascii ? s->chars : s->chars * 4u;
}

/* Copies s as UTF-8 into out (str_room bytes); returns the length. */
static uint32_t str_copy(struct ml_py_reader *r, const struct str_shape *s, char *out)
{
	if (!s->width)
		return 0;
	if (s->ascii)
		return ml_py_read(r, out, s->data, s->chars) ? s->chars : 0;
	uint32_t n = 0, cap = str_room(s);
	unsigned char chunk[64];
	for (uint32_t i = 0; i < s->chars;) {
		uint32_t take = (uint32_t)sizeof(chunk) / s->width;
		if (take > s->chars - i)
			take = s->chars - i;
		if (!ml_py_read(r, chunk, s->data + (uint64_t)i * s->width, take * s->width))
			return 0;
		for (uint32_t k = 0; k < take; k++) {
			uint32_t c = s->width == 1 ? chunk[k] : s->width == 2 ?
				((const uint16_t *)(const void *)chunk)[k] :
				((const uint32_t *)(const void *)chunk)[k];
			put_utf8(out, cap, &n, c);
		}
		i += take;
	}
	return n;
}

/* ---- entries ---- */

/* What a code object points to now, from its header (co_size bytes). */
struct code_view {
	uint64_t filename, name, linetable;
	int32_t firstlineno, firsttraceable;
};

static bool view_code(struct ml_py_reader *r, uint64_t code, struct code_view *v)
{
	const struct ml_py_layout *L = ml_py.layout;
	/* The fields lie in [co_firstlineno, co_size): a safe reader copies
	 * that range once; a plain one reads in place.  at(off) is field off. */
	unsigned char buf[128];
	uint32_t lo = L->co_firstlineno;
	const unsigned char *base = (const unsigned char *)(uintptr_t)(code + lo);
	if (r->safe) {
		if (L->co_size - lo > sizeof(buf) || !ml_py_read(r, buf, code + lo, L->co_size - lo))
			return false;
		base = buf;
	}
#define at(off) (base + ((off) - lo))
	memcpy(&v->filename, at(L->co_filename), 8);
	memcpy(&v->name, at(L->co_qualname ? L->co_qualname : L->co_name), 8);
	memcpy(&v->linetable, at(L->co_linetable), 8);
	memcpy(&v->firstlineno, at(L->co_firstlineno), 4);
	v->firsttraceable = 0;
	if (L->co_firsttraceable)
		memcpy(&v->firsttraceable, at(L->co_firsttraceable), 4);
#undef at
	return v->filename && v->name && v->linetable;
}

/* Tables of more runs than this are kept as the interpreter's bytes. */
#define RUNS_MAX (1u << 20)

/* A code object's line table as it will be kept. */
struct lines {
	const uint8_t *raw;		/* the interpreter's bytes */
	size_t raw_len;
	struct ml_pyline_run *runs;	/* NULL: keep raw */
	size_t n_runs, len;		/* len: the bytes kept */
	bool any;			/* ml_pyline_range's answer on raw */
	int lo, hi;
};

/* Runs that plan_lines finds room for on the stack (1.5 KiB): a table of
 * more is walked twice, once to count them. */
#define SCRATCH_RUNS 128u

/* Makes the runs of raw (in the arena) and measures its lines-only form;
 * leaves runs NULL where they cannot be made.  False on ENOMEM. */
static bool plan_lines(struct lines *t, int firstlineno)
{
	uint32_t format = ml_py.layout->linetable;
	struct ml_pyline_run scratch[SCRATCH_RUNS];
	struct ml_pyline_plan plan;
	size_t n = ml_pyline_plan(format, t->raw, t->raw_len, firstlineno, scratch, SCRATCH_RUNS,
				  &plan);
	t->runs = NULL;
	t->len = t->raw_len;
	if (n == ML_PYLINE_RUNS_BAD || n > RUNS_MAX)
		return true;
	t->runs = ml_arena_alloc(n * sizeof(*t->runs));
	if (!t->runs)
		return false;
	if (n <= SCRATCH_RUNS)
		memcpy(t->runs, scratch, n * sizeof(*t->runs));
	else
		ml_pyline_plan(format, t->raw, t->raw_len, firstlineno, t->runs, n, &plan);
	t->n_runs = n;
	t->any = plan.any;
	t->lo = plan.lo;
	t->hi = plan.hi;
	t->len = plan.encoded_len;
	return true;
}

/* Writes t into c (after its strings; t->len bytes of room there). */
static void put_lines(struct ml_py_code *c, const struct lines *t)
{
	uint8_t *out = (uint8_t *)c->data + c->filename_len + c->name_len;
	c->linetable_len = (uint32_t)t->len;
	if (!t->runs) {
		memcpy(out, t->raw, t->raw_len);
		return;
	}
	size_t len = ml_pyline_encode(t->runs, t->n_runs, c->firstlineno, t->any ? &t->lo : NULL,
				      t->any ? &t->hi : NULL, out);
	ML_ASSERT(len == t->len);	/* plan_lines measured it */
	c->runs = t->runs;
	c->n_runs = (uint32_t)t->n_runs;
	c->flags |= ML_PYCODE_LINES;
}

/* A new entry for code (not yet published); NULL on trouble. */
static struct ml_py_code *make(struct ml_py_reader *r, uint64_t code, const struct code_view *v)
{
	const struct ml_py_layout *L = ml_py.layout;
	uint64_t type = rd_ptr(r, code + 8);	/* ob_type */
	if (r->failed || type != (uint64_t)(uintptr_t)ml_py.api.code_type)
		return NULL;
	struct str_shape file = str_shape(r, v->filename), name = str_shape(r, v->name);
	int64_t lt_len = 0;
	if (!ml_py_read(r, &lt_len, v->linetable + L->bytes_size, sizeof(lt_len)) || lt_len < 0)
		return NULL;
	uint32_t flags = 0;
	if (lt_len > LINETABLE_MAX) {
		lt_len = LINETABLE_MAX;
		flags |= ML_PYCODE_LINETABLE_CUT;
	}
	/* The raw table, read in place by a plain reader (a bytes object the
	 * code keeps alive, never changed), else copied first (the arena keeps
	 * the copy: a safe reader makes few entries). */
	struct lines t = { .raw = (const uint8_t *)(uintptr_t)(v->linetable + L->bytes_data),
			   .raw_len = (size_t)lt_len };
	if (r->safe && lt_len) {
		uint8_t *copy = ml_arena_alloc(t.raw_len);
		if (!copy || !ml_py_read(r, copy, v->linetable + L->bytes_data, t.raw_len))
			return NULL;
		t.raw = copy;
	}
	if (!plan_lines(&t, v->firstlineno))
		return NULL;
	size_t room = str_room(&file) + str_room(&name) + t.len;
	struct ml_py_code *c = ml_arena_alloc(sizeof(*c) + room);
	if (!c)
		return NULL;
	c->filename_len = str_copy(r, &file, c->data);
	c->name_len = str_copy(r, &name, c->data + c->filename_len);
	if (r->failed)
		return NULL;	/* the arena keeps it: never published */
	c->firstlineno = v->firstlineno;
	c->flags = flags;
	put_lines(c, &t);
	c->code = code;
	c->filename_obj = v->filename;
	c->name_obj = v->name;
	c->linetable_obj = v->linetable;
	c->firsttraceable = v->firsttraceable;
	return c;
}

static inline uint32_t slot_of(uint64_t code)
{
	uint64_t h = (code >> 4) * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(h >> (64 - SLOT_BITS));
}

static bool same(const struct ml_py_code *c, const struct code_view *v)
{
	return c->filename_obj == v->filename && c->name_obj == v->name &&
	       c->linetable_obj == v->linetable && c->firstlineno == v->firstlineno;
}

/* Gives c an id and puts it on the list of all codes. */
static void publish(struct ml_py_code *c)
{
	c->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n_codes, 1, __ATOMIC_RELAXED);
	struct ml_py_code *head = __atomic_load_n(&all, __ATOMIC_RELAXED);
	do
		c->next = head;
	while (!__atomic_compare_exchange_n(&all, &head, c, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

const struct ml_py_code *ml_py_code_get(struct ml_py_reader *r, uint64_t code)
{
	struct code_view v;
	if (!slots || !code || (code & 7) || !view_code(r, code, &v))
		return NULL;
	uint32_t i = slot_of(code);
	for (uint32_t probes = 0; probes < SLOTS; probes++, i = (i + 1) & (SLOTS - 1)) {
		struct ml_py_code *c = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
		if (c && c->code != code)
			continue;
		if (c && same(c, &v))
			return c;
		/* Empty, or the address now holds another code object: a new
		 * entry in this slot (the old one stays listed: stacks use it). */
		if (r->lookup_only ||
		    (!c && __atomic_load_n(&n_codes, __ATOMIC_RELAXED) >= SLOT_LIMIT))
			return NULL;
		struct ml_py_code *fresh = make(r, code, &v);
		if (!fresh)
			return NULL;
		if (c)	/* before it shows: see ml_py_code_epoch */
			__atomic_fetch_add(&ml_py_code_epoch, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_compare_exchange_n(&slots[i], &c, fresh, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			/* Another thread changed the slot first: use its entry if it
			 * is this code (fresh stays unused in the arena). */
			if (c && c->code == code && same(c, &v))
				return c;
			return NULL;
		}
		publish(fresh);
		return fresh;
	}
	return NULL;
}

/* The first code unit of c on the line of the instruction at lasti;
 * *run: see ml_pyline_canon_near. */
static int32_t unit_of(const struct ml_py_code *c, int32_t lasti, uint32_t *run)
{
	return c->n_runs ? ml_pyline_canon_near(c->runs, c->n_runs, lasti, run) : lasti;
}

const struct ml_py_code *ml_py_code_at(struct ml_py_reader *r, uint64_t frame, uint64_t code,
				       int32_t lasti, int32_t *unit)
{
	const struct ml_py_layout *L = ml_py.layout;
	const struct ml_py_code *c;
	if (r->safe || !code || (code & 7)) {
		c = ml_py_code_get(r, code);
		uint32_t run = 0;
		if (c)
			*unit = unit_of(c, lasti, &run);
		return c;
	}
	struct code_memo *m = &ml_tl_code_memo[(frame * 0x9e3779b97f4a7c15ull) >> 58];
	if (m->frame == frame && m->code == code && m->entry) {
		uint64_t lt;
		int32_t first;
		memcpy(&lt, (const void *)(uintptr_t)(code + L->co_linetable), 8);
		memcpy(&first, (const void *)(uintptr_t)(code + L->co_firstlineno), 4);
		if (lt == m->linetable && first == m->entry->firstlineno) {
			/* An outer frame stays at its call while inner ones
			 * allocate; a loop's body moves between a few. */
			if (m->lasti[0] != lasti) {
				int32_t u = m->lasti[1] == lasti ? m->unit[1] :
					    unit_of(m->entry, lasti, &m->run);
				m->lasti[1] = m->lasti[0];
				m->unit[1] = m->unit[0];
				m->lasti[0] = lasti;
				m->unit[0] = u;
			}
			*unit = m->unit[0];
			return m->entry;
		}
	}
	c = ml_py_code_get(r, code);
	if (c) {
		/* A new frame of a code object seen before (a function called
		 * again, importlib's for each import) mostly allocates on the
		 * lines its last frame did. */
		uint32_t hint = __atomic_load_n(&c->last_run, __ATOMIC_RELAXED), run = hint;
		int32_t u = unit_of(c, lasti, &run);
		if (run != hint)
			__atomic_store_n(&((struct ml_py_code *)c)->last_run, run, __ATOMIC_RELAXED);
		*m = (struct code_memo){ frame, code, c->linetable_obj, c, { lasti, INT32_MIN },
					 { u, 0 }, run };
		*unit = u;
	}
	return c;
}

void ml_py_codes_foreach(void (*fn)(const struct ml_py_code *c, void *arg), void *arg)
{
	for (struct ml_py_code *c = __atomic_load_n(&all, __ATOMIC_ACQUIRE); c; c = c->next)
		fn(c, arg);
}

uint32_t ml_py_codes_count(void)
{
	return __atomic_load_n(&n_codes, __ATOMIC_RELAXED);
}
