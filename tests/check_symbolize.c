/* tests/check_symbolize.c - the symbolizer on fixture binaries: each fixture
 * prints its load bias, build-id and code addresses with their source lines;
 * the test builds a profile's module map from that and resolves them. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "report/symbolize.h"

#define MAX_POINTS 16

struct point {
	char kind[8];		/* "ret", "ip", "sym", "func", "inl" */
	char tag[32];
	uint64_t addr;
	int line[3];
};

/* What one run of a fixture printed. */
struct fixture_run {
	uint64_t bias, lo, hi;
	uint8_t build_id[64];
	uint32_t build_id_len;
	struct point points[MAX_POINTS];
	int n_points;
};

/* A profile with one module, filled by hand. */
struct one_module_profile {
	struct ml_profile p;
	struct ml_module mod;
};

static char fixture_dir[PATH_MAX];

/* The fixtures live in BUILD/fixtures, and this test is BUILD/tests/NAME. */
static const char *fixture(const char *name)
{
	static char path[PATH_MAX + 64];

	if (!fixture_dir[0]) {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		ck_assert_int_gt(n, 0);
		exe[n] = '\0';
		snprintf(fixture_dir, sizeof(fixture_dir), "%s/fixtures", dirname(dirname(exe)));
	}
	snprintf(path, sizeof(path), "%s/%s", fixture_dir, name);
	return path;
}

/* The loop tests run on the gcc-built fixture (_i 0) and, when clang is
 * installed, on the clang-built one (_i 1): DWARF 5 with strx, addrx and
 * rnglistx forms, decl_file 0 and no .debug_aranges. */
static const char *variant(const char *base, int i)
{
	static char name[64];

	snprintf(name, sizeof(name), "%s%s", base, i ? ".clang" : "");
	return name;
}

static void parse_build_id(struct fixture_run *r, const char *hexid)
{
	size_t len = strlen(hexid);

	ck_assert_uint_le(len / 2, sizeof(r->build_id));
	for (size_t i = 0; i + 1 < len; i += 2)
		sscanf(hexid + i, "%2hhx", &r->build_id[i / 2]);
	r->build_id_len = (uint32_t)(len / 2);
}

static void parse_line(struct fixture_run *r, const char *text)
{
	struct point *pt = &r->points[r->n_points];
	char hexid[160] = "";

	if (sscanf(text, "module %" SCNx64 " %" SCNx64 " %" SCNx64 " %159s", &r->bias, &r->lo,
		   &r->hi, hexid) >= 3) {
		parse_build_id(r, hexid);
		return;
	}
	ck_assert_int_lt(r->n_points, MAX_POINTS);
	if (sscanf(text, "inl %" SCNx64 " %d %d %d", &pt->addr, &pt->line[0], &pt->line[1],
		   &pt->line[2]) == 4)
		strcpy(pt->kind, "inl");
	else if (sscanf(text, "func %31s %d %d", pt->tag, &pt->line[0], &pt->line[1]) == 3)
		strcpy(pt->kind, "func");
	else if (sscanf(text, "sym %31s %" SCNx64, pt->tag, &pt->addr) == 2)
		strcpy(pt->kind, "sym");
	else if (sscanf(text, "%7s %31s %" SCNx64 " %d", pt->kind, pt->tag, &pt->addr,
			&pt->line[0]) != 4)
		ck_abort_msg("fixture printed an odd line: %s", text);
	r->n_points++;
}

