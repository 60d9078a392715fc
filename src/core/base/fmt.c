/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>

#include "core/base/fmt.h"

void dlock__shown_name(char *out, size_t size, const char *name, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len && n + 8 < size; i++) {
		unsigned char ch = (unsigned char)name[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '\\')
			out[n++] = (char)ch;
		else
			n += (size_t)snprintf(out + n, size - n, "\\x%02x", ch);
	}
	if (i < len)
		n += (size_t)snprintf(out + n, size - n, "...");
	out[n] = '\0';
}
