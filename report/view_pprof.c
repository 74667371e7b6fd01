/* report/view_pprof.c - the pprof view: a gzipped profile.proto (encoded by
 * protobuf-c, compressed by zlib) with Go's heap-profile sample types, which
 * `go tool pprof` reads.  Every call-tree node where stacks end is a sample;
 * each call site (function, file, line) is a location with one line. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "report/flame.h"
#include "report/pprof/profile.pb-c.h"
#include "report/strtab.h"
#include "report/views.h"

struct pp_sample {
	uint64_t *locs;		/* leaf first */
	size_t n_locs;
	int64_t *vals;		/* the row of its profile's groups */
	uint32_t profile;
};

/* A profile added: where its groups' values go among the document's. */
struct pp_profile {
	int group[ML_KIND_COUNT + 1];	/* its group g is document group group[g] */
	size_t n_groups;
	bool has_time;
	size_t n_vals;
	uint64_t pid, period_ns;
};

struct site {
	int64_t fn, file, line;	/* string indexes, line number */
};

struct pp_doc {
	struct ml_strtab strings;
	struct ml_strtab sites;		/* "fn\tfile\tline" -> location id - 1 */
	struct ml_strtab funcs;		/* "fn\tfile" -> function id - 1 */
	struct site *site_of;		/* by location id - 1 */
	int64_t *func_name, *func_file;	/* by function id - 1 */
	size_t cap_sites, cap_funcs;
	struct pp_sample *samples;
	size_t n_samples, cap_samples;
	struct pp_profile *profiles;
	size_t n_profiles;
	const char *groups[ML_KIND_COUNT + 1];	/* the document's groups, by name */
	size_t n_groups;
	bool has_time;
	uint64_t period_ns, start_ns, duration_ns;
	long main_file;			/* the first profile's program, in strings */
	uint64_t *path;			/* the walk's location ids, root first */
	size_t cap_path;
};

static int pprof_begin(const struct ml_view_opts *o, void **state)
{
	struct pp_doc *d = calloc(1, sizeof(*d));
	(void)o;
	if (!d)
		return -ENOMEM;
	/* string 0 must be "" */
	if (ml_strtab_intern(&d->strings, "") < 0) {
		free(d);
		return -ENOMEM;
	}
	*state = d;
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 256;
	while (c < need)
		c *= 2;
	void *m = realloc(*p, c * size);
	if (!m)
		return -ENOMEM;
	*p = m;
	*cap = c;
	return 0;
}

/* The function id of (name, file), made on first sight; 0 on ENOMEM. */
static uint64_t function_id(struct pp_doc *d, int64_t name, int64_t file)
{
	char key[64];
	snprintf(key, sizeof(key), "%lld\t%lld", (long long)name, (long long)file);
	size_t before = d->funcs.n;
	long id = ml_strtab_intern(&d->funcs, key);
	if (id < 0)
		return 0;
	if (d->funcs.n != before) {
		size_t cap = d->cap_funcs;
		if (grow((void **)&d->func_name, &cap, d->funcs.n, sizeof(int64_t)) < 0 ||
		    grow((void **)&d->func_file, &d->cap_funcs, d->funcs.n, sizeof(int64_t)) < 0)
			return 0;
		d->func_name[id] = name;
		d->func_file[id] = file;
	}
	return (uint64_t)id + 1;
}

/* The location id of a tree node's call site; 0 on ENOMEM. */
static uint64_t location_id(struct pp_doc *d, const struct ml_flame_node *nd)
{
	long fn = ml_strtab_intern(&d->strings, nd->function);
	long file = ml_strtab_intern(&d->strings, nd->file ? nd->file : nd->module ? nd->module : "");
	if (fn < 0 || file < 0)
		return 0;
	char key[96];
	snprintf(key, sizeof(key), "%ld\t%ld\t%d", fn, file, nd->line);
	size_t before = d->sites.n;
	long id = ml_strtab_intern(&d->sites, key);
	if (id < 0)
		return 0;
	if (d->sites.n != before) {
		if (grow((void **)&d->site_of, &d->cap_sites, d->sites.n, sizeof(struct site)) < 0 ||
		    !function_id(d, fn, file))
			return 0;
		d->site_of[id] = (struct site){ fn, file, nd->line };
	}
	return (uint64_t)id + 1;
}

