/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RLock and client failures on real redis-server processes: a flushed script
 * cache, a key of the wrong type, wrong credentials (password and ACL user),
 * database selection, an unreachable port, a paused server, dropped pooled
 * connections, bad options and URIs, and the error strings.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

/* ---- helpers ------------------------------------------------------------- */

static void node_of(const rh_server *s, char *buf, size_t len)
{
	snprintf(buf, len, "127.0.0.1:%d", rh_server_port(s));
}

/* HGET name field as a number; -1 when absent. */
static int64_t hget_count(rh_server *s, const char *name, const char *field)
{
	redisReply *r = rh_command(s, "HGET %s %s", name, field);

	cr_assert_not_null(r);
	int64_t v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
	cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL,
			"HGET: reply type %d", r->type);
	freeReplyObject(r);
	return v;
}

/* The same for this thread's owner on c: its hold count of name. */
static int64_t my_count(rh_server *s, dlock_client *c, const char *name)
{
	char owner[64];

	dl_owner(c, owner, sizeof owner);
	return hget_count(s, name, owner);
}

/* Lock then unlock `name` once and check what Redis holds meanwhile. */
static void lock_unlock_cycle(rh_server *s, dlock_client *c, const char *name)
{
	dlock_lock *l = dl_lock(c, name);

	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "lock %s: %s", name, dlock_lock_errmsg(l));
	cr_assert_eq(my_count(s, c, name), 1);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "unlock %s: %s", name, dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS %s", name), 0);
	dlock_lock_free(l);
}

/* A loopback port nothing listens on (bound once to find it, then closed). */
static int dead_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;

	cr_assert_geq(fd, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = 0;
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void opts_init(dlock_client_options *o)
{
	cr_assert_eq(dlock_client_options_init(o, DLOCK_CLIENT_OPTIONS_VERSION), 0);
}

/* A client on s whose commands time out after command_timeout_ms. */
static dlock_client *open_with_timeout(rh_server *s, int command_timeout_ms)
{
	dlock_client_options o;

	opts_init(&o);
	o.command_timeout_ms = command_timeout_ms;
	return dl_client_opts(rh_server_uri(s), &o);
}

/* ---- 1. SCRIPT FLUSH ----------------------------------------------------- */

/* Each test gets a fresh server (Criterion runs init/fini in its process). */
TestSuite(rlock_errors, .init = dl_server_start, .fini = dl_server_stop);

Test(rlock_errors, script_flush_falls_back_to_eval, .timeout = 30)
{
	rh_server *s = dl_srv;
	dlock_client *c = dl_client_opts(rh_server_uri(s), NULL);
	dlock_lock *l = dl_lock(c, "flushed");

	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));

	redisReply *r = rh_command(s, "SCRIPT FLUSH");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);

	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0, "after SCRIPT FLUSH: %s", dlock_lock_errmsg(l));
	cr_assert_eq(my_count(s, c, "flushed"), 1);
	r = rh_command(s, "SCRIPT FLUSH");
	cr_assert_not_null(r);
	freeReplyObject(r);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "after SCRIPT FLUSH: %s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS flushed"), 0);

	/* Force unlock (its own script) after a flush, too. */
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0);
	r = rh_command(s, "SCRIPT FLUSH");
	cr_assert_not_null(r);
	freeReplyObject(r);
	int deleted = -1;
	cr_assert_eq(dlock_lock_force_release(&deleted, l), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(deleted, 1);
	cr_assert_eq(rh_command_int(s, "EXISTS flushed"), 0);

	dlock_lock_free(l);
	dlock_client_free(c);
}

/* ---- 2. WRONGTYPE -------------------------------------------------------- */