static void run_fixture(const char *name, struct fixture_run *r)
{
	char text[256];
	FILE *f;

	memset(r, 0, sizeof(*r));
	f = popen(fixture(name), "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(text, sizeof(text), f))
		parse_line(r, text);
	ck_assert_int_eq(pclose(f), 0);
	ck_assert_uint_gt(r->bias, 0);	/* a PIE, so the bias matters */
	ck_assert_uint_eq(r->build_id_len, 20);
}

static const struct point *point(const struct fixture_run *r, const char *kind, const char *tag)
{
	for (int i = 0; i < r->n_points; i++)
		if (!strcmp(r->points[i].kind, kind) && !strcmp(r->points[i].tag, tag))
			return &r->points[i];
	ck_abort_msg("fixture printed no %s %s", kind, tag);
	return NULL;
}

static void make_profile(struct one_module_profile *op, const struct fixture_run *r,
			 const char *path, uint32_t flags)
{
	memset(op, 0, sizeof(*op));
	op->mod.bias = r->bias;
	op->mod.lo = r->lo;
	op->mod.hi = r->hi;
	op->mod.path = path;
	op->mod.build_id = r->build_id;
	op->mod.build_id_len = r->build_id_len;
	op->mod.flags = flags | ML_MOD_MAIN;
	op->p.modules = &op->mod;
	op->p.n_modules = 1;
}

static void open_sym(struct one_module_profile *op, struct ml_symbolizer **s)
{
	ck_assert_int_eq(ml_sym_open(&op->p, s), 0);
}

static void resolve(struct ml_symbolizer *s, uint64_t addr, bool ret,
		    const struct ml_frame **f, size_t *n)
{
	ck_assert_int_eq(ml_sym_resolve(s, addr, ret, f, n), 0);
	ck_assert_uint_ge(*n, 1);
}

static void assert_source(const struct ml_frame *f, const char *function, const char *file,
			  int line)
{
	size_t flen, slen = strlen(file);

	ck_assert_str_eq(f->function, function);
	ck_assert_ptr_nonnull(f->file);
	flen = strlen(f->file);
	/* libdw joins the compile directory: the path is absolute. */
	ck_assert_msg(f->file[0] == '/' && flen > slen && f->file[flen - slen - 1] == '/' &&
		      !strcmp(f->file + flen - slen, file), "file %s, want */%s", f->file, file);
	ck_assert_int_eq(f->line, line);
}

/* Runs fn with stderr going to a string; returns it (static). */
static const char *capture_stderr(void (*fn)(void *), void *arg)
{
	static char text[4096];
	char path[] = "/tmp/check_symbolize_XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	dup2(fd, 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, text, sizeof(text) - 1, 0);
	ck_assert_int_ge(n, 0);
	text[n] = '\0';
	close(fd);
	unlink(path);
	return text;
}

START_TEST(test_return_addresses)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;

	const char *name = variant("sym_basic", _i);

	run_fixture(name, &r);
	make_profile(&op, &r, fixture(name), 0);
	open_sym(&op, &s);
	pt = point(&r, "ret", "leaf");
	resolve(s, pt->addr, true, &f, &n);
	ck_assert_uint_eq(n, 1);
	assert_source(&f[0], "leaf", "tests/fixtures/sym_basic.c", pt->line[0]);
	ck_assert_int_eq(pt->line[0], 27);
	ck_assert(!f[0].inlined);
	ck_assert(!f[0].runtime);
	ck_assert_str_eq(f[0].module, fixture(name));
	ck_assert_uint_eq(f[0].module_offset, pt->addr - r.bias);
	pt = point(&r, "ret", "caller");
	resolve(s, pt->addr, true, &f, &n);
	ck_assert_uint_eq(n, 1);
	assert_source(&f[0], "caller", "tests/fixtures/sym_basic.c", pt->line[0]);
	ml_sym_close(s);
}
END_TEST

START_TEST(test_exact_ip)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;

	run_fixture(variant("sym_basic", _i), &r);
	make_profile(&op, &r, fixture(variant("sym_basic", _i)), 0);
	open_sym(&op, &s);
	pt = point(&r, "ip", "label");
	resolve(s, pt->addr, false, &f, &n);
	ck_assert_uint_eq(n, 1);
	assert_source(&f[0], "labelled", "tests/fixtures/sym_basic.c", pt->line[0]);
	ck_assert_int_eq(pt->line[0], 43);
	ml_sym_close(s);
}
END_TEST

/* A call to a noreturn function ends its caller: the return address is the
 * next function's first byte, and only the lookup at address-1 is right. */
