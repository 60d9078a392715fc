/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Acquisitions on disk (client option sync_aof: WAITAOF 1 N behind every
 * acquisition). On Redis 7.2 and later: a primary and a replica that both
 * keep an append-only file count; a replica without one falls short
 * (DLOCK_ENOSYNC, given back); a primary without one is refused
 * (DLOCK_ESERVER, given back). Before 7.2 every acquisition is refused,
 * naming the version it needs. The server-version matrix (ci/versions.sh)
 * runs the first group on 8.2; the default run (7.0) the refusal.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

/* Generous: the CI runs these beside two CPU hogs. */
#define COMMAND_MS 1000
#define SLACK_MS 4000
#define WAITAOF_SINCE 70200

static const char *const aof_on[] = { "--appendonly", "yes", "--appendfsync", "always", NULL };

static void need_waitaof(int yes)
{
	int v = rh_server_version();

	if (v == 0)
		cr_skip_test("redis-server --version could not be read");
	if (yes && v < WAITAOF_SINCE)
		cr_skip_test("redis-server %d.%d has no WAITAOF (7.2+): ci/versions.sh runs this "
			     "on 8.2",
				v / 10000, v / 100 % 100);
	if (!yes && v >= WAITAOF_SINCE)
		cr_skip_test("redis-server %d.%d has WAITAOF", v / 10000, v / 100 % 100);
}

static dlock_client *aof_client(rh_server *s, int replicas, int64_t sync_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.command_timeout_ms = COMMAND_MS;
	o.sync_aof = replicas;
	o.sync_timeout_ms = sync_ms;
	return dl_client_opts(rh_server_uri(s), &o);
}

/* A server's INFO persistence field, as a number; -1 when absent. */
static long long persistence(rh_server *s, const char *field)
{
	redisReply *r = rh_command(s, "INFO persistence");
	long long v = -1;
	char key[64];
	const char *p;

	cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
	snprintf(key, sizeof key, "\n%s:", field);
	if ((p = strstr(r->str, key)) != NULL)
		v = strtoll(p + strlen(key), NULL, 10);
	freeReplyObject(r);
	return v;
}

/* Turn the append-only file on at run time and wait for its first rewrite. */
static void aof_enable(rh_server *s)
{
	int64_t deadline = rh_now_ms() + 20000;
	redisReply *r = rh_command(s, "CONFIG SET appendonly yes");

	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "CONFIG SET appendonly yes: %s",
			r != NULL && r->str != NULL ? r->str : "no reply");
	freeReplyObject(r);
	while (persistence(s, "aof_enabled") != 1 ||
			persistence(s, "aof_rewrite_in_progress") != 0 ||
			persistence(s, "aof_rewrite_scheduled") != 0) {
		cr_assert_lt(rh_now_ms(), deadline, "the AOF did not turn on within 20 s");
		rh_command_int(s, "PING");
	}
}

/* The owner's hold count on s; 0 when it has none. */
static int64_t count_on(rh_server *s, dlock_client *c, const char *name)
{
	char owner[64];
	redisReply *r;
	int64_t v = 0;

	dl_owner(c, owner, sizeof owner);
	r = rh_command(s, "HGET %s %s", name, owner);
	cr_assert_not_null(r);
	cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
	if (r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return v;
}

static int synced_of(const dlock_lock *l)
{
	int n = -2;

	dl_pass(dlock_lock_synced_replicas(&n, l));
	return n;
}

Test(sync_aof, primary_and_replica_fsync_it, .timeout = 90)
{
	rh_server *primary, *replica;
	dlock_client *c;
	dlock_lock *l;

	need_waitaof(1);
	primary = rh_server_start(aof_on);
	cr_assert_not_null(primary);
	replica = rh_replica_start(primary);
	cr_assert_not_null(replica, "replica did not come online");
	aof_enable(replica);
	c = aof_client(primary, 1, 5000);
	l = dl_lock(c, "aof-ok");
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 30000), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(synced_of(l), 1);
	cr_assert_eq(count_on(primary, c, "aof-ok"), 1);
	cr_assert_eq(rh_command_int(replica, "EXISTS aof-ok"), 1, "the replica has it");
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(replica);
	rh_server_free(primary);
}