Test(rlock_errors, wrongtype_key_is_reported_and_left_alone, .timeout = 30)
{
	rh_server *s = dl_srv;
	char node[64];
	node_of(s, node, sizeof node);
	redisReply *r = rh_command(s, "SET %s %s", "stringkey", "x");
	cr_assert_not_null(r);
	freeReplyObject(r);

	dlock_client *c = dl_client_opts(rh_server_uri(s), NULL);
	dlock_lock *l = dl_lock(c, "stringkey");

	int rc = dlock_lock_acquire(l, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_EWRONGTYPE, "rc %d (%s): %s", rc, dlock_strerror(rc),
			dlock_lock_errmsg(l));
	const char *msg = dlock_lock_errmsg(l);
	cr_assert_not_null(strstr(msg, "WRONGTYPE"), "message: %s", msg);
	cr_assert_not_null(strstr(msg, node), "message \"%s\" should name %s", msg, node);
	cr_assert_null(strchr(msg, '\n'), "one line: %s", msg);

	/* The waiting path and the watchdog lease give the same answer. */
	rc = dlock_lock_acquire(l, NULL, 500, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, DLOCK_EWRONGTYPE, "rc %d", rc);
	rc = dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000);
	cr_assert_eq(rc, DLOCK_EWRONGTYPE, "rc %d", rc);
	rc = dlock_lock_release(l, NULL);
	cr_assert_eq(rc, DLOCK_EWRONGTYPE, "unlock: rc %d", rc);

	r = rh_command(s, "GET stringkey");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING);
	cr_assert_str_eq(r->str, "x");
	freeReplyObject(r);
	cr_assert_eq(rh_command_int(s, "PTTL stringkey"), -1, "the key got a TTL");

	/* The client still works for another name. */
	lock_unlock_cycle(s, c, "other-name");

	dlock_lock_free(l);
	dlock_client_free(c);
}

/* ---- 3. credentials ------------------------------------------------------ */

static void expect_eauth(rh_server *s, const char *userinfo, const char *secret)
{
	char uri[256], node[64];
	dlock_client *c = (dlock_client *)0x1;

	node_of(s, node, sizeof node);
	snprintf(uri, sizeof uri, "redis://%s@127.0.0.1:%d", userinfo, rh_server_port(s));
	int rc = dlock_client_new(&c, uri, NULL);
	cr_assert_eq(rc, DLOCK_EAUTH, "%s: rc %d (%s) %s", userinfo, rc, dlock_strerror(rc),
			dlock_errmsg_last());
	cr_assert_null(c, "*out must be NULL on failure");
	const char *msg = dlock_errmsg_last();
	cr_assert_not_null(strstr(msg, node), "message \"%s\" should name %s", msg, node);
	cr_assert_null(strstr(msg, secret), "message leaks the password: %s", msg);
}

Test(rlock_errors, wrong_password_and_acl_user, .timeout = 30)
{
	const char *const extra[] = { "--requirepass", "s3cret", NULL };
	rh_server *s = rh_server_start(extra);
	cr_assert_not_null(s);
	char uri[256];
	int port = rh_server_port(s);

	expect_eauth(s, ":wrong", "wrong");
	expect_eauth(s, ":pw-Zq81xv", "Zq81xv");

	snprintf(uri, sizeof uri, "redis://:s3cret@127.0.0.1:%d", port);
	dlock_client *c = dl_client_opts(uri, NULL);
	cr_assert_eq(dlock_client_ping(c), 0, "%s", dlock_client_errmsg(c));
	lock_unlock_cycle(s, c, "auth-lock");
	dlock_client_free(c);

	redisReply *r = rh_command(s, "ACL SETUSER alice on >pw ~* &* +@all");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STATUS, "ACL SETUSER: %s",
			r->type == REDIS_REPLY_ERROR ? r->str : "?");
	freeReplyObject(r);

	snprintf(uri, sizeof uri, "redis://alice:pw@127.0.0.1:%d", port);
	c = dl_client_opts(uri, NULL);
	lock_unlock_cycle(s, c, "alice-lock");
	dlock_client_free(c);

	expect_eauth(s, "alice:bad", "bad");
	expect_eauth(s, "alice:Qv93-nope", "Qv93-nope");
	expect_eauth(s, "mallory:pw", "mallory:pw");

	/* The same refusal with a lazy client surfaces at first use. */
	dlock_client_options o;
	opts_init(&o);
	o.lazy_connect = 1;
	snprintf(uri, sizeof uri, "redis://alice:Qv93-nope@127.0.0.1:%d", port);
	c = dl_client_opts(uri, &o);
	dlock_lock *l = dl_lock(c, "lazy-auth");
	int rc = dlock_lock_acquire(l, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_EAUTH, "rc %d %s", rc, dlock_lock_errmsg(l));
	cr_assert_null(strstr(dlock_lock_errmsg(l), "Qv93-nope"));
	cr_assert_eq(rh_command_int(s, "EXISTS lazy-auth"), 0);
	dlock_lock_free(l);
	dlock_client_free(c);

	rh_server_free(s);
}

