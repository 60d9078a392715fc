/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The real Redisson (Java) and dlock on one Redis Cluster (3 primaries, 1
 * replica each; a cluster and a JVM per test): Redisson holds and dlock
 * waits, and the reverse, on names served by three different primaries,
 * and a fair lock handed from Redisson to dlock and back. Both sides use
 * sharded pub/sub on Redis 7: the waiter SSUBSCRIBEs at the node serving
 * the channel's slot (the name's: `redisson_lock__channel:{name}`), the
 * unlock script SPUBLISHes there, and no classic PUBLISH or SUBSCRIBE is
 * used anywhere. Every hold is a watchdog hold of 30 s on both sides: a
 * waiter that missed the message would sit out 20 s or more of TTL, so a
 * hand-off in milliseconds is the message. Wake-ups are printed as
 * "interop cluster ...: X ms (Redisson V)".
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interop.h"
#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

#define WATCHDOG_MS 30000 /* both sides: a TTL of 20 s or more at any unlock */
#define WAKE_MAX_MS 5000  /* generous for a busy host; a missed message costs 20 s */
#define AWAIT_MS 15000    /* a waiter's subscription, a queue position */
#define SHARDS 3

static rh_cluster *cl;
static java_peer *peer;
static dlock_client *cli;

static void setup(void)
{
	cl = rh_cluster_start(SHARDS, 1, NULL);
	cr_assert_not_null(cl, "could not start a Redis Cluster (redis-server 7 and redis-cli)");
	peer = jp_start(rh_cluster_seed_uri(cl), WATCHDOG_MS);
	cli = dl_client(rh_cluster_seed_uri(cl), 5000, WATCHDOG_MS);
}

static void teardown(void)
{
	jp_stop(peer);
	dlock_client_free(cli);
	rh_cluster_free(cl);
	cl = NULL;
}

TestSuite(redisson_cluster, .init = setup, .fini = teardown, .timeout = 240);

/* ---- where things are ----------------------------------------------------- */

static void channel_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "redisson_lock__channel:{%s}", name);
}

/* n names (prefix-K) served by n different primaries, found, not assumed;
 * their channels share their slots. */
static void names_on_shards(char names[][32], int n, const char *prefix)
{
	rh_server *seen[SHARDS];
	int found = 0;
	cr_assert_leq(n, SHARDS);
	for (int i = 0; found < n && i < 1000; i++) {
		char name[32], channel[160];
		snprintf(name, sizeof name, "%s-%d", prefix, i);
		rh_server *s = dl_slot_owner(cl, name);
		int fresh = 1;
		for (int k = 0; k < found; k++)
			fresh = fresh && seen[k] != s;
		if (!fresh)
			continue;
		channel_of(channel, sizeof channel, name);
		cr_assert_eq(rh_cluster_key_slot(cl, channel), rh_cluster_key_slot(cl, name),
				"%s and %s are in different slots", name, channel);
		seen[found] = s;
		snprintf(names[found++], sizeof names[0], "%s", name);
	}
	cr_assert_eq(found, n, "no names on %d different primaries", n);
}

/* ---- what the nodes saw ---------------------------------------------------- */

/* The second element of a PUBSUB (SHARD)NUMSUB reply for one channel. */
static int64_t numsub(rh_server *s, const char *which, const char *channel)
{
	redisReply *r = rh_command(s, "PUBSUB %s %s", which, channel);
	cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
					r->element[1]->type == REDIS_REPLY_INTEGER,
			"PUBSUB %s %s: no count", which, channel);
	int64_t n = r->element[1]->integer;
	freeReplyObject(r);
	return n;
}

/* Wait until someone listens on channel with SSUBSCRIBE at the node serving
 * its slot; then nobody listens on it with a classic SUBSCRIBE on any node. */
static void await_sharded_subscriber(const char *channel)
{
	rh_server *at = dl_slot_owner(cl, channel);
	int64_t deadline = rh_now_ms() + AWAIT_MS;
	while (numsub(at, "SHARDNUMSUB", channel) < 1) {
		cr_assert_lt(rh_now_ms(), deadline,
				"nobody SSUBSCRIBEd to %s at the node serving its slot (port %d)",
				channel, rh_server_port(at));
		dl_sleep_ms(5);
	}
	for (int i = 0; i < rh_cluster_size(cl); i++)
		cr_assert_eq(numsub(rh_cluster_server(cl, i), "NUMSUB", channel), 0,
				"a classic SUBSCRIBE to %s on port %d", channel,
				rh_server_port(rh_cluster_server(cl, i)));
}

