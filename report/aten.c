/* report/aten.c - ATen op names (see aten.h).  torchgen names the C++ entry
 * of operator name.overload at::_ops::name_overload::call (name alone
 * without an overload), so the id cannot be split back by itself
 * ("max_pool2d_with_indices_backward" has no overload, "add_Tensor" has
 * one): the profile's schemas, as PyTorch listed them, map each id to its
 * name.  Lookups are cached per function name (report/strtab.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/aten.h"
#include "report/strtab.h"

#define PREFIX "at::_ops::"
#define ID_MAX 256

/* A map from strings to op ids: interned keys, a value per key number. */
struct map {
	struct ml_strtab keys;
	uint32_t *values;	/* values[k] for key number k */
	size_t cap;
};

struct ml_aten {
	bool exact;
	struct ml_strtab names;	/* op id - 1 -> "aten::name" */
	struct map ids;		/* C++ id -> op id (0: not in the schemas) */
	struct map cache;	/* function name -> op id (0: no op) */
};

/* The value slot of key, made (zero) on first sight; *fresh says so.
 * NULL when out of memory. */
static uint32_t *map_slot(struct map *m, const char *key, bool *fresh)
{
	size_t before = m->keys.n;
	long k = ml_strtab_intern(&m->keys, key);
	if (k < 0)
		return NULL;
	if ((size_t)k >= m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		uint32_t *v = realloc(m->values, cap * sizeof(*v));
		if (!v)
			return NULL;
		m->values = v;
		m->cap = cap;
	}
	*fresh = m->keys.n > before;
	if (*fresh)
		m->values[k] = 0;
	return &m->values[k];
}

static void map_free(struct map *m)
{
	ml_strtab_free(&m->keys);
	free(m->values);
}

/* The id of op "aten::" + name, made on first use; 0 when out of memory. */
static uint32_t intern(struct ml_aten *a, const char *name)
{
	char full[ID_MAX + 8];
	snprintf(full, sizeof(full), "aten::%s", name);
	long k = ml_strtab_intern(&a->names, full);
	return k < 0 ? 0 : (uint32_t)k + 1;
}

int ml_aten_open(const struct ml_profile *p, struct ml_aten **out)
{
	struct ml_aten *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	const struct ml_profile_torch *t = &p->torch;
	a->exact = t->present && t->n_schemas > 0;
	for (uint32_t i = 0; i < t->n_schemas; i++) {
		const char *name = t->schemas[2 * i], *overload = t->schemas[2 * i + 1];
		char id[ID_MAX];
		bool fresh;
		snprintf(id, sizeof(id), "%s%s%s", name, overload[0] ? "_" : "", overload);
		uint32_t *slot = map_slot(&a->ids, id, &fresh);
		uint32_t op = slot ? intern(a, name) : 0;
		if (!op) {
			ml_aten_close(a);
			return -ENOMEM;
		}
		if (fresh)
			*slot = op;
	}
	*out = a;
	return 0;
}

void ml_aten_close(struct ml_aten *a)
{
	if (!a)
		return;
	ml_strtab_free(&a->names);
	map_free(&a->ids);
	map_free(&a->cache);
	free(a);
}

bool ml_aten_exact(const struct ml_aten *a)
{
	return a->exact;
}

bool ml_aten_cpp_id(const char *fn, char *buf, size_t len)
{
	const size_t plen = strlen(PREFIX);
	if (!fn || strncmp(fn, PREFIX, plen) != 0)
		return false;
	const char *id = fn + plen, *end = strstr(id, "::");
	if (!end || end == id || (size_t)(end - id) >= len)
		return false;
	const char *rest = end + 2;
	if (strncmp(rest, "call", 4) != 0 || (rest[4] != '(' && rest[4] != '\0'))
		return false;	/* redispatch, or a member of the op's struct */
	memcpy(buf, id, (size_t)(end - id));
	buf[end - id] = '\0';
	return true;
}

/* The op id of function fn, computed (ids map, else the C++ id); 0 for
 * no op or out of memory. */
static uint32_t resolve(struct ml_aten *a, const char *fn)
{
	char id[ID_MAX];
	bool fresh;
	if (!ml_aten_cpp_id(fn, id, sizeof(id)))
		return 0;
	uint32_t *slot = map_slot(&a->ids, id, &fresh);
	if (!slot)
		return 0;
	return *slot ? *slot : (*slot = intern(a, id));
}

uint32_t ml_aten_op(struct ml_aten *a, const struct ml_frame *fr)
{
	const char *fn = fr ? fr->function : NULL;
	bool fresh;
	if (!fn || fn[0] != 'a' || strncmp(fn, PREFIX, strlen(PREFIX)) != 0)
		return 0;
	uint32_t *slot = map_slot(&a->cache, fn, &fresh);
	if (!slot)
		return resolve(a, fn);
	if (fresh)
		*slot = resolve(a, fn);
	return *slot;
}

uint32_t ml_aten_count(const struct ml_aten *a)
{
	return (uint32_t)a->names.n;
}

const char *ml_aten_name(const struct ml_aten *a, uint32_t op)
{
	return op && op <= a->names.n ? a->names.str[op - 1] : NULL;
}

bool ml_aten_is_tensor_alloc(const struct ml_frame *fr)
{
	static const char name[] = "c10::alloc_cpu(";
	return fr && fr->function && strncmp(fr->function, name, sizeof(name) - 1) == 0;
}
