/* tests/check_pystack.c - report/pystack.c: stacks with Python frames put in
 * program order.  Native frames are small numbers here; "eval" ones are
 * 100-199 and "interpreter" ones 100-299; Python frames are tagged. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "common/format.h"
#include "common/pyformat.h"
#include "report/pystack.h"

static bool is_eval(void *ctx, uint64_t addr, uint32_t i)
{
	return addr >= 100 && addr < 200;
}

static bool in_interp(void *ctx, uint64_t addr, uint32_t i)
{
	return addr >= 100 && addr < 300;
}

static const struct ml_pystack_env env = { NULL, is_eval, in_interp };

/* A Python frame of code id with entry set (the outermost of its run). */
static uint64_t py(uint32_t id, bool entry)
{
	return ml_pyframe_make(id, 4, entry, false);
}

/* The order as a compact string: natives as numbers, Python frames as
 * "p<id>"; frames the default view leaves out in brackets. */
static void order(const uint64_t *frames, uint32_t depth, uint32_t flags, char *out)
{
	struct ml_pystack_item items[64];
	size_t n = ml_pystack_order(frames, depth, flags, &env, items);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		char one[32];
		if (items[i].python)
			snprintf(one, sizeof(one), "p%u", ml_pyframe_code(items[i].addr));
		else
			snprintf(one, sizeof(one), "%llu", (unsigned long long)items[i].addr);
		if (items[i].show != ML_PYSTACK_SHOW)
			snprintf(one + strlen(one), sizeof(one) - strlen(one), "%s",
				 items[i].show == ML_PYSTACK_NEVER ? "!" : "*");
		sprintf(out + strlen(out), "%s%s", i ? " " : "", one);
	}
}

START_TEST(runs_replace_eval_frames)
{
	/* alloc(1) <- interp(201) <- eval(101) <- ext(7) <- interp(202) <- eval(102)
	 * <- main(9); Python: p3 (entry), p2, p1 (entry) */
	uint64_t f[] = { 1, 201, 101, 7, 202, 102, 9, py(3, true), py(2, false), py(1, true) };
	char s[512];
	order(f, 10, 0, s);
	ck_assert_str_eq(s, "1 201* p3 101* 7 202* p2 p1 102* 9*");
}
END_TEST

START_TEST(missed_inner_eval_frame)
{
	/* The innermost eval call is in code not seen as the eval loop (a
	 * stripped .cold part): its run goes inside the innermost paired one. */
	uint64_t f[] = { 1, 250, 7, 102, 9, py(3, true), py(2, false), py(1, true) };
	char s[512];
	order(f, 8, 0, s);
	ck_assert_str_eq(s, "1 250* 7 p3 p2 p1 102* 9*");
}
END_TEST

START_TEST(cut_stacks_pair_from_the_inside)
{
	/* Natives cut after the first eval frame: the rest of the Python
	 * frames come after it. */
	uint64_t f[] = { 1, 201, 101, py(3, true), py(2, false), py(1, true) };
	char s[512];
	order(f, 6, ML_STACK_PY_NATIVE_CUT, s);
	ck_assert_str_eq(s, "1 201* p3 101* p2 p1");
	order(f, 6, ML_STACK_TRUNCATED, s);
	ck_assert_str_eq(s, "1 201* p3 101* p2 p1");
}
END_TEST

START_TEST(no_eval_frame_puts_python_outside)
{
	uint64_t f[] = { 1, 7, py(2, false), py(1, true) };
	char s[512];
	order(f, 4, 0, s);
	ck_assert_str_eq(s, "1 7 p2 p1");
}
END_TEST

START_TEST(prologue_frames_never_shown)
{
	uint64_t hidden = ml_pyframe_make(5, -1, true, true);
	uint64_t f[] = { 1, 101, 102, 9, hidden, py(1, true) };
	char s[512];
	order(f, 6, 0, s);
	ck_assert_str_eq(s, "1 p5! 101* p1 102* 9*");
}
END_TEST

START_TEST(extra_eval_frames_stay_native)
{
	uint64_t f[] = { 1, 101, 102, 9, py(1, true) };
	char s[512];
	order(f, 5, 0, s);
	ck_assert_str_eq(s, "1 101* p1 102* 9*");
}
END_TEST

START_TEST(native_only_stack_untouched)
{
	uint64_t f[] = { 1, 201, 101, 9 };
	char s[512];
	order(f, 4, 0, s);
	ck_assert_str_eq(s, "1 201 101 9");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pystack");
	TCase *tc = tcase_create("pystack");
	tcase_add_test(tc, runs_replace_eval_frames);
	tcase_add_test(tc, missed_inner_eval_frame);
	tcase_add_test(tc, cut_stacks_pair_from_the_inside);
	tcase_add_test(tc, no_eval_frame_puts_python_outside);
	tcase_add_test(tc, prologue_frames_never_shown);
	tcase_add_test(tc, extra_eval_frames_stay_native);
	tcase_add_test(tc, native_only_stack_untouched);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
