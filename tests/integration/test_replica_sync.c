/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Replica acknowledgement (client option sync_replicas: WAIT behind every
 * acquisition) on a real primary with real replicas: a healthy replica
 * acknowledges, a paused one (SIGSTOP) makes the acquisition fail with
 * DLOCK_ENOSYNC and be given back, unlock never waits for a replica, and
 * the quorum locks count a member whose replicas fell short as failed.
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

typedef struct setup {
	rh_server *primary;
	rh_server *replica;
	dlock_client *c;
} setup;

static dlock_client *sync_client(rh_server *s, int replicas, int64_t sync_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.command_timeout_ms = COMMAND_MS;
	o.sync_replicas = replicas;
	o.sync_timeout_ms = sync_ms;
	return dl_client_opts(rh_server_uri(s), &o);
}

static void up(setup *t, int replicas, int64_t sync_ms)
{
	t->primary = rh_server_start(NULL);
	cr_assert_not_null(t->primary);
	t->replica = rh_replica_start(t->primary);
	cr_assert_not_null(t->replica, "replica did not come online");
	t->c = sync_client(t->primary, replicas, sync_ms);
}

static void down(setup *t)
{
	rh_server_resume(t->replica);
	dlock_client_free(t->c);
	rh_server_free(t->replica);
	rh_server_free(t->primary);
}

static int synced_of(const dlock_lock *l)
{
	int n = -2;

	dl_pass(dlock_lock_synced_replicas(&n, l));
	return n;
}

/* The owner's hold count on the primary; 0 when it has none. */
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

/* One attempt that must fail with ENOSYNC within the sync timeout plus the
 * command timeout (and slack), having waited for the replicas. */
static void expect_enosync(dlock_lock *l, int64_t sync_ms, int synced)
{
	int64_t t0 = rh_now_ms(), took;
	int rc = dlock_lock_acquire(l, NULL, 0, 30000);

	took = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ENOSYNC, "rc %d: %s", rc, dlock_lock_errmsg(l));
	cr_assert_geq(took, sync_ms - 50, "gave up after %lld ms", (long long)took);
	cr_assert_lt(took, sync_ms + COMMAND_MS + SLACK_MS, "took %lld ms", (long long)took);
	cr_assert_eq(synced_of(l), synced);
	cr_assert(strstr(dlock_lock_errmsg(l), "replicas acknowledged") != NULL, "%s",
			dlock_lock_errmsg(l));
	cr_assert(strstr(dlock_lock_errmsg(l), "given back") != NULL, "%s", dlock_lock_errmsg(l));
}

Test(replica_sync, healthy_replica_acknowledges, .timeout = 60)
{
	setup t;
	dlock_lock *l;

	up(&t, 1, 2000);
	l = dl_lock(t.c, "sync-ok");
	cr_assert_eq(synced_of(l), -1, "nothing asked yet");
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 30000), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(synced_of(l), 1);
	/* The re-entry is synced too. */
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 30000), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(synced_of(l), 1);
	cr_assert_eq(count_on(t.primary, t.c, "sync-ok"), 2);
	/* The replica has the hold it acknowledged. */
	cr_assert_eq(rh_command_int(t.replica, "EXISTS sync-ok"), 1);
	dl_pass(dlock_lock_release(l, NULL));
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
	down(&t);
}

Test(replica_sync, paused_replica_fails_and_rolls_back, .timeout = 60)
{
	setup t;
	dlock_lock *l;

	up(&t, 1, 1000);
	l = dl_lock(t.c, "sync-paused");
	cr_assert_eq(rh_server_pause(t.replica), 0);
	expect_enosync(l, 1000, 0);
	cr_assert_eq(rh_command_int(t.primary, "EXISTS sync-paused"), 0, "not rolled back");
	cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER, "the hold is forgotten");
	cr_assert_eq(rh_server_resume(t.replica), 0);
	/* A try with a wait rides ENOSYNC out until the replica is back. */
	cr_assert_eq(dlock_lock_acquire(l, NULL, 20000, 30000), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(synced_of(l), 1);
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
	down(&t);
}

Test(replica_sync, reentry_gives_back_only_its_count, .timeout = 60)
{
	setup t;
	dlock_lock *l;

	up(&t, 1, 500);
	l = dl_lock(t.c, "sync-reentry");
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 30000), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_server_pause(t.replica), 0);
	expect_enosync(l, 500, 0);
	cr_assert_eq(count_on(t.primary, t.c, "sync-reentry"), 1, "the first hold stays");
	cr_assert_eq(dlock_lock_check(l, NULL), 0);
	/* Unlock does not wait for the paused replica. */
	dl_pass(dlock_lock_release(l, NULL));
	cr_assert_eq(rh_command_int(t.primary, "EXISTS sync-reentry"), 0);
	dlock_lock_free(l);
	down(&t);
}