static bool row_nonzero(const int64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i])
			return true;
	return false;
}

static int add_sample(struct pp_doc *d, const struct ml_flame *t, uint32_t n, size_t depth)
{
	const int64_t *self = &t->self[(size_t)n * t->n_values];
	if (!row_nonzero(self, t->n_values))
		return 0;
	if (grow((void **)&d->samples, &d->cap_samples, d->n_samples + 1, sizeof(*d->samples)) < 0)
		return -ENOMEM;
	struct pp_sample *s = &d->samples[d->n_samples];
	s->locs = malloc(depth * sizeof(*s->locs));
	s->vals = malloc(t->n_values * sizeof(*s->vals));
	if (!s->locs || !s->vals) {
		free(s->locs);
		free(s->vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < depth; i++)
		s->locs[i] = d->path[depth - 1 - i];
	s->n_locs = depth;
	memcpy(s->vals, self, t->n_values * sizeof(*s->vals));
	s->profile = (uint32_t)(d->n_profiles - 1);
	d->n_samples++;
	return 0;
}

/* Adds a sample for every node of the subtree of n where stacks end;
 * depth is the number of location ids on d->path above n's children. */
static int walk(struct pp_doc *d, const struct ml_flame *t, uint32_t n, size_t depth)
{
	int err = 0;
	if (n) {
		if (grow((void **)&d->path, &d->cap_path, depth + 1, sizeof(*d->path)) < 0)
			return -ENOMEM;
		d->path[depth] = location_id(d, &t->nodes[n]);
		if (!d->path[depth])
			return -ENOMEM;
		depth++;
		err = add_sample(d, t, n, depth);
	}
	for (uint32_t c = t->nodes[n].first_child; c && err == 0; c = t->nodes[c].next_sibling)
		err = walk(d, t, c, depth);
	return err;
}

static int doc_group(struct pp_doc *d, const char *name)
{
	for (size_t g = 0; g < d->n_groups; g++)
		if (strcmp(d->groups[g], name) == 0)
			return (int)g;
	d->groups[d->n_groups] = name;	/* a static name: ml_kind_name or "cuda" */
	return (int)d->n_groups++;
}

static int pprof_add(void *state, const struct ml_agg *a, const struct ml_view_opts *o)
{
	struct pp_doc *d = state;
	struct ml_flame *t;
	int err = ml_flame_build(a, o->base, &t);
	if (err < 0)
		return err;
	struct pp_profile *pr = realloc(d->profiles, (d->n_profiles + 1) * sizeof(*pr));
	if (!pr) {
		ml_flame_free(t);
		return -ENOMEM;
	}
	d->profiles = pr;
	pr = &d->profiles[d->n_profiles++];
	*pr = (struct pp_profile){ .n_groups = t->n_groups, .has_time = t->has_time,
				   .n_vals = t->n_values, .pid = a->profile->meta.pid,
				   .period_ns = t->period_ns };
	for (size_t g = 0; g < t->n_groups; g++)
		pr->group[g] = doc_group(d, t->groups[g].name);
	if (t->has_time && !d->has_time) {
		d->has_time = true;
		d->period_ns = t->period_ns;
	}
	if (d->n_profiles == 1 &&
	    (d->main_file = ml_strtab_intern(&d->strings, a->profile->exe)) < 0) {
		ml_flame_free(t);
		return -ENOMEM;
	}
	const struct ml_fmt_meta *m = &a->profile->meta;
	if (d->n_profiles == 1 || m->start_realtime_ns < d->start_ns)
		d->start_ns = m->start_realtime_ns;
	if (m->duration_ns > d->duration_ns)
		d->duration_ns = m->duration_ns;
	err = walk(d, t, 0, 0);
	ml_flame_free(t);
	return err;
}

/* ---- the document: sample types, then the messages, packed and gzipped ---- */

static const struct {
	const char *type;
	const char *unit;
	enum ml_flame_field field;
} value_types[] = {
	{ "alloc_objects", "count", ML_FF_ALLOCS },
	{ "alloc_space", "bytes", ML_FF_ALLOC_BYTES },
	{ "inuse_objects", "count", ML_FF_PEAK_BLOCKS },	/* live at the peak */
	{ "inuse_space", "bytes", ML_FF_PEAK_BYTES },
	{ "leaked_objects", "count", ML_FF_LEAK_BLOCKS },	/* live at exit */
	{ "leaked_space", "bytes", ML_FF_LEAK_BYTES },
};
#define N_TYPES (sizeof(value_types) / sizeof(value_types[0]))

struct packed {
	Perftools__Profiles__Profile prof;
	Perftools__Profiles__ValueType *types, **type_ptrs, period_type;
	Perftools__Profiles__Sample *samples, **sample_ptrs;
	Perftools__Profiles__Label *labels, **label_ptrs;
	Perftools__Profiles__Location *locs, **loc_ptrs;
	Perftools__Profiles__Line *lines, **line_ptrs;
	Perftools__Profiles__Function *funcs, **func_ptrs;
	Perftools__Profiles__Mapping mapping, *mapping_ptr;
	int64_t *values, comment;
	size_t n_types;
};

static int sample_types(struct pp_doc *d, struct packed *pk)
{
	size_t n = d->n_groups * N_TYPES + (d->has_time ? 2 : 0);
	pk->types = calloc(n + 1, sizeof(*pk->types));
	pk->type_ptrs = calloc(n + 1, sizeof(*pk->type_ptrs));
	if (!pk->types || !pk->type_ptrs)
		return -ENOMEM;
	for (size_t g = 0; g < d->n_groups; g++)
		for (size_t k = 0; k < N_TYPES; k++) {
			char name[96];
			/* heap keeps Go's names; other kinds are prefixed */
			snprintf(name, sizeof(name), "%s%s%s", strcmp(d->groups[g], "heap") ? d->groups[g] : "",
				 strcmp(d->groups[g], "heap") ? "_" : "", value_types[k].type);
			Perftools__Profiles__ValueType *vt = &pk->types[pk->n_types++];
			perftools__profiles__value_type__init(vt);
			vt->type = ml_strtab_intern(&d->strings, name);
			vt->unit = ml_strtab_intern(&d->strings, value_types[k].unit);
		}
	if (d->has_time) {
		static const char *const tt[2][2] = { { "samples", "count" }, { "cpu", "nanoseconds" } };
		for (int k = 0; k < 2; k++) {
			Perftools__Profiles__ValueType *vt = &pk->types[pk->n_types++];
			perftools__profiles__value_type__init(vt);
			vt->type = ml_strtab_intern(&d->strings, tt[k][0]);
			vt->unit = ml_strtab_intern(&d->strings, tt[k][1]);
		}
	}
	for (size_t i = 0; i < pk->n_types; i++) {
		if (pk->types[i].type < 0 || pk->types[i].unit < 0)
			return -ENOMEM;
		pk->type_ptrs[i] = &pk->types[i];
	}
	return 0;
}

/* Sample i's values in the document's sample types. */
static void sample_values(const struct pp_doc *d, const struct pp_sample *s, int64_t *out,
			  size_t n_types)
{
	const struct pp_profile *pr = &d->profiles[s->profile];
	memset(out, 0, n_types * sizeof(*out));
	for (size_t g = 0; g < pr->n_groups; g++)
		for (size_t k = 0; k < N_TYPES; k++)
			out[(size_t)pr->group[g] * N_TYPES + k] = s->vals[ml_flame_vi(g, value_types[k].field)];
	if (pr->has_time) {
		int64_t samples = s->vals[pr->n_groups * ML_FF_COUNT];
		out[d->n_groups * N_TYPES] = samples;
		out[d->n_groups * N_TYPES + 1] = samples * (int64_t)pr->period_ns;
	}
}

static int pack_samples(struct pp_doc *d, struct packed *pk)
{
	size_t n = d->n_samples;
	long pid_key = ml_strtab_intern(&d->strings, "pid");
	pk->samples = calloc(n + 1, sizeof(*pk->samples));
	pk->sample_ptrs = calloc(n + 1, sizeof(*pk->sample_ptrs));
	pk->labels = calloc(n + 1, sizeof(*pk->labels));
	pk->label_ptrs = calloc(n + 1, sizeof(*pk->label_ptrs));
	pk->values = calloc(n * pk->n_types + 1, sizeof(*pk->values));
	if (pid_key < 0 || !pk->samples || !pk->sample_ptrs || !pk->labels || !pk->label_ptrs ||
	    !pk->values)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct pp_sample *s = &d->samples[i];
		Perftools__Profiles__Sample *m = &pk->samples[i];
		perftools__profiles__sample__init(m);
		m->n_location_id = s->n_locs;
		m->location_id = s->locs;
		m->n_value = pk->n_types;
		m->value = &pk->values[i * pk->n_types];
		sample_values(d, s, m->value, pk->n_types);
		Perftools__Profiles__Label *l = &pk->labels[i];
		perftools__profiles__label__init(l);
		l->key = pid_key;
		l->num = (int64_t)d->profiles[s->profile].pid;
		pk->label_ptrs[i] = l;
		m->n_label = 1;
		m->label = &pk->label_ptrs[i];
		pk->sample_ptrs[i] = m;
	}
	pk->prof.n_sample = n;
	pk->prof.sample = pk->sample_ptrs;
	return 0;
}

