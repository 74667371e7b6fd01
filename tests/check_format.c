/* tests/check_format.c - the profile writer and reader (format version 4:
 * zstd-compressed sections, varint columns): round trip, compressed and
 * raw, and the reader's rejection of truncated, corrupt, foreign,
 * malformed and forged files. */
#include "common/format.h"
#include "common/varint.h"
#include "common/writer.h"
#include "report/profile.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

static char dir[] = "/tmp/check_format.XXXXXX";
static char errbuf[256];

/* A stack's frames as the reader gives them (from the profile's trie). */
static const uint64_t *stack_frames(const struct ml_profile *p, const struct ml_stack *s)
{
	static uint64_t buf[4096];

	ck_assert_uint_le(s->depth, 4096);
	return ml_profile_stack_frames(p, s, buf);
}

static void setup(void)
{
	strcpy(dir, "/tmp/check_format.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	errbuf[0] = '\0';
}

static void teardown(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[512];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static const char *in_dir(const char *name)
{
	static char paths[4][512];
	static int next;
	char *p = paths[next++ % 4];

	snprintf(p, 512, "%s/%s", dir, name);
	return p;
}

/* Files in the temp dir, "." and ".." excluded. */
static int count_files(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ---- building profiles through the writer ---- */

static const char test_exe[] = "/usr/bin/prog";
static const char test_argv[] = "prog\0-x\0an arg";	/* + the final NUL: 15 bytes */
static const uint8_t test_build_id[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6,
					   7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const uint64_t frames_a[3] = { 0x401010, 0x401234, 0x7f0000001000 };
static const uint64_t frames_b[2] = { 0x401020, 0x7f0000001000 };	/* shares a's root */
static const uint64_t frames_c[5] = { 1, 2, 3, 4, 5 };

static void put_meta(struct ml_writer *w, uint32_t argc, uint32_t max_depth)
{
	struct ml_fmt_meta m = {
		.pid = 4242, .ppid = 17, .start_realtime_ns = 1700000000123456789ull,
		.duration_ns = 987654321, .end_reason = ML_END_SIGNAL, .end_status = -11,
		.max_depth = max_depth, .flags = ML_META_FORKED | ML_META_TRUNCATED_STACKS,
		.exe_len = sizeof(test_exe) - 1, .argv_len = sizeof(test_argv), .argc = argc,
	};

	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_META), 0);
	ck_assert_int_eq(ml_writer_put(w, &m, sizeof(m)), 0);
	ck_assert_int_eq(ml_writer_put(w, test_exe, m.exe_len), 0);
	ck_assert_int_eq(ml_writer_put(w, test_argv, m.argv_len), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

static void put_module(struct ml_writer *w, const char *path, uint64_t lo, uint64_t hi,
		       const uint8_t *bid, uint32_t bid_len, uint32_t flags)
{
	struct ml_fmt_module m = {
		.bias = lo - 0x1000, .lo = lo, .hi = hi, .path_len = (uint32_t)strlen(path),
		.build_id_len = bid_len, .flags = flags,
	};

	ck_assert_int_eq(ml_writer_put(w, &m, sizeof(m)), 0);
	ck_assert_int_eq(ml_writer_put(w, path, m.path_len), 0);
	ck_assert_int_eq(ml_writer_put(w, bid, bid_len), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
}

static void put_modules(struct ml_writer *w)
{
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_MODULES), 0);
	put_module(w, "/usr/bin/prog", 0x400000, 0x402000, test_build_id, 20, ML_MOD_MAIN);
	put_module(w, "/lib/libc.so.6", 0x7f0000000000, 0x7f0000200000, NULL, 0, 0);
	put_module(w, "/gone.so", 0x7f1000000000, 0x7f1000001000, test_build_id, 3,
		   ML_MOD_UNLOADED);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

static void put_records(struct ml_writer *w, uint32_t type, const void *recs, size_t size,
			size_t n);

/* ---- the varint columns (format.h), built as the runtime builds them ---- */

/* n values as varints in the open section. */
static void put_varints(struct ml_writer *w, const uint64_t *v, size_t n)
{
	unsigned char buf[ML_VARINT_MAX];

	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(ml_writer_put(w, buf, ml_varint_put(buf, v[i])), 0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* ADDRESSES, then FRAMES, for nodes[0..n) (node k + 1 is nodes[k]). */
static void put_trie(struct ml_writer *w, const struct ml_fmt_frame *nodes, size_t n)
{
	static uint64_t addrs[200000], col[400000];
	size_t d = 0;

	ck_assert_uint_le(n, 200000);
	for (size_t i = 0; i < n; i++)
		addrs[i] = nodes[i].address;
	qsort(addrs, n, sizeof(addrs[0]), cmp_u64);
	for (size_t i = 0; i < n; i++)
		if (!d || addrs[i] != addrs[d - 1])
			addrs[d++] = addrs[i];
	for (size_t i = d; i-- > 1;)
		col[i] = addrs[i] - addrs[i - 1];
	col[0] = d ? addrs[0] : 0;
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_ADDRESSES), 0);
	put_varints(w, col, d);
	ck_assert_int_eq(ml_writer_records(w, (uint32_t)d), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
	for (size_t i = 0; i < n; i++) {
		uint64_t *hit = bsearch(&nodes[i].address, addrs, d, sizeof(addrs[0]), cmp_u64);

		col[i] = i + 1 - nodes[i].parent;
		col[n + i] = (uint64_t)(hit - addrs);
	}
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_FRAMES), 0);
	put_varints(w, col, 2 * n);
	ck_assert_int_eq(ml_writer_records(w, (uint32_t)n), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

static int cmp_stack_id(const void *a, const void *b)
{
	uint32_t x = ((const struct ml_fmt_stack *)a)->id, y = ((const struct ml_fmt_stack *)b)->id;

	return (x > y) - (x < y);
}

/* The stack ids of the last put_stack_recs, in file order. */
static uint32_t order[4000];
static size_t n_order;

/* STACKS for recs[0..n), sorted by id as a writer must (depth is not
 * stored: the reader takes it from the trie). */
static void put_stack_recs(struct ml_writer *w, const struct ml_fmt_stack *recs, size_t n)
{
	static struct ml_fmt_stack sorted[4000];
	static uint64_t col[12000];

	ck_assert_uint_le(n, 4000);
	memcpy(sorted, recs, n * sizeof(*recs));
	qsort(sorted, n, sizeof(*sorted), cmp_stack_id);
	for (size_t i = 0; i < n; i++) {
		col[i] = sorted[i].id - (i ? sorted[i - 1].id : 0);
		col[n + i] = (uint64_t)sorted[i].leaf - (i ? sorted[i - 1].leaf : 0);	/* mod 2^64 */
		col[2 * n + i] = sorted[i].flags;
		order[i] = sorted[i].id;
	}
	n_order = n;
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_STACKS), 0);
	put_varints(w, col, 3 * n);
	ck_assert_int_eq(ml_writer_records(w, (uint32_t)n), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

/* The index of stack id in the last STACKS written (n_order if none). */
static uint64_t index_of(uint32_t id)
{
	for (size_t i = 0; i < n_order; i++)
		if (order[i] == id)
			return i;
	return n_order;
}

/* COUNTERS for c[0..n), in the order of the stacks (then as given). */
static void put_counter_recs(struct ml_writer *w, const struct ml_fmt_counter *c, size_t n)
{
	static uint64_t col[8 * 100];
	size_t k = 0;
	uint64_t prev = 0;

	ck_assert_uint_le(n, 100);
	for (uint64_t at = 0; at <= n_order; at++)	/* n_order: unknown stacks, last */
		for (size_t i = 0; i < n; i++) {
			uint64_t idx = index_of(c[i].stack_id);

			if (idx != at)
				continue;
			col[k] = idx - prev;
			prev = idx;
			col[n + k] = c[i].kind;
			col[2 * n + k] = c[i].allocs;
			col[3 * n + k] = c[i].alloc_bytes;
			col[4 * n + k] = c[i].live_blocks;
			col[5 * n + k] = ml_fmt_rel_put(c[i].alloc_bytes, c[i].live_blocks,
							c[i].live_bytes);
			col[6 * n + k] = c[i].peak_blocks;
			col[7 * n + k] = ml_fmt_rel_put(c[i].alloc_bytes, c[i].peak_blocks,
							c[i].peak_bytes);
			k++;
		}
	ck_assert_uint_eq(k, n);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_COUNTERS), 0);
	put_varints(w, col, 8 * n);
	ck_assert_int_eq(ml_writer_records(w, (uint32_t)n), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

/* ---- stacks through the call-site trie (FRAMES + STACKS) ---- */

struct tstack {
	uint32_t id, depth, flags;
	const uint64_t *frames;	/* innermost first */
};

#define TRIE_MAX 100000u
#define TRIE_SLOTS (1u << 18)
static struct ml_fmt_frame tnodes[TRIE_MAX + 1];
static uint32_t tslots[TRIE_SLOTS];
static uint32_t tn;

/* The node (parent, address), made if new: the writer's sharing, by a
 * simple hash table of its own. */
static uint32_t tnode(uint32_t parent, uint64_t address)
{
	uint32_t i = (uint32_t)((address * 31 + parent) * 0x9e3779b97f4a7c15ull >> 46);

	for (;; i = (i + 1) % TRIE_SLOTS) {
		uint32_t id = tslots[i];

		if (!id)
			break;
		if (tnodes[id].parent == parent && tnodes[id].address == address)
			return id;
	}
	ck_assert_uint_lt(tn, TRIE_MAX);
	tnodes[++tn] = (struct ml_fmt_frame){ .parent = parent, .address = address };
	tslots[i] = tn;
	return tn;
}

/* ADDRESSES, FRAMES, then STACKS for n stacks, frames shared as the
 * runtime does. */
static void put_stack_set(struct ml_writer *w, const struct tstack *st, size_t n)
{
	static struct ml_fmt_stack recs[4000];

	ck_assert_uint_le(n, 4000);
	tn = 0;
	memset(tslots, 0, sizeof(tslots));
	for (size_t i = 0; i < n; i++) {
		uint32_t leaf = 0;

		for (uint32_t f = st[i].depth; f-- > 0;)
			leaf = tnode(leaf, st[i].frames[f]);
		recs[i] = (struct ml_fmt_stack){ .id = st[i].id, .depth = st[i].depth,
						 .flags = st[i].flags, .leaf = leaf };
	}
	put_trie(w, tnodes + 1, tn);
	put_stack_recs(w, recs, n);
}

/* Stacks 7, 2, 5 (written ascending).  Nodes: 1-3 stack 7 (outermost
 * first), 4 stack 2 below node 1, 5-9 stack 5. */
static void put_stacks(struct ml_writer *w)
{
	const struct tstack st[3] = {
		{ 7, 3, ML_STACK_EXACT_IP, frames_a },
		{ 2, 2, 0, frames_b },
		{ 5, 5, ML_STACK_TRUNCATED, frames_c },
	};

	put_stack_set(w, st, 3);
}

/* Counts that add up: frees = allocs - live (the format derives them). */
static struct ml_fmt_counter counter(uint32_t stack_id, uint32_t kind, uint64_t base)
{
	return (struct ml_fmt_counter){
		.stack_id = stack_id, .kind = kind, .allocs = base + 10, .alloc_bytes = base + 20,
		.frees = 5, .freed_bytes = 14, .live_blocks = base + 5,
		.live_bytes = base + 6, .peak_blocks = base + 7, .peak_bytes = base + 8,
	};
}

static void put_records(struct ml_writer *w, uint32_t type, const void *recs, size_t size,
			size_t n)
{
	ck_assert_int_eq(ml_writer_begin(w, type), 0);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(ml_writer_put(w, (const char *)recs + i * size, size), 0);
		ck_assert_int_eq(ml_writer_record(w), 0);
	}
	ck_assert_int_eq(ml_writer_end(w), 0);
}

static const struct ml_fmt_total test_totals[2] = {
	{ .kind = ML_KIND_HEAP, .allocs = 10, .alloc_bytes = 1000, .frees = 8, .freed_bytes = 800,
	  .live_blocks = 2, .live_bytes = 200, .peak_bytes = 640, .peak_time_ns = 5555 },
	{ .kind = ML_KIND_CUDA_MANAGED, .allocs = 1, .alloc_bytes = 4096, .live_blocks = 1,
	  .live_bytes = 4096, .peak_bytes = 4096, .peak_time_ns = 77 },
};

static const struct ml_fmt_timepoint test_timeline[3] = {
	{ .kind = ML_KIND_HEAP, .time_ns = 10, .live_bytes = 100 },
	{ .kind = ML_KIND_CUDA_MANAGED, .time_ns = 20, .live_bytes = 4096 },
	{ .kind = ML_KIND_HEAP, .time_ns = 30, .live_bytes = 640 },
};

static void put_counters(struct ml_writer *w)
{
	struct ml_fmt_counter c[4] = {
		counter(7, ML_KIND_HEAP, 100), counter(2, ML_KIND_HEAP, 200),
		counter(7, ML_KIND_CUDA_MANAGED, 300), counter(5, ML_KIND_HEAP, 400),
	};

	put_counter_recs(w, c, 4);
}

/* Unknown sections (types 99 and 98): both must be skipped. */
static void put_unknown(struct ml_writer *w, uint32_t type)
{
	ck_assert_int_eq(ml_writer_begin(w, type), 0);
	ck_assert_int_eq(ml_writer_put(w, "whatever!", 9), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

/* The full test profile at path. */
static void write_full(const char *path)
{
	struct ml_writer w;

	ck_assert_int_eq(ml_writer_open(&w, path, 0644), 0);
	put_unknown(&w, 99);
	put_modules(&w);
	put_stacks(&w);
	put_meta(&w, 3, 64);
	put_counters(&w);
	put_records(&w, ML_SEC_TOTALS, test_totals, sizeof(test_totals[0]), 2);
	put_records(&w, ML_SEC_TIMELINE, test_timeline, sizeof(test_timeline[0]), 3);
	put_unknown(&w, 98);	/* SAMPLES is now read (check_lineprof.c tests it) */
	ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
}

/* A small profile: META, STACKS and COUNTERS (compressed, or raw: the
 * sections as they are, for tests that patch them). */
static void write_small_as(const char *path, bool raw)
{
	struct ml_writer w;

	ck_assert_int_eq(raw ? ml_writer_open_raw(&w, path, 0644) : ml_writer_open(&w, path, 0644), 0);
	put_meta(&w, 3, 64);
	put_stacks(&w);
	put_counters(&w);
	ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
}

static void write_small(const char *path)
{
	write_small_as(path, false);
}

static unsigned char *slurp(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *buf;
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static void spit(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* Parses data expecting failure; returns the error line. */
static const char *parse_fails(const void *data, size_t len)
{
	struct ml_profile *p = NULL;
	int rc;

	errbuf[0] = '\0';
	rc = ml_profile_parse(data, len, &p, errbuf, sizeof(errbuf));
	ck_assert_msg(rc == -EINVAL, "len %zu: rc %d, err '%s'", len, rc, errbuf);
	ck_assert_ptr_null(p);
	ck_assert_msg(errbuf[0] && !strchr(errbuf, '\n'), "not one line: '%s'", errbuf);
	return errbuf;
}

/* ---- round trip ---- */

static void check_meta(const struct ml_profile *p)
{
	ck_assert_uint_eq(p->meta.pid, 4242);
	ck_assert_uint_eq(p->meta.ppid, 17);
	ck_assert_uint_eq(p->meta.start_realtime_ns, 1700000000123456789ull);
	ck_assert_uint_eq(p->meta.duration_ns, 987654321);
	ck_assert_uint_eq(p->meta.end_reason, ML_END_SIGNAL);
	ck_assert_int_eq(p->meta.end_status, -11);
	ck_assert_uint_eq(p->meta.max_depth, 64);
	ck_assert_uint_eq(p->meta.flags, ML_META_FORKED | ML_META_TRUNCATED_STACKS);
	ck_assert_uint_eq(p->meta.argc, 3);
	ck_assert_str_eq(p->exe, "/usr/bin/prog");
	ck_assert_str_eq(p->argv[0], "prog");
	ck_assert_str_eq(p->argv[1], "-x");
	ck_assert_str_eq(p->argv[2], "an arg");
	ck_assert_ptr_null(p->argv[3]);
}

static void check_modules(const struct ml_profile *p)
{
	ck_assert_uint_eq(p->n_modules, 3);
	ck_assert_str_eq(p->modules[0].path, "/usr/bin/prog");
	ck_assert_uint_eq(p->modules[0].bias, 0x3ff000);
	ck_assert_uint_eq(p->modules[0].lo, 0x400000);
	ck_assert_uint_eq(p->modules[0].hi, 0x402000);
	ck_assert_uint_eq(p->modules[0].flags, ML_MOD_MAIN);
	ck_assert_uint_eq(p->modules[0].build_id_len, 20);
	ck_assert_mem_eq(p->modules[0].build_id, test_build_id, 20);
	ck_assert_str_eq(p->modules[1].path, "/lib/libc.so.6");
	ck_assert_uint_eq(p->modules[1].build_id_len, 0);
	ck_assert_ptr_null(p->modules[1].build_id);
	ck_assert_str_eq(p->modules[2].path, "/gone.so");
	ck_assert_uint_eq(p->modules[2].flags, ML_MOD_UNLOADED);
	ck_assert_uint_eq(p->modules[2].build_id_len, 3);
	ck_assert_mem_eq(p->modules[2].build_id, test_build_id, 3);
	ck_assert_ptr_eq(ml_profile_module(p, 0x401234), &p->modules[0]);
	ck_assert_ptr_eq(ml_profile_module(p, 0x400000), &p->modules[0]);
	ck_assert_ptr_null(ml_profile_module(p, 0x402000));
	ck_assert_ptr_eq(ml_profile_module(p, 0x7f00001fffff), &p->modules[1]);
	ck_assert_ptr_null(ml_profile_module(p, 0x10));
}

static void check_stacks(const struct ml_profile *p)
{
	const struct ml_stack *s;

	ck_assert_uint_eq(p->n_stacks, 3);
	ck_assert_uint_eq(p->stacks[0].id, 2);
	ck_assert_uint_eq(p->stacks[1].id, 5);
	ck_assert_uint_eq(p->stacks[2].id, 7);
	s = ml_profile_stack(p, 7);
	ck_assert_ptr_eq(s, &p->stacks[2]);
	ck_assert_uint_eq(s->depth, 3);
	ck_assert_uint_eq(s->flags, ML_STACK_EXACT_IP);
	ck_assert_mem_eq(stack_frames(p, s), frames_a, sizeof(frames_a));
	s = ml_profile_stack(p, 2);
	ck_assert_uint_eq(s->depth, 2);
	ck_assert_uint_eq(s->flags, 0);
	ck_assert_mem_eq(stack_frames(p, s), frames_b, sizeof(frames_b));
	s = ml_profile_stack(p, 5);
	ck_assert_uint_eq(s->flags, ML_STACK_TRUNCATED);
	ck_assert_mem_eq(stack_frames(p, s), frames_c, sizeof(frames_c));
	ck_assert_ptr_null(ml_profile_stack(p, 1));
	ck_assert_ptr_null(ml_profile_stack(p, 3));
	ck_assert_ptr_null(ml_profile_stack(p, 8));
	ck_assert_ptr_null(ml_profile_stack(p, 0));
}

static void check_counters(const struct ml_profile *p)
{
	/* In the order of the stacks: 2, 5, 7 (heap, then managed). */
	static const uint32_t ids[4] = { 2, 5, 7, 7 }, kinds[4] = { 0, 0, 0, 2 };
	static const uint64_t bases[4] = { 200, 400, 100, 300 };

	ck_assert_uint_eq(p->n_counters, 4);
	for (int i = 0; i < 4; i++) {
		struct ml_fmt_counter want = counter(ids[i], kinds[i], bases[i]);

		ck_assert_mem_eq(&p->counters[i], &want, sizeof(want));
	}
}

static void check_totals_timeline(const struct ml_profile *p)
{
	ck_assert_uint_eq(p->kinds_present, 1u << ML_KIND_HEAP | 1u << ML_KIND_CUDA_MANAGED);
	ck_assert_mem_eq(&p->totals[ML_KIND_HEAP], &test_totals[0], sizeof(test_totals[0]));
	ck_assert_mem_eq(&p->totals[ML_KIND_CUDA_MANAGED], &test_totals[1],
			 sizeof(test_totals[1]));
	ck_assert_uint_eq(p->totals[ML_KIND_CUDA_DEVICE].allocs, 0);
	ck_assert_uint_eq(p->n_timeline, 3);
	ck_assert_mem_eq(p->timeline, test_timeline, sizeof(test_timeline));
}

START_TEST(round_trip)
{
	const char *path = in_dir("full.prof");
	struct ml_profile *p = NULL;
	struct ml_fmt_header h;
	size_t len;
	unsigned char *raw;

	write_full(path);
	ck_assert_int_eq(count_files(), 1);	/* no temporary left */
	raw = slurp(path, &len);
	memcpy(&h, raw, sizeof(h));
	ck_assert_mem_eq(h.magic, "MEMLINE\0", 8);
	ck_assert_uint_eq(h.version, 4);
	ck_assert_uint_eq(h.header_size, 64);
	ck_assert_uint_eq(h.file_size, len);
	ck_assert_uint_eq(h.section_count, 10);
	ck_assert_uint_eq(h.flags, ML_FMT_ZSTD);
	ck_assert_uint_gt(h.payload_size, len - 64);	/* it compressed */
	ck_assert_uint_eq(h.payload_size % 8, 0);
	ck_assert_uint_eq(h.checksum, ml_fnv1a(ML_FNV_INIT, raw + 64, len - 64));
	free(raw);

	ck_assert_int_eq(ml_profile_load(path, &p, errbuf, sizeof(errbuf)), 0);
	ck_assert_str_eq(p->path, path);
	check_meta(p);
	check_modules(p);
	check_stacks(p);
	check_counters(p);
	check_totals_timeline(p);
	ml_profile_free(p);
}
END_TEST

/* Past the 16 KiB buffer: section headers are patched in the file, and the
 * checksum is computed over several reads. */
START_TEST(round_trip_large)
{
	const char *path = in_dir("large.prof");
	struct ml_profile *p = NULL;
	struct ml_writer w;
	static uint64_t frames[3000][40];
	static struct tstack st[3000];

	/* Stack id: 40 frames, the outer ones shared with a run of others:
	 * frame f is (id >> (f / 8)) << 20 | f, so the 8 outermost are the
	 * same for ids 16 apart, ... */
	for (uint32_t id = 1; id <= 3000; id++) {
		for (uint32_t f = 0; f < 40; f++)
			frames[id - 1][f] = (uint64_t)(id >> (f / 8)) << 20 | f;
		st[id - 1] = (struct tstack){ id, 40 - id % 40, 0, frames[id - 1] + id % 40 };
	}
	ck_assert_int_eq(ml_writer_open(&w, path, 0644), 0);
	put_meta(&w, 3, 40);
	put_stack_set(&w, st, 3000);
	ck_assert_uint_lt(tn, 3000 * 40 / 2);	/* shared: less than half the frames */
	put_counters(&w);
	ck_assert_int_eq(ml_writer_commit(&w, path, false), 0);

	ck_assert_int_eq(ml_profile_load(path, &p, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(p->n_stacks, 3000);
	for (uint32_t id = 1; id <= 3000; id++) {
		const struct ml_stack *s = ml_profile_stack(p, id);

		ck_assert_ptr_nonnull(s);
		ck_assert_uint_eq(s->depth, 40 - id % 40);
		ck_assert_mem_eq(stack_frames(p, s), frames[id - 1] + id % 40, s->depth * sizeof(uint64_t));
	}
	ck_assert_uint_eq(p->n_counters, 4);
	ml_profile_free(p);
}
END_TEST

/* The writer keeps sections until they add up to 1 MiB: a profile below
 * that is one zstd call of known size (its frame says the size), a bigger
 * one a stream started at the 1 MiB mark (its frame does not).  Both read
 * back whole, and so do unknown sections around the big one. */
static void write_padded(const char *path, uint32_t pad_records)
{
	struct ml_writer w;
	static unsigned char rec[1000];

	ck_assert_int_eq(ml_writer_open(&w, path, 0644), 0);
	put_meta(&w, 3, 64);
	ck_assert_int_eq(ml_writer_begin(&w, 97), 0);
	for (uint32_t i = 0; i < pad_records; i++) {
		memset(rec, (int)(i * 37u), sizeof(rec));	/* not all alike: no tiny frame */
		rec[0] = (unsigned char)i;
		rec[1] = (unsigned char)(i >> 8);
		ck_assert_int_eq(ml_writer_put(&w, rec, sizeof(rec)), 0);
		ck_assert_int_eq(ml_writer_record(&w), 0);
	}
	ck_assert_int_eq(ml_writer_end(&w), 0);
	put_stacks(&w);
	put_unknown(&w, 98);
	put_counters(&w);
	ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
}

START_TEST(staged_and_streamed)
{
	const char *path = in_dir("staged.prof");
	static const uint32_t pads[] = { 0, 1000, 3000 };	/* ~0, ~1, ~3 MB */

	for (unsigned k = 0; k < 3; k++) {
		struct ml_profile *p = NULL;
		struct ml_fmt_header h;
		size_t len;

		write_padded(path, pads[k]);
		unsigned char *raw = slurp(path, &len);
		memcpy(&h, raw, sizeof(h));
		unsigned long long size = ZSTD_getFrameContentSize(raw + sizeof(h), len - sizeof(h));
		if (h.payload_size < (1u << 20))
			ck_assert_uint_eq(size, h.payload_size);
		else
			ck_assert_uint_eq(size, ZSTD_CONTENTSIZE_UNKNOWN);
		ck_assert(pads[k] < 3000 || h.payload_size > (2u << 20));
		free(raw);
		ck_assert_int_eq(ml_profile_load(path, &p, errbuf, sizeof(errbuf)), 0);
		ck_assert_uint_eq(p->n_counters, 4);
		ck_assert_uint_eq(p->n_stacks, 3);
		ml_profile_free(p);
	}
}
END_TEST

/* ---- rejection ---- */

START_TEST(truncated_everywhere)
{
	const char *path = in_dir("small.prof");
	unsigned char *raw;
	size_t len;
	char want[64];

	write_small(path);
	raw = slurp(path, &len);
	ck_assert_uint_gt(len, 64);
	for (size_t cut = 1; cut < len; cut++) {
		const char *err = parse_fails(raw, cut);

		ck_assert_msg(!strncmp(err, "truncated: ", 11), "cut %zu: '%s'", cut, err);
		if (cut >= 24) {
			snprintf(want, sizeof(want), "truncated: %zu of %zu bytes", cut, len);
			ck_assert_str_eq(err, want);
		}
	}
	/* The same through a file. */
	spit(in_dir("cut.prof"), raw, 100);
	ck_assert_int_eq(ml_profile_load(in_dir("cut.prof"), &(struct ml_profile *){ NULL },
					 errbuf, sizeof(errbuf)), -EINVAL);
	snprintf(want, sizeof(want), "truncated: 100 of %zu bytes", len);
	ck_assert_str_eq(errbuf, want);
	free(raw);
}
END_TEST

START_TEST(corrupt_every_byte)
{
	const char *path = in_dir("small.prof");
	struct ml_profile *p = NULL;
	unsigned char *raw;
	size_t len;

	write_small(path);
	raw = slurp(path, &len);
	ck_assert_int_eq(ml_profile_parse(raw, len, &p, errbuf, sizeof(errbuf)), 0);
	ml_profile_free(p);
	/* Every byte, every other value: 704 x 255 files. */
	for (size_t i = 0; i < len; i++) {
		for (unsigned flip = 1; flip < 256; flip++) {
			raw[i] ^= (unsigned char)flip;
			parse_fails(raw, len);
			raw[i] ^= (unsigned char)flip;
		}
	}
	/* A payload byte: the checksum catches it. */
	raw[len - 5] ^= 1;
	ck_assert_str_eq(parse_fails(raw, len), "corrupt: checksum mismatch");
	raw[len - 5] ^= 1;
	/* One byte too many. */
	raw = realloc(raw, len + 1);
	ck_assert_ptr_nonnull(raw);
	raw[len] = 0;
	{
		char want[80];

		snprintf(want, sizeof(want), "corrupt: %zu bytes, the header says %zu", len + 1, len);
		ck_assert_str_eq(parse_fails(raw, len + 1), want);
	}
	free(raw);
}
END_TEST

START_TEST(wrong_magic_and_version)
{
	const char *path = in_dir("small.prof");
	unsigned char *raw;
	size_t len;

	write_small(path);
	raw = slurp(path, &len);
	raw[0] = 'X';
	ck_assert_str_eq(parse_fails(raw, len), "not a memline profile");
	ck_assert_str_eq(parse_fails("#!/bin/sh\n", 10), "not a memline profile");
	ck_assert_str_eq(parse_fails("MEM", 3), "truncated: 3 bytes, shorter than the 64-byte header");
	raw[0] = 'M';
	raw[8] = 5;
	ck_assert_str_eq(parse_fails(raw, len), "profile version 5, this memline reads version 4");
	raw[8] = 3;	/* version 3 stored live and peak bytes as they were */
	ck_assert_str_eq(parse_fails(raw, len), "profile version 3, this memline reads version 4");
	free(raw);
}
END_TEST

/* live_bytes and peak_bytes relative to alloc_bytes: every value comes
 * back, the common ones as 0. */
START_TEST(relative_bytes)
{
	static const uint64_t cases[][3] = {	/* alloc_bytes, blocks, bytes */
		{ 100, 0, 0 }, { 100, 0, 7 }, { 100, 1, 100 }, { 100, 2, 40 }, { 100, 1, 0 },
		{ 100, 1, 101 }, { 0, 1, UINT64_MAX }, { UINT64_MAX, 1, 0 },
		{ UINT64_MAX, 3, UINT64_MAX }, { 5, 1, UINT64_MAX - 3 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = ml_fmt_rel_put(cases[i][0], cases[i][1], cases[i][2]);
		ck_assert_uint_eq(ml_fmt_rel_get(cases[i][0], cases[i][1], v), cases[i][2]);
	}
	ck_assert_uint_eq(ml_fmt_rel_put(4096, 1, 4096), 0);	/* all live */
	ck_assert_uint_eq(ml_fmt_rel_put(4096, 0, 0), 0);	/* none */
	ck_assert_uint_eq(ml_fmt_rel_put(4096, 3, 4000), 96);
}
END_TEST

START_TEST(empty_dir_missing)
{
	struct ml_profile *p = NULL;

	spit(in_dir("empty.prof"), "", 0);
	ck_assert_int_eq(ml_profile_load(in_dir("empty.prof"), &p, errbuf, sizeof(errbuf)), -EINVAL);
	ck_assert_str_eq(errbuf, "empty file: not a memline profile");
	ck_assert_int_eq(ml_profile_load(dir, &p, errbuf, sizeof(errbuf)), -EISDIR);
	ck_assert_str_eq(errbuf, "is a directory, not a memline profile");
	ck_assert_int_eq(ml_profile_load(in_dir("nope.prof"), &p, errbuf, sizeof(errbuf)), -ENOENT);
	ck_assert_str_eq(errbuf, "cannot open: No such file or directory");
	ck_assert_ptr_null(p);
	/* err may be NULL. */
	ck_assert_int_eq(ml_profile_load(in_dir("nope.prof"), &p, NULL, 0), -ENOENT);
}
END_TEST

/* Notes round trip; a note with a NUL or a newline, or that does not fit,
 * is corrupt.  A FIFO and a device are refused without waiting. */
static void write_with_notes(const char *path, const char *const *notes, size_t n)
{
	struct ml_writer w;

	ck_assert_int_eq(ml_writer_open(&w, path, 0644), 0);
	put_meta(&w, 3, 64);
	put_stacks(&w);
	ck_assert_int_eq(ml_writer_begin(&w, ML_SEC_NOTES), 0);
	for (size_t i = 0; i < n; i++) {
		struct ml_fmt_note r = { .len = (uint32_t)strlen(notes[i]) };

		ck_assert_int_eq(ml_writer_put(&w, &r, sizeof(r)), 0);
		ck_assert_int_eq(ml_writer_put(&w, notes[i], r.len), 0);
		ck_assert_int_eq(ml_writer_record(&w), 0);
	}
	ck_assert_int_eq(ml_writer_end(&w), 0);
	ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
}

START_TEST(notes_and_file_kinds)
{
	static const char *const good[] = { "malloc is defined by /x ahead of memline", "", "two" };
	static const char *const bad_nl[] = { "line one\nline two" };
	struct ml_profile *p = NULL;

	write_with_notes(in_dir("notes.prof"), good, 3);
	ck_assert_int_eq(ml_profile_load(in_dir("notes.prof"), &p, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(p->n_notes, 3);
	for (size_t i = 0; i < 3; i++)
		ck_assert_str_eq(p->notes[i], good[i]);
	ml_profile_free(p);
	p = NULL;
	write_with_notes(in_dir("notes.prof"), bad_nl, 1);
	ck_assert_int_eq(ml_profile_load(in_dir("notes.prof"), &p, errbuf, sizeof(errbuf)), -EINVAL);
	ck_assert_str_eq(errbuf, "corrupt: note 0 holds a NUL or a newline");
	ck_assert_int_eq(mkfifo(in_dir("fifo.prof"), 0644), 0);
	ck_assert_int_eq(ml_profile_load(in_dir("fifo.prof"), &p, errbuf, sizeof(errbuf)), -EINVAL);
	ck_assert_str_eq(errbuf, "is a FIFO; memline reads profiles from regular files only");
	ck_assert_int_eq(ml_profile_load("/dev/zero", &p, errbuf, sizeof(errbuf)), -EINVAL);
	ck_assert_str_eq(errbuf, "is a character device; memline reads profiles from regular files only");
	ck_assert_ptr_null(p);
}
END_TEST

/* Sets a field of the small profile, repairs the checksum, returns the error. */
static const char *patched_error(unsigned char *raw, size_t len, size_t off, uint64_t value,
				 size_t width)
{
	static unsigned char copy[4096];
	struct ml_fmt_header h;

	ck_assert_uint_le(len, sizeof(copy));
	memcpy(copy, raw, len);
	memcpy(copy + off, &value, width);
	memcpy(&h, copy, sizeof(h));
	h.checksum = ml_fnv1a(ML_FNV_INIT, copy + 64, len - 64);
	memcpy(copy, &h, sizeof(h));
	return parse_fails(copy, len);
}

/* The offset of the first section of type in a raw profile. */
static size_t sec_at(const unsigned char *raw, size_t len, uint32_t type)
{
	for (size_t off = 64; off + 16 <= len;) {
		struct ml_fmt_section sh;

		memcpy(&sh, raw + off, sizeof(sh));
		if (sh.type == type)
			return off;
		off += 16 + sh.size;
	}
	ck_abort_msg("no section of type %u", type);
	return 0;
}

START_TEST(section_table)
{
	const char *path = in_dir("small.prof");
	unsigned char *raw;
	size_t len, meta, frames, addrs, stacks, counters;
	char want[128];

	write_small_as(path, true);	/* sections as they are: their bytes can be patched */
	raw = slurp(path, &len);
	meta = sec_at(raw, len, ML_SEC_META);
	addrs = sec_at(raw, len, ML_SEC_ADDRESSES);
	frames = sec_at(raw, len, ML_SEC_FRAMES);
	stacks = sec_at(raw, len, ML_SEC_STACKS);
	counters = sec_at(raw, len, ML_SEC_COUNTERS);
	ck_assert_uint_eq(meta, 64);
	ck_assert_str_eq(patched_error(raw, len, 32, 6, 4), "corrupt: 5 sections, the header says 6");
	ck_assert_str_eq(patched_error(raw, len, 12, 72, 4), "corrupt: header size 72, expected 64");
	ck_assert_str_eq(patched_error(raw, len, 16, 10, 8),
			 "corrupt: file size 10 is smaller than the header");
	ck_assert_str_eq(patched_error(raw, len, 36, 2, 4),
			 "corrupt: reserved header fields are not zero");
	ck_assert_str_eq(patched_error(raw, len, 63, 1, 1),
			 "corrupt: reserved header fields are not zero");
	snprintf(want, sizeof(want), "corrupt: payload of %zu bytes, the header says 8", len - 64);
	ck_assert_str_eq(patched_error(raw, len, 40, 8, 8), want);
	/* Raw sections claimed compressed: not a zstd frame. */
	patched_error(raw, len, 36, ML_FMT_ZSTD, 4);
	ck_assert_msg(!strncmp(errbuf, "corrupt: the compressed sections do not decompress", 50),
		      "%s", errbuf);
	snprintf(want, sizeof(want), "corrupt: section 0 (type 1) has size 97, %zu bytes left",
		 len - 80);
	ck_assert_str_eq(patched_error(raw, len, meta + 8, 97, 8), want);
	snprintf(want, sizeof(want),
		 "corrupt: section 0 (type 1) has size 4611686018427387904, %zu bytes left", len - 80);
	ck_assert_str_eq(patched_error(raw, len, meta + 8, 1ull << 62, 8), want);
	/* META exe_len (payload offset 48) 20: 64 + 20 + 15 bytes need 104, not 96. */
	ck_assert_str_eq(patched_error(raw, len, meta + 16 + 48, 20, 4),
			 "corrupt: META section size 96 does not match its lengths");
	ck_assert_str_eq(patched_error(raw, len, meta + 16 + 48, 14, 4),
			 "corrupt: META argv holds 4 strings, argc is 3");
	ck_assert_str_eq(patched_error(raw, len, meta + 4, 2, 4),
			 "corrupt: META section has 2 records, expected 1");
	/* STACKS as an unknown type: skipped, so the counters lose their stacks. */
	ck_assert_str_eq(patched_error(raw, len, stacks, 99, 4),
			 "corrupt: counter 0 refers to stack 0 of 0");
	ck_assert_str_eq(patched_error(raw, len, stacks, ML_SEC_META, 4), "corrupt: two META sections");
	/* FRAMES as an unknown type: the stacks' leaves point nowhere (stack 2,
	 * the first, ends at node 4). */
	ck_assert_str_eq(patched_error(raw, len, frames, 99, 4),
			 "corrupt: stack 2 has leaf 4, the trie has 0 frame nodes");
	/* ADDRESSES as an unknown type: the nodes' addresses point nowhere. */
	ck_assert_str_eq(patched_error(raw, len, addrs, 99, 4),
			 "corrupt: frame node 1 has address 8 of 0");
	/* Counts past what the columns hold. */
	{
		struct ml_fmt_section fs, cs;

		memcpy(&fs, raw + frames, sizeof(fs));
		memcpy(&cs, raw + counters, sizeof(cs));
		snprintf(want, sizeof(want), "corrupt: FRAMES has 100 records in %llu bytes",
			 (unsigned long long)fs.size);
		ck_assert_str_eq(patched_error(raw, len, frames + 4, 100, 4), want);
		snprintf(want, sizeof(want), "corrupt: COUNTERS has 100 records in %llu bytes",
			 (unsigned long long)cs.size);
		ck_assert_str_eq(patched_error(raw, len, counters + 4, 100, 4), want);
	}
	/* The last section cut by 8 bytes: what is left is not a section header. */
	{
		struct ml_fmt_section sh;

		memcpy(&sh, raw + counters, sizeof(sh));
		snprintf(want, sizeof(want), "corrupt: section header 5 cut short at byte %zu",
			 len - 8);
		ck_assert_str_eq(patched_error(raw, len, counters + 8, sh.size - 8, 8), want);
	}
	free(raw);
}
END_TEST

/* Compressed: a forged payload size, and bytes that are not zstd's. */
START_TEST(compressed_payload)
{
	const char *path = in_dir("small.prof");
	unsigned char *raw;
	size_t len;
	struct ml_fmt_header h;
	char want[128];

	write_small(path);
	raw = slurp(path, &len);
	memcpy(&h, raw, sizeof(h));
	/* One byte more or less than the sections decompress to. */
	snprintf(want, sizeof(want), "corrupt: the compressed sections do not decompress to %llu bytes",
		 (unsigned long long)h.payload_size + 8);
	ck_assert_int_eq(strncmp(patched_error(raw, len, 40, h.payload_size + 8, 8), want,
				 strlen(want)), 0);
	snprintf(want, sizeof(want), "corrupt: the compressed sections do not decompress to %llu bytes",
		 (unsigned long long)h.payload_size - 8);
	ck_assert_int_eq(strncmp(patched_error(raw, len, 40, h.payload_size - 8, 8), want,
				 strlen(want)), 0);
	/* A claim far past any real compression ratio: refused before a byte
	 * of memory is taken for it. */
	snprintf(want, sizeof(want), "corrupt: the header says %llu bytes of sections in %zu compressed",
		 1ull << 40, len - 64);
	ck_assert_str_eq(patched_error(raw, len, 40, 1ull << 40, 8), want);
	/* The zstd frame's own content checksum catches a change the file
	 * checksum was repaired for. */
	patched_error(raw, len, len - 3, raw[len - 3] ^ 0x40, 1);
	ck_assert_msg(!strncmp(errbuf, "corrupt: the compressed sections do not decompress", 50),
		      "%s", errbuf);
	free(raw);
}
END_TEST

/* A section header that straddles the writer's buffer (16 KiB): its head
 * is flushed to the file, its tail still buffered when the section ends.
 * Every section's header must come out right, at every split. */
START_TEST(header_straddles_buffer)
{
	const char *path = in_dir("straddle.prof");
	static unsigned char filler[16384];
	for (size_t split = 1; split < sizeof(struct ml_fmt_section); split++) {
		struct ml_writer w;
		struct ml_fmt_section sh;
		unsigned char *raw;
		size_t len;
		ck_assert_int_eq(ml_writer_open_raw(&w, path, 0644), 0);
		/* 64 (file header) + 16 + payload + split = 16384: the second
		 * header's first split bytes end the buffer. */
		size_t payload = 16384 - 64 - 16 - split;
		payload &= ~(size_t)7;
		size_t at = 64 + 16 + payload;
		ml_writer_begin(&w, 99);
		ml_writer_put(&w, filler, payload);
		ml_writer_record(&w);
		ml_writer_end(&w);
		ml_writer_begin(&w, 98);
		ml_writer_put(&w, filler, 40);
		ml_writer_record(&w);
		ml_writer_end(&w);
		ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
		raw = slurp(path, &len);
		memcpy(&sh, raw + at, sizeof(sh));
		ck_assert_uint_eq(sh.type, 98);
		ck_assert_uint_eq(sh.count, 1);
		ck_assert_uint_eq(sh.size, 40);
		free(raw);
	}
}
END_TEST

/* ---- well-checksummed files with bad structure ---- */

/* Writes the profile built by fn and returns the reader's error for it. */
static const char *structure_error(void (*fn)(struct ml_writer *))
{
	const char *path = in_dir("bad.prof");
	struct ml_profile *p = NULL;
	struct ml_writer w;
	int rc;

	n_order = 0;	/* no STACKS written yet */
	ck_assert_int_eq(ml_writer_open(&w, path, 0644), 0);
	fn(&w);
	ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
	rc = ml_profile_load(path, &p, errbuf, sizeof(errbuf));
	ck_assert_msg(rc == -EINVAL, "rc %d", rc);
	ck_assert_ptr_null(p);
	return errbuf;
}

static void no_meta(struct ml_writer *w)
{
	put_stacks(w);
}

static void unknown_stack(struct ml_writer *w)
{
	struct ml_fmt_counter c = counter(6, ML_KIND_HEAP, 0);

	put_meta(w, 3, 64);
	put_stacks(w);
	put_counter_recs(w, &c, 1);
}

static void no_stacks_section(struct ml_writer *w)
{
	put_meta(w, 3, 64);
	put_counters(w);
}

static void bad_counter_kind(struct ml_writer *w)
{
	struct ml_fmt_counter c = counter(7, ML_KIND_CPU, 0);

	put_meta(w, 3, 64);
	put_stacks(w);
	put_counter_recs(w, &c, 1);
}

static void duplicate_counter(struct ml_writer *w)
{
	struct ml_fmt_counter c[2] = { counter(5, 1, 0), counter(5, 1, 9) };

	put_meta(w, 3, 64);
	put_stacks(w);
	put_counter_recs(w, c, 2);
}

static void bad_total_kind(struct ml_writer *w)
{
	struct ml_fmt_total t = { .kind = ML_KIND_CPU };

	put_meta(w, 3, 64);
	put_records(w, ML_SEC_TOTALS, &t, sizeof(t), 1);
}

/* A cuda_gpu (combined GPU total) counter on a stack with no GPU kind's
 * counter: stack 5 has only a heap counter and a pinned one. */
static void gpu_counter_alone(struct ml_writer *w)
{
	struct ml_fmt_counter c[3] = { counter(5, ML_KIND_HEAP, 0),
				       counter(5, ML_KIND_CUDA_PINNED, 0),
				       counter(5, ML_KIND_CUDA_GPU, 0) };

	put_meta(w, 3, 64);
	put_stacks(w);
	put_counter_recs(w, c, 3);
}

/* A cuda_gpu total with no GPU kind's total (pinned is not a GPU kind). */
static void gpu_total_alone(struct ml_writer *w)
{
	struct ml_fmt_total t[2] = { { .kind = ML_KIND_CUDA_PINNED, .allocs = 1 },
				     { .kind = ML_KIND_CUDA_GPU, .allocs = 1 } };

	put_meta(w, 3, 64);
	put_records(w, ML_SEC_TOTALS, t, sizeof(t[0]), 2);
}

/* Both valid: the GPU counter's stack has a device counter. */
static void gpu_total_ok(struct ml_writer *w)
{
	struct ml_fmt_counter c[2] = { counter(5, ML_KIND_CUDA_DEVICE, 0),
				       counter(5, ML_KIND_CUDA_GPU, 0) };
	struct ml_fmt_total t[2] = { { .kind = ML_KIND_CUDA_DEVICE, .allocs = 1 },
				     { .kind = ML_KIND_CUDA_GPU, .allocs = 1 } };

	put_meta(w, 3, 64);
	put_stacks(w);
	put_counter_recs(w, c, 2);
	put_records(w, ML_SEC_TOTALS, t, sizeof(t[0]), 2);
}

static void duplicate_total(struct ml_writer *w)
{
	put_meta(w, 3, 64);
	put_records(w, ML_SEC_TOTALS, &test_totals[1], sizeof(test_totals[1]), 1);
	put_records(w, ML_SEC_TOTALS, &test_totals[0], sizeof(test_totals[0]), 1);
}

static void same_total_twice(struct ml_writer *w)
{
	struct ml_fmt_total t[2] = { test_totals[1], test_totals[1] };

	put_meta(w, 3, 64);
	put_records(w, ML_SEC_TOTALS, t, sizeof(t[0]), 2);
}

static void bad_timeline_kind(struct ml_writer *w)
{
	struct ml_fmt_timepoint t = { .kind = ML_KIND_CPU };

	put_meta(w, 3, 64);
	put_records(w, ML_SEC_TIMELINE, &t, sizeof(t), 1);
}

static void duplicate_stack(struct ml_writer *w)
{
	const struct tstack st[3] = {
		{ 5, 3, 0, frames_a }, { 2, 2, 0, frames_a + 1 }, { 5, 1, 0, frames_b },
	};

	put_meta(w, 3, 64);
	put_stack_set(w, st, 3);
}

static void stack_id_zero(struct ml_writer *w)
{
	const struct tstack st = { 0, 3, 0, frames_a };

	put_meta(w, 3, 64);
	put_stack_set(w, &st, 1);
}

static void too_deep(struct ml_writer *w)
{
	put_meta(w, 3, 4);
	put_stacks(w);	/* stack 5 has 5 frames */
}

/* Raw FRAMES nodes and STACKS records, as given. */
static void put_raw(struct ml_writer *w, const struct ml_fmt_frame *nodes, size_t n_nodes,
		    const struct ml_fmt_stack *stacks, size_t n_stacks)
{
	put_meta(w, 3, 0);
	if (n_nodes)
		put_trie(w, nodes, n_nodes);
	put_stack_recs(w, stacks, n_stacks);
}

/* A chain of three nodes 1 <- 2 <- 3 and a branch 1 <- 4. */
static const struct ml_fmt_frame chain[4] = {
	{ 0, 0, 0x10 }, { 1, 0, 0x20 }, { 2, 0, 0x30 }, { 1, 0, 0x40 },
};

static void leaf_out_of_range(struct ml_writer *w)
{
	const struct ml_fmt_stack s[2] = { { .id = 1, .depth = 2, .leaf = 4 },
					   { .id = 2, .depth = 1, .leaf = 5 } };

	put_raw(w, chain, 4, s, 2);
}

/* Stacks with frames but no FRAMES section at all. */
static void leaf_without_frames(struct ml_writer *w)
{
	const struct ml_fmt_stack s = { .id = 3, .depth = 1, .leaf = 1 };

	put_raw(w, NULL, 0, &s, 1);
}

static void parent_is_self(struct ml_writer *w)
{
	const struct ml_fmt_frame nodes[3] = { { 0, 0, 0x10 }, { 1, 0, 0x20 }, { 3, 0, 0x30 } };
	const struct ml_fmt_stack s = { .id = 1, .depth = 1, .leaf = 1 };

	put_raw(w, nodes, 3, &s, 1);
}

static void parent_later(struct ml_writer *w)
{
	const struct ml_fmt_frame nodes[3] = { { 2, 0, 0x10 }, { 0, 0, 0x20 }, { 1, 0, 0x30 } };
	const struct ml_fmt_stack s = { .id = 1, .depth = 1, .leaf = 2 };

	put_raw(w, nodes, 3, &s, 1);
}

/* FRAMES says 4 nodes but holds the columns of 3. */
static void frames_columns_short(struct ml_writer *w)
{
	const uint64_t addrs[3] = { 0x10, 0x10, 0x10 }, col[6] = { 1, 1, 1, 0, 1, 2 };
	const struct ml_fmt_stack s = { .id = 1, .leaf = 1 };

	put_meta(w, 3, 0);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_ADDRESSES), 0);
	put_varints(w, addrs, 3);
	ck_assert_int_eq(ml_writer_records(w, 3), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_FRAMES), 0);
	put_varints(w, col, 6);
	ck_assert_int_eq(ml_writer_records(w, 4), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
	put_stack_recs(w, &s, 1);
}

/* A FRAMES node whose address index is past ADDRESSES. */
static void address_out_of_range(struct ml_writer *w)
{
	const uint64_t addrs[1] = { 0x10 }, frames[2] = { 1, 1 };
	const struct ml_fmt_stack s = { .id = 1, .leaf = 1 };

	put_meta(w, 3, 0);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_ADDRESSES), 0);
	put_varints(w, addrs, 1);
	ck_assert_int_eq(ml_writer_records(w, 1), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_FRAMES), 0);
	put_varints(w, frames, 2);
	ck_assert_int_eq(ml_writer_records(w, 1), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
	put_stack_recs(w, &s, 1);
}

/* ADDRESSES not ascending (a zero delta). */
static void addresses_not_ascending(struct ml_writer *w)
{
	const uint64_t addrs[2] = { 0x10, 0 };

	put_meta(w, 3, 0);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_ADDRESSES), 0);
	put_varints(w, addrs, 2);
	ck_assert_int_eq(ml_writer_records(w, 2), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

/* STACKS counts 3 records but holds the columns of 2. */
static void stack_count_lies(struct ml_writer *w)
{
	const uint64_t col[6] = { 1, 1, 3, 3, 0, 0 };

	put_meta(w, 3, 64);
	put_trie(w, chain, 4);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_STACKS), 0);
	put_varints(w, col, 6);
	ck_assert_int_eq(ml_writer_records(w, 3), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

/* A varint that never ends (all bytes 0x80) in COUNTERS. */
static void endless_varint(struct ml_writer *w)
{
	unsigned char bytes[64];

	memset(bytes, 0x80, sizeof(bytes));
	put_meta(w, 3, 64);
	put_stacks(w);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_COUNTERS), 0);
	ck_assert_int_eq(ml_writer_put(w, bytes, sizeof(bytes)), 0);
	ck_assert_int_eq(ml_writer_records(w, 1), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

/* A counter with more live blocks than allocations. */
static void live_above_allocs(struct ml_writer *w)
{
	struct ml_fmt_counter c = counter(7, ML_KIND_HEAP, 0);

	c.live_blocks = c.allocs + 1;
	put_meta(w, 3, 64);
	put_stacks(w);
	put_counter_recs(w, &c, 1);
}

/* A stack marked lost (ML_STACK_LOST) that has frames. */
static void lost_with_frames(struct ml_writer *w)
{
	const struct ml_fmt_stack s = { .id = 3, .leaf = 2, .flags = ML_STACK_LOST };

	put_meta(w, 3, 64);
	put_trie(w, chain, 4);
	put_stack_recs(w, &s, 1);
}

/* Valid odd cases: an empty stack (depth 0, leaf 0) without FRAMES; nodes
 * no stack ends at; two stacks with one leaf share their frames. */
START_TEST(trie_edge_cases)
{
	const char *path = in_dir("edge.prof");
	struct ml_profile *p = NULL;
	struct ml_writer w;
	const struct ml_fmt_stack empty = { .id = 4, .depth = 0, .leaf = 0 };
	const struct ml_fmt_stack s[4] = { { .id = 8, .depth = 3, .leaf = 3 },
					   { .id = 6, .depth = 2, .leaf = 4 },
					   { .id = 5, .depth = 3, .leaf = 3, .flags = ML_STACK_EXACT_IP },
					   { .id = 1, .depth = 0, .leaf = 0 } };
	static const uint64_t want8[3] = { 0x30, 0x20, 0x10 }, want6[2] = { 0x40, 0x10 };

	ck_assert_int_eq(ml_writer_open(&w, path, 0644), 0);
	put_raw(&w, NULL, 0, &empty, 1);
	ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
	ck_assert_int_eq(ml_profile_load(path, &p, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(p->n_stacks, 1);
	ck_assert_uint_eq(p->stacks[0].depth, 0);
	ck_assert_uint_eq(p->stacks[0].leaf, 0);
	ml_profile_free(p);

	ck_assert_int_eq(ml_writer_open(&w, path, 0644), 0);
	put_raw(&w, chain, 4, s, 4);
	ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
	ck_assert_int_eq(ml_profile_load(path, &p, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(p->n_stacks, 4);
	ck_assert_uint_eq(ml_profile_stack(p, 8)->depth, 3);
	ck_assert_mem_eq(stack_frames(p, ml_profile_stack(p, 8)), want8, sizeof(want8));
	ck_assert_mem_eq(stack_frames(p, ml_profile_stack(p, 6)), want6, sizeof(want6));
	ck_assert_uint_eq(ml_profile_stack(p, 5)->leaf, ml_profile_stack(p, 8)->leaf);
	ck_assert_uint_eq(ml_profile_stack(p, 5)->flags, ML_STACK_EXACT_IP);
	ck_assert_uint_eq(ml_profile_stack(p, 1)->depth, 0);
	ml_profile_free(p);
}
END_TEST

static void bad_argc(struct ml_writer *w)
{
	put_meta(w, 2, 64);
}

static void module_path_overflow(struct ml_writer *w)
{
	struct ml_fmt_module m = { .lo = 1, .hi = 2, .path_len = 0xfffffff0u, .build_id_len = 0x20 };

	put_meta(w, 3, 64);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_MODULES), 0);
	ck_assert_int_eq(ml_writer_put(w, &m, sizeof(m)), 0);
	ck_assert_int_eq(ml_writer_put(w, "/x", 2), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

static void module_backwards(struct ml_writer *w)
{
	put_meta(w, 3, 64);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_MODULES), 0);
	put_module(w, "/x", 0x5000, 0x4000, NULL, 0, 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

static void two_metas(struct ml_writer *w)
{
	put_meta(w, 3, 64);
	put_meta(w, 3, 64);
}

static void counters_size_mismatch(struct ml_writer *w)
{
	struct ml_fmt_counter c = counter(7, 0, 0);

	put_meta(w, 3, 64);
	put_stacks(w);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_COUNTERS), 0);
	ck_assert_int_eq(ml_writer_put(w, &c, sizeof(c)), 0);
	ck_assert_int_eq(ml_writer_put(w, &c, 8), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

static void bad_end_reason(struct ml_writer *w)
{
	struct ml_fmt_meta m = { .end_reason = 0 };

	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_META), 0);
	ck_assert_int_eq(ml_writer_put(w, &m, sizeof(m)), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

/* PYTHON with one code object (id 1), for the @profile sections. */
static void put_python(struct ml_writer *w)
{
	struct ml_fmt_python py = { .version = 0x030b02f0, .linetable = ML_PY_LINETABLE_311,
				    .cwd_len = 4, .codes = 1 };
	struct ml_fmt_pycode pc = { .id = 1, .firstlineno = 3, .filename_len = 4, .name_len = 1 };
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_PYTHON), 0);
	ck_assert_int_eq(ml_writer_put(w, &py, sizeof(py)), 0);
	ck_assert_int_eq(ml_writer_put(w, "/src", 4), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_PYCODE), 0);
	ck_assert_int_eq(ml_writer_put(w, &pc, sizeof(pc)), 0);
	ck_assert_int_eq(ml_writer_put(w, "a.pyf", 5), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

/* PYFUNCS naming code code_id (mechanism mech), and one PYLINES record
 * for line_code (none when 0). */
static void put_pyprof(struct ml_writer *w, uint32_t mech, uint32_t code_id, uint32_t line_code,
		       uint64_t hits, uint64_t ended)
{
	struct ml_fmt_pyprof h = { .mechanism = mech, .events = hits };
	struct ml_fmt_pyfunc f = { .code_id = code_id, .calls = 1 };
	struct ml_fmt_pyline l = { .code_id = line_code, .line = 4, .hits = hits, .ended = ended };
	put_meta(w, 3, 64);
	put_python(w);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_PYFUNCS), 0);
	ck_assert_int_eq(ml_writer_put(w, &h, sizeof(h)), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_put(w, &f, sizeof(f)), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
	if (!line_code)
		return;
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_PYLINES), 0);
	ck_assert_int_eq(ml_writer_put(w, &l, sizeof(l)), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

static void pyfuncs_without_python(struct ml_writer *w)
{
	struct ml_fmt_pyprof h = { .mechanism = ML_PYPROF_SETTRACE };
	put_meta(w, 3, 64);
	ck_assert_int_eq(ml_writer_begin(w, ML_SEC_PYFUNCS), 0);
	ck_assert_int_eq(ml_writer_put(w, &h, sizeof(h)), 0);
	ck_assert_int_eq(ml_writer_record(w), 0);
	ck_assert_int_eq(ml_writer_end(w), 0);
}

static void pyfuncs_bad_mechanism(struct ml_writer *w)
{
	put_pyprof(w, 7, 1, 1, 2, 2);
}

static void pyfuncs_unknown_code(struct ml_writer *w)
{
	put_pyprof(w, ML_PYPROF_MONITORING, 9, 0, 0, 0);
}

static void pylines_undecorated_code(struct ml_writer *w)
{
	put_pyprof(w, ML_PYPROF_SETTRACE, 1, 2, 2, 2);
}

static void pylines_more_ended_than_hits(struct ml_writer *w)
{
	put_pyprof(w, ML_PYPROF_SETTRACE, 1, 1, 2, 3);
}

START_TEST(pyprof_sections)
{
	ck_assert_str_eq(structure_error(pyfuncs_without_python),
			 "corrupt: PYFUNCS without PYTHON");
	ck_assert_str_eq(structure_error(pyfuncs_bad_mechanism),
			 "corrupt: PYFUNCS names line-event mechanism 7");
	ck_assert_str_eq(structure_error(pyfuncs_unknown_code),
			 "corrupt: PYFUNCS record 1 names Python code 9, which PYCODE lacks");
	ck_assert_str_eq(structure_error(pylines_undecorated_code),
			 "corrupt: PYLINES record 0 (code 2, line 4, 2 hits, 2 ended)");
	ck_assert_str_eq(structure_error(pylines_more_ended_than_hits),
			 "corrupt: PYLINES record 0 (code 1, line 4, 2 hits, 3 ended)");
	/* A good one reads back. */
	const char *path = in_dir("pyprof.prof");
	struct ml_profile *p = NULL;
	struct ml_writer w;
	n_order = 0;
	ck_assert_int_eq(ml_writer_open(&w, path, 0644), 0);
	put_pyprof(&w, ML_PYPROF_MONITORING, 1, 1, 5, 4);
	ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
	ck_assert_int_eq(ml_profile_load(path, &p, errbuf, sizeof(errbuf)), 0);
	ck_assert(p->has_pyprof);
	ck_assert_uint_eq(p->pyprof.mechanism, ML_PYPROF_MONITORING);
	ck_assert_uint_eq(p->n_pyfuncs, 1);
	ck_assert_uint_eq(p->pyfuncs[0].code_id, 1);
	ck_assert_uint_eq(p->n_pylines, 1);
	ck_assert_uint_eq(p->pylines[0].hits, 5);
	ck_assert_uint_eq(p->pylines[0].ended, 4);
	ml_profile_free(p);
}
END_TEST

START_TEST(malformed_structure)
{
	ck_assert_str_eq(structure_error(no_meta), "corrupt: no META section");
	ck_assert_str_eq(structure_error(two_metas), "corrupt: two META sections");
	ck_assert_str_eq(structure_error(unknown_stack),
			 "corrupt: counter 0 refers to stack 3 of 3");
	ck_assert_str_eq(structure_error(no_stacks_section),
			 "corrupt: counter 0 refers to stack 0 of 0");
	ck_assert_str_eq(structure_error(bad_counter_kind), "corrupt: counter 0 has kind 12");
	ck_assert_str_eq(structure_error(duplicate_counter),
			 "corrupt: two counters for stack 5, kind 1");
	ck_assert_str_eq(structure_error(bad_total_kind), "corrupt: total 0 has kind 12");
	ck_assert_str_eq(structure_error(duplicate_total), "corrupt: two TOTALS sections");
	ck_assert_str_eq(structure_error(gpu_counter_alone),
			 "corrupt: cuda_gpu counter 2 (stack 5) without a counter of a GPU kind on "
			 "its stack");
	ck_assert_str_eq(structure_error(gpu_total_alone),
			 "corrupt: a cuda_gpu total without any GPU kind's total");
	{
		const char *path = in_dir("gpu_ok.prof");
		struct ml_profile *p = NULL;
		struct ml_writer w;
		ck_assert_int_eq(ml_writer_open(&w, path, 0644), 0);
		gpu_total_ok(&w);
		ck_assert_int_eq(ml_writer_commit(&w, path, true), 0);
		ck_assert_int_eq(ml_profile_load(path, &p, errbuf, sizeof(errbuf)), 0);
		ck_assert_uint_eq(p->totals[ML_KIND_CUDA_GPU].allocs, 1);
		ml_profile_free(p);
	}
	ck_assert_str_eq(structure_error(same_total_twice), "corrupt: two totals for kind 2");
	ck_assert_str_eq(structure_error(bad_timeline_kind),
			 "corrupt: timeline point 0 has kind 12");
	ck_assert_str_eq(structure_error(duplicate_stack),
			 "corrupt: STACKS ids do not ascend at record 2");
	ck_assert_str_eq(structure_error(stack_id_zero), "corrupt: stack 0 has id 0");
	ck_assert_str_eq(structure_error(too_deep),
			 "corrupt: stack 5 is 5 frames deep, max_depth is 4");
	ck_assert_str_eq(structure_error(leaf_out_of_range),
			 "corrupt: stack 2 has leaf 5, the trie has 4 frame nodes");
	ck_assert_str_eq(structure_error(leaf_without_frames),
			 "corrupt: stack 3 has leaf 1, the trie has 0 frame nodes");
	ck_assert_str_eq(structure_error(parent_is_self), "corrupt: frame node 3 has parent 3");
	ck_assert_str_eq(structure_error(parent_later), "corrupt: frame node 1 has parent 2");
	/* (the section's zero padding reads as two more varints, zeros) */
	ck_assert_str_eq(structure_error(frames_columns_short),
			 "corrupt: frame node 4 has parent 4");
	ck_assert_str_eq(structure_error(stack_count_lies),
			 "corrupt: STACKS has 3 records in 8 bytes");
	ck_assert_str_eq(structure_error(address_out_of_range),
			 "corrupt: frame node 1 has address 1 of 1");
	ck_assert_str_eq(structure_error(addresses_not_ascending),
			 "corrupt: ADDRESSES are not ascending at 1");
	ck_assert_str_eq(structure_error(endless_varint),
			 "corrupt: COUNTERS does not hold 8 x 1 varints");
	ck_assert_str_eq(structure_error(live_above_allocs),
			 "corrupt: counter 0 has more live than allocated");
	ck_assert_str_eq(structure_error(lost_with_frames),
			 "corrupt: stack 3 is marked lost but has frames");
	ck_assert_str_eq(structure_error(bad_argc),
			 "corrupt: META argv holds 3 strings, argc is 2");
	ck_assert_str_eq(structure_error(module_path_overflow),
			 "corrupt: module 0 does not fit in the MODULES section");
	ck_assert_str_eq(structure_error(module_backwards),
			 "corrupt: module 0 ends (0x4000) before it starts (0x5000)");
	ck_assert_str_eq(structure_error(counters_size_mismatch),
			 "corrupt: COUNTERS does not hold 8 x 1 varints");
	ck_assert_str_eq(structure_error(bad_end_reason), "corrupt: META end reason 0 is unknown");
}
END_TEST

/* ---- commit and abort ---- */

START_TEST(commit_no_replace)
{
	const char *final = in_dir("taken.prof");
	const char *other = in_dir("other.prof");
	struct ml_profile *p = NULL;
	struct ml_writer w;
	char tmp[600];
	size_t len;
	unsigned char *raw;

	spit(final, "occupied", 8);
	ck_assert_int_eq(ml_writer_open(&w, final, 0644), 0);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", final, (int)getpid());
	ck_assert_str_eq(w.tmp_path, tmp);
	ck_assert_int_eq(access(tmp, F_OK), 0);
	put_meta(&w, 3, 64);
	ck_assert_int_eq(ml_writer_commit(&w, final, false), -EEXIST);
	/* The existing file is untouched and the temporary kept for a retry. */
	raw = slurp(final, &len);
	ck_assert_uint_eq(len, 8);
	ck_assert_mem_eq(raw, "occupied", 8);
	free(raw);
	ck_assert_int_eq(access(tmp, F_OK), 0);
	ck_assert_int_eq(ml_writer_commit(&w, other, false), 0);
	ck_assert_int_eq(access(tmp, F_OK), -1);
	ck_assert_int_eq(count_files(), 2);
	ck_assert_int_eq(ml_profile_load(other, &p, errbuf, sizeof(errbuf)), 0);
	check_meta(p);
	ml_profile_free(p);
	/* With replace, the existing file is replaced. */
	write_small(final);
	ck_assert_int_eq(count_files(), 2);
	ck_assert_int_eq(ml_profile_load(final, &p, errbuf, sizeof(errbuf)), 0);
	ck_assert_uint_eq(p->n_stacks, 3);
	ml_profile_free(p);
}
END_TEST

START_TEST(abort_removes_temp)
{
	const char *final = in_dir("aborted.prof");
	struct ml_writer w;

	ck_assert_int_eq(ml_writer_open(&w, final, 0644), 0);
	put_meta(&w, 3, 64);
	ck_assert_int_eq(ml_writer_begin(&w, ML_SEC_STACKS), 0);
	ck_assert_int_eq(count_files(), 1);
	ml_writer_abort(&w);
	ck_assert_int_eq(count_files(), 0);
	ck_assert_int_eq(access(final, F_OK), -1);
	/* A second writer on the same name works: O_EXCL found nothing left. */
	ck_assert_int_eq(ml_writer_open(&w, final, 0644), 0);
	ck_assert_int_eq(ml_writer_open(&(struct ml_writer){ 0 }, final, 0644), -EEXIST);
	ml_writer_abort(&w);
	ck_assert_int_eq(count_files(), 0);
}
END_TEST

START_TEST(writer_misuse)
{
	const char *final = in_dir("misuse.prof");
	struct ml_writer w;

	ck_assert_int_eq(ml_writer_open(&w, final, 0644), 0);
	ck_assert_int_eq(ml_writer_put(&w, "x", 1), -EINVAL);	/* no open section */
	ml_writer_abort(&w);

	ck_assert_int_eq(ml_writer_open(&w, final, 0644), 0);
	ck_assert_int_eq(ml_writer_begin(&w, ML_SEC_META), 0);
	ck_assert_int_eq(ml_writer_begin(&w, ML_SEC_STACKS), -EINVAL);
	ck_assert_int_eq(ml_writer_put(&w, "x", 1), -EINVAL);	/* sticky */
	ck_assert_int_eq(ml_writer_commit(&w, final, true), -EINVAL);
	ml_writer_abort(&w);

	ck_assert_int_eq(ml_writer_open(&w, final, 0644), 0);
	ck_assert_int_eq(ml_writer_begin(&w, ML_SEC_META), 0);
	ck_assert_int_eq(ml_writer_commit(&w, final, true), -EINVAL);	/* section open */
	ml_writer_abort(&w);
	ck_assert_int_eq(count_files(), 0);

	ck_assert_int_eq(ml_writer_open(&w, "/nonexistent-dir/x.prof", 0644), -ENOENT);
	ml_writer_abort(&w);
}
END_TEST

START_TEST(fnv1a_vectors)
{
	/* Published FNV-1a 64 test vectors. */
	ck_assert_uint_eq(ml_fnv1a(ML_FNV_INIT, "", 0), 0xcbf29ce484222325ull);
	ck_assert_uint_eq(ml_fnv1a(ML_FNV_INIT, "a", 1), 0xaf63dc4c8601ec8cull);
	ck_assert_uint_eq(ml_fnv1a(ML_FNV_INIT, "foobar", 6), 0x85944171f73967e8ull);
	ck_assert_uint_eq(ml_fnv1a(ml_fnv1a(ML_FNV_INIT, "foo", 3), "bar", 3),
			  0x85944171f73967e8ull);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("format");
	TCase *tc = tcase_create("format");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, round_trip_large);
	tcase_add_test(tc, staged_and_streamed);
	tcase_add_test(tc, truncated_everywhere);
	tcase_add_test(tc, corrupt_every_byte);
	tcase_add_test(tc, wrong_magic_and_version);
	tcase_add_test(tc, relative_bytes);
	tcase_add_test(tc, empty_dir_missing);
	tcase_add_test(tc, notes_and_file_kinds);
	tcase_add_test(tc, malformed_structure);
	tcase_add_test(tc, pyprof_sections);
	tcase_add_test(tc, trie_edge_cases);
	tcase_add_test(tc, section_table);
	tcase_add_test(tc, header_straddles_buffer);
	tcase_add_test(tc, compressed_payload);
	tcase_add_test(tc, commit_no_replace);
	tcase_add_test(tc, abort_removes_temp);
	tcase_add_test(tc, writer_misuse);
	tcase_add_test(tc, fnv1a_vectors);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
