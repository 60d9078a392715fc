/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The schemes beside redis://: unix:// (and redis+unix://) with the socket
 * path, optional userinfo and ?db=N, and the malformed forms with their
 * promise (DLOCK_EINVAL, one line, never the password, *out left zeroed);
 * rediss:// is redis:// with TLS; redis+sentinel:// lists sentinels and
 * names the primary.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "dlock/errors.h"
#include "core/net/uri.h"

typedef struct unix_case {
	const char *text;
	const char *user, *password, *path;
	int db;
} unix_case;

static const unix_case valid[] = {
	{ "unix:///tmp/redis.sock", NULL, NULL, "/tmp/redis.sock", 0 },
	{ "redis+unix:///tmp/redis.sock", NULL, NULL, "/tmp/redis.sock", 0 },
	{ "UNIX:///var/run/redis/redis-server.sock?db=3", NULL, NULL,
			"/var/run/redis/redis-server.sock", 3 },
	{ "unix://:hunter2@/tmp/r.sock?db=1", NULL, "hunter2", "/tmp/r.sock", 1 },
	{ "unix://app:p%40ss@/tmp/r.sock", "app", "p@ss", "/tmp/r.sock", 0 },
	/* No userinfo: an '@' in the path is the path's. */
	{ "unix:///tmp/a@b.sock", NULL, NULL, "/tmp/a@b.sock", 0 },
	{ "unix:///tmp/with%20space.sock", NULL, NULL, "/tmp/with space.sock", 0 },
};

static void assert_same(const char *what, const char *got, const char *want, const char *text)
{
	if (want == NULL)
		cr_assert_null(got, "%s: %s should be NULL", text, what);
	else
		cr_assert(got != NULL && strcmp(got, want) == 0, "%s: %s is \"%s\", want \"%s\"",
				text, what, got ? got : "(null)", want);
}

Test(uri_schemes, valid_forms, .timeout = 10)
{
	for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
		const unix_case *k = &valid[i];
		dlock__uri u;
		char err[256];
		int rc = dlock__uri_parse(&u, k->text, err, sizeof err);

		cr_assert_eq(rc, 0, "%s: rc %d (%s)", k->text, rc, err);
		assert_same("user", u.user, k->user, k->text);
		assert_same("password", u.password, k->password, k->text);
		assert_same("path", u.path, k->path, k->text);
		cr_assert_null(u.host, "%s: a Unix socket has no host", k->text);
		cr_assert_eq(u.db, k->db, "%s: db %d", k->text, u.db);
		dlock__uri_clear(&u);
	}
}

typedef struct bad_case {
	const char *text;
	const char *secret; /* must not appear in the message */
	const char *want;   /* must appear in it */
} bad_case;

static const bad_case invalid[] = {
	{ "unix://", NULL, "absolute socket path" },
	{ "unix://tmp/redis.sock", NULL, "absolute socket path" },
	{ "unix://:hunter2@tmp/r.sock", "hunter2", "absolute socket path" },
	{ "unix:///tmp/r.sock?db=", NULL, "?db=N" },
	{ "unix:///tmp/r.sock?timeout=3", NULL, "?db=N" },
	{ "unix:///tmp/r.sock?db=x", NULL, "db" },
	{ "unix:///tmp/r.sock?db=-1", NULL, "negative db" },
	{ "unix:///tmp/r.sock#frag", NULL, "fragments" },
	{ "unix:///tmp/%zz.sock", NULL, "%-escape in socket path" },
	{ "unix:///tmp/"
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	  "aaaaaaaaaaaaaaaaaaaa.sock",
			NULL, "longer than 107" },
	{ "redis+unix://:hunter2@/tmp/x y", "hunter2", "whitespace" },
	{ "redis+sentinel://h", NULL, "primary's name" },
	{ "redis+sentinel://h:26379/", NULL, "primary's name" },
	{ "redis+sentinel://:hunter2@h,/m", "hunter2", "empty sentinel address" },
	{ "redis+sentinel://,h/m", NULL, "empty sentinel address" },
	{ "redis+sentinel://h:0/m", NULL, "port" },
	{ "redis+sentinel://h/m/x", NULL, "db" },
	{ "redis+sentinel://h/m?x=1", NULL, "query" },
	{ "redis+sentinel://h/%zz", NULL, "%-escape in primary name" },
	{ "redis+sentinel://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q/m", NULL, "more than 16" },
	{ "redis+cluster://a/0", NULL, "no db" },
	{ "redis+cluster://", NULL, "empty seed node address" },
	{ "redis+cluster://a,,b", NULL, "empty seed node address" },
};

Test(uri_schemes, invalid_forms, .timeout = 10)
{
	static const dlock__uri zero;

	for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
		const bad_case *k = &invalid[i];
		dlock__uri u;
		char err[256] = "";
		int rc = dlock__uri_parse(&u, k->text, err, sizeof err);

		cr_assert_eq(rc, DLOCK_EINVAL, "\"%s\": rc %d, want DLOCK_EINVAL", k->text, rc);
		cr_assert(memcmp(&u, &zero, sizeof u) == 0, "\"%s\": *out must be zeroed", k->text);
		cr_assert_null(strchr(err, '\n'), "one line: %s", err);
		if (k->secret)
			cr_assert_null(strstr(err, k->secret), "message leaks the password: %s",
					err);
		cr_assert_not_null(strstr(err, k->want),
				"\"%s\": message \"%s\" should mention \"%s\"", k->text, err,
				k->want);
	}
}