static int pack_locations(struct pp_doc *d, struct packed *pk)
{
	size_t n = d->sites.n, nf = d->funcs.n;
	pk->locs = calloc(n + 1, sizeof(*pk->locs));
	pk->loc_ptrs = calloc(n + 1, sizeof(*pk->loc_ptrs));
	pk->lines = calloc(n + 1, sizeof(*pk->lines));
	pk->line_ptrs = calloc(n + 1, sizeof(*pk->line_ptrs));
	pk->funcs = calloc(nf + 1, sizeof(*pk->funcs));
	pk->func_ptrs = calloc(nf + 1, sizeof(*pk->func_ptrs));
	if (!pk->locs || !pk->loc_ptrs || !pk->lines || !pk->line_ptrs || !pk->funcs || !pk->func_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < nf; i++) {
		Perftools__Profiles__Function *f = &pk->funcs[i];
		perftools__profiles__function__init(f);
		f->id = i + 1;
		f->name = f->system_name = d->func_name[i];
		f->filename = d->func_file[i];
		pk->func_ptrs[i] = f;
	}
	for (size_t i = 0; i < n; i++) {
		const struct site *s = &d->site_of[i];
		Perftools__Profiles__Line *ln = &pk->lines[i];
		perftools__profiles__line__init(ln);
		ln->function_id = function_id(d, s->fn, s->file);
		ln->line = s->line;
		pk->line_ptrs[i] = ln;
		Perftools__Profiles__Location *l = &pk->locs[i];
		perftools__profiles__location__init(l);
		l->id = i + 1;
		l->mapping_id = 1;
		l->n_line = 1;
		l->line = &pk->line_ptrs[i];
		pk->loc_ptrs[i] = l;
	}
	pk->prof.n_location = n;
	pk->prof.location = pk->loc_ptrs;
	/* One mapping, the program: the locations are call sites, already
	 * symbolized, not addresses. */
	perftools__profiles__mapping__init(&pk->mapping);
	pk->mapping.id = 1;
	pk->mapping.memory_limit = UINT64_MAX;
	pk->mapping.filename = d->main_file;
	pk->mapping.has_functions = pk->mapping.has_filenames = pk->mapping.has_line_numbers = true;
	pk->mapping.has_inline_frames = true;
	pk->mapping_ptr = &pk->mapping;
	pk->prof.n_mapping = 1;
	pk->prof.mapping = &pk->mapping_ptr;
	pk->prof.n_function = nf;
	pk->prof.function = pk->func_ptrs;
	return 0;
}