/*
 * lazy_connect = 0 promises that open "connects and authenticates before
 * returning, so a bad password ... fails there": a missing password for a
 * server that requires one is a bad password too.
 */
Test(rlock_errors, missing_password_fails_at_open, .timeout = 30)
{
	const char *const extra[] = { "--requirepass", "s3cret", NULL };
	rh_server *s = rh_server_start(extra);
	cr_assert_not_null(s);
	char node[64];
	node_of(s, node, sizeof node);

	dlock_client *c = NULL;
	int rc = dlock_client_new(&c, rh_server_uri(s), NULL);
	if (c != NULL) {
		/* Show what the first use says, then fail on the open. */
		dlock_lock *l = dl_lock(c, "nopass");
		int first = dlock_lock_acquire(l, NULL, 0, 1000);
		char msg[512];
		snprintf(msg, sizeof msg, "%s", dlock_lock_errmsg(l));
		dlock_lock_free(l);
		dlock_client_free(c);
		rh_server_free(s);
		cr_assert_eq(rc, DLOCK_EAUTH,
				"open without a password succeeded (rc %d); the first lock then gave %d: %s",
				rc, first, msg);
	}
	cr_assert_eq(rc, DLOCK_EAUTH, "rc %d %s", rc, dlock_errmsg_last());
	cr_assert_not_null(strstr(dlock_errmsg_last(), node), "message: %s", dlock_errmsg_last());
	rh_server_free(s);
}

/* ---- 4. database selection ----------------------------------------------- */

Test(rlock_errors, db_in_uri_selects_the_database, .timeout = 30)
{
	rh_server *s = dl_srv;
	char uri[128], owner[64];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/3", rh_server_port(s));
	dlock_client *c = dl_client_opts(uri, NULL);
	dlock_lock *l = dl_lock(c, "db-lock");
	dl_owner(c, owner, sizeof owner);

	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0, "%s", dlock_lock_errmsg(l));

	struct timeval tv = { 2, 0 };
	redisContext *raw = redisConnectWithTimeout("127.0.0.1", rh_server_port(s), tv);
	cr_assert_not_null(raw);
	cr_assert_eq(raw->err, 0);
	redisReply *r = redisCommand(raw, "EXISTS db-lock");
	cr_assert_not_null(r);
	cr_assert_eq(r->integer, 0, "the lock key is in db 0");
	freeReplyObject(r);
	r = redisCommand(raw, "SELECT 3");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	r = redisCommand(raw, "EXISTS db-lock");
	cr_assert_not_null(r);
	cr_assert_eq(r->integer, 1, "the lock key is not in db 3");
	freeReplyObject(r);
	r = redisCommand(raw, "HGET db-lock %s", owner);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING);
	cr_assert_str_eq(r->str, "1");
	freeReplyObject(r);

	/* Queries and unlock go to db 3 as well. */
	int is_locked = 0;
	cr_assert_eq(dlock_lock_is_locked(&is_locked, l), 0);
	cr_assert_eq(is_locked, 1);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	r = redisCommand(raw, "EXISTS db-lock");
	cr_assert_not_null(r);
	cr_assert_eq(r->integer, 0);
	freeReplyObject(r);
	cr_assert_eq(rh_command_int(s, "DBSIZE"), 0, "something was written to db 0");

	redisFree(raw);
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* ---- 5. unreachable server ----------------------------------------------- */

