/* report/reader_python.c - the PYTHON and PYCODE sections (common/pyformat.h):
 * the interpreter a process ran and its code objects, validated. */
#include <stdlib.h>
#include <string.h>
#include "report/reader_internal.h"

_Static_assert(sizeof(struct ml_fmt_python) == 64, "python layout");
_Static_assert(sizeof(struct ml_fmt_pycode) == 24, "pycode layout");

uint32_t ml_reader_depth_limit(const struct parse *ps)
{
	uint32_t max_depth = ps->p->meta.max_depth;
	if (!max_depth)
		return UINT32_MAX;
	return max_depth + (ps->sec[ML_SEC_PYTHON].seen ? ML_PYFRAMES_MAX : 0);
}

static int compare_ids(const void *a, const void *b)
{
	const struct ml_pycode *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

static int parse_codes(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_PYCODE];
	struct cursor c = { s->payload, s->size };
	struct ml_profile *p = ps->p;
	if (!s->seen)
		return 0;
	if (s->count > s->size / sizeof(struct ml_fmt_pycode))
		return BAD(ps, "corrupt: PYCODE section too small for %u records", s->count);
	p->pycodes = calloc((size_t)s->count + 1, sizeof(*p->pycodes));
	if (!p->pycodes)
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->count; i++) {
		struct ml_fmt_pycode r;
		const unsigned char *var;
		if (!ml_reader_peek(&c, &r, sizeof(r)) ||
		    !ml_reader_take_record(&c, &r, sizeof(r), (uint64_t)r.filename_len +
					   r.name_len + r.linetable_len, &var))
			return BAD(ps, "corrupt: PYCODE record %u does not fit in its section", i);
		if (r.id == 0 || r.id > ML_PYFRAME_CODE_MAX)
			return BAD(ps, "corrupt: PYCODE record %u has id %u", i, r.id);
		struct ml_pycode *pc = &p->pycodes[p->n_pycodes++];
		pc->id = r.id;
		pc->firstlineno = r.firstlineno;
		pc->flags = r.flags;
		pc->filename = ml_reader_copy_string(ps->o, var, r.filename_len);
		pc->name = ml_reader_copy_string(ps->o, var + r.filename_len, r.name_len);
		pc->linetable = var + r.filename_len + r.name_len;
		pc->linetable_len = r.linetable_len;
		pc->linetable_format = (r.flags & ML_PYCODE_LINES) ? ML_PY_LINETABLE_LINES :
								       p->python.linetable;
		pc->cwd = p->python_cwd;
		if (!pc->filename || !pc->name)
			return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	}
	if (c.left)
		return BAD(ps, "corrupt: %llu stray bytes after the last PYCODE record",
			   (unsigned long long)c.left);
	qsort(p->pycodes, p->n_pycodes, sizeof(*p->pycodes), compare_ids);
	for (size_t i = 1; i < p->n_pycodes; i++)
		if (p->pycodes[i].id == p->pycodes[i - 1].id)
			return BAD(ps, "corrupt: Python code id %u appears twice", p->pycodes[i].id);
	return 0;
}

int ml_reader_parse_python(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_PYTHON];
	struct cursor c = { s->payload, s->size };
	struct ml_profile *p = ps->p;
	const unsigned char *cwd;
	if (!s->seen)
		return ps->sec[ML_SEC_PYCODE].seen ? BAD(ps, "corrupt: PYCODE without PYTHON") : 0;
	if (s->count != 1 || !ml_reader_peek(&c, &p->python, sizeof(p->python)) ||
	    !ml_reader_take_record(&c, &p->python, sizeof(p->python), p->python.cwd_len, &cwd) ||
	    c.left)
		return BAD(ps, "corrupt: PYTHON section is not one record");
	uint32_t v = p->python.version;
	if (v >> 24 != 3 || (p->python.linetable != ML_PY_LINETABLE_310 &&
			     p->python.linetable != ML_PY_LINETABLE_311) ||
	    p->python.eval_hi < p->python.eval_lo)
		return BAD(ps, "corrupt: PYTHON section names Python %u.%u, line table %u",
			   v >> 24, (v >> 16) & 0xff, p->python.linetable);
	p->python_cwd = ml_reader_copy_string(ps->o, cwd, p->python.cwd_len);
	if (!p->python_cwd)
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	p->has_python = true;
	return parse_codes(ps);
}

