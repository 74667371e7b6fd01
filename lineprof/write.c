/* lineprof/write.c - the SAMPLES and REGIONS sections (common/format.h),
 * written with the core's writer (the room's write_sections): no malloc,
 * no stdio. */
#include <string.h>
#include "core/core.h"
#include "lineprof/internal.h"

static void put_sample(const struct ml_lp_entry *e, void *arg)
{
	struct ml_writer *w = arg;
	struct ml_fmt_sample r = {
		.tid = e->tid, .depth = e->depth, .flags = e->flags,
		.count = __atomic_load_n(&e->count, __ATOMIC_RELAXED),
	};
	ml_writer_put(w, &r, sizeof(r));
	ml_writer_put(w, e->frames, e->depth * sizeof(uint64_t));
	ml_writer_record(w);
}

/* Sums what the records will hold, so the header matches them exactly. */
static void sum_sample(const struct ml_lp_entry *e, void *arg)
{
	*(uint64_t *)arg += __atomic_load_n(&e->count, __ATOMIC_RELAXED);
}

static void put_region(const struct ml_lp_region_info *r, void *arg)
{
	struct ml_writer *w = arg;
	struct ml_fmt_region rec = {
		.id = r->id, .parent = r->parent, .name_len = (uint32_t)strlen(r->name),
		.flags = r->flags, .count = r->count, .total_ns = r->total_ns,
		.alloc_bytes = r->alloc_bytes, .allocs = r->allocs,
	};
	ml_writer_put(w, &rec, sizeof(rec));
	ml_writer_put(w, r->name, rec.name_len);
	ml_writer_record(w);
}

void ml_lp_write_sections(struct ml_writer *w)
{
	if (ml_lp_config.lines) {
		ml_lp_sampler_pause(true);
		struct ml_fmt_sampling s = {
			.period_ns = ml_lp_config.period_ns,
			.dropped = ml_lp_sampletab_dropped(),
			.clock = ml_lp_config.clock,
			.flags = ml_lp_stepped_aside() ? ML_SAMPLING_STEPPED_ASIDE : 0,
			.threads = ml_lp_sampler_threads(),
		};
		ml_lp_sampletab_foreach(sum_sample, &s.samples);
		ml_writer_begin(w, ML_SEC_SAMPLES);
		ml_writer_put(w, &s, sizeof(s));
		ml_writer_record(w);
		ml_lp_sampletab_foreach(put_sample, w);
		ml_writer_end(w);
		ml_lp_sampler_pause(false);
	}
	if (ml_lp_regions_count()) {
		ml_writer_begin(w, ML_SEC_REGIONS);
		ml_lp_regions_foreach(put_region, w);
		ml_writer_end(w);
		ml_lp_spans_write(w);
	}
}
