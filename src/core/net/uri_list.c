/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The URIs that list servers:
 *
 * redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/NAME[/db]
 *   The convention of redis-py's and Celery's Sentinel URLs (kombu,
 *   redis-sentinel-url): sentinels comma-separated (port 26379 by default),
 *   then the name the sentinels monitor the primary under, then the db. The
 *   userinfo is the primary's (and its replicas') password, as in redis://;
 *   the sentinels' own credentials, when they have any, are options
 *   (sentinel_user, sentinel_password), so that one secret never travels to
 *   servers that did not ask for it.
 *
 * redis+cluster://[[user]:password@]host[:port][,host[:port]...][/]
 *   Seed nodes of a Redis Cluster (port 6379 by default; any node will do,
 *   the others are learnt from it). A cluster has only db 0.
 */
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/net/uri_parts.h"

#define SENTINEL_PORT 26379
#define SEED_PORT 6379
#define HOSTS_MAX 16
#define MASTER_NAME_MAX 255

static size_t count_hosts(const char *p, const char *end)
{
	size_t n = 1;

	for (; p < end; p++)
		n += *p == ',';
	return n;
}

/* One "host[:port]" of the list, s..end, into slot i. */
static int parse_one(dlock__uri *u, size_t i, const char *s, const char *end, const char *what,
		int port, char *err, size_t errlen)
{
	dlock__uri one;
	const char *p;
	int rc;

	memset(&one, 0, sizeof one);
	one.port = port;
	if (s == end) {
		dlock__uri_seterr(err, errlen, "empty %s address in URI (%s %zu of the list)", what,
				what, i + 1);
		return DLOCK_EINVAL;
	}
	rc = dlock__uri_parse_host(&one, s, end, &p, err, errlen);
	if (rc == 0 && p < end && *p == ':')
		rc = dlock__uri_parse_port(&one, p + 1, end, &p, err, errlen);
	if (rc == 0 && p < end) {
		dlock__uri_seterr(err, errlen, "unexpected '/' in %s address of URI", what);
		rc = DLOCK_EINVAL;
	}
	if (rc != 0) {
		dlock__free(one.host);
		return rc;
	}
	u->hosts[i] = one.host;
	u->ports[i] = one.port;
	u->n_hosts = i + 1;
	return 0;
}

/* The comma-separated list s..end of sentinels or seed nodes (`what`). */
static int parse_hosts(dlock__uri *u, const char *s, const char *end, const char *what, int port,
		char *err, size_t errlen)
{
	size_t n = count_hosts(s, end), i;

	if (n > HOSTS_MAX) {
		dlock__uri_seterr(err, errlen, "more than %d %ss in URI", HOSTS_MAX, what);
		return DLOCK_EINVAL;
	}
	u->hosts = dlock__calloc(n, sizeof(*u->hosts));
	u->ports = dlock__calloc(n, sizeof(*u->ports));
	if (u->hosts == NULL || u->ports == NULL) {
		dlock__uri_seterr(err, errlen, "out of memory parsing URI");
		return DLOCK_ENOMEM;
	}
	for (i = 0; i < n; i++) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *stop = comma != NULL ? comma : end;
		int rc = parse_one(u, i, s, stop, what, port, err, errlen);

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
	rc = parse_hosts(u, p, slash, "sentinel", SENTINEL_PORT, err, errlen);
	if (rc == 0)
		rc = parse_master(u, slash + 1, end, err, errlen);
	return rc;
}

int dlock__uri_parse_cluster_rest(
		dlock__uri *u, const char *p, const char *end, char *err, size_t errlen)
{
	const char *slash;

	if (memchr(p, '?', (size_t)(end - p)) != NULL) {
		dlock__uri_seterr(err, errlen, "query strings ('?') are not supported in URI");
		return DLOCK_EINVAL;
	}
	slash = memchr(p, '/', (size_t)(end - p));
	if (slash != NULL && slash + 1 != end) {
		dlock__uri_seterr(err, errlen,
				"a redis+cluster:// URI takes no db or path (a cluster has only db 0)");
		return DLOCK_EINVAL;
	}
	u->cluster = 1;
	return parse_hosts(u, p, slash != NULL ? slash : end, "seed node", SEED_PORT, err, errlen);
}