/* calls= of a command in INFO commandstats (counting calls from Lua scripts). */
static int64_t calls_of(rh_server *s, const char *cmd)
{
	char field[64];
	snprintf(field, sizeof field, "cmdstat_%s:calls=", cmd);
	redisReply *r = rh_command(s, "INFO commandstats");
	cr_assert(r && r->type == REDIS_REPLY_STRING, "INFO commandstats on port %d",
			rh_server_port(s));
	const char *at = strstr(r->str, field);
	int64_t n = at ? strtoll(at + strlen(field), NULL, 10) : 0;
	freeReplyObject(r);
	return n;
}

/* SPUBLISH and PUBLISH counts of every primary, before and after an unlock. */
typedef struct published {
	rh_server *primary[SHARDS];
	int64_t spublish[SHARDS], publish[SHARDS];
} published;

static void published_now(published *p)
{
	int n = 0;
	for (int i = 0; i < rh_cluster_size(cl); i++) {
		if (rh_cluster_is_primary(cl, i) != 1)
			continue;
		cr_assert_lt(n, SHARDS, "more than %d primaries", SHARDS);
		rh_server *s = rh_cluster_server(cl, i);
		p->primary[n] = s;
		p->spublish[n] = calls_of(s, "spublish");
		p->publish[n++] = calls_of(s, "publish");
	}
	cr_assert_eq(n, SHARDS, "%d primaries, not %d", n, SHARDS);
}

/* Since `before`, the unlock message on channel went out with SPUBLISH at
 * the node serving its slot, and nowhere else; no PUBLISH at all. */
static void published_only_at_the_slot(const published *before, const char *channel, const char *by)
{
	published after;
	published_now(&after);
	rh_server *at = dl_slot_owner(cl, channel);
	for (int i = 0; i < SHARDS; i++) {
		cr_assert_eq(after.primary[i], before->primary[i], "the primaries changed");
		int64_t s = after.spublish[i] - before->spublish[i];
		int port = rh_server_port(after.primary[i]);
		if (after.primary[i] == at)
			cr_assert_geq(s, 1, "%s's unlock of %s: no SPUBLISH at its node (port %d)",
					by, channel, port);
		else
			cr_assert_eq(s, 0, "%s's unlock of %s: SPUBLISH at port %d, not its node",
					by, channel, port);
		cr_assert_eq(after.publish[i], before->publish[i],
				"%s's unlock of %s: a classic PUBLISH at port %d", by, channel,
				port);
	}
}

/* Print the wake-up (the format the other interop tests print) and fail it
 * when it took longer than a message does. */
static double wake(const char *what, const char *name, int64_t from_ns, int64_t to_ns)
{
	double ms = (double)(to_ns - from_ns) / 1e6;
	int port = rh_server_port(dl_slot_owner(cl, name));
	fprintf(stderr, "interop cluster %s: %.2f ms (Redisson %s)\n", what, ms, jp_version(peer));
	cr_log_info("cluster %s, \"%s\" (slot %d, port %d): %.2f ms (Redisson %s)", what, name,
			rh_cluster_key_slot(cl, name), port, ms, jp_version(peer));
	cr_assert(ms >= 0 && ms <= WAKE_MAX_MS,
			"%s on \"%s\": woke after %.1f ms; a sharded pub/sub wake-up takes "
			"milliseconds, a missed one 20 s or more of the watchdog's TTL",
			what, name, ms);
	return ms;
}

/* ---- RLock, Redisson -> dlock ---------------------------------------------- */

static int lock_watchdog(void *l)
{
	return dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG);
}

