/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redis+cluster:// against a real Redis Cluster (3 primaries, 1 replica
 * each): locks of every kind on every shard, waiters woken by sharded
 * pub/sub (SSUBSCRIBE at the channel's node; on Redis 6, which has none,
 * SUBSCRIBE), watchdog renewals grouped per slot, MOVED after a slot
 * moved, ASK while it moves, a primary failed over while a lock is held and
 * another client waits, a MultiLock across slots, a name that would be
 * CROSSSLOT refused, and the command.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

static rh_cluster *cl;

static void cluster_up(void)
{
	cl = rh_cluster_start(3, 1, NULL);
	cr_assert_not_null(cl, "could not start a cluster");
}

static void cluster_down(void)
{
	rh_cluster_free(cl);
	cl = NULL;
}

TestSuite(cluster, .init = cluster_up, .fini = cluster_down, .timeout = 120);

/* Three names on three different primaries (found, not assumed). */
static void names_on_three_shards(char names[3][16])
{
	rh_server *seen[3];
	int n = 0;

	for (int i = 0; n < 3 && i < 1000; i++) {
		char name[16];
		rh_server *s;
		int fresh = 1;

		snprintf(name, sizeof name, "res-%d", i);
		s = dl_slot_owner(cl, name);
		for (int k = 0; k < n; k++)
			fresh = fresh && seen[k] != s;
		if (fresh) {
			seen[n] = s;
			snprintf(names[n++], 16, "%s", name);
		}
	}
	cr_assert_eq(n, 3, "names on 3 shards not found");
}

Test(cluster, locks_of_every_kind_on_every_shard)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, 30000);
	dlock_lock_options fair_opts = DLOCK_LOCK_OPTIONS_INIT;
	char names[3][16], owner[128];
	int64_t token = 0;

	fair_opts.kind = DLOCK_LOCK_FAIR;
	fair_opts.fair_wait_ms = 5000;
	dl_owner(c, owner, sizeof owner);
	names_on_three_shards(names);
	for (int i = 0; i < 3; i++) {
		dlock_lock *plain = dl_lock(c, names[i]), *fenced = NULL, *fair = NULL;
		char fname[64], rname[64];

		dl_pass(dlock_lock_acquire(plain, NULL, DLOCK_WAIT_FOREVER, 10000));
		cr_assert_eq(rh_command_int(dl_slot_owner(cl, names[i]), "HEXISTS %s %s", names[i],
					     owner),
				1, "%s is not held on the node serving its slot", names[i]);
		dl_pass(dlock_lock_release(plain, NULL));
		cr_assert_eq(rh_command_int(dl_slot_owner(cl, names[i]), "EXISTS %s", names[i]), 0);

		snprintf(fname, sizeof fname, "%s-fenced", names[i]);
		dl_pass(dlock_lock_new(&fenced, c, fname, dl_kind(DLOCK_LOCK_FENCED)));
		dl_pass(dlock_lock_acquire_fenced(&token, fenced, NULL, 0, 10000));
		redisReply *counter = rh_command(
				dl_slot_owner(cl, fname), "GET redisson_lock_token:{%s}", fname);
		cr_assert(counter && counter->type == REDIS_REPLY_STRING &&
						atoll(counter->str) == token,
				"the token counter is not on the node of the name's slot");
		freeReplyObject(counter);
		dl_pass(dlock_lock_release(fenced, NULL));

		snprintf(rname, sizeof rname, "%s-fair", names[i]);
		dl_pass(dlock_lock_new(&fair, c, rname, &fair_opts));
		dl_pass(dlock_lock_acquire(fair, NULL, DLOCK_WAIT_FOREVER, 10000));
		dl_pass(dlock_lock_release(fair, NULL));
		dl_free_locks(plain, fenced, fair);
	}
	dl_close_clients(c);
}

/* Listeners on a channel: with SSUBSCRIBE at the node of its slot (Redis 7);
 * before 7, which has no sharded pub/sub, with SUBSCRIBE at any node. */
static int subscribers(const char *channel)
{
	int n = 0;

	for (int i = 0; i < rh_cluster_size(cl); i++) {
		int sharded = rh_server_version() >= 70000;
		rh_server *s = sharded ? dl_slot_owner(cl, channel) : rh_cluster_server(cl, i);
		redisReply *r = rh_command(s, sharded ? "PUBSUB SHARDNUMSUB %s" : "PUBSUB NUMSUB %s",
				channel);

		if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
			n += (int)r->element[1]->integer;
		if (r)
			freeReplyObject(r);
		if (sharded)
			break;
	}
	return n;
}

