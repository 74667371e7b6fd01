/* common/pyline.c - decodes co_linetable (common/pyline.h).  3.10: pairs of
 * (bytecode delta in bytes, signed line delta; -128: no line), from
 * co_firstlineno.  3.11+: entries of one first byte (bit 7 set, code in
 * bits 3-6, length - 1 in code units in bits 0-2) and continuation bytes,
 * as Objects/locations.md describes.  memline's own lines-only form
 * (ML_PY_LINETABLE_LINES, made by the runtime from either): a header, then
 * one entry per run of code units on one line, all ULEB128 varints:
 *
 *   header  any (0: the table names no line; 1: lo and hi follow),
 *           zz(lo - firstlineno), zz(hi - firstlineno)   (ml_pyline_range)
 *   entry   units (> 0), tag (0: no line; else zz(line - previous line) + 1,
 *           the previous line starting at firstlineno)
 *
 * where zz maps a signed number onto an unsigned one (0, -1, 1, -2 ...).
 * Used by the runtime (no allocation, async-signal-safe) and the report. */
#include <stdbool.h>
#include <string.h>
#include "common/pyformat.h"
#include "common/pyline.h"
#include "common/varint.h"

/* One address range of a table: [start, end) in bytes, and its line
 * (-1: none), plus its last line (3.11+ long form, else = line). */
struct range {
	int64_t start, end;
	int line, end_line;
};

struct walk {
	uint32_t format;
	const uint8_t *p, *limit;
	int64_t addr;		/* end of the previous range */
	int computed;		/* the running line */
};

/* The decoders are inlined into ml_pyline_plan's walk (its loop is most
 * of the runtime's first look at a code object). */
#define HOT static inline __attribute__((always_inline))

/* 6-bit chunks, least significant first; bit 6 says more follow. */
HOT bool varint(struct walk *w, uint32_t *out)
{
	uint32_t v = 0;
	for (unsigned shift = 0; w->p < w->limit && shift < 32; shift += 6) {
		uint8_t b = *w->p++;
		v |= (uint32_t)(b & 63) << shift;
		if (!(b & 64)) {
			*out = v;
			return true;
		}
	}
	return false;
}

