/* report/strtab.c - interned strings, numbered in order of arrival. */
#include <stdlib.h>
#include <string.h>
#include "report/strtab.h"

static uint64_t hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static int rehash(struct ml_strtab *t)
{
	size_t n = t->n_slots ? t->n_slots * 2 : 256;
	uint32_t *slots = calloc(n, sizeof(*slots));
	if (!slots)
		return -1;
	for (size_t i = 0; i < t->n; i++) {
		size_t s = hash(t->str[i]) & (n - 1);
		while (slots[s])
			s = (s + 1) & (n - 1);
		slots[s] = (uint32_t)i + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->n_slots = n;
	return 0;
}

long ml_strtab_intern(struct ml_strtab *t, const char *s)
{
	if (!s)
		s = "";
	if ((t->n + 1) * 2 > t->n_slots && rehash(t) < 0)
		return -1;
	size_t at = hash(s) & (t->n_slots - 1);
	for (; t->slots[at]; at = (at + 1) & (t->n_slots - 1))
		if (strcmp(t->str[t->slots[at] - 1], s) == 0)
			return (long)t->slots[at] - 1;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		char **str = realloc(t->str, cap * sizeof(*str));
		if (!str)
			return -1;
		t->str = str;
		t->cap = cap;
	}
	char *copy = strdup(s);
	if (!copy)
		return -1;
	t->str[t->n] = copy;
	t->slots[at] = (uint32_t)t->n + 1;
	return (long)t->n++;
}

void ml_strtab_free(struct ml_strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->str[i]);
	free(t->str);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