/* Someone listens on the lock's channel (see subscribers()). */
static void await_sharded_subscriber(const char *name)
{
	int64_t end = rh_now_ms() + 10000;
	char channel[128];

	snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
	while (subscribers(channel) == 0) {
		cr_assert_lt(rh_now_ms(), end, "no %s on %s",
				rh_server_version() >= 70000 ? "SSUBSCRIBE at its node" : "SUBSCRIBE",
				channel);
		dl_sleep_ms(5);
	}
}

Test(cluster, a_waiter_is_woken_by_sharded_pubsub)
{
	dlock_client *ca = dl_client(rh_cluster_seed_uri(cl), 2000, 30000);
	dlock_client *cb = dl_client(rh_cluster_seed_uri(cl), 2000, 30000);
	dlock_lock *a = dl_lock(ca, "woken"), *b = dl_lock(cb, "woken");
	dl_waiter w;

	dl_pass(dlock_lock_acquire(a, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_waiter_start(&w, cb, b, 30000);
	await_sharded_subscriber("woken");
	int64_t t_unlock = rh_now_ms();
	dl_pass(dlock_lock_release(a, NULL));
	dl_waiter_join(&w);
	cr_assert_eq(w.rc, 0, "%s", dlock_lock_errmsg(b));
	/* The holder's lease was 30 s: only the unlock message explains a quick hand-off. */
	cr_assert_lt(w.returned - t_unlock, 5000, "the waiter was not woken by the unlock");
	cr_log_info("cluster: waiter held the lock %lld ms after the unlock",
			(long long)(w.returned - t_unlock));
	dl_pass(dlock_lock_release(b, w.owner));
	dl_free_locks(a, b);
	dl_close_clients(ca, cb);
}

/* watch_force_unlock on a cluster: the hold (renewed, or with a fixed
 * lease) listens with SSUBSCRIBE at the node of its slot and hears another
 * client's force unlock within 1 s. */
static void force_unlock_heard_on_a_cluster(const char *name, int64_t lease_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.command_timeout_ms = o.connect_timeout_ms = 2000;
	o.watch_force_unlock = 1;
	dlock_client *ca = dl_client_opts(rh_cluster_seed_uri(cl), &o);
	dlock_client *cb = dl_client(rh_cluster_seed_uri(cl), 2000, 30000);
	dlock_lock *a = dl_lock(ca, name), *b = dl_lock(cb, name);
	dl_lost lost;
	int deleted = 0;

	dl_lost_init(&lost);
	dl_pass(dlock_lock_set_lost_cb(a, dl_on_lost, &lost));
	dl_pass(dlock_lock_acquire(a, NULL, DLOCK_WAIT_FOREVER, lease_ms));
	await_sharded_subscriber(name);
	int64_t forced_at = rh_now_ms();
	dl_pass(dlock_lock_force_release(&deleted, b));
	cr_assert_eq(deleted, 1);
	cr_assert_eq(dl_lost_wait(&lost, forced_at + 5000), 1, "no lost callback within 5 s");
	/* The watchdog's own round would come 10 s after the acquisition. */
	cr_assert_leq(lost.at_ms - forced_at, 1000, "cluster: lost %lld ms after the force unlock",
			(long long)(lost.at_ms - forced_at));
	cr_log_info("cluster: lost %lld ms after the force unlock",
			(long long)(lost.at_ms - forced_at));
	cr_assert_eq(dlock_lock_release(a, NULL), DLOCK_ELOST, "%s", dlock_lock_errmsg(a));
	dl_free_locks(a, b);
	dl_close_clients(ca, cb);
	dl_lost_destroy(&lost);
}

Test(cluster, a_force_unlock_is_heard_by_sharded_pubsub)
{
	force_unlock_heard_on_a_cluster("forced", DLOCK_LEASE_WATCHDOG);
}

/* A 20 s lease is not renewed: without the check a message makes, the loss
 * would go unheard until the release. */
Test(cluster, a_force_unlock_of_a_leased_hold_is_heard_by_sharded_pubsub)
{
	force_unlock_heard_on_a_cluster("forced-leased", 20000);
}

Test(cluster, the_watchdog_renews_holds_on_every_shard)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, 1500);
	dlock_lock *l[24];
	char name[24][16];

	for (int i = 0; i < 24; i++) {
		snprintf(name[i], sizeof name[i], "wd-%d", i);
		l[i] = dl_lock(c, name[i]);
		dl_pass(dlock_lock_acquire(l[i], NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	}
	dl_sleep_ms(3500); /* more than twice the 1.5 s lease: only renewals keep them */
	for (int i = 0; i < 24; i++) {
		int held = 0;

		dl_pass(dlock_lock_is_held(&held, l[i], NULL));
		cr_assert_eq(held, 1, "%s lost", name[i]);
		cr_assert_gt(rh_command_int(dl_slot_owner(cl, name[i]), "PTTL %s", name[i]), 0,
				"%s is not alive on its node", name[i]);
		dl_pass(dlock_lock_release(l[i], NULL));
		dlock_lock_free(l[i]);
	}
	dl_close_clients(c);
}

Test(cluster, a_moved_slot_is_followed_and_ask_is_honoured)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, 30000);
	dlock_lock *held = dl_lock(c, "moving"), *fresh = NULL;
	char owner[128];
	rh_slot_move mv;
	int slot = rh_cluster_key_slot(cl, "moving");

	dl_owner(c, owner, sizeof owner);
	dl_pass(dlock_lock_acquire(held, NULL, DLOCK_WAIT_FOREVER, 60000));
	rh_server *from = dl_slot_owner(cl, "moving"), *to = dl_other_primary(cl, from);

	/* While the slot moves: a new key of that slot is not at the source
	 * yet, so the source answers ASK and the lock is taken at the target. */
	cr_assert_eq(rh_cluster_move_begin(cl, slot, to, &mv), 0);
	cr_assert_geq(rh_cluster_move_keys(cl, &mv, 0), 1, "the held key did not move");
	fresh = dl_lock(c, "{moving}.second");
	dl_pass(dlock_lock_acquire(fresh, NULL, DLOCK_WAIT_FOREVER, 60000));
	redisReply *asking = rh_command(to, "ASKING"); /* the slot is still importing there */
	cr_assert_not_null(asking);
	freeReplyObject(asking);
	cr_assert_eq(rh_command_int(to, "HEXISTS {moving}.second %s", owner), 1,
			"taken during the move, not at the target");
	cr_assert_eq(rh_cluster_move_end(cl, &mv), 0);

	/* After it: the old owner says MOVED, and the release follows it. */
	dl_pass(dlock_lock_release(held, NULL));
	dl_pass(dlock_lock_release(fresh, NULL));
	cr_assert_eq(rh_command_int(to, "EXISTS moving"), 0);
	dl_pass(dlock_lock_acquire(held, NULL, DLOCK_WAIT_FOREVER, 60000));
	cr_assert_eq(rh_command_int(to, "HEXISTS moving %s", owner), 1);
	dl_pass(dlock_lock_release(held, NULL));
	dl_free_locks(held, fresh);
	dl_close_clients(c);
}