Test(redisson_cluster, redissons_unlock_wakes_a_dlock_waiter_on_every_shard)
{
	char names[SHARDS][32], java_owner[256], channel[160];
	jp_reply r;
	snprintf(java_owner, sizeof java_owner, "%s", jp_ok(peer, &r, "w1", "owner"));
	names_on_shards(names, SHARDS, "j2c");
	for (int i = 0; i < SHARDS; i++) {
		const char *name = names[i];
		dlock_lock *l = dl_lock(cli, name);
		rh_server *at = dl_slot_owner(cl, name);
		channel_of(channel, sizeof channel, name);

		jp_ok(peer, &r, "w1", "lock rlock %s -1", name);
		cr_assert_eq(rh_command_int(at, "HEXISTS %s %s", name, java_owner), 1,
				"Redisson's hold of %s is not on the node serving its slot", name);
		cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 1000), DLOCK_ENOTACQUIRED,
				"dlock took %s from Redisson", name);
		cr_assert_eq(numsub(at, "SHARDNUMSUB", channel), 0, "a listener before the waiter");

		io_call w;
		io_call_start(&w, lock_watchdog, l);
		await_sharded_subscriber(channel);
		cr_assert_not(io_call_poll(&w, 0), "dlock got %s while Redisson holds it (rc %d)",
				name, w.rc);
		int64_t ttl = rh_command_int(at, "PTTL %s", name);
		cr_assert_gt(ttl, WATCHDOG_MS / 2,
				"Redisson's watchdog hold has a PTTL of %" PRId64, ttl);

		published before;
		published_now(&before);
		jp_ok(peer, &r, "w1", "unlock rlock %s", name);
		cr_assert_eq(io_call_join(&w), 0, "%s", dlock_lock_errmsg(l));
		wake("RLock wake-up, Redisson -> dlock", name, r.t_start_ns, w.t_end_ns);
		published_only_at_the_slot(&before, channel, "Redisson");

		char owner[128];
		cr_assert_eq(dlock_client_owner(owner, cli, w.thread_id), 0);
		cr_assert_eq(rh_command_int(at, "HEXISTS %s %s", name, owner), 1,
				"dlock's hold of %s is not on the node serving its slot", name);
		io_call_unlock(&w, cli, l);
		cr_assert_eq(rh_command_int(at, "EXISTS %s", name), 0);
		dlock_lock_free(l);
	}
}

/* ---- RLock, dlock -> Redisson ---------------------------------------------- */

Test(redisson_cluster, dlocks_unlock_wakes_a_redisson_waiter_on_every_shard)
{
	char names[SHARDS][32], java_owner[256], c_owner[128], channel[160];
	jp_reply r;
	snprintf(java_owner, sizeof java_owner, "%s", jp_ok(peer, &r, "w1", "owner"));
	dl_owner(cli, c_owner, sizeof c_owner);
	names_on_shards(names, SHARDS, "c2j");
	for (int i = 0; i < SHARDS; i++) {
		const char *name = names[i];
		dlock_lock *l = dl_lock(cli, name);
		rh_server *at = dl_slot_owner(cl, name);
		channel_of(channel, sizeof channel, name);

		dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		cr_assert_eq(rh_command_int(at, "HEXISTS %s %s", name, c_owner), 1,
				"dlock's hold of %s is not on the node serving its slot", name);
		cr_assert_str_eq(jp_ok(peer, &r, "w1", "try rlock %s 0 -1", name), "false",
				"Redisson took %s from dlock", name);
		cr_assert_eq(numsub(at, "SHARDNUMSUB", channel), 0, "a listener before the waiter");

		/* tryLock with a wait: Redisson subscribes after its first attempt. */
		long seq = jp_send(peer, "w1", "try rlock %s 60000 -1", name);
		await_sharded_subscriber(channel);
		cr_assert_not(jp_poll(peer, seq, 0, &r),
				"Redisson got %s while dlock holds it (%s)", name, r.value);
		int64_t ttl = rh_command_int(at, "PTTL %s", name);
		cr_assert_gt(ttl, WATCHDOG_MS / 2, "dlock's watchdog hold has a PTTL of %" PRId64,
				ttl);

		published before;
		published_now(&before);
		int64_t unlocked = jp_now_ns();
		dl_pass(dlock_lock_release(l, NULL));
		jp_wait(peer, seq, &r);
		cr_assert(r.ok, "Redisson's tryLock failed: %s", r.value);
		cr_assert_str_eq(r.value, "true", "Redisson's tryLock of %s gave up", name);
		wake("RLock wake-up, dlock -> Redisson", name, unlocked, r.t_end_ns);
		published_only_at_the_slot(&before, channel, "dlock");

		cr_assert_eq(rh_command_int(at, "HEXISTS %s %s", name, java_owner), 1,
				"Redisson's hold of %s is not on the node serving its slot", name);
		jp_ok(peer, &r, "w1", "unlock rlock %s", name);
		cr_assert_eq(rh_command_int(at, "EXISTS %s", name), 0);
		dlock_lock_free(l);
	}
}

