/* report/json.c - a tiny streaming JSON emitter: commas, nesting, escaping. */
#include <inttypes.h>
#include <string.h>
#include "report/json.h"

void ml_json_init(struct ml_json *j, FILE *out)
{
	j->out = out;
	j->depth = 0;
	j->has_items[0] = false;
	j->after_key = false;
}

/* Everything is written with the stream's unlocked calls, plain text in
 * runs: a report's JSON can be hundreds of megabytes. */
static void indent(struct ml_json *j)
{
	static const char spaces[64] = "                                                                ";
	putc_unlocked('\n', j->out);
	for (size_t n = 2 * (size_t)j->depth; n;) {
		size_t k = n < sizeof(spaces) ? n : sizeof(spaces);
		fwrite_unlocked(spaces, 1, k, j->out);
		n -= k;
	}
}

/* Puts the separator and indentation before a value or key. */
static void before_item(struct ml_json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (j->depth == 0)
		return;
	if (j->has_items[j->depth])
		putc_unlocked(',', j->out);
	j->has_items[j->depth] = true;
	indent(j);
}

static void open_level(struct ml_json *j, char c)
{
	before_item(j);
	putc_unlocked(c, j->out);
	if (j->depth + 1 < ML_JSON_MAX_DEPTH)
		j->depth++;
	j->has_items[j->depth] = false;
}

static void close_level(struct ml_json *j, char c)
{
	bool had = j->has_items[j->depth];
	if (j->depth > 0)
		j->depth--;
	if (had)
		indent(j);
	putc_unlocked(c, j->out);
}

void ml_json_object_begin(struct ml_json *j) { open_level(j, '{'); }
void ml_json_object_end(struct ml_json *j) { close_level(j, '}'); }
void ml_json_array_begin(struct ml_json *j) { open_level(j, '['); }
void ml_json_array_end(struct ml_json *j) { close_level(j, ']'); }

void ml_json_write_escaped(FILE *out, const char *s)
{
	putc_unlocked('"', out);
	const unsigned char *p = (const unsigned char *)s, *run = p;
	for (; *p; p++) {
		const char *esc;
		switch (*p) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		default:
			if (*p >= 0x20)
				continue;
			esc = NULL;
		}
		if (p > run)
			fwrite_unlocked(run, 1, (size_t)(p - run), out);
		run = p + 1;
		if (esc)
			fwrite_unlocked(esc, 1, 2, out);
		else
			fprintf(out, "\\u%04x", *p);
	}
	if (p > run)
		fwrite_unlocked(run, 1, (size_t)(p - run), out);
	putc_unlocked('"', out);
}

/* s, a string constant, as it is. */
static void put_plain(FILE *out, const char *s)
{
	fwrite_unlocked(s, 1, strlen(s), out);
}

/* v in decimal. */
static void put_u64(FILE *out, uint64_t v)
{
	char buf[24], *at = buf + sizeof(buf);
	do
		*--at = (char)('0' + v % 10);
	while ((v /= 10));
	fwrite_unlocked(at, 1, (size_t)(buf + sizeof(buf) - at), out);
}

void ml_json_key(struct ml_json *j, const char *name)
{
	before_item(j);
	ml_json_write_escaped(j->out, name);
	put_plain(j->out, ": ");
	j->after_key = true;
}

void ml_json_string(struct ml_json *j, const char *s)
{
	before_item(j);
	if (s)
		ml_json_write_escaped(j->out, s);
	else
		put_plain(j->out, "null");
}

void ml_json_u64(struct ml_json *j, uint64_t v)
{
	before_item(j);
	put_u64(j->out, v);
}

void ml_json_i64(struct ml_json *j, int64_t v)
{
	before_item(j);
	if (v < 0)
		putc_unlocked('-', j->out);
	put_u64(j->out, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

void ml_json_bool(struct ml_json *j, bool v)
{
	before_item(j);
	put_plain(j->out, v ? "true" : "false");
}

void ml_json_null(struct ml_json *j)
{
	before_item(j);
	put_plain(j->out, "null");
}

void ml_json_finish(struct ml_json *j)
{
	putc_unlocked('\n', j->out);
}

void ml_json_double(struct ml_json *j, double v)
{
	before_item(j);
	if (v != v || v > 1e300 || v < -1e300)
		put_plain(j->out, "null");
	else
		fprintf(j->out, "%.9g", v);
}