Test(cluster, a_failed_over_primary_keeps_the_hold_and_hands_it_on)
{
	dlock_client *ca = dl_client(rh_cluster_seed_uri(cl), 1000, 3000);
	dlock_client *cb = dl_client(rh_cluster_seed_uri(cl), 1000, 3000);
	dlock_lock *a = dl_lock(ca, "fo"), *b = dl_lock(cb, "fo");
	dl_lost lost;
	dl_waiter w;

	dl_lost_init(&lost);
	dl_pass(dlock_lock_acquire(a, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_waiter_start(&w, cb, b, 30000);
	await_sharded_subscriber("fo");
	rh_server *old = dl_slot_owner(cl, "fo");
	cr_assert_eq(rh_command_int(old, "WAIT 1 5000"), 1, "the hold did not replicate");
	int64_t t0 = rh_now_ms();
	rh_server *promoted = rh_cluster_failover(cl, old, 20000);
	cr_assert_not_null(promoted);
	int64_t t_switched = rh_now_ms();
	/* Renewals follow MOVED to the new primary: after two leases the hold is still there. */
	dl_sleep_ms(2 * 3000);
	int held = 0;
	dl_pass(dlock_lock_is_held(&held, a, NULL));
	cr_assert_eq(held, 1, "the holder lost the lock in a failover its hold survived");
	cr_assert_gt(rh_command_int(promoted, "PTTL fo"), 0, "not renewed on the new primary");
	int64_t t_unlock = rh_now_ms();
	dl_pass(dlock_lock_release(a, NULL));
	dl_waiter_join(&w);
	cr_assert_eq(w.rc, 0, "%s", dlock_lock_errmsg(b));
	cr_assert_eq(rh_command_int(promoted, "HEXISTS fo %s", w.owner), 1);
	cr_log_info("cluster failover: %lld ms; the waiter held the lock %lld ms after the release",
			(long long)(t_switched - t0), (long long)(w.returned - t_unlock));
	dl_pass(dlock_lock_release(b, w.owner));
	dl_free_locks(a, b);
	dl_close_clients(ca, cb);
	dl_lost_destroy(&lost);
}

Test(cluster, a_multilock_spans_slots)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, 30000);
	char names[3][16];
	dlock_lock *m[3];
	dlock_multilock *ml = NULL;

	names_on_three_shards(names);
	for (int i = 0; i < 3; i++)
		m[i] = dl_lock(c, names[i]);
	dl_pass(dlock_multilock_new(&ml, m, 3, NULL));
	dl_pass(dlock_multilock_acquire(ml, NULL, 0, 10000));
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(dl_slot_owner(cl, names[i]), "EXISTS %s", names[i]), 1);
	dl_pass(dlock_multilock_release(ml, NULL));
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(dl_slot_owner(cl, names[i]), "EXISTS %s", names[i]), 0);
	dlock_multilock_free(ml);
	dl_free_locks(m[0], m[1], m[2]);
	dl_close_clients(c);
}

