/* tests/check_pyline.c - common/pyline.c against the interpreters themselves:
 * real co_linetable bytes of CPython 3.10 to 3.13 with the line co_lines()
 * gives every instruction (tests/pyline_vectors.h, made by
 * tests/python/gen_pyline_vectors.py), plus hand-made edge cases; and the
 * runtime's lines-only form and first-unit-of-the-line map made from them;
 * and the runtime's one walk (ml_pyline_plan) against the general path on
 * those, on every code object of a few standard modules
 * (tests/pyline_tables.h, made by tests/python/gen_pyline_tables.py),
 * damaged copies of them and made-up tables of thousands of runs. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/pyformat.h"
#include "common/pyline.h"

struct vector {
	uint32_t format;
	const char *what;
	int firstlineno;
	size_t len;
	const uint8_t *table;
	int units;
	const int *lines;
};

static const struct vector vectors[] = {
#include "tests/pyline_vectors.h"
};
#define N_VECTORS (sizeof(vectors) / sizeof(vectors[0]))

START_TEST(every_instruction_of_every_version)
{
	const struct vector *v = &vectors[_i];
	for (int unit = 0; unit < v->units; unit++) {
		int got = ml_pyline_at(v->format, v->table, v->len, v->firstlineno, unit);
		ck_assert_msg(got == v->lines[unit], "%s: instruction %d: line %d, want %d", v->what,
			      unit, got, v->lines[unit]);
	}
}
END_TEST

START_TEST(range_covers_every_line)
{
	const struct vector *v = &vectors[_i];
	int lo, hi, want_lo = 0, want_hi = 0;
	for (int unit = 0; unit < v->units; unit++) {
		int l = v->lines[unit];
		if (l <= 0)	/* none, or 3.11+'s artificial line 0 */
			continue;
		if (!want_lo || l < want_lo)
			want_lo = l;
		if (l > want_hi)
			want_hi = l;
	}
	int rc = ml_pyline_range(v->format, v->table, v->len, v->firstlineno, &lo, &hi);
	if (!want_lo) {
		ck_assert_int_eq(rc, -1);
		return;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(lo, want_lo);
	/* hi may pass the last instruction's line: the end of a multi-line
	 * statement (a nested def spans its whole body); never the source's
	 * end (545 lines). */
	ck_assert_int_ge(hi, want_hi);
	ck_assert_int_le(hi, 545);
}
END_TEST

/* The runs of v, with their first units (freed by the caller). */
static struct ml_pyline_run *runs_of(const struct vector *v, size_t *n)
{
	*n = ml_pyline_runs(v->format, v->table, v->len, v->firstlineno, NULL, 0);
	ck_assert_msg(*n != ML_PYLINE_RUNS_BAD, "%s: no runs", v->what);
	struct ml_pyline_run *runs = calloc(*n, sizeof(*runs));
	ck_assert_ptr_nonnull(runs);
	ck_assert_uint_eq(ml_pyline_runs(v->format, v->table, v->len, v->firstlineno, runs, *n), *n);
	ml_pyline_canonical(runs, *n);
	return runs;
}

START_TEST(lines_form_keeps_every_line_and_range)
{
	const struct vector *v = &vectors[_i];
	size_t n;
	struct ml_pyline_run *runs = runs_of(v, &n);
	int lo, hi;
	bool any = ml_pyline_range(v->format, v->table, v->len, v->firstlineno, &lo, &hi) == 0;
	size_t len = ml_pyline_encode(runs, n, v->firstlineno, any ? &lo : NULL, any ? &hi : NULL,
				      NULL);
	uint8_t *t = malloc(ML_PYLINE_ENCODED_MAX(n));
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(ml_pyline_encode(runs, n, v->firstlineno, any ? &lo : NULL,
					   any ? &hi : NULL, t), len);
	ck_assert_uint_le(len, ML_PYLINE_ENCODED_MAX(n));
	/* Every instruction, and a few past the end, as the original table. */
	for (int unit = -1; unit < v->units + 3; unit++) {
		int want = ml_pyline_at(v->format, v->table, v->len, v->firstlineno, unit);
		int got = ml_pyline_at(ML_PY_LINETABLE_LINES, t, len, v->firstlineno, unit);
		ck_assert_msg(got == want, "%s: unit %d: line %d, want %d", v->what, unit, got, want);
	}
	int lo2, hi2;
	ck_assert_int_eq(ml_pyline_range(ML_PY_LINETABLE_LINES, t, len, v->firstlineno, &lo2, &hi2),
			 any ? 0 : -1);
	ck_assert_int_eq(lo2, lo);
	ck_assert_int_eq(hi2, hi);
	/* Smaller than the 3.11+ tables, whose columns it drops. */
	if (v->format == ML_PY_LINETABLE_311 && v->units > 16)
		ck_assert_uint_lt(len, v->len);
	free(t);
	free(runs);
}
END_TEST