Test(rlock_errors, unreachable_server_fails_fast_with_econn, .timeout = 30)
{
	int port = dead_port();
	char uri[128], node[64];
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", port);
	snprintf(node, sizeof node, "127.0.0.1:%d", port);

	dlock_client_options o;
	opts_init(&o);
	o.connect_timeout_ms = 500;
	dlock_client *c = (dlock_client *)0x1;
	int64_t t0 = rh_now_ms();
	int rc = dlock_client_new(&c, uri, &o);
	int64_t elapsed = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ECONN, "rc %d (%s) %s", rc, dlock_strerror(rc), dlock_errmsg_last());
	cr_assert_null(c);
	cr_assert_lt(elapsed, 500 + 200, "open took %" PRId64 " ms", elapsed);
	cr_assert_not_null(strstr(dlock_errmsg_last(), node), "message: %s", dlock_errmsg_last());

	o.lazy_connect = 1;
	c = dl_client_opts(uri, &o);
	cr_assert_str_eq(dlock_client_node(c), node);
	dlock_lock *l = dl_lock(c, "nowhere");
	/* One attempt: under two connect timeouts (500 ms) and 200 ms. */
	dl_assert_try(l, 0, 10000, DLOCK_ECONN, 0, 1199);
	cr_assert_not_null(strstr(dlock_lock_errmsg(l), node), "message: %s", dlock_lock_errmsg(l));
	/* A wait rides out a transient error until it is used up, then says what failed. */
	dl_assert_try(l, 1000, DLOCK_LEASE_WATCHDOG, DLOCK_ECONN, 1000, 1799);
	cr_assert_eq(dlock_client_ping(c), DLOCK_ECONN);
	cr_assert_not_null(strstr(dlock_client_errmsg(c), node), "message: %s",
			dlock_client_errmsg(c));

	dlock_lock_free(l);
	dlock_client_free(c);
}

/* ---- 6. paused server ---------------------------------------------------- */

Test(rlock_errors, paused_server_times_out_and_client_recovers, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	char node[64];
	node_of(s, node, sizeof node);
	dlock_client *c = open_with_timeout(s, 300);
	dlock_lock *l = dl_lock(c, "paused");

	/* Warm the script cache, so the acquire sent to the paused server is an
	 * EVALSHA that runs when the server wakes up (not a NOSCRIPT). */
	lock_unlock_cycle(s, c, "warm-up");

	cr_assert_eq(rh_server_pause(s), 0);
	dl_assert_try(l, 0, 10000, DLOCK_ETIMEDOUT, 250, 1000);
	cr_assert_not_null(strstr(dlock_lock_errmsg(l), node), "message: %s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_server_resume(s), 0);

	/*
	 * The timed-out acquire is still in the server's socket buffer and runs
	 * once the server wakes up (await it, bounded). Either way one more
	 * acquire must leave exactly one hold, and every reply must match its
	 * command (the timed-out connection was not reused).
	 */
	int64_t until = rh_now_ms() + 1000;
	while (rh_command_int(s, "EXISTS paused") != 1 && rh_now_ms() < until)
		usleep(5 * 1000);
	int rc = dlock_lock_acquire(l, NULL, 0, 10000);
	cr_assert_eq(rc, 0, "after resume: rc %d %s", rc, dlock_lock_errmsg(l));
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0);
	cr_assert_eq(n, 1, "hold count %" PRId64 " after a timed-out acquire and a retry", n);
	cr_assert_eq(my_count(s, c, "paused"), 1);
	int64_t ttl = 0;
	cr_assert_eq(dlock_lock_remaining_ttl_ms(&ttl, l), 0);
	cr_assert(ttl > 8000 && ttl <= 10000, "PTTL %" PRId64, ttl);
	cr_assert_eq(dlock_client_ping(c), 0);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS paused"), 0);
	lock_unlock_cycle(s, c, "after-pause");

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

/*
 * A server that dies while it owes replies to given-up commands (paused,
 * then killed and restarted empty): the dead connection's debts die with
 * it - nothing queued there can run any more - so the next acquire goes out
 * at once instead of waiting for replies that will never come.
 */
Test(rlock_errors, server_killed_while_owing_replies_is_asked_again, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = open_with_timeout(s, 200);
	dlock_lock *l = dl_lock(c, "owed");
	lock_unlock_cycle(s, c, "warm-up");

	cr_assert_eq(rh_server_pause(s), 0);
	int rc = dlock_lock_acquire(l, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_ETIMEDOUT, "rc %d (%s) %s", rc, dlock_strerror(rc),
			dlock_lock_errmsg(l));
	/* While it is only hung, it is not asked again: its late replies are owed. */
	rc = dlock_lock_acquire(l, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_ETIMEDOUT, "rc %d (%s) %s", rc, dlock_strerror(rc),
			dlock_lock_errmsg(l));
	cr_assert_not_null(
			strstr(dlock_lock_errmsg(l), "owes"), "message: %s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_server_kill(s), 0);
	cr_assert_eq(rh_server_restart(s), 0);

	int64_t t0 = rh_now_ms();
	do {
		rc = dlock_lock_acquire(l, NULL, 0, 10000);
		if (rc != 0)
			usleep(20 * 1000);
	} while (rc != 0 && rh_now_ms() - t0 < 2000);
	cr_assert_eq(rc, 0, "2 s after the restart: rc %d (%s) %s", rc, dlock_strerror(rc),
			dlock_lock_errmsg(l));
	cr_assert_eq(my_count(s, c, "owed"), 1);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS owed"), 0);

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

/* ---- 7. dropped connections ---------------------------------------------- */

static void kill_normal_clients(rh_server *s)
{
	redisReply *r = rh_command(s, "CLIENT KILL TYPE normal");

	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "CLIENT KILL: %s",
			r->type == REDIS_REPLY_ERROR ? r->str : "?");
	cr_assert_geq(r->integer, 1, "no dlock connection was killed");
	freeReplyObject(r);
}

Test(rlock_errors, killed_pooled_connection_is_replaced_and_counts_stay_exact, .timeout = 30)
{
	rh_server *s = dl_srv;
	dlock_client *c = dl_client_opts(rh_server_uri(s), NULL);
	dlock_lock *l = dl_lock(c, "dropped");
	int64_t n = -1;

	/* lock | kill | unlock */
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0);
	kill_normal_clients(s);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "unlock after kill: %s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS dropped"), 0);

	/* kill | lock: one hold, not two */
	kill_normal_clients(s);
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0, "lock after kill: %s", dlock_lock_errmsg(l));
	cr_assert_eq(my_count(s, c, "dropped"), 1);
	kill_normal_clients(s);
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(n, 1);

	/* kill | re-enter: two */
	kill_normal_clients(s);
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(my_count(s, c, "dropped"), 2);

	/* kill | unlock | kill | unlock */
	kill_normal_clients(s);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(my_count(s, c, "dropped"), 1);
	kill_normal_clients(s);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS dropped"), 0);
	kill_normal_clients(s);
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ENOTOWNER);

	dlock_lock_free(l);
	dlock_client_free(c);
}

