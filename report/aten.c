/* report/aten.c - ATen op names (see aten.h).  torchgen names the C++ entry
 * of operator name.overload at::_ops::name_overload::call (name alone
 * without an overload), so the id cannot be split back by itself
 * ("max_pool2d_with_indices_backward" has no overload, "add_Tensor" has
 * one): the profile's schemas, as PyTorch listed them, map each id to its
 * name.  Lookups are cached per function name string. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/aten.h"

#define PREFIX "at::_ops::"
#define ID_MAX 256

struct entry {
	const char *key;	/* op name (names), C++ id (ids) or function name (cache) */
	uint32_t value;		/* op id; 0 in the cache: no op */
};

/* Open addressing on strings; slots hold entry index + 1. */
struct table {
	struct entry *entries;
	size_t n, cap;
	uint32_t *slots;
	size_t n_slots;
};

struct ml_aten {
	bool exact;
	struct table names;	/* "aten::name" -> op id; entries[id - 1].key is the name */
	struct table ids;	/* C++ id -> op id, from the schemas */
	struct table cache;	/* function name -> op id, or 0 */
	char **owned;		/* strings made here */
	size_t n_owned, cap_owned;
};

static uint64_t hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
	return h;
}

/* The entry of key, or NULL. */
static const struct entry *table_get(const struct table *t, const char *key)
{
	if (!t->n_slots)
		return NULL;
	for (size_t s = hash(key) & (t->n_slots - 1);; s = (s + 1) & (t->n_slots - 1)) {
		uint32_t k = t->slots[s];
		if (!k)
			return NULL;
		if (strcmp(t->entries[k - 1].key, key) == 0)
			return &t->entries[k - 1];
	}
}

static int table_grow(struct table *t)
{
	size_t n_slots = t->n_slots ? t->n_slots * 2 : 1024;
	uint32_t *slots = calloc(n_slots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++)
		for (size_t s = hash(t->entries[i].key) & (n_slots - 1);; s = (s + 1) & (n_slots - 1))
			if (!slots[s]) {
				slots[s] = (uint32_t)i + 1;
				break;
			}
	free(t->slots);
	t->slots = slots;
	t->n_slots = n_slots;
	return 0;
}

/* Adds key -> value (key must outlive t); a key present keeps its value. */
static int table_put(struct table *t, const char *key, uint32_t value)
{
	if (table_get(t, key))
		return 0;
	if ((t->n + 1) * 2 > t->n_slots && table_grow(t) < 0)
		return -ENOMEM;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct entry *e = realloc(t->entries, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		t->entries = e;
		t->cap = cap;
	}
	t->entries[t->n] = (struct entry){ key, value };
	for (size_t s = hash(key) & (t->n_slots - 1);; s = (s + 1) & (t->n_slots - 1))
		if (!t->slots[s]) {
			t->slots[s] = (uint32_t)++t->n;
			return 0;
		}
}

static void table_free(struct table *t)
{
	free(t->entries);
	free(t->slots);
}

/* A malloc'd string kept until ml_aten_close; NULL when out of memory. */
static char *own(struct ml_aten *a, size_t len)
{
	if (a->n_owned == a->cap_owned) {
		size_t cap = a->cap_owned ? a->cap_owned * 2 : 256;
		char **o = realloc(a->owned, cap * sizeof(*o));
		if (!o)
			return NULL;
		a->owned = o;
		a->cap_owned = cap;
	}
	char *s = malloc(len + 1);
	if (s)
		a->owned[a->n_owned++] = s;
	return s;
}

/* The id of op "aten::" + name, made on first use; 0 when out of memory. */
static uint32_t intern(struct ml_aten *a, const char *name)
{
	char full[ID_MAX + 8];
	snprintf(full, sizeof(full), "aten::%s", name);
	const struct entry *e = table_get(&a->names, full);
	if (e)
		return e->value;
	char *s = own(a, strlen(full));
	uint32_t id = (uint32_t)a->names.n + 1;
	if (!s)
		return 0;
	strcpy(s, full);
	return table_put(&a->names, s, id) < 0 ? 0 : id;
}

/* The C++ id of name.overload: "name" or "name_overload", kept. */
static const char *cpp_id(struct ml_aten *a, const char *name, const char *overload)
{
	size_t n = strlen(name), o = strlen(overload);
	char *s = own(a, n + 1 + o);
	if (!s)
		return NULL;
	memcpy(s, name, n);
	if (o) {
		s[n] = '_';
		memcpy(s + n + 1, overload, o + 1);
	} else {
		s[n] = '\0';
	}
	return s;
}

int ml_aten_open(const struct ml_profile *p, struct ml_aten **out)
{
	struct ml_aten *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	const struct ml_profile_torch *t = &p->torch;
	a->exact = t->present && t->n_schemas > 0;
	for (uint32_t i = 0; i < t->n_schemas; i++) {
		const char *id = cpp_id(a, t->schemas[2 * i], t->schemas[2 * i + 1]);
		uint32_t op = id ? intern(a, t->schemas[2 * i]) : 0;
		if (!op || table_put(&a->ids, id, op) < 0) {
			ml_aten_close(a);
			return -ENOMEM;
		}
	}
	*out = a;
	return 0;
}

void ml_aten_close(struct ml_aten *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n_owned; i++)
		free(a->owned[i]);
	free(a->owned);
	table_free(&a->names);
	table_free(&a->ids);
	table_free(&a->cache);
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
 * no op. */
static uint32_t resolve(struct ml_aten *a, const char *fn)
{
	char id[ID_MAX];
	if (!ml_aten_cpp_id(fn, id, sizeof(id)))
		return 0;
	const struct entry *e = table_get(&a->ids, id);
	return e ? e->value : intern(a, id);
}

uint32_t ml_aten_op(struct ml_aten *a, const struct ml_frame *fr)
{
	const char *fn = fr ? fr->function : NULL;
	if (!fn || fn[0] != 'a' || strncmp(fn, PREFIX, strlen(PREFIX)) != 0)
		return 0;
	const struct entry *e = table_get(&a->cache, fn);
	if (e)
		return e->value;
	uint32_t op = resolve(a, fn);
	char *key = own(a, strlen(fn));
	if (key) {
		strcpy(key, fn);
		table_put(&a->cache, key, op);
	}
	return op;
}

uint32_t ml_aten_count(const struct ml_aten *a)
{
	return (uint32_t)a->names.n;
}

const char *ml_aten_name(const struct ml_aten *a, uint32_t op)
{
	return op && op <= a->names.n ? a->names.entries[op - 1].key : NULL;
}

bool ml_aten_is_tensor_alloc(const struct ml_frame *fr)
{
	static const char name[] = "c10::alloc_cpu(";
	return fr && fr->function && strncmp(fr->function, name, sizeof(name) - 1) == 0;
}
