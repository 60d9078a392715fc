/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redis+sentinel:// against 3 real sentinels (redis-server --sentinel) over
 * a primary and 2 replicas: discovery (a dead sentinel skipped, an unknown
 * name refused clearly), failover by SENTINEL FAILOVER and by SIGKILL of
 * the primary while a lock is held and another client waits, a hold that
 * did not replicate reported LOST (never re-created), nothing past its
 * deadline, and a RedLock whose members are of mixed kinds.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define MASTER "mym"
#define WATCHDOG_MS 3000

typedef struct topo {
	rh_server *data[3]; /* data[0] starts as the primary, 1 and 2 replicate it */
	rh_server *sent[3];
	char uri[512]; /* redis+sentinel://127.0.0.1:P,127.0.0.1:P,127.0.0.1:P/mym */
} topo;

static topo t;

static int64_t reply_int(redisReply *r)
{
	int64_t v = r != NULL && r->type == REDIS_REPLY_ARRAY ? (int64_t)r->elements : -1;

	if (r != NULL)
		freeReplyObject(r);
	return v;
}

/* The primary streams to both replicas (their first sync done), and every
 * sentinel knows both replicas and the two other sentinels: a failover can
 * be agreed and done. */
static int topo_ready(void)
{
	redisReply *r = rh_command(t.data[0], "INFO replication");
	const char *online = r != NULL && r->type == REDIS_REPLY_STRING
			? strstr(r->str, "state=online")
			: NULL;
	int ok = online != NULL && strstr(online + 1, "state=online") != NULL;

	if (r != NULL)
		freeReplyObject(r);
	for (int i = 0; ok && i < 3; i++)
		ok = reply_int(rh_command(t.sent[i], "SENTINEL REPLICAS " MASTER)) == 2 &&
				reply_int(rh_command(t.sent[i], "SENTINEL SENTINELS " MASTER)) == 2;
	return ok;
}

static void topo_up(void)
{
	char port[16], monitor[96];

	/* No 5 s wait before the replicas' first sync (Redis 7's default). */
	const char *primary[] = { "--repl-diskless-sync-delay", "0", NULL };
	t.data[0] = rh_server_start(primary);
	cr_assert_not_null(t.data[0]);
	snprintf(port, sizeof port, "%d", rh_server_port(t.data[0]));
	const char *replica[] = { "--replicaof", "127.0.0.1", port, NULL };
	for (int i = 1; i < 3; i++)
		cr_assert_not_null(t.data[i] = rh_server_start(replica));
	snprintf(monitor, sizeof monitor, "sentinel monitor " MASTER " 127.0.0.1 %s 2", port);
	const char *conf[] = { monitor, "sentinel down-after-milliseconds " MASTER " 1000",
		"sentinel failover-timeout " MASTER " 5000", NULL };
	for (int i = 0; i < 3; i++)
		cr_assert_not_null(t.sent[i] = rh_sentinel_start(NULL, conf));
	snprintf(t.uri, sizeof t.uri,
			"redis+sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/" MASTER,
			rh_server_port(t.sent[0]), rh_server_port(t.sent[1]),
			rh_server_port(t.sent[2]));
	int64_t end = rh_now_ms() + 30000;
	while (!topo_ready()) {
		cr_assert_lt(rh_now_ms(), end, "sentinels and replicas not ready after 30 s");
		dl_sleep_ms(50);
	}
}

static void topo_down(void)
{
	for (int i = 0; i < 3; i++) {
		rh_server_free(t.sent[i]);
		rh_server_free(t.data[i]);
	}
	memset(&t, 0, sizeof t);
}

TestSuite(sentinel, .init = topo_up, .fini = topo_down, .timeout = 120);

/* The data server whose port a sentinel names as the primary now (-1: none of ours). */
static int named_primary(rh_server *sentinel)
{
	redisReply *r = rh_command(sentinel, "SENTINEL GET-MASTER-ADDR-BY-NAME " MASTER);
	int port = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
			? atoi(r->element[1]->str)
			: -1,
	    found = -1;

	if (r != NULL)
		freeReplyObject(r);
	for (int i = 0; i < 3; i++)
		if (rh_server_port(t.data[i]) == port)
			found = i;
	return found;
}

static int role_is(rh_server *s, const char *role)
{
	redisReply *r = rh_command(s, "ROLE");
	int is = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
			strcmp(r->element[0]->str, role) == 0;

	if (r != NULL)
		freeReplyObject(r);
	return is;
}

/*
 * Wait until every sentinel names one new primary and it says it is one,
 * and (when the old one is alive) the old one says it is a replica: until
 * then it takes writes too, and a client still connected to it (connections
 * made before the switch) is on the wrong side - Sentinel's window, which
 * no client can close.
 */