const struct ml_pycode *ml_profile_pycode(const struct ml_profile *p, uint32_t id)
{
	size_t lo = 0, hi = p->n_pycodes;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->pycodes[mid].id == id)
			return &p->pycodes[mid];
		if (p->pycodes[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- @profile: PYFUNCS and PYLINES (common/pyprof.h) ---- */

_Static_assert(sizeof(struct ml_fmt_pyprof) == 56, "pyprof layout");
_Static_assert(sizeof(struct ml_fmt_pyfunc) == 32, "pyfunc layout");
_Static_assert(sizeof(struct ml_fmt_pyline) == 64, "pyline layout");

static bool is_decorated(const struct ml_profile *p, uint32_t code_id)
{
	for (size_t i = 0; i < p->n_pyfuncs; i++)
		if (p->pyfuncs[i].code_id == code_id)
			return true;
	return false;
}

int ml_reader_parse_pyprof(struct parse *ps)
{
	const struct span *f = &ps->sec[ML_SEC_PYFUNCS], *l = &ps->sec[ML_SEC_PYLINES];
	struct ml_profile *p = ps->p;
	if (!f->seen)
		return l->seen ? BAD(ps, "corrupt: PYLINES without PYFUNCS") : 0;
	if (!p->has_python)
		return BAD(ps, "corrupt: PYFUNCS without PYTHON");
	if (f->count == 0 || f->size != sizeof(struct ml_fmt_pyprof) +
	    (uint64_t)(f->count - 1) * sizeof(struct ml_fmt_pyfunc))
		return BAD(ps, "corrupt: PYFUNCS section of %u records has %llu bytes", f->count,
			   (unsigned long long)f->size);
	memcpy(&p->pyprof, f->payload, sizeof(p->pyprof));
	if (p->pyprof.mechanism != ML_PYPROF_SETTRACE &&
	    p->pyprof.mechanism != ML_PYPROF_MONITORING)
		return BAD(ps, "corrupt: PYFUNCS names line-event mechanism %u",
			   p->pyprof.mechanism);
	p->pyfuncs = (const struct ml_fmt_pyfunc *)(f->payload + sizeof(struct ml_fmt_pyprof));
	p->n_pyfuncs = f->count - 1;
	for (size_t i = 0; i < p->n_pyfuncs; i++)
		if (!ml_profile_pycode(p, p->pyfuncs[i].code_id))
			return BAD(ps, "corrupt: PYFUNCS record %zu names Python code %u, "
				   "which PYCODE lacks", i + 1, p->pyfuncs[i].code_id);
	if (l->seen) {
		if (l->size != (uint64_t)l->count * sizeof(struct ml_fmt_pyline))
			return BAD(ps, "corrupt: PYLINES section of %u records has %llu bytes",
				   l->count, (unsigned long long)l->size);
		p->pylines = (const struct ml_fmt_pyline *)l->payload;
		p->n_pylines = l->count;
	}
	for (size_t i = 0; i < p->n_pylines; i++) {
		const struct ml_fmt_pyline *r = &p->pylines[i];
		if (!is_decorated(p, r->code_id) || r->line <= 0 || r->ended > r->hits)
			return BAD(ps, "corrupt: PYLINES record %zu (code %u, line %d, %llu hits, "
				   "%llu ended)", i, r->code_id, r->line,
				   (unsigned long long)r->hits, (unsigned long long)r->ended);
	}
	p->has_pyprof = true;
	return 0;
}