START_TEST(first_unit_of_each_line)
{
	const struct vector *v = &vectors[_i];
	size_t n;
	struct ml_pyline_run *runs = runs_of(v, &n);
	for (int unit = 0; unit < v->units; unit++) {
		int first = 0;
		while (v->lines[first] != v->lines[unit])
			first++;
		int32_t got = ml_pyline_canon(runs, n, unit);
		ck_assert_msg(got == first, "%s: unit %d (line %d): first unit %d, want %d", v->what,
			      unit, v->lines[unit], got, first);
	}
	/* From any starting run (behind, at, ahead of, past the table): the
	 * same answer, and the run left there holds the unit. */
	for (uint32_t from = 0; from < n + 4; from += 1 + from / 8)
		for (int unit = 0; unit < v->units; unit++) {
			uint32_t run = from;
			int32_t got = ml_pyline_canon_near(runs, n, unit, &run);
			ck_assert_int_eq(got, ml_pyline_canon(runs, n, unit));
			ck_assert_uint_lt(run, n - 1);
			ck_assert_uint_le(runs[run].start, (uint32_t)unit);
			ck_assert_uint_gt(runs[run + 1].start, (uint32_t)unit);
		}
	ck_assert_int_eq(ml_pyline_canon(runs, n, -1), -1);
	ck_assert_int_eq(ml_pyline_canon(runs, n, v->units), v->units);
	ck_assert_int_eq(ml_pyline_canon(runs, n, v->units + 100), v->units + 100);
	free(runs);
}
END_TEST

/* ---- ml_pyline_plan against the general path ---- */

/* A table's runs, canons, range and lines-only form by the general path:
 * ml_pyline_runs, ml_pyline_canonical, ml_pyline_range, ml_pyline_encode. */
struct general {
	size_t n;			/* ML_PYLINE_RUNS_BAD: no runs */
	struct ml_pyline_run *runs;	/* the caller frees */
	bool any;
	int lo, hi;
	size_t encoded_len;
};

static struct general general_path(uint32_t format, const uint8_t *table, size_t len,
				   int firstlineno)
{
	struct general g = { 0 };
	g.n = ml_pyline_runs(format, table, len, firstlineno, NULL, 0);
	g.any = ml_pyline_range(format, table, len, firstlineno, &g.lo, &g.hi) == 0;
	if (g.n == ML_PYLINE_RUNS_BAD)
		return g;
	g.runs = calloc(g.n, sizeof(*g.runs));
	ck_assert_ptr_nonnull(g.runs);
	ck_assert_uint_eq(ml_pyline_runs(format, table, len, firstlineno, g.runs, g.n), g.n);
	ml_pyline_canonical(g.runs, g.n);
	g.encoded_len = ml_pyline_encode(g.runs, g.n, firstlineno, g.any ? &g.lo : NULL,
					 g.any ? &g.hi : NULL, NULL);
	return g;
}

/* ml_pyline_plan gives what the general path gives for the table: the same
 * runs and canons with room for them, the same count, range and length
 * without.  Returns plan->sorted (false for a table it rejects). */
static bool plan_matches(uint32_t format, const uint8_t *table, size_t len, int firstlineno,
			 const char *what)
{
	struct general g = general_path(format, table, len, firstlineno);
	struct ml_pyline_plan plan;
	if (g.n == ML_PYLINE_RUNS_BAD) {
		struct ml_pyline_run one[4];
		ck_assert_msg(ml_pyline_plan(format, table, len, firstlineno, one, 4, &plan) ==
			      ML_PYLINE_RUNS_BAD, "%s: a table the general path rejects", what);
		ck_assert_uint_eq(plan.n_runs, ML_PYLINE_RUNS_BAD);
		return false;
	}
	struct ml_pyline_run *runs = calloc(g.n + 1, sizeof(*runs));
	ck_assert_ptr_nonnull(runs);
	/* Too little room (none, one short): only counted and measured. */
	size_t caps[] = { 0, g.n - 1, g.n };
	for (size_t c = 0; c < 3; c++) {
		size_t n = ml_pyline_plan(format, table, len, firstlineno, runs, caps[c], &plan);
		ck_assert_msg(n == g.n && plan.n_runs == g.n, "%s: %zu runs, want %zu", what, n,
			      g.n);
		ck_assert_msg(plan.any == g.any && plan.lo == g.lo && plan.hi == g.hi,
			      "%s: range %d %d..%d, want %d %d..%d", what, plan.any, plan.lo,
			      plan.hi, g.any, g.lo, g.hi);
		ck_assert_msg(plan.encoded_len == g.encoded_len, "%s: %zu bytes, want %zu", what,
			      plan.encoded_len, g.encoded_len);
	}
	for (size_t i = 0; i < g.n; i++)
		ck_assert_msg(runs[i].start == g.runs[i].start && runs[i].line == g.runs[i].line &&
			      runs[i].canon == g.runs[i].canon,
			      "%s: run %zu: %u %d %u, want %u %d %u", what, i, runs[i].start,
			      runs[i].line, runs[i].canon, g.runs[i].start, g.runs[i].line,
			      g.runs[i].canon);
	bool sorted = plan.sorted;
	free(runs);
	free(g.runs);
	return sorted;
}