HOT bool svarint(struct walk *w, int *out)
{
	uint32_t u;
	if (!varint(w, &u))
		return false;
	*out = (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
	return true;
}

HOT bool next_310(struct walk *w, struct range *r)
{
	if (w->limit - w->p < 2)
		return false;
	int delta = w->p[0], ldelta = (int8_t)w->p[1];
	w->p += 2;
	r->start = w->addr;
	r->end = w->addr += delta;
	if (ldelta == -128) {
		r->line = -1;
	} else {
		w->computed += ldelta;
		r->line = w->computed;
	}
	r->end_line = r->line;
	return true;
}

HOT bool next_311(struct walk *w, struct range *r)
{
	if (w->p >= w->limit || !(*w->p & 128))
		return false;
	uint8_t first = *w->p++;
	uint32_t code = (first >> 3) & 15u;
	int delta = 0, end_delta = 0;
	uint32_t u;
	switch (code) {
	case 15:			/* no location */
		break;
	case 13:			/* no column: line delta */
		if (!svarint(w, &delta))
			return false;
		break;
	case 14:			/* long form: line delta, end line delta, columns */
		if (!svarint(w, &delta) || !varint(w, &u))
			return false;
		end_delta = (int)u;
		break;
	case 10: case 11: case 12:	/* one line form: delta in the code */
		delta = (int)code - 10;
		break;
	default:			/* short forms 0-9: same line */
		break;
	}
	while (w->p < w->limit && !(*w->p & 128))	/* columns and the rest */
		w->p++;
	w->computed += delta;
	r->start = w->addr;
	r->end = w->addr += ((first & 7) + 1) * 2;
	r->line = code == 15 ? -1 : w->computed;
	r->end_line = code == 15 ? -1 : w->computed + end_delta;
	return true;
}

static uint64_t zz(int64_t v)
{
	return v < 0 ? ((uint64_t)(-(v + 1)) << 1) | 1u : (uint64_t)v << 1;
}

static int64_t unzz(uint64_t u)
{
	return (u & 1) ? -(int64_t)(u >> 1) - 1 : (int64_t)(u >> 1);
}

/* The lines-only form's header: whether any line, and lo, hi. */
static bool lines_header(struct walk *w, int firstlineno, bool *any, int *lo, int *hi)
{
	uint64_t has, a, b;
	if (!ml_varint_get(&w->p, w->limit, &has) || has > 1)
		return false;
	*any = has == 1;
	*lo = *hi = firstlineno;
	if (!*any)
		return true;
	if (!ml_varint_get(&w->p, w->limit, &a) || !ml_varint_get(&w->p, w->limit, &b))
		return false;
	*lo = (int)(firstlineno + unzz(a));
	*hi = (int)(firstlineno + unzz(b));
	return true;
}

static bool next_lines(struct walk *w, struct range *r)
{
	uint64_t units, tag;
	if (!ml_varint_get(&w->p, w->limit, &units) || !units || units > INT32_MAX ||
	    !ml_varint_get(&w->p, w->limit, &tag))
		return false;
	r->start = w->addr;
	r->end = w->addr += (int64_t)units * 2;
	if (tag) {
		w->computed = (int)(w->computed + unzz(tag - 1));
		r->line = w->computed;
	} else {
		r->line = -1;
	}
	r->end_line = r->line;
	return true;
}

static bool next(struct walk *w, struct range *r)
{
	switch (w->format) {
	case ML_PY_LINETABLE_310:
		return next_310(w, r);
	case ML_PY_LINETABLE_311:
		return next_311(w, r);
	case ML_PY_LINETABLE_LINES:
		return next_lines(w, r);
	}
	return false;
}

/* Starts a walk of table (past the lines-only form's header). */
static bool begin(struct walk *w, uint32_t format, const uint8_t *table, size_t len,
		  int firstlineno)
{
	*w = (struct walk){ format, table, table + len, 0, firstlineno };
	if (format != ML_PY_LINETABLE_LINES)
		return true;
	bool any;
	int lo, hi;
	return lines_header(w, firstlineno, &any, &lo, &hi);
}

int ml_pyline_at(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
		 int32_t lasti)
{
	if (lasti < 0)
		return firstlineno;
	struct walk w;
	if (!begin(&w, format, table, len, firstlineno))
		return -1;
	int64_t addr = (int64_t)lasti * 2;
	struct range r;
	while (next(&w, &r))
		if (r.start <= addr && addr < r.end)
			return r.line;
	return -1;
}

/* Widens lo..hi (any: they hold a line yet) to r's lines, as
 * ml_pyline_range counts them. */
static inline void range_add(const struct range *r, bool *any, int *lo, int *hi)
{
	if (r->line <= 0 || r->start == r->end)	/* 3.11+ modules start at line 0 */
		return;
	if (!*any || r->line < *lo)
		*lo = r->line;
	if (!*any || r->end_line > *hi)
		*hi = r->end_line > r->line ? r->end_line : r->line;
	*any = true;
}

int ml_pyline_range(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
		    int *lo, int *hi)
{
	struct walk w = { format, table, table + len, 0, firstlineno };
	struct range r;
	bool any = false;
	*lo = *hi = firstlineno;
	if (format == ML_PY_LINETABLE_LINES) {
		int l, h;
		if (!lines_header(&w, firstlineno, &any, &l, &h) || !any)
			return -1;
		*lo = l;
		*hi = h;
		return 0;
	}
	while (next(&w, &r))
		range_add(&r, &any, lo, hi);
	return any ? 0 : -1;
}

/* ---- runs and the lines-only form ---- */

static bool same_line(const struct ml_pyline_run *a, const struct range *r)
{
	return a->line == r->line;
}

size_t ml_pyline_runs(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
		      struct ml_pyline_run *out, size_t cap)
{
	struct walk w;
	struct range r;
	size_t n = 0;
	struct ml_pyline_run last = { 0, 0, 0 };
	int64_t end = 0;
	if (format == ML_PY_LINETABLE_LINES || !begin(&w, format, table, len, firstlineno))
		return ML_PYLINE_RUNS_BAD;
	while (next(&w, &r)) {
		if (r.start == r.end)
			continue;
		if ((r.start | r.end) & 1 || r.end > (int64_t)UINT32_MAX * 2 || r.start != end)
			return ML_PYLINE_RUNS_BAD;
		end = r.end;
		if (n && same_line(&last, &r))
			continue;
		last = (struct ml_pyline_run){ (uint32_t)(r.start / 2), r.line, 0 };
		if (n < cap)
			out[n] = last;
		n++;
	}
	/* The end: units past it have no line (ml_pyline_at gives -1). */
	if (n < cap)
		out[n] = (struct ml_pyline_run){ (uint32_t)(end / 2), ML_PYLINE_END, 0 };
	return n + 1;
}

/* Sift-down of a heap sort over runs[0, n) by key(): (line, start) or start. */
static bool before(const struct ml_pyline_run *a, const struct ml_pyline_run *b, bool by_line)
{
	if (by_line && a->line != b->line)
		return a->line < b->line;
	return a->start < b->start;
}

static void sift(struct ml_pyline_run *runs, size_t root, size_t n, bool by_line)
{
	for (;;) {
		size_t child = 2 * root + 1;
		if (child >= n)
			return;
		if (child + 1 < n && before(&runs[child], &runs[child + 1], by_line))
			child++;
		if (!before(&runs[root], &runs[child], by_line))
			return;
		struct ml_pyline_run t = runs[root];
		runs[root] = runs[child];
		runs[child] = t;
		root = child;
	}
}

static void heap_sort(struct ml_pyline_run *runs, size_t n, bool by_line)
{
	for (size_t i = n / 2; i-- > 0;)
		sift(runs, i, n, by_line);
	for (size_t end = n; end-- > 1;) {
		struct ml_pyline_run t = runs[0];
		runs[0] = runs[end];
		runs[end] = t;
		sift(runs, 0, end, by_line);
	}
}

void ml_pyline_canonical(struct ml_pyline_run *runs, size_t n)
{
	if (!n)
		return;
	size_t body = n - 1;	/* the end mark stays last */
	heap_sort(runs, body, true);
	for (size_t i = 0; i < body; i++)
		runs[i].canon = i && runs[i - 1].line == runs[i].line ? runs[i - 1].canon :
									 runs[i].start;
	heap_sort(runs, body, false);
	runs[body].canon = runs[body].start;
}

int32_t ml_pyline_canon_near(const struct ml_pyline_run *runs, size_t n, int32_t unit,
			     uint32_t *run)
{
	if (unit < 0 || n < 2 || (uint32_t)unit >= runs[n - 1].start)
		return unit;
	/* runs[n - 1] is the end mark: run k < n - 1 holds unit when
	 * runs[k].start <= unit < runs[k + 1].start. */
	for (size_t k = *run; k < (size_t)*run + 3 && k + 1 < n; k++)
		if (runs[k].start <= (uint32_t)unit && (uint32_t)unit < runs[k + 1].start) {
			*run = (uint32_t)k;
			return (int32_t)runs[k].canon;
		}
	size_t lo = 0, hi = n - 1;	/* runs[lo].start <= unit < runs[hi].start */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (runs[mid].start <= (uint32_t)unit)
			lo = mid;
		else
			hi = mid;
	}
	*run = (uint32_t)lo;
	return (int32_t)runs[lo].canon;
}