Test(uri_schemes, rediss_is_redis_with_tls, .timeout = 10)
{
	static const char *const texts[] = { "rediss://:pw@cache.example.com:6380/2",
		"REDISS://cache.example.com:6380/2" };
	for (size_t i = 0; i < 2; i++) {
		dlock__uri u;
		char err[256];
		cr_assert_eq(dlock__uri_parse(&u, texts[i], err, sizeof err), 0, "%s", err);
		cr_assert_eq(u.tls, 1, "%s: not TLS", texts[i]);
		cr_assert_str_eq(u.host, "cache.example.com");
		cr_assert_eq(u.port, 6380);
		cr_assert_eq(u.db, 2);
		dlock__uri_clear(&u);
	}
	dlock__uri plain;
	char err[256];
	cr_assert_eq(dlock__uri_parse(&plain, "redis://h", err, sizeof err), 0);
	cr_assert_eq(plain.tls, 0, "redis:// must not be TLS");
	dlock__uri_clear(&plain);
}

Test(uri_schemes, sentinel_lists_sentinels_and_names_the_primary, .timeout = 10)
{
	dlock__uri u;
	char err[256];

	cr_assert_eq(dlock__uri_parse(&u,
				     "redis+sentinel://app:p%40ss@s1:26380,[::1],10.0.0.3:5000/my%20master/2",
				     err, sizeof err),
			0, "%s", err);
	cr_assert_eq(u.n_hosts, 3);
	cr_assert_str_eq(u.hosts[0], "s1");
	cr_assert_eq(u.ports[0], 26380);
	cr_assert_str_eq(u.hosts[1], "::1");
	cr_assert_eq(u.ports[1], 26379, "the default sentinel port");
	cr_assert_str_eq(u.hosts[2], "10.0.0.3");
	cr_assert_eq(u.ports[2], 5000);
	cr_assert_str_eq(u.master, "my master");
	cr_assert_eq(u.db, 2);
	cr_assert_str_eq(u.user, "app", "the userinfo is the primary's");
	cr_assert_str_eq(u.password, "p@ss");
	cr_assert_null(u.host, "no host: the sentinels say where the primary is");
	dlock__uri_clear(&u);

	cr_assert_eq(dlock__uri_parse(&u, "REDIS+SENTINEL://localhost/mymaster", err, sizeof err),
			0, "%s", err);
	cr_assert_eq(u.n_hosts, 1);
	cr_assert_eq(u.db, 0);
	dlock__uri_clear(&u);
}

Test(uri_schemes, cluster_lists_seed_nodes, .timeout = 10)
{
	dlock__uri u;
	char err[256];

	cr_assert_eq(dlock__uri_parse(&u, "redis+cluster://:pw@10.0.0.1:7000,10.0.0.2/", err,
				     sizeof err),
			0, "%s", err);
	cr_assert(u.cluster);
	cr_assert_eq(u.n_hosts, 2);
	cr_assert_str_eq(u.hosts[0], "10.0.0.1");
	cr_assert_eq(u.ports[0], 7000);
	cr_assert_eq(u.ports[1], 6379, "the default seed port");
	cr_assert_str_eq(u.password, "pw");
	cr_assert_null(u.master);
	cr_assert_eq(u.tls, 0);
	dlock__uri_clear(&u);
	cr_assert_eq(dlock__uri_parse(&u, "rediss+cluster://h", err, sizeof err), 0, "%s", err);
	cr_assert(u.cluster && u.tls, "rediss+cluster:// is TLS");
	dlock__uri_clear(&u);
}

/* The examples dlock_client_new()'s comment gives, one per form: each parses. */
Test(uri_schemes, the_documented_examples_parse, .timeout = 10)
{
	static const char *const documented[] = {
		"redis://:s3cret@10.0.0.5:6380/2",
		"redis://[::1]:6379",
		"rediss://app:s3cret@redis.example.com:6380",
		"unix:///var/run/redis/redis.sock?db=1",
		"redis+unix:///tmp/redis.sock",
		"redis+sentinel://:s3cret@10.0.0.1,10.0.0.2:26380/mymaster/0",
		"redis+cluster://10.0.0.1:7000,10.0.0.2:7000",
		"rediss+cluster://redis-1.example.com:7000",
	};

	for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++) {
		dlock__uri u;
		char err[256];
		int rc = dlock__uri_parse(&u, documented[i], err, sizeof err);

		cr_assert_eq(rc, 0, "%s: rc %d (%s)", documented[i], rc, err);
		dlock__uri_clear(&u);
	}
}

/* The comment says there is no TLS form of Sentinel: the parser agrees. */
Test(uri_schemes, rediss_sentinel_is_refused, .timeout = 10)
{
	dlock__uri u;
	char err[256];

	cr_assert_eq(dlock__uri_parse(&u, "rediss+sentinel://h/m", err, sizeof err), DLOCK_EINVAL);
	cr_assert_neq(strstr(err, "unsupported scheme"), NULL, "%s", err);
}