static int await_new_primary(int old)
{
	int64_t end = rh_now_ms() + 30000;

	for (;;) {
		int p = named_primary(t.sent[0]);
		int agreed = p >= 0 && p != old && named_primary(t.sent[1]) == p &&
				named_primary(t.sent[2]) == p && role_is(t.data[p], "master") &&
				(rh_server_pid(t.data[old]) == 0 || role_is(t.data[old], "slave"));

		if (agreed)
			return p;
		cr_assert_lt(rh_now_ms(), end, "no failover within 30 s");
		dl_sleep_ms(20);
	}
}

/* Someone waits on the lock's channel at the server (a waiter subscribed). */
static void await_subscriber(int primary, const char *name)
{
	int64_t end = rh_now_ms() + 10000;
	char channel[128];

	snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
	for (;;) {
		redisReply *r = rh_command(t.data[primary], "PUBSUB NUMSUB %s", channel);
		int n = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
				? (int)r->element[1]->integer
				: 0;

		if (r != NULL)
			freeReplyObject(r);
		if (n > 0)
			return;
		cr_assert_lt(rh_now_ms(), end, "the waiter never subscribed");
		dl_sleep_ms(5);
	}
}

Test(sentinel, locks_through_the_sentinels_skipping_a_dead_one)
{
	char uri[600];
	int dead = rh_free_port();

	/* The first sentinel listed is not there: the next one answers. */
	snprintf(uri, sizeof uri, "redis+sentinel://127.0.0.1:%d,%s", dead,
			t.uri + strlen("redis+sentinel://"));
	dlock_client *c = dl_client(uri, 1000, WATCHDOG_MS);
	cr_assert_str_eq(dlock_client_node(c), "sentinel:" MASTER);
	dlock_lock *l = dl_lock(c, "via-sentinel");
	char owner[128];

	dl_owner(c, owner, sizeof owner);
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
	cr_assert_eq(rh_command_int(t.data[0], "HEXISTS via-sentinel %s", owner), 1,
			"the hold is not on the primary");
	dl_pass(dlock_lock_release(l, NULL));
	cr_assert_eq(rh_command_int(t.data[0], "EXISTS via-sentinel"), 0);
	dl_free_locks(l);
	dl_close_clients(c);
}

Test(sentinel, an_unknown_name_or_no_sentinel_is_a_clear_error)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;
	char uri[600];

	o.connect_timeout_ms = 1000;
	snprintf(uri, sizeof uri, "redis+sentinel://127.0.0.1:%d/nosuch",
			rh_server_port(t.sent[1]));
	cr_assert_eq(dlock_client_new(&c, uri, &o), DLOCK_ESERVER);
	cr_assert_not_null(strstr(dlock_errmsg_last(), "monitors no primary named \"nosuch\""),
			"%s", dlock_errmsg_last());

	int64_t t0 = rh_now_ms();
	snprintf(uri, sizeof uri, "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d/" MASTER,
			rh_free_port(), rh_free_port());
	cr_assert_eq(dlock_client_new(&c, uri, &o), DLOCK_ECONN, "%s", dlock_errmsg_last());
	cr_assert_not_null(
			strstr(dlock_errmsg_last(), "no sentinel named the primary (2 of 2 asked)"),
			"%s", dlock_errmsg_last());
	cr_assert_lt(rh_now_ms() - t0, 1000 + 500, "took longer than the connect timeout");
	cr_assert_null(c);
}