/* WAIT would count this replica; WAITAOF does not: it keeps no AOF. */
Test(sync_aof, replica_without_aof_falls_short, .timeout = 90)
{
	const int64_t sync_ms = 500;
	rh_server *primary, *replica;
	dlock_client *c;
	dlock_lock *l;
	int64_t t0, took;
	int rc;

	need_waitaof(1);
	primary = rh_server_start(aof_on);
	cr_assert_not_null(primary);
	replica = rh_replica_start(primary);
	cr_assert_not_null(replica, "replica did not come online");
	c = aof_client(primary, 1, sync_ms);
	l = dl_lock(c, "aof-short");
	t0 = rh_now_ms();
	rc = dlock_lock_acquire(l, NULL, 0, 30000);
	took = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ENOSYNC, "rc %d: %s", rc, dlock_lock_errmsg(l));
	cr_assert_geq(took, sync_ms - 50, "gave up after %lld ms", (long long)took);
	cr_assert_lt(took, sync_ms + COMMAND_MS + SLACK_MS, "took %lld ms", (long long)took);
	cr_assert(strstr(dlock_lock_errmsg(l), "0 of 1 replicas fsynced") != NULL, "%s",
			dlock_lock_errmsg(l));
	cr_assert(strstr(dlock_lock_errmsg(l), "sync_aof") != NULL, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(synced_of(l), 0);
	cr_assert_eq(rh_command_int(primary, "EXISTS aof-short"), 0, "not rolled back");
	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(replica);
	rh_server_free(primary);
}

static void expect_refused(rh_server *s, const char *name, const char *says)
{
	dlock_client *c = aof_client(s, 1, 500);
	dlock_lock *l = dl_lock(c, name);
	int rc = dlock_lock_acquire(l, NULL, 0, 30000);

	cr_assert_eq(rc, DLOCK_ESERVER, "rc %d: %s", rc, dlock_lock_errmsg(l));
	cr_assert(strstr(dlock_lock_errmsg(l), says) != NULL, "%s", dlock_lock_errmsg(l));
	cr_assert(strstr(dlock_lock_errmsg(l), "given back") != NULL, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS %s", name), 0, "not rolled back");
	/* A wait does not ride a refusal out. */
	cr_assert_eq(dlock_lock_acquire(l, NULL, 2000, 30000), DLOCK_ESERVER, "%s", dlock_lock_errmsg(l));
	dlock_lock_free(l);
	dlock_client_free(c);
}

Test(sync_aof, primary_without_aof_is_refused, .timeout = 60)
{
	rh_server *s;

	need_waitaof(1);
	s = rh_server_start(NULL);
	cr_assert_not_null(s);
	expect_refused(s, "aof-off", "appendonly");
	rh_server_free(s);
}

Test(sync_aof, refused_before_7_2, .timeout = 60)
{
	rh_server *s;

	need_waitaof(0);
	s = rh_server_start(aof_on);
	cr_assert_not_null(s);
	expect_refused(s, "aof-old", "WAITAOF needs Redis 7.2");
	rh_server_free(s);
}

Test(sync_aof, more_replicas_to_ack_than_to_fsync_is_refused, .timeout = 10)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	o.sync_aof = 1;
	o.sync_replicas = 2;
	cr_assert_eq(dlock_client_new(&c, "redis://127.0.0.1:1", &o), DLOCK_EINVAL);
	cr_assert_null(c);
	o.sync_aof = -1;
	o.sync_replicas = 0;
	cr_assert_eq(dlock_client_new(&c, "redis://127.0.0.1:1", &o), DLOCK_EINVAL);
}
