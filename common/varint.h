/* common/varint.h - ULEB128 varints, the packed columns of the profile
 * format (format.h): the runtime writes them, the report reads them.
 * Async-signal-safe, no allocation. */
#ifndef ML_COMMON_VARINT_H
#define ML_COMMON_VARINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ML_VARINT_MAX 10u	/* bytes of the longest (a 64-bit value) */

/* Writes v at out (ML_VARINT_MAX bytes of room); returns the bytes used. */
static inline size_t ml_varint_put(unsigned char *out, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (unsigned char)v;
	return n;
}

/* Reads one varint from [*at, end) into *v and advances *at.  False, with
 * *at unchanged, when the bytes end first or it is longer than 64 bits. */
static inline bool ml_varint_get(const unsigned char **at, const unsigned char *end, uint64_t *v)
{
	const unsigned char *p = *at;
	uint64_t x = 0;
	for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
		unsigned char b = *p++;
		if (shift == 63 && b > 1)
			return false;	/* past 64 bits */
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			*at = p;
			return true;
		}
	}
	return false;
}

#endif