START_TEST(test_return_address_minus_one)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;

	run_fixture("sym_basic", &r);
	make_profile(&op, &r, fixture("sym_basic"), 0);
	open_sym(&op, &s);
	pt = point(&r, "ret", "noreturn");
	ck_assert_uint_eq(pt->addr, point(&r, "sym", "after_noreturn")->addr);
	resolve(s, pt->addr, true, &f, &n);
	assert_source(&f[0], "ends_in_noreturn", "tests/fixtures/sym_basic.c", pt->line[0]);
	resolve(s, pt->addr, false, &f, &n);
	ck_assert_str_eq(f[0].function, "after_noreturn");
	ml_sym_close(s);
}
END_TEST

START_TEST(test_cache_and_runtime_flag)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f1, *f2;
	size_t n1, n2;
	const struct point *pt;

	run_fixture(variant("sym_basic", _i), &r);
	make_profile(&op, &r, fixture(variant("sym_basic", _i)), ML_MOD_RUNTIME);
	open_sym(&op, &s);
	pt = point(&r, "ret", "leaf");
	resolve(s, pt->addr, true, &f1, &n1);
	ck_assert(f1[0].runtime);
	/* Enough other addresses to make the cache grow and rehash. */
	for (uint64_t a = r.lo; a < r.lo + 3000; a++)
		resolve(s, a, true, &f2, &n2);
	resolve(s, pt->addr, true, &f2, &n2);
	ck_assert_ptr_eq(f1, f2);
	ck_assert_uint_eq(n1, n2);
	ck_assert_str_eq(f2[0].function, "leaf");
	ml_sym_close(s);
}
END_TEST

START_TEST(test_no_module)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f;
	size_t n;

	run_fixture("sym_basic", &r);
	make_profile(&op, &r, fixture("sym_basic"), 0);
	open_sym(&op, &s);
	resolve(s, 0x1234, true, &f, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(f[0].function, "0x1234");
	ck_assert_ptr_null(f[0].module);
	ck_assert_ptr_null(f[0].file);
	ck_assert_int_eq(f[0].line, 0);
	resolve(s, 0, true, &f, &n);
	ck_assert_str_eq(f[0].function, "0x0");
	ml_sym_close(s);
}
END_TEST

START_TEST(test_inlined_frames)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;
	const char *src = "tests/fixtures/sym_inline.c";

	run_fixture(variant("sym_inline", _i), &r);
	make_profile(&op, &r, fixture(variant("sym_inline", _i)), 0);
	open_sym(&op, &s);
	pt = point(&r, "inl", "");
	ck_assert_int_eq(pt->line[0], 27);
	ck_assert_int_eq(pt->line[1], 34);
	ck_assert_int_eq(pt->line[2], 41);
	resolve(s, pt->addr, true, &f, &n);
	ck_assert_uint_eq(n, 3);
	assert_source(&f[0], "inner", src, pt->line[0]);
	ck_assert(f[0].inlined);
	assert_source(&f[1], "middle", src, pt->line[1]);
	ck_assert(f[1].inlined);
	assert_source(&f[2], "outer", src, pt->line[2]);
	ck_assert(!f[2].inlined);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(f[i].module_offset, pt->addr - r.bias);
	ml_sym_close(s);
}
END_TEST

START_TEST(test_cxx_demangled)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;
	const char *src = "tests/fixtures/sym_cxx.cc";

	run_fixture(variant("sym_cxx", _i), &r);
	make_profile(&op, &r, fixture(variant("sym_cxx", _i)), 0);
	open_sym(&op, &s);
	pt = point(&r, "ret", "get");
	resolve(s, pt->addr, true, &f, &n);
	assert_source(&f[0], "ns::Box<int>::get(int) const", src, pt->line[0]);
	pt = point(&r, "ret", "twice");
	resolve(s, pt->addr, true, &f, &n);
	assert_source(&f[0], "ns::twice(int)", src, pt->line[0]);
	pt = point(&r, "ret", "hidden");
	resolve(s, pt->addr, true, &f, &n);
	assert_source(&f[0], "(anonymous namespace)::hidden(long)", src, pt->line[0]);
	ml_sym_close(s);
}
END_TEST