Test(replica_sync, unlock_never_waits_for_replicas, .timeout = 60)
{
	const int64_t sync_ms = 6000;
	setup t;
	dlock_lock *l;
	int64_t t0, took;

	up(&t, 1, sync_ms);
	l = dl_lock(t.c, "sync-unlock");
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_server_pause(t.replica), 0);
	t0 = rh_now_ms();
	dl_pass(dlock_lock_release(l, NULL));
	took = rh_now_ms() - t0;
	cr_assert_lt(took, sync_ms / 2, "unlock took %lld ms", (long long)took);
	cr_assert_eq(rh_command_int(t.primary, "EXISTS sync-unlock"), 0);
	dlock_lock_free(l);
	down(&t);
}

Test(replica_sync, more_replicas_than_exist, .timeout = 60)
{
	setup t;
	dlock_lock *l;

	up(&t, 2, 300);
	l = dl_lock(t.c, "sync-two");
	expect_enosync(l, 300, 1);
	cr_assert(strstr(dlock_lock_errmsg(l), "1 of 2 replicas") != NULL, "%s",
			dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(t.primary, "EXISTS sync-two"), 0);
	dlock_lock_free(l);
	down(&t);
}

Test(replica_sync, fenced_and_fair_are_synced, .timeout = 60)
{
	setup t;
	dlock_lock *f, *q;
	int64_t token = 0;

	up(&t, 1, 400);
	dl_pass(dlock_lock_new(&f, t.c, "sync-fenced", dl_kind(DLOCK_LOCK_FENCED)));
	dl_pass(dlock_lock_new(&q, t.c, "sync-fair", dl_kind(DLOCK_LOCK_FAIR)));
	dl_pass(dlock_lock_acquire_fenced(&token, f, NULL, 0, 30000));
	cr_assert_eq(synced_of(f), 1);
	dl_pass(dlock_lock_release(f, NULL));
	dl_pass(dlock_lock_acquire(q, NULL, 0, 30000));
	cr_assert_eq(synced_of(q), 1);
	dl_pass(dlock_lock_release(q, NULL));

	cr_assert_eq(rh_server_pause(t.replica), 0);
	cr_assert_eq(dlock_lock_acquire_fenced(&token, f, NULL, 0, 30000), DLOCK_ENOSYNC, "%s",
			dlock_lock_errmsg(f));
	cr_assert_eq(synced_of(f), 0);
	cr_assert_eq(rh_command_int(t.primary, "EXISTS sync-fenced"), 0);
	expect_enosync(q, 400, 0);
	cr_assert_eq(rh_command_int(t.primary, "EXISTS sync-fair"), 0);
	cr_assert_eq(rh_command_int(t.primary, "EXISTS redisson_lock_queue:{sync-fair}"), 0);
	dlock_lock_free(f);
	dlock_lock_free(q);
	down(&t);
}

Test(replica_sync, options_are_checked, .timeout = 30)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;
	int n;

	cr_assert_eq(o.sync_replicas, 0, "off by default");
	cr_assert_eq(o.sync_timeout_ms, 1000);
	o.lazy_connect = 1;
	o.sync_replicas = -1;
	cr_assert_eq(dlock_client_new(&c, "redis://127.0.0.1:1", &o), DLOCK_EINVAL);
	cr_assert(strstr(dlock_errmsg_last(), "sync_replicas") != NULL, "%s", dlock_errmsg_last());
	o.sync_replicas = 1;
	o.sync_timeout_ms = 0;
	cr_assert_eq(dlock_client_new(&c, "redis://127.0.0.1:1", &o), DLOCK_EINVAL);
	cr_assert(strstr(dlock_errmsg_last(), "sync_timeout_ms") != NULL, "%s",
			dlock_errmsg_last());
	cr_assert_null(c);
	cr_assert_eq(dlock_lock_synced_replicas(&n, NULL), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_synced_replicas(NULL, NULL), DLOCK_EINVAL);
	cr_assert(strstr(dlock_strerror(DLOCK_ENOSYNC), "replicas") != NULL);
}

/* ---- MultiLock and RedLock ------------------------------------------------ */

/* Three primaries; the first has a replica and its client asks it to
 * acknowledge, the others do not ask. */
typedef struct quorum {
	rh_server *p[3];
	rh_server *replica;
	dlock_client *c[3];
	dlock_lock *m[3];
} quorum;

