/* report/strtab.h - a string table: each distinct string once, numbered in
 * the order first seen (pprof's string_table, the HTML report's names). */
#ifndef ML_REPORT_STRTAB_H
#define ML_REPORT_STRTAB_H

#include <stddef.h>
#include <stdint.h>

struct ml_strtab {
	char **str;		/* str[i]: the string numbered i (owned copies) */
	size_t n;
	size_t cap;
	uint32_t *slots;	/* open addressing: number + 1, 0 empty */
	size_t n_slots;		/* a power of two */
};

/* The number of s (a NULL s counts as ""), added on first sight.  Returns
 * it, or -1 on ENOMEM.  Zero-initialise the table before the first call. */
long ml_strtab_intern(struct ml_strtab *t, const char *s);

void ml_strtab_free(struct ml_strtab *t);

#endif