/* objcopy --strip-debug keeps the symbol table: "function+offset". */
START_TEST(test_symbol_fallback)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;
	char want[64];

	run_fixture("sym_basic", &r);
	make_profile(&op, &r, fixture("sym_basic.nodebug"), 0);
	open_sym(&op, &s);
	pt = point(&r, "ret", "leaf");
	resolve(s, pt->addr, true, &f, &n);
	ck_assert_uint_eq(n, 1);
	snprintf(want, sizeof(want), "leaf+0x%" PRIx64, pt->addr - point(&r, "sym", "leaf")->addr);
	ck_assert_str_eq(f[0].function, want);
	ck_assert_ptr_null(f[0].file);
	ck_assert_int_eq(f[0].line, 0);
	ck_assert_str_eq(f[0].module, fixture("sym_basic.nodebug"));
	ml_sym_close(s);
}
END_TEST

/* strip --strip-all leaves no symbol for a static executable's own code:
 * the module offset in hex, and the module. */
START_TEST(test_address_fallback)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;
	char want[64];

	run_fixture("sym_basic", &r);
	make_profile(&op, &r, fixture("sym_basic.stripped"), 0);
	open_sym(&op, &s);
	pt = point(&r, "ret", "leaf");
	resolve(s, pt->addr, true, &f, &n);
	ck_assert_uint_eq(n, 1);
	snprintf(want, sizeof(want), "0x%" PRIx64, pt->addr - r.bias);
	ck_assert_str_eq(f[0].function, want);
	ck_assert_ptr_null(f[0].file);
	ck_assert_str_eq(f[0].module, fixture("sym_basic.stripped"));
	ml_sym_close(s);
}
END_TEST

