/* report/stackfmt.c - one symbolized stack as text (valgrind's at/by lines) or JSON. */
#include <string.h>
#include "report/views.h"
#include "report/view_common.h"
#include "report/units.h"

void ml_stack_print(FILE *out, const struct ml_agg_stack *st)
{
	if (st->n_frames == 0)
		fprintf(out, "   at %s (no program frames)\n", ML_AGG_UNKNOWN);
	for (size_t i = 0; i < st->n_frames; i++) {
		const struct ml_frame *fr = st->frames[i];
		const char *fn = fr->function ? fr->function : ML_AGG_UNKNOWN;
		fprintf(out, "   %s %s", i == 0 ? "at" : "by", fn);
		if (fr->file && fr->line > 0)
			fprintf(out, " (%s:%d)", ml_view_base_name(fr->file), fr->line);
		else if (fr->module)
			fprintf(out, " (in %s)", fr->module);
		fputs(fr->inlined ? " [inlined]\n" : "\n", out);
	}
	if (st->truncated)
		fputs("   ... (stack truncated at the capture depth)\n", out);
}

void ml_stack_json(struct ml_json *j, const struct ml_agg_stack *st)
{
	ml_json_array_begin(j);
	for (size_t i = 0; i < st->n_frames; i++) {
		const struct ml_frame *fr = st->frames[i];
		ml_json_object_begin(j);
		ml_json_key(j, "function");
		ml_json_string(j, fr->function);
		ml_json_key(j, "file");
		ml_json_string(j, fr->file);
		ml_json_key(j, "line");
		ml_json_i64(j, fr->line);
		ml_json_key(j, "module");
		ml_json_string(j, fr->module);
		ml_json_key(j, "module_offset");
		ml_json_u64(j, fr->module_offset);
		ml_json_key(j, "inlined");
		ml_json_bool(j, fr->inlined);
		ml_json_key(j, "python");
		ml_json_bool(j, fr->python);
		ml_json_object_end(j);
	}
	ml_json_array_end(j);
}

void ml_amount_json(struct ml_json *j, const struct ml_amount *m)
{
	ml_json_key(j, "allocs");
	ml_json_u64(j, m->allocs);
	ml_json_key(j, "alloc_bytes");
	ml_json_u64(j, m->alloc_bytes);
	ml_json_key(j, "frees");
	ml_json_u64(j, m->frees);
	ml_json_key(j, "freed_bytes");
	ml_json_u64(j, m->freed_bytes);
	ml_json_key(j, "leaked_blocks");
	ml_json_u64(j, m->live_blocks);
	ml_json_key(j, "leaked_bytes");
	ml_json_u64(j, m->live_bytes);
	ml_json_key(j, "peak_blocks");
	ml_json_u64(j, m->peak_blocks);
	ml_json_key(j, "peak_bytes");
	ml_json_u64(j, m->peak_bytes);
	if (m->estimated) {
		/* memline run --sample: the amounts are estimates; one standard
		 * deviation of each bytes amount. */
		ml_json_key(j, "estimated");
		ml_json_bool(j, true);
		ml_json_key(j, "samples");
		ml_json_u64(j, m->samples);
		ml_json_key(j, "alloc_bytes_stddev");
		ml_json_u64(j, ml_stddev(m->var_alloc_bytes));
		ml_json_key(j, "leaked_bytes_stddev");
		ml_json_u64(j, ml_stddev(m->var_live_bytes));
		ml_json_key(j, "peak_bytes_stddev");
		ml_json_u64(j, ml_stddev(m->var_peak_bytes));
	}
}