int32_t ml_pyline_canon(const struct ml_pyline_run *runs, size_t n, int32_t unit)
{
	uint32_t run = 0;
	return ml_pyline_canon_near(runs, n, unit, &run);
}

/* Appends v's varint at out + *at, or only counts its bytes when out is
 * NULL. */
static inline void put(uint8_t *out, size_t *at, uint64_t v)
{
	if (out) {
		*at += ml_varint_put(out + *at, v);
		return;
	}
	size_t bytes = 1;
	while (v >= 0x80) {
		v >>= 7;
		bytes++;
	}
	*at += bytes;
}

/* The lines-only form's header (lo NULL: the table names no line). */
static void put_header(uint8_t *out, size_t *at, int firstlineno, const int *lo, const int *hi)
{
	put(out, at, lo ? 1 : 0);
	if (lo) {
		put(out, at, zz((int64_t)*lo - firstlineno));
		put(out, at, zz((int64_t)*hi - firstlineno));
	}
}

/* One run's entry: its length in units and its line; *previous: the line
 * of the last run that had one (firstlineno before the first). */
static inline void put_entry(uint8_t *out, size_t *at, uint32_t units, int32_t line,
			     int *previous)
{
	put(out, at, units);
	if (line < 0) {
		put(out, at, 0);
	} else {
		put(out, at, zz((int64_t)line - *previous) + 1);
		*previous = line;
	}
}

size_t ml_pyline_encode(const struct ml_pyline_run *runs, size_t n, int firstlineno,
			const int *lo, const int *hi, uint8_t *out)
{
	size_t at = 0;
	put_header(out, &at, firstlineno, lo, hi);
	int previous = firstlineno;
	for (size_t i = 0; i + 1 < n; i++)
		put_entry(out, &at, runs[i + 1].start - runs[i].start, runs[i].line, &previous);
	return at;
}

/* ---- the runtime's one walk (ml_pyline_plan) ---- */

/* Chain heads of canon_by_chains, on the stack: up to 1 << 8 (1 KiB). */
#define CHAIN_BITS_MAX 8u

static inline uint32_t chain_of(int32_t line, unsigned bits)
{
	return ((uint32_t)line * 0x9e3779b1u) >> (32 - bits);
}

/* ml_pyline_canonical over runs[0, body) (no end mark) in O(body): a run
 * whose line no earlier run had is its line's first; the others take that
 * first run's start.  The first runs of each line are chained by a hash of
 * the line, the link kept in their canon field until the end, when it
 * becomes their own start.  A line outside every earlier line's span is new
 * without a look (a module body runs mostly downwards).  False, with the
 * canons unspecified, where the chains grow too long: many lines that come
 * and go (the caller sorts instead). */