START_TEST(test_debuglink)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;

	run_fixture("sym_basic", &r);
	make_profile(&op, &r, fixture("sym_split"), 0);
	open_sym(&op, &s);
	pt = point(&r, "ret", "caller");
	resolve(s, pt->addr, true, &f, &n);
	assert_source(&f[0], "caller", "tests/fixtures/sym_basic.c", pt->line[0]);
	ml_sym_close(s);
}
END_TEST

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n;

	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(out, 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

/* A debug directory laid out as /usr/lib/debug/.build-id/xx/yyyy.debug;
 * returns the path of the debug file in it. */
static void make_build_id_dir(const struct fixture_run *r, char *dir, char *file, size_t len)
{
	char hexid[41], sub[256];

	for (int i = 0; i < 20; i++)
		sprintf(hexid + 2 * i, "%02x", r->build_id[i]);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/.build-id", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	snprintf(sub, sizeof(sub), "%s/.build-id/%.2s", dir, hexid);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	snprintf(file, len, "%s/%s.debug", sub, hexid + 2);
	copy_file(fixture("sym_split.debug"), file);
	setenv("MEMLINE_DEBUG_DIR", dir, 1);
}

static void remove_build_id_dir(const char *dir, const char *file)
{
	char sub[PATH_MAX];

	unlink(file);
	snprintf(sub, sizeof(sub), "%s", file);
	rmdir(dirname(sub));
	snprintf(sub, sizeof(sub), "%s/.build-id", dir);
	rmdir(sub);
	rmdir(dir);
	unsetenv("MEMLINE_DEBUG_DIR");
}

struct open_call {
	struct one_module_profile *op;
	struct ml_symbolizer *s;
	int rc;
};

static void do_open(void *arg)
{
	struct open_call *c = arg;

	c->rc = ml_sym_open(&c->op->p, &c->s);
}

/* Separate debug info found by build-id in the debug directory, both for a
 * binary without DWARF and for one that is gone altogether. */
START_TEST(test_build_id_debug_dir)
{
	struct fixture_run r;
	struct one_module_profile op;
	struct open_call c = { .op = &op };
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;
	char dir[] = "/tmp/check_symbolize_dbg_XXXXXX", file[PATH_MAX];

	run_fixture("sym_basic", &r);
	make_build_id_dir(&r, dir, file, sizeof(file));
	pt = point(&r, "ret", "leaf");

	make_profile(&op, &r, fixture("sym_basic.nodebug"), 0);
	ck_assert_str_eq(capture_stderr(do_open, &c), "");
	ck_assert_int_eq(c.rc, 0);
	resolve(c.s, pt->addr, true, &f, &n);
	assert_source(&f[0], "leaf", "tests/fixtures/sym_basic.c", pt->line[0]);
	ml_sym_close(c.s);

	make_profile(&op, &r, "/nonexistent/sym_basic", 0);
	ck_assert_str_eq(capture_stderr(do_open, &c), "");
	ck_assert_int_eq(c.rc, 0);
	resolve(c.s, pt->addr, true, &f, &n);
	assert_source(&f[0], "leaf", "tests/fixtures/sym_basic.c", pt->line[0]);
	ck_assert_str_eq(f[0].module, "/nonexistent/sym_basic");
	ml_sym_close(c.s);
	remove_build_id_dir(dir, file);
}
END_TEST

START_TEST(test_build_id_mismatch_and_missing)
{
	struct fixture_run r;
	struct ml_module mods[4];
	struct ml_profile p;
	struct one_module_profile op = { 0 };
	struct open_call c = { .op = &op };
	const struct ml_frame *f;
	size_t n;
	const struct point *pt;
	uint8_t other_id[20];
	char want[1024], off[64];

	run_fixture("sym_basic", &r);
	memcpy(other_id, r.build_id, sizeof(other_id));
	other_id[7] ^= 0x5a;
	memset(mods, 0, sizeof(mods));
	mods[0] = (struct ml_module){ r.bias, r.lo, r.hi, fixture("sym_basic"), other_id, 20, ML_MOD_MAIN };
	mods[0].path = strdup(fixture("sym_basic"));
	mods[1] = (struct ml_module){ 0x100000, 0x100000, 0x200000, "/nonexistent/libgone.so", other_id, 20, 0 };
	mods[2] = (struct ml_module){ 0x300000, 0x300000, 0x400000, "linux-vdso.so.1", NULL, 0, 0 };
	/* The same library again (dlclose'd, loaded again): no second warning. */
	mods[3] = (struct ml_module){ 0x500000, 0x500000, 0x600000, "/nonexistent/libgone.so", other_id, 20,
				      ML_MOD_UNLOADED };
	memset(&p, 0, sizeof(p));
	p.modules = mods;
	p.n_modules = 4;
	op.p = p;
	snprintf(want, sizeof(want),
		 "memline: warning: %s: build-id differs from the profiled binary; lines may be wrong\n"
		 "memline: warning: /nonexistent/libgone.so: not found; its frames stay unresolved\n",
		 mods[0].path);
	ck_assert_str_eq(capture_stderr(do_open, &c), want);
	ck_assert_int_eq(c.rc, 0);
	/* Still resolved, from the file on disk. */
	pt = point(&r, "ret", "leaf");
	resolve(c.s, pt->addr, true, &f, &n);
	ck_assert_str_eq(f[0].function, "leaf");
	resolve(c.s, 0x100123, true, &f, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(f[0].function, "0x123");
	ck_assert_str_eq(f[0].module, "/nonexistent/libgone.so");
	ck_assert_uint_eq(f[0].module_offset, 0x123);
	resolve(c.s, 0x300040, false, &f, &n);
	snprintf(off, sizeof(off), "0x%x", 0x40);
	ck_assert_str_eq(f[0].function, off);
	ml_sym_close(c.s);
	free((char *)mods[0].path);
}
END_TEST

START_TEST(test_function_source)
{
	struct fixture_run r, rx;
	struct ml_module mods[2];
	struct ml_profile p;
	struct ml_symbolizer *s;
	const char *file;
	int first, last;
	const struct point *pt;
	/* clang gives the closing brace no line table row: the highest line
	 * of a function is the one before it. */
	int brace = _i ? 1 : 0;

	run_fixture(variant("sym_basic", _i), &r);
	run_fixture(variant("sym_cxx", _i), &rx);
	memset(&p, 0, sizeof(p));
	memset(mods, 0, sizeof(mods));
	mods[0] = (struct ml_module){ r.bias, r.lo, r.hi, NULL, r.build_id, 20, ML_MOD_MAIN };
	mods[0].path = strdup(fixture(variant("sym_basic", _i)));
	/* Two runs' modules may overlap: the symbolizer keeps them apart. */
	mods[1] = (struct ml_module){ rx.bias, rx.lo, rx.hi, NULL, rx.build_id, 20, 0 };
	mods[1].path = strdup(fixture(variant("sym_cxx", _i)));
	p.modules = mods;
	p.n_modules = 2;
	ck_assert_int_eq(ml_sym_open(&p, &s), 0);

	pt = point(&r, "func", "leaf");
	ck_assert_int_eq(ml_sym_function_source(s, "leaf", &file, &first, &last), 0);
	ck_assert_int_eq(first, pt->line[0]);
	ck_assert_int_eq(last, pt->line[1] - brace);
	ck_assert_int_eq(first, 25);
	ck_assert_int_eq(last, 30 - brace);
	ck_assert_ptr_nonnull(strstr(file, "tests/fixtures/sym_basic.c"));

	/* clang's DWARF 5 has decl_file 0 (the primary source file). */
	pt = point(&r, "func", "main");
	ck_assert_int_eq(ml_sym_function_source(s, "main", &file, &first, &last), 0);
	ck_assert_int_eq(first, pt->line[0]);
	ck_assert_int_eq(last, pt->line[1] - brace);
	ck_assert_int_eq(first, 71);
	ck_assert_ptr_nonnull(strstr(file, "tests/fixtures/sym_basic.c"));

	pt = point(&rx, "func", "get");
	ck_assert_int_eq(ml_sym_function_source(s, "ns::Box<int>::get", &file, &first, &last), 0);
	ck_assert_int_eq(first, pt->line[0]);
	ck_assert_int_eq(last, pt->line[1] - brace);
	ck_assert_ptr_nonnull(strstr(file, "tests/fixtures/sym_cxx.cc"));
	first = last = 0;
	ck_assert_int_eq(ml_sym_function_source(s, "ns::Box<int>::get(int) const", &file, &first,
						&last), 0);
	ck_assert_int_eq(first, pt->line[0]);
	ck_assert_int_eq(last, pt->line[1] - brace);

	/* Internal linkage: no linkage name in DWARF, the symbol table has it. */
	ck_assert_int_eq(ml_sym_function_source(s, "(anonymous namespace)::hidden", &file, &first,
						&last), 0);
	ck_assert_int_eq(first, 39);
	ck_assert_int_eq(last, 43 - brace);

	/* A template function demangles as "int scaled<int>(int)". */
	pt = point(&rx, "func", "scaled");
	ck_assert_int_eq(ml_sym_function_source(s, "scaled<int>", &file, &first, &last), 0);
	ck_assert_int_eq(first, pt->line[0]);
	ck_assert_int_eq(last, pt->line[1] - brace);
	first = last = 0;
	ck_assert_int_eq(ml_sym_function_source(s, "int scaled<int>(int)", &file, &first, &last),
			 0);
	ck_assert_int_eq(first, pt->line[0]);
	ck_assert_int_eq(ml_sym_function_source(s, "scaled", &file, &first, &last), -ENOENT);

	ck_assert_int_eq(ml_sym_function_source(s, "get", &file, &first, &last), -ENOENT);
	ck_assert_int_eq(ml_sym_function_source(s, "no_such_function", &file, &first, &last),
			 -ENOENT);
	ml_sym_close(s);
	free((char *)mods[0].path);
	free((char *)mods[1].path);
}
END_TEST

/* Whether prog is an executable file in $PATH. */
static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	while (path && *path) {
		size_t len = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, prog);
		if (access(buf, X_OK) == 0)
			return true;
		path += len + (path[len] == ':');
	}
	return false;
}