typedef struct waiter {
	dlock_lock *lock;
	int rc;
	int64_t acquired_at;
} waiter;

static void *waiter_main(void *arg)
{
	waiter *w = arg;

	w->rc = dlock_lock_acquire(w->lock, NULL, DLOCK_WAIT_FOREVER, 10000);
	w->acquired_at = rh_now_ms();
	if (w->rc == 0)
		dlock_lock_release(w->lock, NULL);
	return NULL;
}

/*
 * The waiters' pub/sub connection is dropped and the unlock message is
 * published while it is down: the waiter must not sleep out the holder's
 * 30 s TTL; it resubscribes and tries again.
 */
Test(rlock_errors, killed_pubsub_connection_does_not_strand_waiter, .timeout = 30)
{
	rh_server *s = dl_srv;
	dlock_client *c = dl_client_opts(rh_server_uri(s), NULL);
	dlock_lock *l = dl_lock(c, "pubsub-drop");
	const char *channel = "redisson_lock__channel:{pubsub-drop}";

	cr_assert_eq(dlock_lock_acquire(l, "holder:1", 0, 30000), 0);
	waiter w = { .lock = l, .rc = 1 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
	dl_await_numsub(s, channel, 1, 3000);

	redisReply *r = rh_command(s, "CLIENT KILL TYPE pubsub");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
	cr_assert_eq(r->integer, 1);
	freeReplyObject(r);
	cr_assert_eq(dl_numsub(s, channel), 0);
	int64_t t0 = rh_now_ms();
	cr_assert_eq(dlock_lock_release(l, "holder:1"), 0, "%s", dlock_lock_errmsg(l));

	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(w.rc, 0, "waiter: %d", w.rc);
	cr_assert_lt(w.acquired_at - t0, 2000, "waiter took %" PRId64 " ms after the unlock",
			w.acquired_at - t0);
	cr_assert_eq(rh_command_int(s, "EXISTS pubsub-drop"), 0);

	dlock_lock_free(l);
	dlock_client_free(c);
}

/* ---- 8. option and URI validation ----------------------------------------- */

static void expect_bad_option(dlock_client_options *o, const char *field)
{
	dlock_client *c = (dlock_client *)0x1;
	int rc = dlock_client_new(&c, "redis://127.0.0.1:1", o);

	cr_assert_eq(rc, DLOCK_EINVAL, "%s: rc %d", field, rc);
	cr_assert_null(c);
	cr_assert_not_null(strstr(dlock_errmsg_last(), field), "message \"%s\" should name %s",
			dlock_errmsg_last(), field);
}

Test(rlock_errors, bad_options_and_uris_are_einval, .timeout = 30)
{
	dlock_client_options o;

	cr_assert_eq(dlock_client_options_init(&o, 999), DLOCK_EINVAL);
	cr_assert_eq(dlock_client_options_init(&o, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_client_options_init(NULL, DLOCK_CLIENT_OPTIONS_VERSION), DLOCK_EINVAL);

	opts_init(&o);
	cr_assert_eq(o.version, DLOCK_CLIENT_OPTIONS_VERSION);
	cr_assert_eq(o.connect_timeout_ms, 1000);
	cr_assert_eq(o.command_timeout_ms, 1000);
	cr_assert_eq(o.watchdog_timeout_ms, 30000);
	cr_assert_eq(o.pool_size, 8);
	cr_assert_eq(o.lazy_connect, 0);

	opts_init(&o);
	o.command_timeout_ms = 0;
	expect_bad_option(&o, "command_timeout_ms");
	opts_init(&o);
	o.connect_timeout_ms = -1;
	expect_bad_option(&o, "connect_timeout_ms");
	opts_init(&o);
	o.pool_size = 0;
	expect_bad_option(&o, "pool_size");
	opts_init(&o);
	o.watchdog_timeout_ms = 0;
	expect_bad_option(&o, "watchdog_timeout_ms");
	opts_init(&o);
	o.version = 77;
	expect_bad_option(&o, "version");

	const char *bad[] = { "http://x", "redis://", "redis://h:99999", "redis://h:0",
		"redis://h:12x", "", "redis://h/notadb", "redis://h:6379/-1" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		dlock_client *c = (dlock_client *)0x1;
		int rc = dlock_client_new(&c, bad[i], NULL);
		cr_assert_eq(rc, DLOCK_EINVAL, "\"%s\": rc %d", bad[i], rc);
		cr_assert_null(c);
		cr_assert_str_neq(dlock_errmsg_last(), "", "\"%s\": no message", bad[i]);
	}
	dlock_client *c = (dlock_client *)0x1;
	cr_assert_eq(dlock_client_new(&c, NULL, NULL), DLOCK_EINVAL);
	cr_assert_null(c);
	cr_assert_eq(dlock_client_new(NULL, "redis://127.0.0.1", NULL), DLOCK_EINVAL);
}

/* ---- 9. strerror ---------------------------------------------------------- */

Test(rlock_errors, strerror_is_distinct_for_every_code, .timeout = 30)
{
	const char *seen[-DLOCK_EDUPLICATE + 1];

	for (int code = 0; code >= DLOCK_EDUPLICATE; code--) {
		const char *s = dlock_strerror(code);
		cr_assert_not_null(s);
		cr_assert_str_neq(s, "", "code %d", code);
		cr_assert_str_neq(s, "unknown error", "code %d", code);
		for (int k = 0; k < -code; k++)
			cr_assert_str_neq(s, seen[k], "codes %d and %d share \"%s\"", code, -k, s);
		seen[-code] = s;
	}
	cr_assert_str_eq(dlock_strerror(1), "unknown error");
	cr_assert_str_eq(dlock_strerror(-999), "unknown error");
	cr_assert_str_eq(dlock_strerror(DLOCK_EDUPLICATE - 1), "unknown error");
	cr_assert_str_eq(dlock_strerror(DLOCK_ENOTOWNER), dlock_strerror(-10));
}