static bool canon_by_chains(struct ml_pyline_run *runs, size_t body)
{
	if (body >= UINT32_MAX)
		return false;	/* an index + 1 must fit a canon */
	uint32_t head[1u << CHAIN_BITS_MAX];	/* a run's index + 1; 0: none */
	unsigned bits = 3;			/* about a head a run: few to clear */
	while (bits < CHAIN_BITS_MAX && (1u << bits) < body)
		bits++;
	int32_t low = INT32_MAX, high = INT32_MIN;
	size_t steps_left = 8 * body + 256;
	memset(head, 0, sizeof(head[0]) << bits);
	for (size_t i = 0; i < body; i++) {
		int32_t line = runs[i].line;
		uint32_t *h = &head[chain_of(line, bits)];
		if (line >= low && line <= high) {
			uint32_t j = *h;
			while (j && runs[j - 1].line != line) {
				if (!steps_left--)
					return false;
				j = runs[j - 1].canon;
			}
			if (j) {
				runs[i].canon = runs[j - 1].start;
				continue;
			}
		}
		low = line < low ? line : low;
		high = line > high ? line : high;
		runs[i].canon = *h;
		*h = (uint32_t)i + 1;
	}
	for (size_t b = 0; b < (1u << bits); b++)
		for (uint32_t j = head[b]; j;) {
			uint32_t link = runs[j - 1].canon;
			runs[j - 1].canon = runs[j - 1].start;
			j = link;
		}
	return true;
}

/* The walk of ml_pyline_plan for one format (a constant: the decoder is
 * inlined): ml_pyline_runs's loop, with ml_pyline_range's and
 * ml_pyline_encode's sums kept on the way. */
static inline __attribute__((always_inline)) size_t
plan_walk(uint32_t format, struct walk *w, int firstlineno, struct ml_pyline_run *out, size_t cap,
	  struct ml_pyline_plan *plan)
{
	struct range r;
	size_t n = 0, encoded = 0;
	struct ml_pyline_run last = { 0, 0, 0 };
	int64_t end = 0;
	int previous = firstlineno;	/* put_entry's */
	bool any = false;
	int lo = firstlineno, hi = firstlineno;
	while (format == ML_PY_LINETABLE_310 ? next_310(w, &r) : next_311(w, &r)) {
		if (r.start == r.end)
			continue;
		/* 3.11+ entries are whole units end to end: only 3.10 ones
		 * can be odd or apart. */
		if ((format == ML_PY_LINETABLE_310 && ((r.start | r.end) & 1 || r.start != end)) ||
		    r.end > (int64_t)UINT32_MAX * 2)
			return ML_PYLINE_RUNS_BAD;
		end = r.end;
		if (n && last.line == r.line) {
			/* After its run's first entry, one that ends on its line
			 * changes no range: lo <= line <= hi already. */
			if (r.end_line != r.line)
				range_add(&r, &any, &lo, &hi);
			continue;
		}
		range_add(&r, &any, &lo, &hi);
		uint32_t start = (uint32_t)(r.start / 2);
		if (n)
			put_entry(NULL, &encoded, start - last.start, last.line, &previous);
		last = (struct ml_pyline_run){ start, r.line, 0 };
		if (n < cap)
			out[n] = last;
		n++;
	}
	if (n)
		put_entry(NULL, &encoded, (uint32_t)(end / 2) - last.start, last.line, &previous);
	if (n < cap)
		out[n] = (struct ml_pyline_run){ (uint32_t)(end / 2), ML_PYLINE_END, (uint32_t)(end / 2) };
	put_header(NULL, &encoded, firstlineno, any ? &lo : NULL, any ? &hi : NULL);
	*plan = (struct ml_pyline_plan){ n + 1, encoded, any, lo, hi, false };
	return n + 1;
}

size_t ml_pyline_plan(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
		      struct ml_pyline_run *out, size_t cap, struct ml_pyline_plan *plan)
{
	struct walk w = { format, table, table + len, 0, firstlineno };
	size_t n;
	if (format == ML_PY_LINETABLE_310)
		n = plan_walk(ML_PY_LINETABLE_310, &w, firstlineno, out, cap, plan);
	else if (format == ML_PY_LINETABLE_311)
		n = plan_walk(ML_PY_LINETABLE_311, &w, firstlineno, out, cap, plan);
	else
		n = ML_PYLINE_RUNS_BAD;
	if (n == ML_PYLINE_RUNS_BAD) {
		plan->n_runs = n;
		return n;
	}
	if (n <= cap && !canon_by_chains(out, n - 1)) {
		ml_pyline_canonical(out, n);
		plan->sorted = true;
	}
	return n;
}