/* Reads one llvm-addr2line frame pair into *fr (function, file, line); the
 * file is "??" and the line 0 where it knows none.  Returns false at EOF. */
struct ref_frame {
	char function[1100];
	char file[1100];
	int line;
};

static bool read_ref_frame(FILE *in, const char *function_line, struct ref_frame *fr)
{
	char loc[1100], *colon, *disc;

	snprintf(fr->function, sizeof(fr->function), "%s", function_line);
	if (!fgets(loc, sizeof(loc), in))
		return false;
	loc[strcspn(loc, "\n")] = '\0';
	disc = strstr(loc, " (discriminator");
	if (disc)
		*disc = '\0';
	colon = strrchr(loc, ':');
	ck_assert_ptr_nonnull(colon);
	*colon = '\0';
	snprintf(fr->file, sizeof(fr->file), "%s", loc);
	fr->line = atoi(colon + 1);
	return true;
}

/* Compares our frames of one address with the reference's; returns true
 * when they agree.  Our "0x1234" (no function) is its "??". */
static bool frames_agree(const struct ml_frame *f, size_t n, const struct ref_frame *ref,
			 size_t n_ref)
{
	if (n != n_ref)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool unnamed = strncmp(f[i].function, "0x", 2) == 0;

		if (unnamed ? strcmp(ref[i].function, "??") != 0 :
			      strcmp(f[i].function, ref[i].function) != 0)
			return false;
		if (!f[i].file || strcmp(f[i].file, ref[i].file) != 0 || f[i].line != ref[i].line)
			return false;
	}
	return true;
}