static int gzip_to(FILE *out, const uint8_t *buf, size_t len)
{
	z_stream z = { 0 };
	unsigned char chunk[1 << 16];
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)(uintptr_t)buf;
	z.avail_in = (uInt)len;
	int rc;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		rc = deflate(&z, Z_FINISH);
		fwrite(chunk, 1, sizeof(chunk) - z.avail_out, out);
	} while (rc == Z_OK);
	deflateEnd(&z);
	return rc == Z_STREAM_END && !ferror(out) ? 0 : -EIO;
}

static void free_packed(struct packed *pk)
{
	free(pk->types);
	free(pk->type_ptrs);
	free(pk->samples);
	free(pk->sample_ptrs);
	free(pk->labels);
	free(pk->label_ptrs);
	free(pk->locs);
	free(pk->loc_ptrs);
	free(pk->lines);
	free(pk->line_ptrs);
	free(pk->funcs);
	free(pk->func_ptrs);
	free(pk->values);
}

static int write_doc(struct pp_doc *d, FILE *out)
{
	struct packed pk = { 0 };
	perftools__profiles__profile__init(&pk.prof);
	int err = sample_types(d, &pk);
	if (err == 0)
		err = pack_locations(d, &pk);
	if (err == 0)
		err = pack_samples(d, &pk);
	long dflt = ml_strtab_intern(&d->strings, "inuse_space");
	long comment = ml_strtab_intern(&d->strings, "memline: inuse_* are the blocks live at the "
					"peak; leaked_* those live at exit");
	if (err == 0 && (dflt < 0 || comment < 0))
		err = -ENOMEM;
	uint8_t *buf = NULL;
	if (err == 0) {
		pk.prof.n_sample_type = pk.n_types;
		pk.prof.sample_type = pk.type_ptrs;
		pk.prof.default_sample_type = d->n_groups ? dflt : 0;
		pk.comment = comment;
		pk.prof.n_comment = 1;
		pk.prof.comment = &pk.comment;
		pk.prof.time_nanos = (int64_t)d->start_ns;
		pk.prof.duration_nanos = (int64_t)d->duration_ns;
		if (d->has_time) {
			perftools__profiles__value_type__init(&pk.period_type);
			pk.period_type.type = ml_strtab_intern(&d->strings, "cpu");
			pk.period_type.unit = ml_strtab_intern(&d->strings, "nanoseconds");
			pk.prof.period_type = &pk.period_type;
			pk.prof.period = (int64_t)d->period_ns;
		}
		pk.prof.n_string_table = d->strings.n;
		pk.prof.string_table = d->strings.str;
		size_t len = perftools__profiles__profile__get_packed_size(&pk.prof);
		buf = malloc(len + 1);
		if (!buf)
			err = -ENOMEM;
		else {
			perftools__profiles__profile__pack(&pk.prof, buf);
			err = gzip_to(out, buf, len);
		}
	}
	free(buf);
	free_packed(&pk);
	return err;
}

static int pprof_end(void *state, FILE *out)
{
	struct pp_doc *d = state;
	int err = out ? write_doc(d, out) : 0;
	for (size_t i = 0; i < d->n_samples; i++) {
		free(d->samples[i].locs);
		free(d->samples[i].vals);
	}
	free(d->samples);
	free(d->profiles);
	free(d->site_of);
	free(d->func_name);
	free(d->func_file);
	free(d->path);
	ml_strtab_free(&d->strings);
	ml_strtab_free(&d->sites);
	ml_strtab_free(&d->funcs);
	free(d);
	return err;
}

const struct ml_docview ml_docview_pprof = {
	.name = "pprof", .begin = pprof_begin, .add = pprof_add, .end = pprof_end, .binary = true,
};
