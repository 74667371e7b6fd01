/* tests/check_lineprof.c - the line timer's core (lineprof/): settings,
 * the sample table, the region tree, and the SAMPLES / REGIONS sections
 * written by ml_lp_write_sections and read back by the profile reader. */
#include "lineprof/internal.h"
#include "core/core.h"
#include "common/writer.h"
#include "report/profile.h"

#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(parse_settings)
{
	ck_assert_uint_eq(ml_lp_parse_rate("997"), 997);
	ck_assert_uint_eq(ml_lp_parse_rate("1"), 1);
	ck_assert_uint_eq(ml_lp_parse_rate("100000"), 100000);
	ck_assert_uint_eq(ml_lp_parse_rate("100001"), 0);
	ck_assert_uint_eq(ml_lp_parse_rate("0"), 0);
	ck_assert_uint_eq(ml_lp_parse_rate("12x"), 0);
	ck_assert_uint_eq(ml_lp_parse_rate(""), 0);
	ck_assert_uint_eq(ml_lp_parse_rate(NULL), 0);
	ck_assert_uint_eq(ml_lp_parse_clock("cpu"), ML_CLOCK_CPU);
	ck_assert_uint_eq(ml_lp_parse_clock("wall"), ML_CLOCK_WALL);
	ck_assert_uint_eq(ml_lp_parse_clock("CPU"), 0);
	ck_assert_uint_eq(ml_lp_parse_clock(NULL), 0);
}
END_TEST

struct seen {
	uint64_t total;
	uint32_t entries;
	uint64_t count_of_t1_abc;
};

static void count_entry(const struct ml_lp_entry *e, void *arg)
{
	struct seen *s = arg;
	s->total += e->count;
	s->entries++;
	if (e->tid == 1 && e->depth == 3 && e->frames[0] == 0xa && e->frames[2] == 0xc)
		s->count_of_t1_abc = e->count;
}

START_TEST(sample_table_counts_per_thread_and_stack)
{
	uint64_t abc[3] = { 0xa, 0xb, 0xc }, abd[3] = { 0xa, 0xb, 0xd };
	ck_assert_int_eq(ml_lp_sampletab_init(), 0);
	ml_lp_sampletab_reset();
	ml_lp_sampletab_add(1, abc, 3, ML_STACK_EXACT_IP, 2);
	ml_lp_sampletab_add(1, abc, 3, ML_STACK_EXACT_IP, 3);
	ml_lp_sampletab_add(2, abc, 3, ML_STACK_EXACT_IP, 1);	/* another thread */
	ml_lp_sampletab_add(1, abd, 3, ML_STACK_EXACT_IP, 1);	/* another stack */
	ml_lp_sampletab_add(1, abc, 2, ML_STACK_EXACT_IP, 1);	/* a prefix */
	ml_lp_sampletab_drop(4);
	struct seen s = { 0 };
	ml_lp_sampletab_foreach(count_entry, &s);
	ck_assert_uint_eq(s.entries, 4);
	ck_assert_uint_eq(s.total, 8);
	ck_assert_uint_eq(s.count_of_t1_abc, 5);
	ck_assert_uint_eq(ml_lp_sampletab_samples(), 8);
	ck_assert_uint_eq(ml_lp_sampletab_dropped(), 4);
	ck_assert_uint_eq(ml_lp_sampletab_entries(), 4);
	ml_lp_sampletab_reset();
	s = (struct seen){ 0 };
	ml_lp_sampletab_foreach(count_entry, &s);
	ck_assert_uint_eq(s.entries, 0);
}
END_TEST

struct region_seen {
	struct ml_lp_region_info r[8];
	char names[8][32];
	int n;
};

static void keep_region(const struct ml_lp_region_info *r, void *arg)
{
	struct region_seen *s = arg;
	if (s->n < 8) {
		s->r[s->n] = *r;
		snprintf(s->names[s->n], sizeof(s->names[0]), "%s", r->name);
		s->n++;
	}
}