typedef struct answered {
	_Atomic int calls;
	int code;
	int64_t value;
} answered;

static void note_answer(dlock_op *op, const dlock_result *r, void *ud)
{
	answered *a = ud;

	(void)op;
	a->code = r->code;
	a->value = r->value;
	atomic_fetch_add(&a->calls, 1);
}

/* A MultiLock's query asks every member at once; a member whose slot moved
 * answers MOVED, which is followed to its new primary (blocking and async). */
Test(cluster, a_multilock_query_follows_a_moved_slot)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, 30000);
	char names[3][16];
	dlock_lock *m[3];
	dlock_multilock *ml = NULL;
	answered a = { 0 };
	int yes = 0, slot;
	int64_t until;
	rh_server *from;

	names_on_three_shards(names);
	for (int i = 0; i < 3; i++)
		m[i] = dl_lock(c, names[i]);
	dl_pass(dlock_multilock_new(&ml, m, 3, NULL));
	dl_pass(dlock_multilock_acquire(ml, "mq:1", 0, 30000));
	slot = rh_cluster_key_slot(cl, names[0]);
	from = dl_slot_owner(cl, names[0]);
	cr_assert_eq(rh_cluster_move_slot(cl, slot, dl_other_primary(cl, from), 0), 0);
	dl_pass(dlock_multilock_is_held(&yes, ml, "mq:1"));
	cr_assert_eq(yes, 1, "held on every member, one of them moved");
	slot = rh_cluster_key_slot(cl, names[1]);
	from = dl_slot_owner(cl, names[1]);
	cr_assert_eq(rh_cluster_move_slot(cl, slot, dl_other_primary(cl, from), 0), 0);
	dl_pass(dlock_multilock_is_locked_async(NULL, ml, note_answer, &a));
	for (until = rh_now_ms() + 10000; atomic_load(&a.calls) == 0 && rh_now_ms() < until;)
		dl_sleep_ms(5);
	cr_assert_eq(atomic_load(&a.calls), 1);
	cr_assert_eq(a.code, 0);
	cr_assert_eq(a.value, 1);
	dl_pass(dlock_multilock_release(ml, "mq:1"));
	dlock_multilock_free(ml);
	dl_free_locks(m[0], m[1], m[2]);
	dl_close_clients(c);
}

Test(cluster, a_name_that_would_be_crossslot_is_refused)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, 30000);
	dlock_lock *l = NULL;

	cr_assert_eq(dlock_lock_new(&l, c, "half{open", NULL), DLOCK_EINVAL);
	cr_assert_not_null(strstr(dlock_errmsg_last(), "CROSSSLOT"), "%s", dlock_errmsg_last());
	dl_pass(dlock_lock_new(&l, c, "tagged{user1}.lock", NULL)); /* a whole tag is fine */
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
	dl_pass(dlock_lock_release(l, NULL));
	dl_free_locks(l);
	dl_close_clients(c);
}

Test(cluster, the_command_runs_on_a_cluster)
{
	pid_t pid = fork();
	int status = 0;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		unsetenv("DLOCK_NODES");
		execl(DLOCK_CLI_PATH, DLOCK_CLI_PATH, "-n", rh_cluster_seed_uri(cl), "run", "-w",
				"5000", "cli-on-cluster", "--", "sh", "-c",
				"test \"$DLOCK_NAME\" = cli-on-cluster", (char *)NULL);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			"dlock run on the cluster: status %d", status);
}