START_TEST(plan_is_the_general_path_on_vectors)
{
	const struct vector *v = &vectors[_i];
	ck_assert(!plan_matches(v->format, v->table, v->len, v->firstlineno, v->what));
}
END_TEST

struct real_table {
	uint32_t format;
	const char *what;
	int firstlineno;
	size_t len;
	const char *bytes;
};

static const struct real_table real_tables[] = {
#include "tests/pyline_tables.h"
};
#define N_REAL_TABLES (sizeof(real_tables) / sizeof(real_tables[0]))

START_TEST(plan_is_the_general_path_on_real_modules)
{
	const struct real_table *t = &real_tables[_i];
	ck_assert(!plan_matches(t->format, (const uint8_t *)t->bytes, t->len, t->firstlineno,
				t->what));
}
END_TEST

/* xorshift64: the same numbers on every run. */
static uint64_t next_random(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

START_TEST(plan_is_the_general_path_on_damaged_tables)
{
	/* Every real table cut short, and with bytes changed at random: the
	 * walk must stop, reject or go on exactly where the general one does. */
	const struct real_table *t = &real_tables[_i];
	uint64_t state = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
	uint8_t *copy = malloc(t->len + 1);
	ck_assert_ptr_nonnull(copy);
	for (int round = 0; round < 24; round++) {
		memcpy(copy, t->bytes, t->len);
		size_t len = t->len;
		if (round % 3 == 0)
			len = t->len ? next_random(&state) % t->len : 0;
		else
			for (int k = 0; k < 1 + round % 4 && len; k++)
				copy[next_random(&state) % len] = (uint8_t)next_random(&state);
		uint32_t format = round % 8 == 7 ? t->format ^ (310 ^ 311) : t->format;
		plan_matches(format, copy, len, t->firstlineno, t->what);
	}
	free(copy);
}
END_TEST

/* A 3.11 table of one code unit a line, the lines given (code 13: a line
 * delta, no columns).  Returns its length (out: 6 bytes a line). */
static size_t table_of_lines(const int *lines, size_t n, int firstlineno, uint8_t *out)
{
	size_t at = 0;
	int previous = firstlineno;
	for (size_t i = 0; i < n; i++) {
		int delta = lines[i] - previous;
		uint32_t u = delta < 0 ? ((uint32_t)-delta << 1) | 1u : (uint32_t)delta << 1;
		out[at++] = 0x80 | (13 << 3);
		do {
			out[at++] = (uint8_t)((u & 63) | (u > 63 ? 64 : 0));
			u >>= 6;
		} while (u);
		previous = lines[i];
	}
	return at;
}

START_TEST(plan_sorts_where_the_chains_grow_long)
{
	/* 9000 lines, all different, in a random order: the hash chains give
	 * up, the sort does it.  9000 runs over 300 lines in a random order
	 * (loops), and 9000 lines each a little past the last, with a jump
	 * back every 50 (a module body): the chains do it. */
	enum { N = 9000 };
	int *lines = malloc(N * sizeof(*lines));
	uint8_t *table = malloc(N * 6);
	ck_assert(lines && table);
	uint64_t state = 12345;
	for (int i = 0; i < N; i++)
		lines[i] = 1 + i;
	for (int i = N - 1; i > 0; i--) {
		int j = (int)(next_random(&state) % (uint64_t)(i + 1)), x = lines[i];
		lines[i] = lines[j];
		lines[j] = x;
	}
	size_t len = table_of_lines(lines, N, 1, table);
	ck_assert(plan_matches(ML_PY_LINETABLE_311, table, len, 1, "shuffled"));
	for (int i = 0; i < N; i++)
		lines[i] = 1 + (int)(next_random(&state) % 300);
	len = table_of_lines(lines, N, 1, table);
	ck_assert(!plan_matches(ML_PY_LINETABLE_311, table, len, 1, "scattered"));
	for (int i = 0; i < N; i++)
		lines[i] = (i ? lines[i - 1] : 0) + 1 + (int)(next_random(&state) % 3) -
			   (i % 50 == 0 ? 40 : 0);
	len = table_of_lines(lines, N, 1, table);
	ck_assert(!plan_matches(ML_PY_LINETABLE_311, table, len, 1, "downwards"));
	free(table);
	free(lines);
}
END_TEST

START_TEST(lines_form_rejects_bad_bytes)
{
	/* A header that says 2, an entry of 0 units, a cut varint. */
	static const uint8_t bad_header[] = { 2, 0, 0 };
	static const uint8_t zero_units[] = { 0, 0, 1 };
	static const uint8_t cut[] = { 0, 0x85 };
	int lo, hi;
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_LINES, bad_header, 3, 4, 0), -1);
	ck_assert_int_eq(ml_pyline_range(ML_PY_LINETABLE_LINES, bad_header, 3, 4, &lo, &hi), -1);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_LINES, zero_units, 3, 4, 0), -1);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_LINES, cut, 2, 4, 0), -1);
	/* Lines-only tables are never made again from themselves, and a
	 * 3.10 range of an odd byte length makes none. */
	static const uint8_t lines[] = { 0, 2, 3 };
	ck_assert_uint_eq(ml_pyline_runs(ML_PY_LINETABLE_LINES, lines, 3, 1, NULL, 0),
			  ML_PYLINE_RUNS_BAD);
	static const uint8_t odd[] = { 3, 1 };
	ck_assert_uint_eq(ml_pyline_runs(ML_PY_LINETABLE_310, odd, 2, 1, NULL, 0),
			  ML_PYLINE_RUNS_BAD);
}
END_TEST

