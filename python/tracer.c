/* python/tracer.c - the numbers behind `@profile`: the decorated code
 * objects, each line's hits, time and memory, and the frames running them.
 * The mechanisms that catch the interpreter's line events (trace_legacy.c,
 * trace_monitor.c) call the three events below; this file knows no
 * interpreter version.
 *
 * Counting follows line_profiler >= 4.1: every line event is one hit; an
 * execution of a line lasts until the next event of the same frame, and its
 * time (CLOCK_MONOTONIC) includes the calls made from it.  Memory follows
 * memory_profiler, from memline's own counters instead of RSS polls: the
 * increment of an execution is the process's live bytes at its end minus at
 * its start; a line's usage is the most live bytes seen at an execution's
 * end.  The tables are serialised by the GIL (every event comes from the
 * interpreter with the GIL held); the profile writer reads them racily. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include "core/core.h"
#include "python/internal.h"
#include "python/tracer.h"

uint32_t ml_pyt_mechanism, ml_pyt_tool_id;

/* ---- decorated code objects: address -> struct ml_pyt_code ---- */

static struct ml_pyt_code **codes;	/* open addressing, codes_cap slots */
static uint32_t codes_cap, codes_used;
static struct ml_pyt_code *all_codes;	/* newest first */
static uint64_t events, dropped;

static uint32_t slot_of(uint64_t key, uint32_t cap)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

struct ml_pyt_code *ml_pyt_find(uint64_t code)
{
	if (!codes_used)
		return NULL;
	for (uint32_t i = slot_of(code, codes_cap);; i = (i + 1) & (codes_cap - 1)) {
		struct ml_pyt_code *c = codes[i];
		if (!c || c->code == code)
			return c;
	}
}

/* Doubles the code table.  The old array stays in the arena (rare). */
static int grow_codes(void)
{
	uint32_t cap = codes_cap ? codes_cap * 2 : 64;
	struct ml_pyt_code **fresh = ml_arena_alloc(cap * sizeof(*fresh));
	if (!fresh)
		return -ENOMEM;
	for (uint32_t i = 0; i < codes_cap; i++) {
		struct ml_pyt_code *c = codes[i];
		if (!c)
			continue;
		uint32_t j = slot_of(c->code, cap);
		while (fresh[j])
			j = (j + 1) & (cap - 1);
		fresh[j] = c;
	}
	__atomic_store_n(&codes, fresh, __ATOMIC_RELEASE);
	codes_cap = cap;
	return 0;
}

int ml_pyt_register(uint64_t code, int32_t lo, int32_t hi, const int32_t *unit_lines,
		    uint32_t n_units, uint32_t flags)
{
	if (ml_pyt_find(code))
		return 0;
	if (hi < lo || hi - lo > (1 << 20))
		return -EINVAL;
	if ((codes_used + 1) * 2 > codes_cap && grow_codes() < 0)
		return -ENOMEM;
	struct ml_pyt_code *c = ml_arena_alloc(sizeof(*c));
	struct ml_pyt_line *lines = ml_arena_alloc((size_t)(hi - lo + 1) * sizeof(*lines));
	int32_t *units = n_units ? ml_arena_alloc(n_units * sizeof(*units)) : NULL;
	if (!c || !lines || (n_units && !units))
		return -ENOMEM;
	struct ml_py_reader r = { .safe = false, .failed = false };
	const struct ml_py_code *entry = ml_py_code_get(&r, code);
	if (units)
		memcpy(units, unit_lines, n_units * sizeof(*units));
	*c = (struct ml_pyt_code){
		.code = code, .code_id = entry ? entry->id : 0, .flags = flags, .lo = lo, .hi = hi,
		.unit_lines = units, .n_units = n_units, .lines = lines, .next = all_codes,
	};
	uint32_t i = slot_of(code, codes_cap);
	while (codes[i])
		i = (i + 1) & (codes_cap - 1);
	codes[i] = c;
	codes_used++;
	__atomic_store_n(&all_codes, c, __ATOMIC_RELEASE);
	return 0;
}

void ml_pyt_drop(void)
{
	dropped++;
}

/* ---- frames running decorated code: frame address -> state ---- */

