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

/* 6-bit chunks, least significant first; bit 6 says more follow. */
static bool varint(struct walk *w, uint32_t *out)
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

static bool svarint(struct walk *w, int *out)
{
	uint32_t u;
	if (!varint(w, &u))
		return false;
	*out = (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
	return true;
}

static bool next_310(struct walk *w, struct range *r)
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

static bool next_311(struct walk *w, struct range *r)
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
	while (next(&w, &r)) {
		if (r.line <= 0 || r.start == r.end)	/* 3.11+ modules start at line 0 */
			continue;
		if (!any || r.line < *lo)
			*lo = r.line;
		if (!any || r.end_line > *hi)
			*hi = r.end_line > r.line ? r.end_line : r.line;
		any = true;
	}
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

/* Appends v's varint at out + *at, or only counts it when out is NULL. */
static void put(uint8_t *out, size_t *at, uint64_t v)
{
	unsigned char scratch[ML_VARINT_MAX];
	*at += ml_varint_put(out ? out + *at : scratch, v);
}

size_t ml_pyline_encode(const struct ml_pyline_run *runs, size_t n, int firstlineno,
			const int *lo, const int *hi, uint8_t *out)
{
	size_t at = 0;
	put(out, &at, lo ? 1 : 0);
	if (lo) {
		put(out, &at, zz((int64_t)*lo - firstlineno));
		put(out, &at, zz((int64_t)*hi - firstlineno));
	}
	int previous = firstlineno;
	for (size_t i = 0; i + 1 < n; i++) {
		put(out, &at, runs[i + 1].start - runs[i].start);
		if (runs[i].line < 0) {
			put(out, &at, 0);
		} else {
			put(out, &at, zz((int64_t)runs[i].line - previous) + 1);
			previous = runs[i].line;
		}
	}
	return at;
}