START_TEST(not_started_is_first_line)
{
	static const uint8_t t310[] = { 6, 1, 4, 1 };
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_310, t310, sizeof(t310), 7, -1), 7);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_310, t310, sizeof(t310), 7, 0), 8);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_310, t310, sizeof(t310), 7, 4), 9);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_310, t310, sizeof(t310), 7, 5), -1);
}
END_TEST

START_TEST(no_line_marks)
{
	/* 3.10: a -128 line delta is "no line" and moves nothing. */
	static const uint8_t t310[] = { 2, 1, 2, 0x80, 2, 1 };
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_310, t310, sizeof(t310), 1, 0), 2);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_310, t310, sizeof(t310), 1, 1), -1);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_310, t310, sizeof(t310), 1, 2), 3);
	/* 3.11: code 15 has no location; code 13 a signed varint delta
	 * (-70: 141 = 0x4d 0x02 in 6-bit chunks). */
	static const uint8_t t311[] = { 0x80 | (15 << 3) | 0, 0x80 | (13 << 3) | 1, 0x4d | 64, 0x02,
					0x80 | (11 << 3), 3, 4 };
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_311, t311, sizeof(t311), 100, 0), -1);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_311, t311, sizeof(t311), 100, 1), 30);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_311, t311, sizeof(t311), 100, 2), 30);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_311, t311, sizeof(t311), 100, 3), 31);
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_311, t311, sizeof(t311), 100, 4), -1);
}
END_TEST

START_TEST(truncated_tables_stop)
{
	/* A table cut inside an entry never reads past its end. */
	static const uint8_t t311[] = { 0x80 | (14 << 3) | 2, 0x41 };
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_311, t311, sizeof(t311), 5, 0), -1);
	static const uint8_t t310[] = { 4 };
	ck_assert_int_eq(ml_pyline_at(ML_PY_LINETABLE_310, t310, sizeof(t310), 5, 0), -1);
	int lo, hi;
	ck_assert_int_eq(ml_pyline_range(ML_PY_LINETABLE_310, t310, 0, 5, &lo, &hi), -1);
	ck_assert_int_eq(lo, 5);
	ck_assert_int_eq(hi, 5);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pyline");
	TCase *tc = tcase_create("pyline");
	tcase_add_loop_test(tc, every_instruction_of_every_version, 0, (int)N_VECTORS);
	tcase_add_loop_test(tc, range_covers_every_line, 0, (int)N_VECTORS);
	tcase_add_loop_test(tc, lines_form_keeps_every_line_and_range, 0, (int)N_VECTORS);
	tcase_add_loop_test(tc, first_unit_of_each_line, 0, (int)N_VECTORS);
	tcase_add_loop_test(tc, plan_is_the_general_path_on_vectors, 0, (int)N_VECTORS);
	tcase_add_loop_test(tc, plan_is_the_general_path_on_real_modules, 0, (int)N_REAL_TABLES);
	tcase_add_loop_test(tc, plan_is_the_general_path_on_damaged_tables, 0, (int)N_REAL_TABLES);
	tcase_add_test(tc, plan_sorts_where_the_chains_grow_long);
	tcase_add_test(tc, lines_form_rejects_bad_bytes);
	tcase_add_test(tc, not_started_is_first_line);
	tcase_add_test(tc, no_line_marks);
	tcase_add_test(tc, truncated_tables_stop);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
