/* report/view_regions.c - the regions view: the tree of named regions
 * (memline.h push/pop, NVTX ranges) with total wall time, count, self time
 * (total minus the child regions' totals) and heap memory allocated inside.
 * Text is a tree like Sample Factory's Timing view; JSON is ML-Agents'
 * timers.json shape (total, count, self, children keyed by name). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/view_common.h"
#include "report/units.h"

#define JSON_DEPTH_MAX 12	/* ml_json nests 32 levels: 2 per region + the document's */

/* Sum of the children's totals of region index i (0 = the root). */
static uint64_t children_ns(const struct ml_profile *p, uint32_t id)
{
	uint64_t sum = 0;
	for (size_t k = 0; k < p->n_regions; k++)
		if (p->regions[k].parent == id)
			sum += p->regions[k].total_ns;
	return sum;
}

static uint64_t children_bytes(const struct ml_profile *p, uint32_t id)
{
	uint64_t sum = 0;
	for (size_t k = 0; k < p->n_regions; k++)
		if (p->regions[k].parent == id)
			sum += p->regions[k].alloc_bytes;
	return sum;
}

static uint64_t sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;	/* parallel children can exceed their parent */
}

static void text_node(FILE *out, const struct ml_profile *p, uint32_t parent, int depth)
{
	for (size_t k = 0; k < p->n_regions; k++) {
		const struct ml_region *r = &p->regions[k];
		char mem[ML_UNITS_LEN];
		if (r->parent != parent)
			continue;
		fprintf(out, "%*s%s: %.4f  (count %llu, self %.4f, alloc %s in %llu allocs%s)\n",
			depth * 2, "", r->name, (double)r->total_ns / 1e9,
			(unsigned long long)r->count,
			(double)sub(r->total_ns, children_ns(p, r->id)) / 1e9,
			ml_units_bytes(r->alloc_bytes, mem, sizeof(mem)),
			(unsigned long long)r->allocs, (r->flags & ML_REGION_NVTX) ? ", nvtx" : "");
		text_node(out, p, r->id, depth + 1);
	}
}

static void json_fields(struct ml_json *j, uint64_t total_ns, uint64_t count, uint64_t self_ns,
			uint64_t bytes, uint64_t self_bytes, uint64_t allocs)
{
	ml_json_key(j, "total");
	ml_json_double(j, (double)total_ns / 1e9);
	ml_json_key(j, "count");
	ml_json_u64(j, count);
	ml_json_key(j, "self");
	ml_json_double(j, (double)self_ns / 1e9);
	ml_json_key(j, "total_ns");
	ml_json_u64(j, total_ns);
	ml_json_key(j, "self_ns");
	ml_json_u64(j, self_ns);
	ml_json_key(j, "alloc_bytes");
	ml_json_u64(j, bytes);
	ml_json_key(j, "self_alloc_bytes");
	ml_json_u64(j, self_bytes);
	ml_json_key(j, "allocs");
	ml_json_u64(j, allocs);
}

static void json_children(struct ml_json *j, const struct ml_profile *p, uint32_t parent,
			  int depth)
{
	ml_json_key(j, "children");
	ml_json_object_begin(j);
	for (size_t k = 0; depth < JSON_DEPTH_MAX && k < p->n_regions; k++) {
		const struct ml_region *r = &p->regions[k];
		if (r->parent != parent)
			continue;
		ml_json_key(j, r->name);
		ml_json_object_begin(j);
		json_fields(j, r->total_ns, r->count, sub(r->total_ns, children_ns(p, r->id)),
			    r->alloc_bytes, sub(r->alloc_bytes, children_bytes(p, r->id)), r->allocs);
		ml_json_key(j, "is_nvtx");
		ml_json_bool(j, (r->flags & ML_REGION_NVTX) != 0);
		json_children(j, p, r->id, depth + 1);
		ml_json_object_end(j);
	}
	ml_json_object_end(j);
}

int ml_view_regions(const struct ml_agg *a, const struct ml_view_opts *o, FILE *out,
		    struct ml_json *j)
{
	const struct ml_profile *p = a->profile;
	uint64_t run_ns = p->meta.duration_ns;
	(void)o;
	if (j) {
		/* The root is the whole run, as ML-Agents' root timer is. */
		ml_json_key(j, "name");
		ml_json_string(j, "root");
		json_fields(j, run_ns, 1, sub(run_ns, children_ns(p, 0)), a->totals[ML_KIND_HEAP].alloc_bytes,
			    sub(a->totals[ML_KIND_HEAP].alloc_bytes, children_bytes(p, 0)),
			    a->totals[ML_KIND_HEAP].allocs);
		json_children(j, p, 0, 0);
		return 0;
	}
	if (!p->n_regions) {
		fprintf(out, "No regions: the program marked none (memline.h's memline_push/"
			"memline_pop, or NVTX ranges).\n");
		return 0;
	}
	fprintf(out, "Region tree view (wall seconds; self excludes child regions; "
		"alloc: heap bytes allocated inside, children included):\n");
	text_node(out, p, 0, 0);
	return 0;
}