START_TEST(regions_form_a_tree)
{
	ml_lp_regions_reset();
	uint32_t base = ml_lp_regions_count();
	ml_lp_region_push("ut_a", 0);
	ml_track_count_thread(10);
	ml_lp_region_push("ut_b", 0);
	ml_track_count_thread(100);
	usleep(2000);
	ml_lp_region_pop();
	ml_lp_region_pop();
	ml_lp_region_push("ut_a", 0);	/* the same node again */
	ml_lp_region_pop();
	ml_lp_region_pop();		/* one pop too many: ignored */
	uint64_t id = ml_lp_range_start("ut_range", ML_REGION_NVTX);
	ck_assert_uint_gt(id, 0);
	ml_lp_range_end(id);
	ml_lp_range_end(id);		/* ended twice: ignored */
	ck_assert_uint_eq(ml_lp_regions_count(), base + 3);
	struct region_seen s = { .n = 0 };
	ml_lp_regions_foreach(keep_region, &s);
	int a = -1, b = -1, rg = -1;
	for (int i = 0; i < s.n; i++) {
		if (!strcmp(s.names[i], "ut_a"))
			a = i;
		if (!strcmp(s.names[i], "ut_b"))
			b = i;
		if (!strcmp(s.names[i], "ut_range"))
			rg = i;
	}
	ck_assert(a >= 0 && b >= 0 && rg >= 0);
	ck_assert_uint_eq(s.r[a].parent, 0);
	ck_assert_uint_eq(s.r[b].parent, s.r[a].id);
	ck_assert_uint_eq(s.r[a].count, 2);
	ck_assert_uint_eq(s.r[b].count, 1);
	ck_assert_uint_eq(s.r[a].alloc_bytes, 110);
	ck_assert_uint_eq(s.r[a].allocs, 2);
	ck_assert_uint_eq(s.r[b].alloc_bytes, 100);
	ck_assert_uint_ge(s.r[b].total_ns, 2000000);
	ck_assert_uint_ge(s.r[a].total_ns, s.r[b].total_ns);
	ck_assert_uint_eq(s.r[rg].count, 1);
	ck_assert_uint_eq(s.r[rg].flags, ML_REGION_NVTX);
}
END_TEST

/* The per-thread node cache is keyed by the name's address: a buffer reused
 * with other contents, under the same or another parent, must still give
 * the node of what it holds now. */
START_TEST(regions_reused_name_buffer)
{
	ml_lp_regions_reset();
	uint32_t base = ml_lp_regions_count();
	char buf[16];
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 2; i++) {
			snprintf(buf, sizeof(buf), "ut_buf%d", i);
			ml_lp_region_push(buf, 0);
			ml_lp_region_push(buf, 0);	/* same address, child of itself */
			ml_lp_region_pop();
			ml_lp_region_pop();
		}
	}
	ck_assert_uint_eq(ml_lp_regions_count(), base + 4);
	struct region_seen s = { .n = 0 };
	ml_lp_regions_foreach(keep_region, &s);
	int top[2] = { -1, -1 }, kid[2] = { -1, -1 };
	for (int i = 0; i < s.n; i++)
		for (int k = 0; k < 2; k++) {
			char want[16];
			snprintf(want, sizeof(want), "ut_buf%d", k);
			if (strcmp(s.names[i], want))
				continue;
			if (s.r[i].id <= base)
				continue;
			if (s.r[i].parent == 0)
				top[k] = i;
			else
				kid[k] = i;
		}
	for (int k = 0; k < 2; k++) {
		ck_assert(top[k] >= 0 && kid[k] >= 0);
		ck_assert_uint_eq(s.r[kid[k]].parent, s.r[top[k]].id);
		ck_assert_uint_eq(s.r[top[k]].count, 3);
		ck_assert_uint_eq(s.r[kid[k]].count, 3);
	}
}
END_TEST

/* Writes META + lineprof's sections into path. */
static void write_profile(const char *path)
{
	struct ml_writer w;
	struct ml_fmt_meta m = { .pid = 1, .end_reason = ML_END_EXIT, .max_depth = 64 };
	ck_assert_int_eq(ml_writer_open_raw(&w, path, 0644), 0);	/* raw: the test patches it */
	ml_writer_begin(&w, ML_SEC_META);
	ml_writer_put(&w, &m, sizeof(m));
	ml_writer_record(&w);
	ml_writer_end(&w);
	ml_lp_write_sections(&w);
	ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
}

