/* report/demangle.c - C++ symbol names made readable, with libstdc++'s demangler. */
#include <stdlib.h>
#include <string.h>
#include "report/sym_internal.h"

/* libstdc++'s Itanium ABI demangler (the CLI links -lstdc++). */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *ml_sym_demangle(const char *name)
{
	int status = 0;
	char *out;

	/* Only Itanium names start with _Z; C names such as "main" or "Z" would
	 * otherwise be read as types by the demangler. */
	if (!name || strncmp(name, "_Z", 2) != 0)
		return NULL;
	out = __cxa_demangle(name, NULL, NULL, &status);
	if (status != 0) {
		free(out);
		return NULL;
	}
	return out;
}
