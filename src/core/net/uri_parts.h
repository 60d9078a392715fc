/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal to the URI parser (uri.c, uri_list.c): the pieces each
 * grammar is made of (uri_parts.c). Messages go to err; none quotes text that could be
 * part of a password.
 */
#ifndef DLOCK_CORE_URI_PARTS_H
#define DLOCK_CORE_URI_PARTS_H

#include <stddef.h>

#include "core/net/uri.h"

#if defined(__GNUC__) || defined(__clang__)
#define DLOCK__URI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define DLOCK__URI_PRINTF(f, a)
#endif

/* Whitespace and control bytes are never valid, raw, anywhere in a URI. */
static inline int dlock__uri_is_ctl(unsigned char c)
{
	return c <= 0x20 || c == 0x7f;
}

static inline int dlock__uri_is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static inline int dlock__uri_is_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* strlen that stops looking past `max`, so a huge input costs nothing. */
static inline size_t dlock__uri_bounded_len(const char *s, size_t max)
{
	size_t n = 0;

	while (n < max && s[n] != '\0')
		n++;
	return n;
}

void dlock__uri_seterr(char *err, size_t errlen, const char *fmt, ...) DLOCK__URI_PRINTF(3, 4);

/* Percent-decode s[0..n) into a new string; `what` names the field in messages. */
int dlock__uri_decode_field(
		const char *s, size_t n, const char *what, char **out, char *err, size_t errlen);

/* A host name, IPv4 or [IPv6] address into u->host, ending at ':', '/' or end. */
int dlock__uri_parse_host(dlock__uri *u, const char *s, const char *end, const char **next,
		char *err, size_t errlen);

/* Decimal 1..65535 into u->port, ending at '/' or end. */
int dlock__uri_parse_port(dlock__uri *u, const char *s, const char *end, const char **next,
		char *err, size_t errlen);

/* "" or N in 0..INT_MAX into u->db; nothing may follow. */
int dlock__uri_parse_db(dlock__uri *u, const char *s, const char *end, char *err, size_t errlen);

/* redis+sentinel:// and redis+cluster://: everything after the userinfo (uri_list.c). */
int dlock__uri_parse_sentinel_rest(
		dlock__uri *u, const char *p, const char *end, char *err, size_t errlen);
int dlock__uri_parse_cluster_rest(
		dlock__uri *u, const char *p, const char *end, char *err, size_t errlen);

#endif
