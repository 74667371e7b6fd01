/* report/reader_process.c - the profile reader's parsers for what places a
 * process in its run: the PROCESS section (run, rank, host) and the runtime's
 * WARNINGS.  Both are optional (profiles of older writers lack them). */
#include <stdlib.h>
#include <string.h>
#include "report/reader_internal.h"

int ml_reader_parse_process(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_PROCESS];
	struct cursor c = { s->payload, s->size };
	struct ml_process_info *pi = &ps->p->process;
	struct ml_fmt_process fp;
	const unsigned char *host;

	pi->rank = pi->local_rank = pi->world_size = -1;
	pi->host = "";
	pi->parent_pid = ps->p->meta.ppid;
	if (!s->seen)
		return 0;
	if (s->count != 1 || !ml_reader_peek(&c, &fp, sizeof(fp)) ||
	    !ml_reader_take_record(&c, &fp, sizeof(fp), fp.host_len, &host) || c.left)
		return BAD(ps, "corrupt: PROCESS section");
	if (fp.host_len > 255 || memchr(host, '\0', fp.host_len) || fp.rank < -1 ||
	    fp.local_rank < -1 || fp.world_size < -1 || fp.rank_source > ML_RANK_SLURM)
		return BAD(ps, "corrupt: PROCESS record");
	pi->host = ml_reader_copy_string(ps->o, host, fp.host_len);
	if (!pi->host)
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	pi->present = true;
	pi->run_pid = fp.run_pid;
	pi->parent_pid = fp.parent_pid;
	pi->rank = fp.rank;
	pi->local_rank = fp.local_rank;
	pi->world_size = fp.world_size;
	pi->rank_source = fp.rank_source;
	return 0;
}

int ml_reader_parse_warnings(struct parse *ps)
{
	const struct span *s = &ps->sec[ML_SEC_WARNINGS];
	struct cursor c = { s->payload, s->size };
	struct ml_profile *p = ps->p;

	if (!s->seen || !s->count)
		return s->seen && s->size ? BAD(ps, "corrupt: WARNINGS section has bytes but no records") : 0;
	if (s->count > s->size / sizeof(struct ml_fmt_warning))
		return BAD(ps, "corrupt: WARNINGS section too small for %u records", s->count);
	p->warnings = calloc(s->count, sizeof(*p->warnings));
	if (!p->warnings)
		return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->count; i++) {
		struct ml_fmt_warning fw;
		const unsigned char *text;

		if (!ml_reader_peek(&c, &fw, sizeof(fw)) ||
		    !ml_reader_take_record(&c, &fw, sizeof(fw), fw.text_len, &text))
			return BAD(ps, "corrupt: warning %u does not fit in the WARNINGS section", i);
		if (memchr(text, '\0', fw.text_len) || (fw.flags & ~ML_WARNING_SHOWN))
			return BAD(ps, "corrupt: warning %u", i);
		p->warnings[i].text = ml_reader_copy_string(ps->o, text, fw.text_len);
		p->warnings[i].shown = (fw.flags & ML_WARNING_SHOWN) != 0;
		if (!p->warnings[i].text)
			return ml_reader_set_err(ps->err, ps->errlen, -ENOMEM, "out of memory");
		p->n_warnings++;
	}
	if (c.left)
		return BAD(ps, "corrupt: %llu stray bytes after the last warning",
			   (unsigned long long)c.left);
	return 0;
}