static void quorum_up(quorum *q, const char *name)
{
	cr_assert_eq(rh_servers_start(q->p, 3, NULL), 0);
	q->replica = rh_replica_start(q->p[0]);
	cr_assert_not_null(q->replica, "replica did not come online");
	for (int i = 0; i < 3; i++) {
		q->c[i] = sync_client(q->p[i], i == 0 ? 1 : 0, 500);
		q->m[i] = dl_lock(q->c[i], name);
	}
}

static void quorum_down(quorum *q)
{
	rh_server_resume(q->replica);
	for (int i = 0; i < 3; i++) {
		dlock_lock_free(q->m[i]);
		dlock_client_free(q->c[i]);
	}
	rh_server_free(q->replica);
	for (int i = 0; i < 3; i++)
		rh_server_free(q->p[i]);
}

static int64_t exists_on(rh_server *s, const char *name)
{
	return rh_command_int(s, "EXISTS %s", name);
}

Test(replica_sync, redlock_counts_an_unsynced_member_as_failed, .timeout = 90)
{
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	dlock_redlock *rl = NULL;
	quorum q;

	quorum_up(&q, "sync-redlock");
	dl_pass(dlock_redlock_new(&rl, q.m, 3, NULL));
	dl_pass(dlock_redlock_acquire(rl, NULL, 0, 30000));
	cr_assert_eq(synced_of(q.m[0]), 1);
	dl_pass(dlock_redlock_release(rl, NULL));

	cr_assert_eq(rh_server_pause(q.replica), 0);
	/* Two of three is a quorum: granted, without the unsynced member. */
	dl_pass(dlock_redlock_acquire(rl, NULL, 0, 30000));
	dl_pass(dlock_redlock_member_status(&st, rl, 0));
	cr_assert_eq(st.vote, DLOCK_VOTE_ERROR, "vote %s", dl_vote_name(st.vote));
	cr_assert_eq(st.error, DLOCK_ENOSYNC, "error %d: %s", st.error, st.message);
	cr_assert_eq(synced_of(q.m[0]), 0);
	cr_assert_eq(exists_on(q.p[0], "sync-redlock"), 0, "the unsynced member was kept");
	cr_assert_eq(exists_on(q.p[1], "sync-redlock"), 1);
	cr_assert_eq(exists_on(q.p[2], "sync-redlock"), 1);
	dl_pass(dlock_redlock_release(rl, NULL));
	cr_assert_eq(exists_on(q.p[1], "sync-redlock"), 0);
	dlock_redlock_free(rl);
	quorum_down(&q);
}

Test(replica_sync, multilock_fails_on_an_unsynced_member, .timeout = 90)
{
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	dlock_multilock *ml = NULL;
	int64_t t0, took;
	quorum q;
	int rc;

	quorum_up(&q, "sync-multi");
	dl_pass(dlock_multilock_new(&ml, q.m, 3, NULL));
	cr_assert_eq(rh_server_pause(q.replica), 0);
	/* wait 0: Redisson's ordered round, member by member. */
	rc = dlock_multilock_acquire(ml, NULL, 0, 30000);
	cr_assert_eq(rc, DLOCK_ENOQUORUM, "rc %d: %s", rc, dlock_multilock_errmsg(ml));
	dl_pass(dlock_multilock_member_status(&st, ml, 0));
	cr_assert_eq(st.error, DLOCK_ENOSYNC, "error %d: %s", st.error, st.message);
	/* A wait: the parallel attempt first, then ordered rounds until it ends. */
	t0 = rh_now_ms();
	rc = dlock_multilock_acquire(ml, NULL, 1200, 30000);
	took = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ENOQUORUM, "rc %d: %s", rc, dlock_multilock_errmsg(ml));
	cr_assert_lt(took, 1200 + 500 + COMMAND_MS + SLACK_MS, "took %lld ms", (long long)took);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(exists_on(q.p[i], "sync-multi"), 0, "member %d kept", i);
	cr_assert_eq(rh_server_resume(q.replica), 0);
	dl_pass(dlock_multilock_acquire(ml, NULL, 20000, 30000));
	cr_assert_eq(synced_of(q.m[0]), 1);
	dl_pass(dlock_multilock_release(ml, NULL));
	dlock_multilock_free(ml);
	quorum_down(&q);
}

/*
 * A flushed script cache (NOSCRIPT) makes the acquire go again as EVAL, and
 * its WAIT with it: the one sent behind the refused EVALSHA counted no
 * write of the acquire. (Redis 7.0 makes that stale WAIT block as well, so
 * these tests check the outcome and the counts after a NOSCRIPT, not which
 * WAIT was counted.)
 */
