/* report/json.h - a tiny streaming JSON emitter (pretty-printed, 2-space indent).
 * It tracks commas and nesting; it does not validate the caller's order. */
#ifndef ML_REPORT_JSON_H
#define ML_REPORT_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define ML_JSON_MAX_DEPTH 32

struct ml_json {
	FILE *out;
	int depth;
	bool has_items[ML_JSON_MAX_DEPTH];	/* an item was written at this level */
	bool after_key;				/* the next value follows "key": */
};

/* Starts a writer on out.  Nothing is written until the first value. */
void ml_json_init(struct ml_json *j, FILE *out);

void ml_json_object_begin(struct ml_json *j);
void ml_json_object_end(struct ml_json *j);
void ml_json_array_begin(struct ml_json *j);
void ml_json_array_end(struct ml_json *j);

/* Writes "name": inside an object; the next call writes its value. */
void ml_json_key(struct ml_json *j, const char *name);

/* Values.  A NULL string is written as null.  Strings are escaped per
 * RFC 8259: quote, backslash and control characters; other bytes pass
 * through (UTF-8 stays UTF-8). */
void ml_json_string(struct ml_json *j, const char *s);
void ml_json_u64(struct ml_json *j, uint64_t v);
void ml_json_i64(struct ml_json *j, int64_t v);
void ml_json_bool(struct ml_json *j, bool v);
void ml_json_null(struct ml_json *j);
/* A number with up to 9 significant digits (null if not finite). */
void ml_json_double(struct ml_json *j, double v);

/* Writes s as a quoted, escaped JSON string to out (no commas, no layout). */
void ml_json_write_escaped(FILE *out, const char *s);

/* Ends the document with a newline. */
void ml_json_finish(struct ml_json *j);

#endif
