/* report/coverage.c - exact counts from gcov (see coverage.h).  The .gcda
 * paths are found as strings in the instrumented executable; gcov is run on
 * each with --json-format --stdout and its JSON read by a small parser here
 * (only what gcov writes: objects, arrays, strings, numbers, literals). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "report/coverage.h"
#include "report/regfile.h"

struct cov_line {
	const char *file;
	int line;
	uint64_t count;
};

struct cov_func {
	const char *name;
	uint64_t calls;
};

struct ml_cov {
	struct cov_line *lines;
	size_t n_lines, cap_lines;
	struct cov_func *funcs;
	size_t n_funcs, cap_funcs;
	char **strings;
	size_t n_strings, cap_strings;
};

/* ---- JSON ---- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jval {
	enum jtype type;
	char *str;		/* J_STR: unescaped (ASCII; \u kept as '?') */
	uint64_t num;		/* J_NUM: integer part (counts are integers) */
	struct jval *items;	/* J_ARR, J_OBJ: values */
	char **keys;		/* J_OBJ */
	size_t n;
};

struct jparse {
	const char *at, *end;
	int depth;
};

static void skip_ws(struct jparse *p)
{
	while (p->at < p->end && (*p->at == ' ' || *p->at == '\n' || *p->at == '\r' || *p->at == '\t'))
		p->at++;
}

static int parse_value(struct jparse *p, struct jval *v);

static int parse_string(struct jparse *p, char **out)
{
	if (p->at >= p->end || *p->at != '"')
		return -1;
	const char *s = ++p->at;
	size_t cap = 16, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		return -1;
	while (p->at < p->end && *p->at != '"') {
		char c = *p->at++;
		if (c == '\\' && p->at < p->end) {
			char e = *p->at++;
			c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' :
			    e == 'f' ? '\f' : e;
			if (e == 'u') {
				p->at += p->end - p->at >= 4 ? 4 : p->end - p->at;
				c = '?';
			}
		}
		if (n + 2 > cap) {
			char *b = realloc(buf, cap *= 2);
			if (!b) {
				free(buf);
				return -1;
			}
			buf = b;
		}
		buf[n++] = c;
	}
	(void)s;
	if (p->at >= p->end) {
		free(buf);
		return -1;
	}
	p->at++;
	buf[n] = '\0';
	*out = buf;
	return 0;
}

static int push_item(struct jval *v, size_t *cap, struct jval *item, char *key)
{
	if (v->n == *cap) {
		size_t c = *cap ? *cap * 2 : 8;
		struct jval *it = realloc(v->items, c * sizeof(*it));
		if (!it)
			return -1;
		v->items = it;
		if (v->type == J_OBJ) {
			char **k = realloc(v->keys, c * sizeof(*k));
			if (!k)
				return -1;
			v->keys = k;
		}
		*cap = c;
	}
	v->items[v->n] = *item;
	if (v->type == J_OBJ)
		v->keys[v->n] = key;
	v->n++;
	return 0;
}