struct frame_state {
	uint64_t frame;			/* 0: empty slot */
	struct ml_pyt_code *code;
	int32_t line;			/* the line running (0: none yet) */
	uint64_t t0;			/* when it began */
	uint64_t cpu0, cuda0;		/* live bytes then */
};

static struct frame_state *frames;
static uint32_t frames_cap, frames_used;

/* The state of frame, or NULL. */
static struct frame_state *frame_find(uint64_t frame)
{
	if (!frames_used)
		return NULL;
	for (uint32_t i = slot_of(frame, frames_cap);; i = (i + 1) & (frames_cap - 1)) {
		if (frames[i].frame == frame)
			return &frames[i];
		if (!frames[i].frame)
			return NULL;
	}
}

static void frame_place(struct frame_state *tab, uint32_t cap, const struct frame_state *in)
{
	uint32_t i = slot_of(in->frame, cap);
	while (tab[i].frame)
		i = (i + 1) & (cap - 1);
	tab[i] = *in;
}

static int grow_frames(void)
{
	uint32_t cap = frames_cap ? frames_cap * 2 : 256;
	struct frame_state *fresh = ml_arena_alloc(cap * sizeof(*fresh));
	if (!fresh)
		return -ENOMEM;
	for (uint32_t i = 0; i < frames_cap; i++)
		if (frames[i].frame)
			frame_place(fresh, cap, &frames[i]);
	/* The pointer first, then the size: a reader that loads the size,
	 * then the pointer (the writer, below) never reads past a table. */
	__atomic_store_n(&frames, fresh, __ATOMIC_RELEASE);
	__atomic_store_n(&frames_cap, cap, __ATOMIC_RELEASE);
	return 0;
}

/* A new state for frame (known absent), or NULL when memory is out. */
static struct frame_state *frame_add(uint64_t frame, struct ml_pyt_code *c)
{
	if ((frames_used + 1) * 2 > frames_cap && grow_frames() < 0)
		return NULL;
	struct frame_state in = { .frame = frame, .code = c };
	frame_place(frames, frames_cap, &in);
	frames_used++;
	return frame_find(frame);
}

/* Removes st, shifting back the run behind it (no tombstones). */
static void frame_remove(struct frame_state *st)
{
	uint32_t mask = frames_cap - 1, i = (uint32_t)(st - frames);
	for (uint32_t j = (i + 1) & mask; frames[j].frame; j = (j + 1) & mask) {
		uint32_t home = slot_of(frames[j].frame, frames_cap);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			frames[i] = frames[j];
			i = j;
		}
	}
	frames[i].frame = 0;
	frames_used--;
}

/* ---- events ---- */

struct moment {
	uint64_t ns, cpu, cuda;
};

static void now(struct moment *m, uint64_t extra)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	m->ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* heap + Python objects: one total (common/kinds.h). */
	uint64_t cpu = ml_core_live_bytes(ML_KIND_HEAP);
	m->cpu = cpu > extra ? cpu - extra : 0;
	m->cuda = ml_core_live_bytes(ML_KIND_CUDA_GPU);
}

static struct ml_pyt_line *line_of(struct ml_pyt_code *c, int32_t line)
{
	return line >= c->lo && line <= c->hi ? &c->lines[line - c->lo] : NULL;
}

/* The line st runs ends at m. */
static void end_line(struct frame_state *st, const struct moment *m)
{
	struct ml_pyt_line *l = line_of(st->code, st->line);
	if (!l)
		return;
	l->ended++;
	l->time_ns += m->ns - st->t0;
	l->cpu_increment += (int64_t)(m->cpu - st->cpu0);
	l->cuda_increment += (int64_t)(m->cuda - st->cuda0);
	if (m->cpu > l->cpu_usage)
		l->cpu_usage = m->cpu;
	if (m->cuda > l->cuda_usage)
		l->cuda_usage = m->cuda;
}

void ml_pyt_on_start(uint64_t frame, struct ml_pyt_code *c, uint64_t extra)
{
	struct moment m;
	now(&m, extra);
	struct frame_state *st = frame_find(frame);
	if (st)
		frame_remove(st);	/* left by a frame that ended unseen */
	c->calls++;
	if (m.cpu > c->entry_cpu)
		c->entry_cpu = m.cpu;
	if (m.cuda > c->entry_cuda)
		c->entry_cuda = m.cuda;
}

