/* common/sigsafe.c - async-signal-safe string helpers (sigsafe.h). */
#include <string.h>
#include "common/sigsafe.h"

bool ml_sigsafe_append(char *dst, size_t cap, size_t *pos, const char *src)
{
	size_t n = strlen(src);
	if (*pos + n + 1 > cap)
		return false;
	memcpy(dst + *pos, src, n + 1);
	*pos += n;
	return true;
}

void ml_sigsafe_utoa(char out[24], uint64_t v)
{
	char tmp[24];
	size_t n = 0, i = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		out[i++] = tmp[--n];
	out[i] = '\0';
}