Test(sentinel, sentinel_failover_hands_the_lock_to_the_waiter)
{
	dlock_client *ca = dl_client(t.uri, 1000, WATCHDOG_MS),
		     *cb = dl_client(t.uri, 1000, WATCHDOG_MS);
	dlock_lock *a = dl_lock(ca, "fo-cmd"), *b = dl_lock(cb, "fo-cmd");
	dl_lost lost;
	dl_waiter w;

	dl_lost_init(&lost);
	cr_assert_eq(dlock_lock_set_lost_cb(a, dl_on_lost, &lost), 0);
	dl_pass(dlock_lock_acquire(a, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	cr_assert_eq(rh_command_int(t.data[0], "WAIT 2 5000"), 2, "the hold did not replicate");
	dl_waiter_start(&w, cb, b, 30000);
	await_subscriber(0, "fo-cmd");

	int64_t t_failover = rh_now_ms();
	cr_assert_eq(reply_int(rh_command(t.sent[0], "SENTINEL FAILOVER " MASTER)), -1);
	int p = await_new_primary(0);
	int64_t t_switched = rh_now_ms();
	/* The hold replicated: A still holds it on the new primary, and releases it there. */
	int64_t t_unlock = rh_now_ms();
	dl_pass(dlock_lock_release(a, NULL));
	dl_waiter_join(&w);
	cr_assert_eq(w.rc, 0, "waiter: %s", dlock_lock_errmsg(b));
	cr_assert_eq(rh_command_int(t.data[p], "HEXISTS fo-cmd %s", w.owner), 1,
			"the waiter's hold is not on the new primary");
	cr_assert_eq(dl_lost_count(&lost), 0, "a hold that replicated was reported lost");
	cr_log_info("SENTINEL FAILOVER: switched after %lld ms; the waiter held the lock %lld ms "
		    "after the release on the new primary",
			(long long)(t_switched - t_failover), (long long)(w.returned - t_unlock));
	dl_pass(dlock_lock_release(b, w.owner));
	dl_free_locks(a, b);
	dl_close_clients(ca, cb);
	dl_lost_destroy(&lost);
}

/*
 * The primary dies with a hold its replicas never saw (they were paused and
 * cut off while it was taken): the replica promoted does not have it. The
 * holder must learn it LOST (its renewal finds the field gone; it is never
 * re-created), and the waiter gets the lock from the new primary.
 */
Test(sentinel, killed_primary_loses_the_unreplicated_hold_and_the_waiter_gets_it)
{
	dlock_client *ca = dl_client(t.uri, 500, WATCHDOG_MS),
		     *cb = dl_client(t.uri, 500, WATCHDOG_MS);
	dlock_lock *a = dl_lock(ca, "fo-kill"), *b = dl_lock(cb, "fo-kill");
	dl_lost lost;
	dl_waiter w;

	dl_lost_init(&lost);
	cr_assert_eq(dlock_lock_set_lost_cb(a, dl_on_lost, &lost), 0);
	cr_assert_eq(rh_server_pause(t.data[1]), 0);
	cr_assert_eq(rh_server_pause(t.data[2]), 0);
	cr_assert_eq(rh_command_int(t.data[0], "CLIENT KILL TYPE replica"), 2);
	dl_pass(dlock_lock_acquire(a, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_waiter_start(&w, cb, b, 30000);
	await_subscriber(0, "fo-kill");

	int64_t t_kill = rh_now_ms();
	cr_assert_eq(rh_server_kill(t.data[0]), 0);
	cr_assert_eq(rh_server_resume(t.data[1]), 0);
	cr_assert_eq(rh_server_resume(t.data[2]), 0);
	int p = await_new_primary(0);
	dl_waiter_join(&w);
	cr_assert_eq(w.rc, 0, "waiter: %s", dlock_lock_errmsg(b));
	cr_assert_leq(w.returned - w.started, 30000 + 1000, "the wait overran its deadline");
	cr_assert_eq(rh_command_int(t.data[p], "HLEN fo-kill"), 1, "one holder on the new primary");

	cr_assert_eq(dl_lost_wait(&lost, rh_now_ms() + 2 * WATCHDOG_MS), 1,
			"the holder was not told its hold is gone");
	cr_assert_eq(lost.reason, DLOCK_LOST_GONE, "reason %d", lost.reason);
	cr_assert_eq(dlock_lock_release(a, NULL), DLOCK_ELOST, "%s", dlock_lock_errmsg(a));
	cr_log_info("SIGKILL of the primary: the waiter held the lock on the new primary %lld ms "
		    "after the kill; the old holder learned it lost after %lld ms",
			(long long)(w.returned - t_kill), (long long)(lost.at_ms - t_kill));
	dl_pass(dlock_lock_release(b, w.owner));
	dl_free_locks(a, b);
	dl_close_clients(ca, cb);
	dl_lost_destroy(&lost);
}

Test(sentinel, a_redlock_mixes_a_sentinel_primary_and_plain_servers)
{
	rh_server *plain[2];
	cr_assert_eq(rh_servers_start(plain, 2, NULL), 0);
	const char *uris[] = { t.uri, rh_server_uri(plain[0]), rh_server_uri(plain[1]) };
	dlock_redlock *rl = NULL;
	int64_t validity = 0;

	dl_pass(dlock_redlock_new_from_uris(&rl, uris, 3, "mixed", NULL, NULL));
	dl_pass(dl_redlock_acquire_v(&validity, rl, NULL, 0, 10000));
	cr_assert_gt(validity, 0);
	cr_assert_eq(rh_command_int(t.data[0], "EXISTS mixed"), 1,
			"not held on the sentinel's primary");
	cr_assert_eq(rh_command_int(plain[0], "EXISTS mixed"), 1);
	dl_pass(dlock_redlock_release(rl, NULL));
	cr_assert_eq(rh_command_int(t.data[0], "EXISTS mixed"), 0);
	dlock_redlock_free(rl);
	rh_server_free(plain[0]);
	rh_server_free(plain[1]);
}

/* Held under `name` on any data server or on `other`. */
static int64_t held_anywhere(rh_server *other, const char *name)
{
	int64_t n = rh_command_int(other, "EXISTS %s", name);

	for (int i = 0; i < 3; i++)
		n += rh_command_int(t.data[i], "EXISTS %s", name);
	return n;
}

/*
 * The primary named through the sentinels and again by its address is one
 * server: no address tells (the sentinels are asked only when connecting),
 * its run_id does. Refused at the first acquisition, naming both spellings,
 * nothing held; and the command exits 64 with one line naming both.
 */
Test(sentinel, a_redlock_listing_the_primary_also_by_address_is_refused)
{
	rh_server *other = rh_server_start(NULL);
	cr_assert_not_null(other);
	char by_address[64], label[64], sentinel_label[64], nodes[1024];
	snprintf(by_address, sizeof by_address, "redis://127.0.0.1:%d", rh_server_port(t.data[0]));
	snprintf(label, sizeof label, "127.0.0.1:%d", rh_server_port(t.data[0]));
	snprintf(sentinel_label, sizeof sentinel_label, "sentinel:" MASTER);
	const char *uris[] = { t.uri, by_address, rh_server_uri(other) };
	dlock_redlock *rl = NULL;
	int64_t validity = 0;

	dl_pass(dlock_redlock_new_from_uris(&rl, uris, 3, "dup-sentinel", NULL, NULL));
	int rc = dl_redlock_acquire_v(&validity, rl, NULL, 0, 10000);
	const char *msg = dlock_redlock_errmsg(rl);
	cr_assert_eq(rc, DLOCK_EDUPLICATE, "rc %d (%s): %s", rc, dlock_strerror(rc), msg);
	cr_assert(strstr(msg, sentinel_label) != NULL && strstr(msg, label) != NULL,
			"the message should name %s and %s: %s", sentinel_label, label, msg);
	cr_assert_eq(held_anywhere(other, "dup-sentinel"), 0, "the refused acquisition left a hold");
	dlock_redlock_free(rl);

	snprintf(nodes, sizeof nodes, "%s,%s,%s", t.uri, by_address, rh_server_uri(other));
	proc *p = DLOCK("-n", nodes, "run", "-w", "0", "dup-sentinel", "--", "true");
	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, sentinel_label) != NULL && strstr(p->err, label) != NULL,
			"`%s`: the line should name %s and %s: %s", p->desc, sentinel_label, label,
			p->err);
	cr_expect_eq(p->out_len, 0, "`%s`: nothing on stdout: %s", p->desc, p->out);
	proc_free(p);
	cr_assert_eq(held_anywhere(other, "dup-sentinel"), 0, "the command left a hold");
	rh_server_free(other);
}

/* Run the dlock command with one extra environment variable; its exit status. */
static int run_cli(const char *env_name, const char *env_value, const char *const *args)
{
	pid_t pid = fork();
	int status = 0;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		const char *argv[16] = { DLOCK_CLI_PATH };
		size_t n = 1;

		for (; args[n - 1] != NULL && n < 15; n++)
			argv[n] = args[n - 1];
		unsetenv("DLOCK_NODES");
		setenv(env_name, env_value, 1);
		execv(DLOCK_CLI_PATH, (char *const *)argv);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Sentinels with a password of their own: the option (and the command's
 * $DLOCK_SENTINEL_PASSWORD, which the command it runs never sees). */
Test(sentinel, sentinels_with_their_own_password)
{
	char monitor[96], uri[128];

	snprintf(monitor, sizeof monitor, "sentinel monitor " MASTER " 127.0.0.1 %d 2",
			rh_server_port(t.data[0]));
	const char *conf[] = { monitor, NULL };
	const char *password[] = { "--requirepass", "s3cret", NULL };
	rh_server *guarded = rh_sentinel_start(password, conf);
	cr_assert_not_null(guarded);
	snprintf(uri, sizeof uri, "redis+sentinel://127.0.0.1:%d/" MASTER, rh_server_port(guarded));

	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;
	cr_assert_eq(dlock_client_new(&c, uri, &o), DLOCK_EAUTH, "%s", dlock_errmsg_last());
	cr_assert_not_null(strstr(dlock_errmsg_last(), "sentinel 127.0.0.1:"), "%s",
			dlock_errmsg_last());
	o.sentinel_password = "s3cret";
	dl_pass(dlock_client_new(&c, uri, &o));
	dl_close_clients(c);

	const char *args[] = { "-n", uri, "run", "-w", "5000", "cli-sentinel", "--", "sh", "-c",
		"test -z \"$DLOCK_SENTINEL_PASSWORD\" && test \"$DLOCK_NAME\" = cli-sentinel",
		NULL };
	cr_assert_eq(run_cli("DLOCK_SENTINEL_PASSWORD", "s3cret", args), 0,
			"dlock run through a password-protected sentinel failed");
	rh_server_free(guarded);
}