static void jfree(struct jval *v)
{
	free(v->str);
	for (size_t i = 0; i < v->n; i++) {
		jfree(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
}

static int parse_container(struct jparse *p, struct jval *v, char close)
{
	size_t cap = 0;
	p->at++;
	skip_ws(p);
	if (p->at < p->end && *p->at == close) {
		p->at++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		struct jval item = { 0 };
		skip_ws(p);
		if (v->type == J_OBJ) {
			if (parse_string(p, &key) < 0)
				return -1;
			skip_ws(p);
			if (p->at >= p->end || *p->at++ != ':') {
				free(key);
				return -1;
			}
		}
		if (parse_value(p, &item) < 0 || push_item(v, &cap, &item, key) < 0) {
			free(key);
			jfree(&item);
			return -1;
		}
		skip_ws(p);
		if (p->at < p->end && *p->at == ',') {
			p->at++;
			continue;
		}
		if (p->at < p->end && *p->at == close) {
			p->at++;
			return 0;
		}
		return -1;
	}
}

static int parse_value(struct jparse *p, struct jval *v)
{
	memset(v, 0, sizeof(*v));
	skip_ws(p);
	if (p->at >= p->end || ++p->depth > 64)
		return -1;
	int rc = 0;
	char c = *p->at;
	if (c == '{') {
		v->type = J_OBJ;
		rc = parse_container(p, v, '}');
	} else if (c == '[') {
		v->type = J_ARR;
		rc = parse_container(p, v, ']');
	} else if (c == '"') {
		v->type = J_STR;
		rc = parse_string(p, &v->str);
	} else if (c == '-' || (c >= '0' && c <= '9')) {
		v->type = J_NUM;
		bool neg = c == '-';
		if (neg)
			p->at++;
		while (p->at < p->end && *p->at >= '0' && *p->at <= '9')
			v->num = v->num * 10 + (uint64_t)(*p->at++ - '0');
		while (p->at < p->end && strchr(".eE+-0123456789", *p->at))
			p->at++;
		if (neg)
			v->num = 0;
	} else if (p->end - p->at >= 4 && strncmp(p->at, "true", 4) == 0) {
		v->type = J_BOOL;
		v->num = 1;
		p->at += 4;
	} else if (p->end - p->at >= 5 && strncmp(p->at, "false", 5) == 0) {
		v->type = J_BOOL;
		p->at += 5;
	} else if (p->end - p->at >= 4 && strncmp(p->at, "null", 4) == 0) {
		p->at += 4;
	} else {
		rc = -1;
	}
	p->depth--;
	return rc;
}

static const struct jval *jget(const struct jval *o, const char *key, enum jtype type)
{
	if (!o || o->type != J_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->keys[i], key) == 0)
			return o->items[i].type == type ? &o->items[i] : NULL;
	return NULL;
}

/* ---- the counts ---- */

static const char *keep(struct ml_cov *c, const char *s)
{
	for (size_t i = 0; i < c->n_strings; i++)
		if (strcmp(c->strings[i], s) == 0)
			return c->strings[i];
	if (c->n_strings == c->cap_strings) {
		size_t cap = c->cap_strings ? c->cap_strings * 2 : 16;
		char **m = realloc(c->strings, cap * sizeof(*m));
		if (!m)
			return NULL;
		c->strings = m;
		c->cap_strings = cap;
	}
	char *d = strdup(s);
	if (d)
		c->strings[c->n_strings++] = d;
	return d;
}

static int add_line(struct ml_cov *c, const char *file, int line, uint64_t count)
{
	for (size_t i = 0; i < c->n_lines; i++)	/* the same line again: sum */
		if (c->lines[i].line == line && c->lines[i].file == file) {
			c->lines[i].count += count;
			return 0;
		}
	if (c->n_lines == c->cap_lines) {
		size_t cap = c->cap_lines ? c->cap_lines * 2 : 256;
		struct cov_line *m = realloc(c->lines, cap * sizeof(*m));
		if (!m)
			return -ENOMEM;
		c->lines = m;
		c->cap_lines = cap;
	}
	c->lines[c->n_lines++] = (struct cov_line){ file, line, count };
	return 0;
}

static int add_func(struct ml_cov *c, const char *name, uint64_t calls)
{
	for (size_t i = 0; i < c->n_funcs; i++)
		if (strcmp(c->funcs[i].name, name) == 0) {
			c->funcs[i].calls += calls;
			return 0;
		}
	if (c->n_funcs == c->cap_funcs) {
		size_t cap = c->cap_funcs ? c->cap_funcs * 2 : 64;
		struct cov_func *m = realloc(c->funcs, cap * sizeof(*m));
		if (!m)
			return -ENOMEM;
		c->funcs = m;
		c->cap_funcs = cap;
	}
	const char *k = keep(c, name);
	if (!k)
		return -ENOMEM;
	c->funcs[c->n_funcs++] = (struct cov_func){ k, calls };
	return 0;
}

/* Takes gcov's JSON document: files[].lines[] and files[].functions[]. */
static int take_document(struct ml_cov *c, const struct jval *doc)
{
	const struct jval *files = jget(doc, "files", J_ARR);
	const struct jval *cwd = jget(doc, "current_working_directory", J_STR);
	for (size_t i = 0; files && i < files->n; i++) {
		const struct jval *f = &files->items[i];
		const struct jval *name = jget(f, "file", J_STR);
		if (!name)
			continue;
		char path[4096];
		if (name->str[0] != '/' && cwd)
			snprintf(path, sizeof(path), "%s/%s", cwd->str, name->str);
		else
			snprintf(path, sizeof(path), "%s", name->str);
		const char *file = keep(c, path);
		if (!file)
			return -ENOMEM;
		const struct jval *lines = jget(f, "lines", J_ARR);
		for (size_t k = 0; lines && k < lines->n; k++) {
			const struct jval *ln = jget(&lines->items[k], "line_number", J_NUM);
			const struct jval *ct = jget(&lines->items[k], "count", J_NUM);
			if (ln && ct && add_line(c, file, (int)ln->num, ct->num) < 0)
				return -ENOMEM;
		}
		const struct jval *funcs = jget(f, "functions", J_ARR);
		for (size_t k = 0; funcs && k < funcs->n; k++) {
			const struct jval *fn = jget(&funcs->items[k], "demangled_name", J_STR);
			const struct jval *ct = jget(&funcs->items[k], "execution_count", J_NUM);
			if (!fn)
				fn = jget(&funcs->items[k], "name", J_STR);
			if (fn && ct && add_func(c, fn->str, ct->num) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

/* Every distinct "/...gcda" string in the file's bytes. */
static size_t find_gcda(const char *data, size_t len, char out[][4096], size_t max)
{
	size_t n = 0;
	for (const char *at = data; n < max && (at = memmem(at, len - (size_t)(at - data), ".gcda", 6));
	     at += 6) {
		const char *start = at;
		while (start > data && start[-1] >= 0x20 && start[-1] < 0x7f)
			start--;
		size_t slen = (size_t)(at + 5 - start);
		if (*start != '/' || slen >= 4096)
			continue;
		bool dup = false;
		for (size_t k = 0; k < n; k++)
			dup |= strncmp(out[k], start, slen) == 0 && out[k][slen] == '\0';
		if (dup)
			continue;
		memcpy(out[n], start, slen);
		out[n][slen] = '\0';
		n++;
	}
	return n;
}

/* The whole regular file at path (never a FIFO or device), or NULL. */
static char *slurp(const char *path, size_t *len)
{
	struct stat st;
	int fd = ml_regfile_open(path, &st, NULL);
	if (fd < 0)
		return NULL;
	char *buf = malloc((size_t)st.st_size + 1);
	if (buf && ml_regfile_pread_all(fd, buf, (size_t)st.st_size, 0) < 0) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* Whether path is a readable regular file (the tools run on it would
 * otherwise wait on a FIFO). */
static bool readable_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

/* ---- clang: llvm-profdata merge + llvm-cov export -format=lcov ---- */

/* Runs argv (a tool), its stdout into a malloc'd buffer, stderr dropped.
 * NULL when it cannot run or fails. */
static char *run_tool(char *const argv[], size_t *len)
{
	int fds[2];
	if (pipe(fds) < 0)
		return NULL;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return NULL;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(fds[1], 1);
		if (null >= 0)
			dup2(null, 2);
		close(fds[0]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	bool ok = buf != NULL;
	for (;;) {
		char sink[4096];
		if (ok && n == cap) {
			char *b = realloc(buf, cap *= 2);
			if (b)
				buf = b;
			else
				ok = false;
		}
		ssize_t r = ok ? read(fds[0], buf + n, cap - n) : read(fds[0], sink, sizeof(sink));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (ok)
			n += (size_t)r;
	}
	close(fds[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
			fprintf(stderr, "memline: warning: %s not found; Hits show samples\n", argv[0]);
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

/* The raw profile of a clang-instrumented run (see ml_cov_load). */
static bool find_profraw(const char *profile_path, char *out, size_t len)
{
	const char *env = getenv("LLVM_PROFILE_FILE");
	if (env && *env && !strchr(env, '%') && readable_file(env)) {
		snprintf(out, len, "%s", env);
		return true;
	}
	const char *slash = profile_path ? strrchr(profile_path, '/') : NULL;
	if (slash)
		snprintf(out, len, "%.*s/default.profraw", (int)(slash - profile_path), profile_path);
	else
		snprintf(out, len, "default.profraw");
	if (readable_file(out))
		return true;
	snprintf(out, len, "default.profraw");
	return readable_file(out);
}

/* "file.c:fn" (a static function) -> "fn". */
static const char *lcov_function_name(const char *name)
{
	const char *colon = strrchr(name, ':');
	return colon && colon > name && colon[-1] != ':' ? colon + 1 : name;
}

/* Takes lcov text: SF:file, DA:line,count, FNDA:count,name. */
static int take_lcov(struct ml_cov *c, char *text)
{
	const char *file = NULL;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (strncmp(line, "SF:", 3) == 0) {
			if (!(file = keep(c, line + 3)))
				return -ENOMEM;
		} else if (strncmp(line, "DA:", 3) == 0 && file) {
			char *comma = strchr(line + 3, ',');
			if (comma && add_line(c, file, atoi(line + 3),
					      strtoull(comma + 1, NULL, 10)) < 0)
				return -ENOMEM;
		} else if (strncmp(line, "FNDA:", 5) == 0) {
			char *comma = strchr(line + 5, ',');
			if (comma && add_func(c, lcov_function_name(comma + 1),
					      strtoull(line + 5, NULL, 10)) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

static int load_llvm(const char *exe, const char *profile_path, uint64_t data_after_ns,
		     struct ml_cov *c)
{
	char raw[4096], merged[] = "/tmp/memline-cov-XXXXXX";
	struct stat st;
	if (!find_profraw(profile_path, raw, sizeof(raw))) {
		fprintf(stderr, "memline: warning: %s is built with clang's coverage but no raw "
			"profile was found (set LLVM_PROFILE_FILE, or keep default.profraw next to "
			"the memline profile); Hits show samples\n", exe);
		return 0;
	}
	if (stat(raw, &st) == 0 && data_after_ns &&
	    (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec < data_after_ns)
		fprintf(stderr, "memline: warning: %s predates the profiled run; its counts are "
			"from an earlier run\n", raw);
	int fd = mkstemp(merged);
	if (fd < 0)
		return 0;
	close(fd);
	size_t len = 0;
	char *argv1[] = { "llvm-profdata", "merge", "-sparse", "-o", merged, raw, NULL };
	char *out = run_tool(argv1, &len);
	free(out);
	int rc = 0;
	if (out) {
		char *argv2[] = { "llvm-cov", "export", "-format=lcov", "-instr-profile", merged,
				  (char *)exe, NULL };
		char *lcov = run_tool(argv2, &len);
		if (lcov) {
			char *z = realloc(lcov, len + 1);
			if (z) {
				z[len] = '\0';
				rc = take_lcov(c, z);
				lcov = z;
			}
			free(lcov);
		}
	}
	unlink(merged);
	return rc;
}

int ml_cov_load(const char *exe, const char *profile_path, uint64_t data_after_ns,
		struct ml_cov **out)
{
	static char gcdas[16][4096];
	size_t len = 0;
	*out = NULL;
	char *data = exe ? slurp(exe, &len) : NULL;
	if (!data)
		return 0;
	size_t n = find_gcda(data, len, gcdas, 16);
	bool llvm = !n && memmem(data, len, "__llvm_profile_runtime", 22) != NULL;
	free(data);
	if (!n && !llvm)
		return 0;
	struct ml_cov *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (llvm && load_llvm(exe, profile_path, data_after_ns, c) < 0) {
		ml_cov_free(c);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (stat(gcdas[i], &st) < 0) {
			fprintf(stderr, "memline: warning: %s is built with --coverage but %s is "
				"missing; Hits show samples\n", exe, gcdas[i]);
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			fprintf(stderr, "memline: warning: %s is %s, not a regular file; Hits show "
				"samples\n", gcdas[i], ml_regfile_kind(st.st_mode));
			continue;
		}
		uint64_t mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
			(uint64_t)st.st_mtim.tv_nsec;
		if (data_after_ns && mtime < data_after_ns)
			fprintf(stderr, "memline: warning: %s predates the profiled run; its counts "
				"are from an earlier run\n", gcdas[i]);
		size_t jlen = 0;
		char *gcov_argv[] = { "gcov", "--json-format", "--stdout", gcdas[i], NULL };
		char *json = run_tool(gcov_argv, &jlen);
		if (!json)
			continue;
		struct jparse p = { json, json + jlen, 0 };
		struct jval doc;
		if (parse_value(&p, &doc) == 0 && take_document(c, &doc) < 0) {
			jfree(&doc);
			free(json);
			ml_cov_free(c);
			return -ENOMEM;
		}
		jfree(&doc);
		free(json);
	}
	if (!c->n_lines) {
		ml_cov_free(c);
		return 0;
	}
	*out = c;
	return 1;
}

void ml_cov_free(struct ml_cov *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_strings; i++)
		free(c->strings[i]);
	free(c->strings);
	free(c->lines);
	free(c->funcs);
	free(c);
}

static const char *base(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static bool file_eq(const char *a, const char *b)
{
	return strcmp(a, b) == 0 || strcmp(base(a), base(b)) == 0;
}

bool ml_cov_line(const struct ml_cov *c, const char *file, int line, uint64_t *count)
{
	bool found = false;
	*count = 0;
	for (size_t i = 0; c && i < c->n_lines; i++)
		if (c->lines[i].line == line && file_eq(c->lines[i].file, file)) {
			*count += c->lines[i].count;
			found = true;
		}
	return found;
}

bool ml_cov_has_file(const struct ml_cov *c, const char *file)
{
	for (size_t i = 0; c && i < c->n_lines; i++)
		if (file_eq(c->lines[i].file, file))
			return true;
	return false;
}

bool ml_cov_calls(const struct ml_cov *c, const char *name, uint64_t *calls)
{
	size_t len = strlen(name);
	for (size_t i = 0; c && i < c->n_funcs; i++) {
		const char *f = c->funcs[i].name;
		if (strncmp(f, name, len) == 0 && (f[len] == '\0' || f[len] == '(')) {
			*calls = c->funcs[i].calls;
			return true;
		}
	}
	return false;
}