static const char *llvm_addr2line(void)
{
	static const char *const names[] = { "llvm-addr2line-14", "llvm-addr2line" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (in_path(names[i]))
			return names[i];
	return NULL;
}

/* Every address of a fixture's mapping, by ml_sym_resolve and by
 * llvm-addr2line -i -f -C: the same inlined chain, functions, files and
 * lines wherever llvm-addr2line has a line (padding between functions,
 * data and code without lines it knows nothing of, and is not compared). */
START_TEST(test_addr2line_agreement)
{
	static const char *const bases[] = { "sym_basic", "sym_inline", "sym_cxx" };
	const char *name = variant(bases[_i % 3], _i / 3), *tool = llvm_addr2line();
	struct fixture_run r;
	struct one_module_profile op;
	struct ml_symbolizer *s;
	char list[] = "/tmp/check_symbolize_addrs_XXXXXX", cmd[PATH_MAX * 2], text[1100];
	struct ref_frame ref[16];
	size_t n_ref = 0, compared = 0, differ = 0;
	uint64_t addr = 0;
	FILE *out, *in;
	int fd;

	if (!tool) {
		printf("check_symbolize: no llvm-addr2line: skipping the comparison on %s\n", name);
		return;
	}
	run_fixture(name, &r);
	make_profile(&op, &r, fixture(name), 0);
	open_sym(&op, &s);
	fd = mkstemp(list);
	ck_assert_int_ge(fd, 0);
	out = fdopen(fd, "w");
	for (uint64_t a = r.lo; a < r.hi; a++)
		fprintf(out, "%#" PRIx64 "\n", a - r.bias);
	fclose(out);
	snprintf(cmd, sizeof(cmd), "%s -a -i -f -C -e '%s' < %s", tool, fixture(name), list);
	in = popen(cmd, "r");
	ck_assert_ptr_nonnull(in);
	for (bool more = true; more;) {
		more = fgets(text, sizeof(text), in) != NULL;
		text[strcspn(text, "\n")] = '\0';
		if (more && strncmp(text, "0x", 2) != 0) {
			ck_assert_uint_lt(n_ref, 16);
			ck_assert(read_ref_frame(in, text, &ref[n_ref++]));
			continue;
		}
		/* A new address (or the end): check the one before. */
		if (n_ref > 0 && ref[0].line > 0 && strcmp(ref[0].file, "??") != 0) {
			const struct ml_frame *f;
			size_t n;

			resolve(s, addr + r.bias, false, &f, &n);
			compared++;
			if (!frames_agree(f, n, ref, n_ref) && differ++ == 0)
				fprintf(stderr, "%s +%#" PRIx64 ": ours %s %s:%d (%zu frames), "
					"llvm-addr2line %s %s:%d (%zu frames)\n", name, addr,
					f[0].function, f[0].file ? f[0].file : "??", f[0].line, n,
					ref[0].function, ref[0].file, ref[0].line, n_ref);
		}
		n_ref = 0;
		if (more)
			addr = strtoull(text, NULL, 16);
	}
	ck_assert_int_eq(pclose(in), 0);
	unlink(list);
	ck_assert_uint_gt(compared, 100);
	ck_assert_uint_eq(differ, 0);
	ml_sym_close(s);
}
END_TEST

START_TEST(test_name_matches)
{
	ck_assert(ml_sym_name_matches("void f<int>(int)", "f<int>"));
	ck_assert(ml_sym_name_matches("void f<int>(int)", "void f<int>(int)"));
	ck_assert(ml_sym_name_matches("void f<int>(int)", "void f<int>"));
	ck_assert(!ml_sym_name_matches("void f<int>(int)", "f"));
	ck_assert(!ml_sym_name_matches("void f<int>(int)", "int"));
	ck_assert(ml_sym_name_matches("ns::Box<int>::get(int) const", "ns::Box<int>::get"));
	ck_assert(!ml_sym_name_matches("ns::Box<int>::get(int) const", "get"));
	ck_assert(ml_sym_name_matches("std::pair<int, long> ns::mk<int, long>(int, long)",
				      "ns::mk<int, long>"));
	ck_assert(ml_sym_name_matches("std::vector<int, std::allocator<int> >::size() const",
				      "std::vector<int, std::allocator<int> >::size"));
	ck_assert(!ml_sym_name_matches("std::vector<int, std::allocator<int> >::size() const",
				       "std::allocator<int> >::size"));
	ck_assert(!ml_sym_name_matches("(anonymous namespace)::hidden(long)", "hidden"));
	ck_assert(!ml_sym_name_matches("operator new(unsigned long)", "new"));
	ck_assert(ml_sym_name_matches("operator new(unsigned long)", "operator new"));
	ck_assert(ml_sym_name_matches("ns::A::operator int() const", "ns::A::operator int"));
	ck_assert(!ml_sym_name_matches(NULL, "f"));
}
END_TEST

static Suite *symbolize_suite(void)
{
	/* The Makefile builds the .clang fixtures when clang is installed. */
	int variants = in_path("clang") && in_path("clang++") ? 2 : 1;

	Suite *suite = suite_create("symbolize");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_return_addresses, 0, variants);
	tcase_add_loop_test(tc, test_exact_ip, 0, variants);
	tcase_add_test(tc, test_return_address_minus_one);
	tcase_add_loop_test(tc, test_cache_and_runtime_flag, 0, variants);
	tcase_add_test(tc, test_no_module);
	tcase_add_loop_test(tc, test_inlined_frames, 0, variants);
	tcase_add_loop_test(tc, test_cxx_demangled, 0, variants);
	tcase_add_test(tc, test_symbol_fallback);
	tcase_add_test(tc, test_address_fallback);
	tcase_add_test(tc, test_debuglink);
	tcase_add_test(tc, test_build_id_debug_dir);
	tcase_add_test(tc, test_build_id_mismatch_and_missing);
	tcase_add_loop_test(tc, test_function_source, 0, variants);
	tcase_add_test(tc, test_name_matches);
	tcase_add_loop_test(tc, test_addr2line_agreement, 0, 3 * variants);
	suite_add_tcase(suite, tc);
	if (variants == 1)
		printf("check_symbolize: clang not installed: skipping the clang-built (DWARF 5) "
		       "fixtures\n");
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(symbolize_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
