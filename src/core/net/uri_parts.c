/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pieces the URI grammars are made of (uri_parts.h): messages, percent-
 * decoding, a host, a port, a db. Used by uri.c and uri_list.c, which use
 * each other not at all.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/net/uri.h"
#include "core/net/uri_parts.h"

#define HOST_MAX_LEN 255

/* Longest port / db text we quote back; longer digit runs are not echoed. */
#define PORT_ECHO_MAX 5
#define DB_ECHO_MAX 12

void dlock__uri_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int is_host_char(unsigned char c)
{
	return dlock__uri_is_alpha(c) || dlock__uri_is_digit(c) || c == '.' || c == '-' || c == '_';
}

static int hex_value(unsigned char c)
{
	if (dlock__uri_is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Bytes are printed as a character only when that cannot garble the line. */
static void describe_byte(unsigned char c, char buf[8])
{
	if (c > 0x20 && c < 0x7f)
		snprintf(buf, 8, "'%c'", c);
	else
		snprintf(buf, 8, "0x%02x", c);
}

/*
 * Percent-decode s[0..n) into a new string. `what` names the field in
 * messages; the field's text itself is never quoted, since it may be secret.
 */
int dlock__uri_decode_field(
		const char *s, size_t n, const char *what, char **out, char *err, size_t errlen)
{
	char *d = dlock__malloc(n + 1);
	size_t i, j = 0;

	if (d == NULL) {
		dlock__uri_seterr(err, errlen, "out of memory parsing URI");
		return DLOCK_ENOMEM;
	}
	for (i = 0; i < n; i++) {
		int hi, lo;

		if (s[i] != '%') {
			d[j++] = s[i];
			continue;
		}
		hi = i + 2 < n ? hex_value((unsigned char)s[i + 1]) : -1;
		lo = i + 2 < n ? hex_value((unsigned char)s[i + 2]) : -1;
		if (hi < 0 || lo < 0) {
			dlock__uri_seterr(err, errlen,
					"malformed %%-escape in %s of URI (expected %%XX)", what);
			dlock__free(d);
			return DLOCK_EINVAL;
		}
		if (hi == 0 && lo == 0) {
			/* A NUL would silently cut the C string short. */
			dlock__uri_seterr(err, errlen, "%%00 is not allowed in %s of URI", what);
			dlock__free(d);
			return DLOCK_EINVAL;
		}
		d[j++] = (char)(hi * 16 + lo);
		i += 2;
	}
	d[j] = '\0';
	*out = d;
	return 0;
}

/* `[addr]`, stored without brackets; inet_pton is the authority on IPv6 syntax. */
static int parse_ipv6(dlock__uri *u, const char *s, const char *end, const char **next, char *err,
		size_t errlen)
{
	const char *close = memchr(s, ']', (size_t)(end - s));
	unsigned char addr[16];
	char buf[INET6_ADDRSTRLEN];
	size_t n;

	if (close == NULL) {
		dlock__uri_seterr(err, errlen, "missing ']' after IPv6 address in URI");
		return DLOCK_EINVAL;
	}
	n = (size_t)(close - s - 1);
	if (n == 0) {
		dlock__uri_seterr(err, errlen, "empty IPv6 address \"[]\" in URI");
		return DLOCK_EINVAL;
	}
	if (n >= sizeof buf) {
		dlock__uri_seterr(err, errlen, "IPv6 address too long in URI");
		return DLOCK_EINVAL;
	}
	memcpy(buf, s + 1, n);
	buf[n] = '\0';
	if (inet_pton(AF_INET6, buf, addr) != 1) {
		dlock__uri_seterr(err, errlen, "bad IPv6 address \"%s\" in URI", buf);
		return DLOCK_EINVAL;
	}
	if (close + 1 < end && close[1] != ':' && close[1] != '/') {
		char b[8];

		describe_byte((unsigned char)close[1], b);
		dlock__uri_seterr(err, errlen, "unexpected %s after IPv6 address in URI", b);
		return DLOCK_EINVAL;
	}
	u->host = dlock__strndup(buf, n);
	if (u->host == NULL) {
		dlock__uri_seterr(err, errlen, "out of memory parsing URI");
		return DLOCK_ENOMEM;
	}
	*next = close + 1;
	return 0;
}

/* A hostname or IPv4 address: a run of [A-Za-z0-9._-] ending at ':', '/' or the end. */
int dlock__uri_parse_host(dlock__uri *u, const char *s, const char *end, const char **next,
		char *err, size_t errlen)
{
	const char *p = s;
	size_t n;

	if (p < end && *p == '[')
		return parse_ipv6(u, s, end, next, err, errlen);
	while (p < end && *p != ':' && *p != '/') {
		if (!is_host_char((unsigned char)*p)) {
			char b[8];

			describe_byte((unsigned char)*p, b);
			dlock__uri_seterr(err, errlen, "bad character %s in host of URI", b);
			return DLOCK_EINVAL;
		}
		p++;
	}
	n = (size_t)(p - s);
	if (n == 0) {
		/* "redis://::1" is the likely mistake behind an empty host before two colons. */
		if (p < end && *p == ':' && memchr(p + 1, ':', (size_t)(end - p - 1)) != NULL)
			dlock__uri_seterr(err, errlen,
					"empty host in URI (put IPv6 addresses in brackets: [::1])");
		else
			dlock__uri_seterr(err, errlen, "empty host in URI");
		return DLOCK_EINVAL;
	}
	if (n > HOST_MAX_LEN) {
		dlock__uri_seterr(err, errlen, "host longer than %d bytes in URI", HOST_MAX_LEN);
		return DLOCK_EINVAL;
	}
	u->host = dlock__strndup(s, n);
	if (u->host == NULL) {
		dlock__uri_seterr(err, errlen, "out of memory parsing URI");
		return DLOCK_ENOMEM;
	}
	*next = p;
	return 0;
}

/*
 * Decimal 1..65535. The digits are quoted back only when short: after a
 * forgotten '@', "redis://user:secret" puts the password where the port goes.
 */
int dlock__uri_parse_port(dlock__uri *u, const char *s, const char *end, const char **next,
		char *err, size_t errlen)
{
	const char *p = s;
	long v = 0;
	size_t n;

	while (p < end && *p != '/')
		p++;
	n = (size_t)(p - s);
	if (n == 0) {
		dlock__uri_seterr(err, errlen, "empty port after ':' in URI");
		return DLOCK_EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!dlock__uri_is_digit((unsigned char)s[i])) {
			/* "redis://2001:db8::1" lands here: the first group became the host. */
			if (memchr(s, ':', n) != NULL)
				dlock__uri_seterr(err, errlen,
						"port is not a decimal number in URI "
						"(put IPv6 addresses in brackets: [::1])");
			else
				dlock__uri_seterr(err, errlen,
						"port is not a decimal number in URI (1..65535)");
			return DLOCK_EINVAL;
		}
	}
	if (n > PORT_ECHO_MAX) {
		dlock__uri_seterr(err, errlen, "port out of range in URI (1..65535)");
		return DLOCK_EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	if (v < 1 || v > 65535) {
		dlock__uri_seterr(err, errlen, "bad port \"%.*s\" in URI (1..65535)", (int)n, s);
		return DLOCK_EINVAL;
	}
	u->port = (int)v;
	*next = p;
	return 0;
}

/* "/" alone or "/N" with N in 0..INT_MAX; nothing may follow. */
int dlock__uri_parse_db(dlock__uri *u, const char *s, const char *end, char *err, size_t errlen)
{
	const char *p = s;
	long long v = 0;
	size_t n;

	if (p == end)
		return 0;
	if (*p == '-') {
		dlock__uri_seterr(err, errlen, "negative db in URI (0..%d)", INT_MAX);
		return DLOCK_EINVAL;
	}
	while (p < end && dlock__uri_is_digit((unsigned char)*p))
		p++;
	n = (size_t)(p - s);
	if (n == 0) {
		dlock__uri_seterr(
				err, errlen, "db is not a decimal number in URI (0..%d)", INT_MAX);
		return DLOCK_EINVAL;
	}
	if (p < end) {
		char b[8];

		describe_byte((unsigned char)*p, b);
		dlock__uri_seterr(err, errlen, "unexpected %s after db in URI", b);
		return DLOCK_EINVAL;
	}
	if (n > DB_ECHO_MAX) {
		dlock__uri_seterr(err, errlen, "db out of range in URI (0..%d)", INT_MAX);
		return DLOCK_EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	if (v > INT_MAX) {
		dlock__uri_seterr(
				err, errlen, "bad db \"%.*s\" in URI (0..%d)", (int)n, s, INT_MAX);
		return DLOCK_EINVAL;
	}
	u->db = (int)v;
	return 0;
}
