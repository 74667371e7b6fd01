/* report/pyline.c - decodes co_linetable (report/pyline.h).  3.10: pairs of
 * (bytecode delta in bytes, signed line delta; -128: no line), from
 * co_firstlineno.  3.11+: entries of one first byte (bit 7 set, code in
 * bits 3-6, length - 1 in code units in bits 0-2) and continuation bytes,
 * as Objects/locations.md describes. */
#include <stdbool.h>
#include "common/pyformat.h"
#include "report/pyline.h"

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

static bool next(struct walk *w, struct range *r)
{
	return w->format == ML_PY_LINETABLE_310 ? next_310(w, r) : next_311(w, r);
}

int ml_pyline_at(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
		 int32_t lasti)
{
	if (lasti < 0)
		return firstlineno;
	struct walk w = { format, table, table + len, 0, firstlineno };
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