void ml_pyt_on_line(uint64_t frame, struct ml_pyt_code *c, int32_t line, uint64_t extra)
{
	struct moment m;
	struct ml_pyt_line *l = line_of(c, line);
	if (!l) {
		dropped++;
		return;
	}
	now(&m, extra);
	struct frame_state *st = frame_find(frame);
	if (st && st->code != c) {	/* a dead frame's address, reused */
		frame_remove(st);
		st = NULL;
	}
	if (!st && !(st = frame_add(frame, c))) {
		dropped++;
		return;
	}
	if (st->line)
		end_line(st, &m);
	l->hits++;
	events++;
	st->line = line;
	st->t0 = m.ns;
	st->cpu0 = m.cpu;
	st->cuda0 = m.cuda;
}

void ml_pyt_on_exit(uint64_t frame, uint64_t extra)
{
	struct frame_state *st = frame_find(frame);
	if (!st)
		return;
	if (st->line) {
		struct moment m;
		now(&m, extra);
		end_line(st, &m);
	}
	frame_remove(st);
}

void ml_pyt_fork_child(void)
{
	for (struct ml_pyt_code *c = all_codes; c; c = c->next) {
		memset(c->lines, 0, (size_t)(c->hi - c->lo + 1) * sizeof(*c->lines));
		c->calls = c->entry_cpu = c->entry_cuda = 0;
	}
	/* The forking thread's frames go on in the child: their lines begin
	 * again at their next event. */
	for (uint32_t i = 0; i < frames_cap; i++)
		frames[i].line = 0;
	events = dropped = 0;
}

/* ---- the profile's sections ---- */

/* Time of the line frame st is running when the profile is written. */
static uint64_t running_ns(const struct ml_pyt_code *c, int32_t line, uint64_t at)
{
	uint64_t extra = 0;
	uint32_t cap = __atomic_load_n(&frames_cap, __ATOMIC_ACQUIRE);
	struct frame_state *tab = __atomic_load_n(&frames, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; tab && i < cap; i++)
		if (tab[i].frame && tab[i].code == c && tab[i].line == line && at > tab[i].t0)
			extra += at - tab[i].t0;
	return extra;
}

static void put_lines(struct ml_writer *w, const struct ml_pyt_code *c, uint64_t at)
{
	for (int32_t line = c->lo; line <= c->hi; line++) {
		const struct ml_pyt_line *l = &c->lines[line - c->lo];
		if (!l->hits)
			continue;
		struct ml_fmt_pyline r = {
			.code_id = c->code_id, .line = line, .hits = l->hits, .ended = l->ended,
			.time_ns = l->time_ns + running_ns(c, line, at),
			.cpu_increment = l->cpu_increment, .cpu_usage = l->cpu_usage,
			.cuda_increment = l->cuda_increment, .cuda_usage = l->cuda_usage,
		};
		ml_writer_put(w, &r, sizeof(r));
		ml_writer_record(w);
	}
}

void ml_pyt_write_sections(struct ml_writer *w)
{
	struct ml_pyt_code *head = __atomic_load_n(&all_codes, __ATOMIC_ACQUIRE);
	if (!ml_pyt_mechanism || !head)
		return;
	struct ml_fmt_pyprof h = {
		.mechanism = ml_pyt_mechanism, .tool_id = ml_pyt_tool_id, .events = events,
		.dropped = dropped,
	};
	ml_writer_begin(w, ML_SEC_PYFUNCS);
	ml_writer_put(w, &h, sizeof(h));
	ml_writer_record(w);
	for (const struct ml_pyt_code *c = head; c; c = c->next) {
		if (!c->code_id)
			continue;
		struct ml_fmt_pyfunc f = {
			.code_id = c->code_id, .flags = c->flags, .calls = c->calls,
			.entry_cpu = c->entry_cpu, .entry_cuda = c->entry_cuda,
		};
		ml_writer_put(w, &f, sizeof(f));
		ml_writer_record(w);
	}
	ml_writer_end(w);
	struct moment m;
	now(&m, 0);
	ml_writer_begin(w, ML_SEC_PYLINES);
	for (const struct ml_pyt_code *c = head; c; c = c->next)
		if (c->code_id)
			put_lines(w, c, m.ns);
	ml_writer_end(w);
}