/* ---- RFairLock, Redisson -> dlock -> Redisson ------------------------------ */

/* Wait until the fair queue of name at its node holds n waiters. */
static void queue_reaches(const char *name, int64_t n)
{
	char queue[96];
	snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", name);
	rh_server *at = dl_slot_owner(cl, queue);
	int64_t deadline = rh_now_ms() + AWAIT_MS, len;
	while ((len = rh_command_int(at, "LLEN %s", queue)) != n) {
		cr_assert_lt(rh_now_ms(), deadline, "%s holds %" PRId64 " waiters, not %" PRId64,
				queue, len, n);
		dl_sleep_ms(5);
	}
}

/* A fair waiter listens on its own channel, `redisson_lock__channel:{name}:OWNER`. */
static void fair_channel(char *buf, size_t len, const char *name, const char *owner)
{
	snprintf(buf, len, "redisson_lock__channel:{%s}:%s", name, owner);
}

/* Redisson holds, a dlock waiter queues and is handed the lock by Redisson's
 * unlock, a Redisson waiter queues behind dlock and is handed it by dlock's. */
Test(redisson_cluster, a_fair_lock_is_handed_from_redisson_to_dlock_and_back)
{
	char names[1][32], channel[400], c_owner[128], java_owner[256];
	jp_reply r;
	names_on_shards(names, 1, "fair");
	const char *name = names[0];
	rh_server *at = dl_slot_owner(cl, name);
	dlock_lock *l = NULL;
	dl_pass(dlock_lock_new(&l, cli, name, dl_kind(DLOCK_LOCK_FAIR)));

	/* Redisson -> dlock. */
	jp_ok(peer, &r, "w0", "lock fair %s -1", name);
	io_call w;
	io_call_start(&w, lock_watchdog, l);
	queue_reaches(name, 1);
	cr_assert_eq(dlock_client_owner(c_owner, cli, w.thread_id), 0);
	fair_channel(channel, sizeof channel, name, c_owner);
	await_sharded_subscriber(channel);
	published before;
	published_now(&before);
	jp_ok(peer, &r, "w0", "unlock fair %s", name);
	cr_assert_eq(io_call_join(&w), 0, "%s", dlock_lock_errmsg(l));
	/* dlock's fair waiter also looks every 50 ms (the head may be gone
	 * without a message): this time alone does not prove the message, the
	 * SPUBLISH on its channel's node (below) shows it was sent. */
	wake("fair hand-off, Redisson -> dlock", name, r.t_start_ns, w.t_end_ns);
	published_only_at_the_slot(&before, channel, "Redisson");
	cr_assert_eq(rh_command_int(at, "HEXISTS %s %s", name, c_owner), 1);

	/* dlock -> Redisson: Redisson's fair waiter waits for the holder's TTL
	 * (20 s or more) unless the message on its channel wakes it. */
	snprintf(java_owner, sizeof java_owner, "%s", jp_ok(peer, &r, "w1", "owner"));
	long seq = jp_send(peer, "w1", "try fair %s 60000 -1", name);
	queue_reaches(name, 1);
	fair_channel(channel, sizeof channel, name, java_owner);
	await_sharded_subscriber(channel);
	cr_assert_not(jp_poll(peer, seq, 0, &r), "Redisson got the fair lock dlock holds");
	published_now(&before);
	int64_t unlocked = jp_now_ns();
	io_call_unlock(&w, cli, l);
	jp_wait(peer, seq, &r);
	cr_assert(r.ok, "Redisson's fair tryLock failed: %s", r.value);
	cr_assert_str_eq(r.value, "true", "Redisson's fair tryLock gave up");
	wake("fair hand-off, dlock -> Redisson", name, unlocked, r.t_end_ns);
	published_only_at_the_slot(&before, channel, "dlock");
	cr_assert_eq(rh_command_int(at, "HEXISTS %s %s", name, java_owner), 1);

	jp_ok(peer, &r, "w1", "unlock fair %s", name);
	cr_assert_eq(rh_command_int(at,
				     "EXISTS %s redisson_lock_queue:{%s} redisson_lock_timeout:{%s}",
				     name, name, name),
			0, "the fair lock's keys are left behind");
	dlock_lock_free(l);
}
