/* report/reader_torch.c - the TORCH section (common/torchformat.h): one
 * record, its schema strings checked to be exactly n_schemas pairs of
 * NUL-terminated strings; they point into the profile's own bytes. */
#include <stdlib.h>
#include <string.h>
#include "report/reader_internal.h"

/* Splits the n pairs of strings in [at, at + len) into out[2 n].  False
 * when the bytes are not exactly that. */
static bool split_schemas(const unsigned char *at, uint64_t len, uint32_t n, const char **out)
{
	uint64_t off = 0;
	for (uint64_t i = 0; i < 2 * (uint64_t)n; i++) {
		const unsigned char *end = off < len ? memchr(at + off, '\0', len - off) : NULL;
		if (!end)
			return false;
		out[i] = (const char *)at + off;
		off = (uint64_t)(end - at) + 1;
	}
	return off == len;
}

int ml_reader_parse_torch(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_TORCH];
	struct cursor c = { s->payload, s->size };
	struct ml_profile_torch *t = &ps->p->torch;
	struct ml_fmt_torch rec;
	const unsigned char *strings;

	if (!s->seen)
		return 0;
	if (s->count != 1 || !ml_reader_peek(&c, &rec, sizeof(rec)) ||
	    !ml_reader_take_record(&c, &rec, sizeof(rec), rec.schemas_len, &strings) || c.left)
		return BAD(ps, "corrupt: TORCH section is not one record");
	/* Each pair takes two bytes at least. */
	if ((uint64_t)rec.n_schemas * 2 > rec.schemas_len)
		return BAD(ps, "corrupt: TORCH section: %u schemas in %u bytes", rec.n_schemas,
			   rec.schemas_len);
	if (rec.n_schemas) {
		t->schemas = calloc(2 * (size_t)rec.n_schemas, sizeof(*t->schemas));
		if (!t->schemas)
			return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
		if (!split_schemas(strings, rec.schemas_len, rec.n_schemas, t->schemas))
			return BAD(ps, "corrupt: TORCH section: the schemas are not %u pairs of strings",
				   rec.n_schemas);
	} else if (rec.schemas_len) {
		return BAD(ps, "corrupt: TORCH section: schema bytes without schemas");
	}
	t->present = true;
	t->flags = rec.flags;
	t->block_allocs = rec.block_allocs;
	t->block_frees = rec.block_frees;
	t->other_reports = rec.other_reports;
	t->tensor_frees = rec.tensor_frees;
	t->n_schemas = rec.n_schemas;
	return 0;
}
