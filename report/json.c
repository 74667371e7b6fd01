/* report/json.c - a tiny streaming JSON emitter: commas, nesting, escaping. */
#include <inttypes.h>
#include "report/json.h"

void ml_json_init(struct ml_json *j, FILE *out)
{
	j->out = out;
	j->depth = 0;
	j->has_items[0] = false;
	j->after_key = false;
}

static void indent(struct ml_json *j)
{
	fputc('\n', j->out);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->out);
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
		fputc(',', j->out);
	j->has_items[j->depth] = true;
	indent(j);
}

static void open_level(struct ml_json *j, char c)
{
	before_item(j);
	fputc(c, j->out);
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
	fputc(c, j->out);
}

void ml_json_object_begin(struct ml_json *j) { open_level(j, '{'); }
void ml_json_object_end(struct ml_json *j) { close_level(j, '}'); }
void ml_json_array_begin(struct ml_json *j) { open_level(j, '['); }
void ml_json_array_end(struct ml_json *j) { close_level(j, ']'); }

void ml_json_write_escaped(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", out); break;
		case '\\': fputs("\\\\", out); break;
		case '\n': fputs("\\n", out); break;
		case '\r': fputs("\\r", out); break;
		case '\t': fputs("\\t", out); break;
		case '\b': fputs("\\b", out); break;
		case '\f': fputs("\\f", out); break;
		default:
			if (*p < 0x20)
				fprintf(out, "\\u%04x", *p);
			else
				fputc(*p, out);
		}
	}
	fputc('"', out);
}

void ml_json_key(struct ml_json *j, const char *name)
{
	before_item(j);
	ml_json_write_escaped(j->out, name);
	fputs(": ", j->out);
	j->after_key = true;
}

void ml_json_string(struct ml_json *j, const char *s)
{
	before_item(j);
	if (s)
		ml_json_write_escaped(j->out, s);
	else
		fputs("null", j->out);
}

void ml_json_u64(struct ml_json *j, uint64_t v)
{
	before_item(j);
	fprintf(j->out, "%" PRIu64, v);
}

void ml_json_i64(struct ml_json *j, int64_t v)
{
	before_item(j);
	fprintf(j->out, "%" PRId64, v);
}

void ml_json_bool(struct ml_json *j, bool v)
{
	before_item(j);
	fputs(v ? "true" : "false", j->out);
}

void ml_json_null(struct ml_json *j)
{
	before_item(j);
	fputs("null", j->out);
}

void ml_json_finish(struct ml_json *j)
{
	fputc('\n', j->out);
}

void ml_json_double(struct ml_json *j, double v)
{
	before_item(j);
	if (v != v || v > 1e300 || v < -1e300)
		fputs("null", j->out);
	else
		fprintf(j->out, "%.9g", v);
}