START_TEST(sections_round_trip)
{
	char path[] = "/tmp/check_lineprof.XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	uint64_t st1[2] = { 0x1111, 0x2222 }, st2[1] = { 0x3333 };
	ck_assert_int_eq(ml_lp_sampletab_init(), 0);
	ml_lp_sampletab_reset();
	ml_lp_regions_reset();
	ml_lp_config.lines = true;
	ml_lp_config.clock = ML_CLOCK_WALL;
	ml_lp_config.period_ns = 1003009;
	ml_lp_sampletab_add(7, st1, 2, ML_STACK_EXACT_IP, 5);
	ml_lp_sampletab_add(8, st2, 1, ML_STACK_EXACT_IP, 2);
	ml_lp_region_push("rt_outer", 0);
	ml_lp_region_push("rt_inner", 0);
	ml_lp_region_pop();
	ml_lp_region_pop();
	write_profile(path);

	struct ml_profile *p = NULL;
	char err[256] = "";
	ck_assert_msg(ml_profile_load(path, &p, err, sizeof(err)) == 0, "%s", err);
	ck_assert(p->has_samples);
	ck_assert_uint_eq(p->sampling.period_ns, 1003009);
	ck_assert_uint_eq(p->sampling.clock, ML_CLOCK_WALL);
	ck_assert_uint_eq(p->sampling.samples, 7);
	ck_assert_uint_eq(p->n_samples, 2);
	uint64_t sum = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		sum += p->samples[i].count;
		ck_assert_uint_eq(p->samples[i].flags, ML_STACK_EXACT_IP);
		if (p->samples[i].tid == 7) {
			ck_assert_uint_eq(p->samples[i].depth, 2);
			ck_assert_uint_eq(p->samples[i].frames[1], 0x2222);
			ck_assert_uint_eq(p->samples[i].count, 5);
		}
	}
	ck_assert_uint_eq(sum, 7);
	int outer = -1, inner = -1;
	for (size_t i = 0; i < p->n_regions; i++) {
		if (!strcmp(p->regions[i].name, "rt_outer"))
			outer = (int)i;
		if (!strcmp(p->regions[i].name, "rt_inner"))
			inner = (int)i;
	}
	ck_assert(outer >= 0 && inner > outer);
	ck_assert_uint_eq(p->regions[inner].parent, p->regions[outer].id);
	ck_assert_uint_eq(p->regions[outer].count, 1);
	ml_profile_free(p);

	/* A header that disagrees with its records is corrupt. */
	size_t len;
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	unsigned char *buf = malloc(1 << 16);
	len = fread(buf, 1, 1 << 16, f);
	fclose(f);
	/* Find the SAMPLES section and bump its header's sample total. */
	size_t off = sizeof(struct ml_fmt_header);
	bool patched = false;
	while (off + sizeof(struct ml_fmt_section) <= len) {
		struct ml_fmt_section sh;
		memcpy(&sh, buf + off, sizeof(sh));
		if (sh.type == ML_SEC_SAMPLES) {
			buf[off + sizeof(sh) + offsetof(struct ml_fmt_sampling, samples)]++;
			patched = true;
			break;
		}
		off += sizeof(sh) + sh.size;
	}
	ck_assert(patched);
	struct ml_fmt_header h;
	memcpy(&h, buf, sizeof(h));
	h.checksum = ml_fnv1a(ML_FNV_INIT, buf + sizeof(h), len - sizeof(h));
	memcpy(buf, &h, sizeof(h));
	ck_assert_int_lt(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "corrupt: SAMPLES records hold 7 samples, the header says 8");
	free(buf);
	unlink(path);
	ml_lp_config.lines = false;
}
END_TEST

/* Each completed region is a span on the time axis: inner ones end first
 * and lie inside their outer one; an NVTX range keeps the thread that
 * started it; past the table's size spans are only counted. */
START_TEST(spans_round_trip)
{
	char path[] = "/tmp/check_lineprof.XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ml_lp_regions_reset();
	ml_lp_spans_reset();
	ml_lp_region_push("sp_outer", 0);
	ml_lp_region_push("sp_inner", 0);
	usleep(2000);
	ml_lp_region_pop();
	ml_lp_region_pop();
	uint64_t id = ml_lp_range_start("sp_range", ML_REGION_NVTX);
	ml_lp_range_end(id);
	write_profile(path);
	struct ml_profile *p = NULL;
	char err[256] = "";
	ck_assert_msg(ml_profile_load(path, &p, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(p->n_spans, 3);
	ck_assert_uint_eq(p->spans_dropped, 0);
	const char *names[3];
	for (size_t i = 0; i < 3; i++) {
		for (size_t k = 0; k < p->n_regions; k++)
			if (p->regions[k].id == p->spans[i].region)
				names[i] = p->regions[k].name;
		ck_assert_uint_eq(p->spans[i].tid, (uint32_t)getpid());
		ck_assert_uint_le(p->spans[i].start_ns, p->spans[i].end_ns);
	}
	ck_assert_str_eq(names[0], "sp_inner");	/* in the order they closed */
	ck_assert_str_eq(names[1], "sp_outer");
	ck_assert_str_eq(names[2], "sp_range");
	ck_assert_uint_ge(p->spans[0].end_ns - p->spans[0].start_ns, 2000000);
	ck_assert_uint_le(p->spans[1].start_ns, p->spans[0].start_ns);
	ck_assert_uint_ge(p->spans[1].end_ns, p->spans[0].end_ns);
	ck_assert_uint_ge(p->spans[2].start_ns, p->spans[1].end_ns);
	ml_profile_free(p);

	for (uint32_t i = 0; i < ML_SPANS_MAX + 5; i++) {
		ml_lp_region_push("sp_many", 0);
		ml_lp_region_pop();
	}
	write_profile(path);
	ck_assert_msg(ml_profile_load(path, &p, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(p->n_spans, ML_SPANS_MAX);
	ck_assert_uint_eq(p->spans_dropped, 8);	/* 3 + 32773 - 32768 */
	ml_profile_free(p);
	unlink(path);
	ml_lp_spans_reset();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lineprof");
	TCase *tc = tcase_create("lineprof");
	tcase_add_test(tc, parse_settings);
	tcase_add_test(tc, sample_table_counts_per_thread_and_stack);
	tcase_add_test(tc, regions_form_a_tree);
	tcase_add_test(tc, regions_reused_name_buffer);
	tcase_add_test(tc, sections_round_trip);
	tcase_add_test(tc, spans_round_trip);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
