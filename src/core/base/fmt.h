/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: integers to decimal text, on every command's hot path (snprintf
 * costs ~10x); a name as messages show it. */
#ifndef DLOCK_CORE_FMT_H
#define DLOCK_CORE_FMT_H

#include <stddef.h>
#include <stdint.h>

/* Write v in decimal and a NUL into buf (24 bytes suffice); returns the length. */
static inline size_t dlock__fmt_i64(char *buf, int64_t v)
{
	char tmp[24];
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	size_t n = 0, i = 0;

	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		buf[i++] = '-';
	while (n > 0)
		buf[i++] = tmp[--n];
	buf[i] = '\0';
	return i;
}

/* A key's name as messages show it: printable bytes as they are, others as
 * \xNN escapes, "..." when it does not fit in `size`. */
void dlock__shown_name(char *out, size_t size, const char *name, size_t len);

#endif
