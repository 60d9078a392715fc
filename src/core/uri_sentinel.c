/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/NAME[/db]
 *
 * The convention of redis-py's and Celery's Sentinel URLs (kombu,
 * redis-sentinel-url): sentinels comma-separated (port 26379 by default),
 * then the name the sentinels monitor the primary under, then the db. The
 * userinfo is the primary's (and its replicas') password, as in redis://;
 * the sentinels' own credentials, when they have any, are options
 * (sentinel_user, sentinel_password), so that one secret never travels to
 * servers that did not ask for it.
 */
#include <string.h>

#include "dlock/errors.h"
#include "core/alloc.h"
#include "core/uri_parts.h"

#define SENTINEL_PORT 26379
#define SENTINELS_MAX 16
#define MASTER_NAME_MAX 255

static size_t count_sentinels(const char *p, const char *end)
{
	size_t n = 1;

	for (; p < end; p++)
		n += *p == ',';
	return n;
}

/* One "host[:port]" of the list, s..end, into slot i. */
static int parse_sentinel(
		dlock__uri *u, size_t i, const char *s, const char *end, char *err, size_t errlen)
{
	dlock__uri one;
	const char *p;
	int rc;

	memset(&one, 0, sizeof one);
	one.port = SENTINEL_PORT;
	if (s == end) {
		dlock__uri_seterr(err, errlen,
				"empty sentinel address in URI (sentinel %zu of the list)", i + 1);
		return DLOCK_EINVAL;
	}
	rc = dlock__uri_parse_host(&one, s, end, &p, err, errlen);
	if (rc == 0 && p < end && *p == ':')
		rc = dlock__uri_parse_port(&one, p + 1, end, &p, err, errlen);
	if (rc == 0 && p < end) {
		dlock__uri_seterr(err, errlen, "unexpected '/' in sentinel address of URI");
		rc = DLOCK_EINVAL;
	}
	if (rc != 0) {
		dlock__free(one.host);
		return rc;
	}
	u->sentinel_hosts[i] = one.host;
	u->sentinel_ports[i] = one.port;
	u->n_sentinels = i + 1;
	return 0;
}

/* The comma-separated sentinel list s..end. */
static int parse_sentinels(dlock__uri *u, const char *s, const char *end, char *err, size_t errlen)
{
	size_t n = count_sentinels(s, end), i;

	if (n > SENTINELS_MAX) {
		dlock__uri_seterr(err, errlen, "more than %d sentinels in URI", SENTINELS_MAX);
		return DLOCK_EINVAL;
	}
	u->sentinel_hosts = dlock__calloc(n, sizeof(*u->sentinel_hosts));
	u->sentinel_ports = dlock__calloc(n, sizeof(*u->sentinel_ports));
	if (u->sentinel_hosts == NULL || u->sentinel_ports == NULL) {
		dlock__uri_seterr(err, errlen, "out of memory parsing URI");
		return DLOCK_ENOMEM;
	}
	for (i = 0; i < n; i++) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *stop = comma != NULL ? comma : end;
		int rc = parse_sentinel(u, i, s, stop, err, errlen);

		if (rc != 0)
			return rc;
		s = stop + 1;
	}
	return 0;
}

/* "/NAME[/db]": the primary's name, percent-decoded, then the db. */
static int parse_master(dlock__uri *u, const char *s, const char *end, char *err, size_t errlen)
{
	const char *slash = memchr(s, '/', (size_t)(end - s));
	const char *stop = slash != NULL ? slash : end;
	int rc;

	if (s == stop) {
		dlock__uri_seterr(err, errlen,
				"a redis+sentinel:// URI needs the primary's name after the sentinels "
				"(redis+sentinel://host:26379/mymaster)");
		return DLOCK_EINVAL;
	}
	if ((size_t)(stop - s) > MASTER_NAME_MAX) {
		dlock__uri_seterr(err, errlen, "primary name longer than %d bytes in URI",
				MASTER_NAME_MAX);
		return DLOCK_EINVAL;
	}
	rc = dlock__uri_decode_field(
			s, (size_t)(stop - s), "primary name", &u->master, err, errlen);
	if (rc == 0 && slash != NULL)
		rc = dlock__uri_parse_db(u, slash + 1, end, err, errlen);
	return rc;
}

int dlock__uri_parse_sentinel_rest(
		dlock__uri *u, const char *p, const char *end, char *err, size_t errlen)
{
	const char *slash;
	int rc;

	if (memchr(p, '?', (size_t)(end - p)) != NULL) {
		dlock__uri_seterr(err, errlen, "query strings ('?') are not supported in URI");
		return DLOCK_EINVAL;
	}
	slash = memchr(p, '/', (size_t)(end - p));
	if (slash == NULL) {
		dlock__uri_seterr(err, errlen,
				"a redis+sentinel:// URI needs the primary's name after the sentinels "
				"(redis+sentinel://host:26379/mymaster)");
		return DLOCK_EINVAL;
	}
	rc = parse_sentinels(u, p, slash, err, errlen);
	if (rc == 0)
		rc = parse_master(u, slash + 1, end, err, errlen);
	return rc;
}
