/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Parsing of redis://[[user]:password@]host[:port][/db] (rediss:// for TLS) and of
 * unix://[[user]:password@]/path/to/redis.sock[?db=N] (also redis+unix://,
 * as redis-py and go-redis spell it).
 *
 * This is the one place that reads connection text a user typed, so it is
 * strict (anything it does not understand is an error, never a guess) and
 * careful with secrets: no error message ever quotes text that could be part
 * of the password.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/net/uri.h"
#include "core/net/uri_parts.h"

#define URI_MAX_LEN 4096
#define HOST_MAX_LEN 255
/* sun_path holds 108 bytes with the NUL. */
#define UNIX_PATH_MAX_LEN 107
#define DEFAULT_PORT 6379

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

/* Whitespace and control bytes are never valid, raw, anywhere in a URI. */
static int is_ctl(unsigned char c)
{
	return c <= 0x20 || c == 0x7f;
}

static int is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int is_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_host_char(unsigned char c)
{
	return is_alpha(c) || is_digit(c) || c == '.' || c == '-' || c == '_';
}

static int hex_value(unsigned char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* strlen that stops looking past `max`, so a huge input costs nothing. */
static size_t bounded_len(const char *s, size_t max)
{
	size_t n = 0;

	while (n < max && s[n] != '\0')
		n++;
	return n;
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

/* Split `user:password` at the first ':' (a password may contain more). */
static int parse_userinfo(dlock__uri *u, const char *s, size_t n, char *err, size_t errlen)
{
	const char *colon = memchr(s, ':', n);
	size_t ulen;
	int rc;

	if (colon == NULL) {
		dlock__uri_seterr(err, errlen,
				"userinfo needs ':' (use :password@ or user:password@)");
		return DLOCK_EINVAL;
	}
	ulen = (size_t)(colon - s);
	if (ulen > 0) {
		rc = dlock__uri_decode_field(s, ulen, "user name", &u->user, err, errlen);
		if (rc != 0)
			return rc;
	}
	return dlock__uri_decode_field(
			colon + 1, n - ulen - 1, "password", &u->password, err, errlen);
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
		if (!is_digit((unsigned char)s[i])) {
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
	while (p < end && is_digit((unsigned char)*p))
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

enum scheme {
	SCHEME_TCP = 1,
	SCHEME_TLS,
	SCHEME_UNIX,
	SCHEME_SENTINEL,
	SCHEME_CLUSTER,
	SCHEME_CLUSTER_TLS
};

/* The schemes understood, with the length of their "name://". */
static const struct {
	const char *prefix;
	size_t len;
	enum scheme scheme;
} schemes[] = {
	{ "redis://", 8, SCHEME_TCP },
	{ "rediss://", 9, SCHEME_TLS },
	{ "unix://", 7, SCHEME_UNIX },
	{ "redis+unix://", 13, SCHEME_UNIX },
	{ "redis+sentinel://", 17, SCHEME_SENTINEL },
	{ "redis+cluster://", 16, SCHEME_CLUSTER },
	{ "rediss+cluster://", 17, SCHEME_CLUSTER_TLS },
};

/*
 * Which scheme text starts with; *skip is its length. A foreign scheme is
 * quoted only if it looks like one (RFC 3986 characters, short), so a
 * mangled URI is never echoed.
 */
static int check_scheme(const char *text, size_t len, size_t *skip, char *err, size_t errlen)
{
	const char *sep;
	size_t n;

	for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
		if (len >= schemes[i].len &&
				strncasecmp(text, schemes[i].prefix, schemes[i].len) == 0) {
			*skip = schemes[i].len;
			return (int)schemes[i].scheme;
		}
	}
	sep = strstr(text, "://");
	n = sep != NULL ? (size_t)(sep - text) : 0;
	if (n > 0 && n <= 16 && is_alpha((unsigned char)text[0])) {
		size_t i;

		for (i = 1; i < n; i++) {
			unsigned char c = (unsigned char)text[i];

			if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.')
				break;
		}
		if (i == n) {
			dlock__uri_seterr(err, errlen,
					"unsupported scheme \"%.*s\" in URI (expected redis://, "
					"rediss://, unix://, redis+sentinel:// or redis+cluster://)",
					(int)n, text);
			return DLOCK_EINVAL;
		}
	}
	dlock__uri_seterr(err, errlen,
			"URI must start with redis://, rediss://, unix://, redis+sentinel:// or "
			"redis+cluster://");
	return DLOCK_EINVAL;
}

/* A Unix socket's absolute path up to '?' or the end, percent-decoded. */
static int parse_unix_path(dlock__uri *u, const char *s, const char *end, const char **next,
		char *err, size_t errlen)
{
	const char *q = memchr(s, '?', (size_t)(end - s));
	const char *stop = q != NULL ? q : end;
	int rc;

	if (s == stop || *s != '/') {
		dlock__uri_seterr(err, errlen,
				"a unix:// URI needs an absolute socket path (unix:///path/to/redis.sock)");
		return DLOCK_EINVAL;
	}
	rc = dlock__uri_decode_field(s, (size_t)(stop - s), "socket path", &u->path, err, errlen);
	if (rc != 0)
		return rc;
	if (strlen(u->path) > UNIX_PATH_MAX_LEN) {
		dlock__uri_seterr(err, errlen, "socket path longer than %d bytes in URI",
				UNIX_PATH_MAX_LEN);
		return DLOCK_EINVAL;
	}
	*next = stop;
	return 0;
}

/* Nothing, or "?db=N": the one query a unix:// URI takes. */
static int parse_unix_query(dlock__uri *u, const char *s, const char *end, char *err, size_t errlen)
{
	if (s == end)
		return 0;
	if ((size_t)(end - s) <= 4 || strncmp(s, "?db=", 4) != 0) {
		dlock__uri_seterr(err, errlen, "a unix:// URI takes only ?db=N after the path");
		return DLOCK_EINVAL;
	}
	return dlock__uri_parse_db(u, s + 4, end, err, errlen);
}

/*
 * Everything before the last '@' is userinfo: host, port and db never
 * contain '@', and this way a password may hold '@', ':' or '/' even
 * unescaped. It also fixes which bytes are secret before any message is made.
 */
static int parse_tcp_rest(dlock__uri *u, const char *p, const char *end, char *err, size_t errlen)
{
	int rc;

	/* Caught up front so the message names the real problem, not a bad port or db. */
	if (memchr(p, '?', (size_t)(end - p)) != NULL) {
		dlock__uri_seterr(err, errlen, "query strings ('?') are not supported in URI");
		return DLOCK_EINVAL;
	}
	rc = dlock__uri_parse_host(u, p, end, &p, err, errlen);
	if (rc != 0)
		return rc;
	if (p < end && *p == ':') {
		rc = dlock__uri_parse_port(u, p + 1, end, &p, err, errlen);
		if (rc != 0)
			return rc;
	}
	if (p < end) {
		/* parse_host and parse_port stop only at ':' (handled), '/' or the end. */
		rc = dlock__uri_parse_db(u, p + 1, end, err, errlen);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int parse_unix_rest(dlock__uri *u, const char *p, const char *end, char *err, size_t errlen)
{
	int rc = parse_unix_path(u, p, end, &p, err, errlen);

	return rc != 0 ? rc : parse_unix_query(u, p, end, err, errlen);
}

static int parse(dlock__uri *u, const char *text, char *err, size_t errlen)
{
	const char *at, *p, *end;
	size_t len, skip = 0;
	int rc, scheme;

	len = bounded_len(text, URI_MAX_LEN + 1);
	if (len == 0) {
		dlock__uri_seterr(err, errlen, "URI is empty");
		return DLOCK_EINVAL;
	}
	if (len > URI_MAX_LEN) {
		dlock__uri_seterr(err, errlen, "URI is longer than %d bytes", URI_MAX_LEN);
		return DLOCK_EINVAL;
	}
	end = text + len;
	at = strrchr(text, '@');

	for (p = text; p < end; p++) {
		if (!is_ctl((unsigned char)*p))
			continue;
		if (at != NULL && p < at)
			dlock__uri_seterr(err, errlen,
					"whitespace or control character in userinfo of URI "
					"(percent-encode it)");
		else
			dlock__uri_seterr(err, errlen,
					"whitespace or control character 0x%02x at byte %zu of URI",
					(unsigned char)*p, (size_t)(p - text));
		return DLOCK_EINVAL;
	}

	scheme = check_scheme(text, len, &skip, err, errlen);
	if (scheme < 0)
		return scheme;
	p = text + skip;

	/* unix:///path has no userinfo: an '@' is then part of the path. */
	if (at != NULL && !(scheme == SCHEME_UNIX && *p == '/')) {
		rc = parse_userinfo(u, p, (size_t)(at - p), err, errlen);
		if (rc != 0)
			return rc;
		p = at + 1;
	}
	if (memchr(p, '#', (size_t)(end - p)) != NULL) {
		dlock__uri_seterr(err, errlen, "fragments ('#') are not supported in URI");
		return DLOCK_EINVAL;
	}
	if (scheme == SCHEME_UNIX)
		return parse_unix_rest(u, p, end, err, errlen);
	if (scheme == SCHEME_SENTINEL)
		return dlock__uri_parse_sentinel_rest(u, p, end, err, errlen);
	if (scheme == SCHEME_CLUSTER || scheme == SCHEME_CLUSTER_TLS) {
		u->tls = scheme == SCHEME_CLUSTER_TLS;
		return dlock__uri_parse_cluster_rest(u, p, end, err, errlen);
	}
	u->tls = scheme == SCHEME_TLS;
	return parse_tcp_rest(u, p, end, err, errlen);
}

int dlock__uri_parse(dlock__uri *out, const char *text, char *err, size_t errlen)
{
	dlock__uri u;
	int rc;

	dlock__uri_seterr(err, errlen, "%s", "");
	if (out == NULL) {
		dlock__uri_seterr(err, errlen, "URI output is NULL");
		return DLOCK_EINVAL;
	}
	memset(out, 0, sizeof *out);
	if (text == NULL) {
		dlock__uri_seterr(err, errlen, "URI is NULL");
		return DLOCK_EINVAL;
	}
	memset(&u, 0, sizeof u);
	u.port = DEFAULT_PORT;
	rc = parse(&u, text, err, errlen);
	if (rc != 0) {
		dlock__uri_clear(&u);
		return rc;
	}
	*out = u;
	return 0;
}

void dlock__uri_clear(dlock__uri *uri)
{
	if (uri == NULL)
		return;
	dlock__free(uri->user);
	dlock__free(uri->password);
	dlock__free(uri->host);
	dlock__free(uri->path);
	for (size_t i = 0; i < uri->n_hosts; i++)
		dlock__free(uri->hosts[i]);
	dlock__free(uri->hosts);
	dlock__free(uri->ports);
	dlock__free(uri->master);
	memset(uri, 0, sizeof *uri);
}