Test(replica_sync, noscript_sends_the_wait_again, .timeout = 90)
{
	setup t;
	dlock_lock *l;

	up(&t, 1, 400);
	l = dl_lock(t.c, "sync-noscript");
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 30000), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_server_pause(t.replica), 0);
	freeReplyObject(rh_command(t.primary, "SCRIPT FLUSH"));
	expect_enosync(l, 400, 0);
	cr_assert_eq(count_on(t.primary, t.c, "sync-noscript"), 1);
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
	down(&t);
}

Test(replica_sync, noscript_sends_the_wait_again_in_a_quorum, .timeout = 90)
{
	dlock_multilock *ml = NULL;
	quorum q;
	int rc;

	quorum_up(&q, "sync-noscript-multi");
	dl_pass(dlock_multilock_new(&ml, q.m, 3, NULL));
	dl_pass(dlock_multilock_acquire(ml, NULL, 5000, 30000));
	cr_assert_eq(synced_of(q.m[0]), 1);
	cr_assert_eq(rh_server_pause(q.replica), 0);
	freeReplyObject(rh_command(q.p[0], "SCRIPT FLUSH"));
	/* A wait: the parallel attempt (the multiplexed path) comes first. */
	rc = dlock_multilock_acquire(ml, NULL, 300, 30000);
	cr_assert_eq(rc, DLOCK_ENOQUORUM, "rc %d: %s", rc, dlock_multilock_errmsg(ml));
	cr_assert_eq(synced_of(q.m[0]), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(count_on(q.p[i], q.c[i], "sync-noscript-multi"), 1,
				"member %d: the first hold must stay, once", i);
	cr_assert_eq(rh_server_resume(q.replica), 0);
	dl_pass(dlock_multilock_release(ml, NULL));
	for (int i = 0; i < 3; i++)
		cr_assert_eq(exists_on(q.p[i], "sync-noscript-multi"), 0);
	dlock_multilock_free(ml);
	quorum_down(&q);
}

typedef struct ended {
	int calls, code;
	char message[256];
} ended;

static void note_end(dlock_op *op, const dlock_result *r, void *ud)
{
	ended *e = ud;

	(void)op;
	e->calls++;
	e->code = r->code;
	snprintf(e->message, sizeof(e->message), "%s", r->message);
}

/*
 * The give-back of an acquisition too few replicas acknowledged is a step
 * of the acquire's operation on its loop: with the primary stopped after
 * the acquire ran (its WAIT then never answers, and the give-back cannot
 * be answered either), the caller's loop goes on turning - no turn waits
 * for the give-back's command timeout - and the one callback says what
 * became of the hold.
 */
Test(replica_sync, a_give_back_to_a_stopped_primary_does_not_stall_the_loop, .timeout = 90)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	ended e = { 0 };
	int64_t longest, until;
	setup t;

	up(&t, 1, 1500);
	dl_pass(dlock_loop_new(&loop, NULL));
	o.loop = loop;
	o.command_timeout_ms = COMMAND_MS;
	o.sync_replicas = 1;
	o.sync_timeout_ms = 1500;
	c = dl_client_opts(rh_server_uri(t.primary), &o);
	l = dl_lock(c, "sync-loop");
	cr_assert_eq(rh_server_pause(t.replica), 0);
	dl_pass(dlock_lock_acquire_async(NULL, l, "me:1", 0, 30000, note_end, &e));
	/* The acquire runs; its WAIT waits for the paused replica. */
	for (until = rh_now_ms() + 10000; rh_now_ms() < until && rh_command_int(t.primary,
			"EXISTS sync-loop") != 1;)
		dlock_loop_run(loop, 20);
	cr_assert_eq(rh_command_int(t.primary, "EXISTS sync-loop"), 1, "the acquire never ran");
	cr_assert_eq(rh_server_pause(t.primary), 0);
	/* The WAIT's deadline, then the give-back's command timeout, pass. */
	longest = dl_longest_loop_turn(loop, 1500 + 2 * COMMAND_MS + 1000, 20);
	cr_assert_eq(rh_server_resume(t.primary), 0);
	for (until = rh_now_ms() + 15000; e.calls == 0 && rh_now_ms() < until;)
		dlock_loop_run(loop, 20);
	cr_assert_eq(e.calls, 1, "%d callbacks", e.calls);
	cr_expect_lt(longest, COMMAND_MS / 2, "a loop turn took %lld ms: the give-back blocked it",
			(long long)longest);
	cr_expect_neq(e.code, 0);
	cr_expect(strstr(e.message, "given back") != NULL, "%d: %s", e.code, e.message);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
	down(&t);
}
