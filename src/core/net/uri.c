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
/* sun_path holds 108 bytes with the NUL. */
#define UNIX_PATH_MAX_LEN 107
#define DEFAULT_PORT 6379

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
	if (n > 0 && n <= 16 && dlock__uri_is_alpha((unsigned char)text[0])) {
		size_t i;

		for (i = 1; i < n; i++) {
			unsigned char c = (unsigned char)text[i];

			if (!dlock__uri_is_alpha(c) && !dlock__uri_is_digit(c) && c != '+' && c != '-' && c != '.')
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

	len = dlock__uri_bounded_len(text, URI_MAX_LEN + 1);
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
		if (!dlock__uri_is_ctl((unsigned char)*p))
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
