/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The event hook and the stats snapshot (dlock/stats.h) as a user sees
 * them: a lock taken and released, a try on a held lock, a hold deleted by
 * someone else, a key taken over by another owner (a brain split), a
 * server killed under a renewing hold and started again, a RedLock with a
 * member down, and snapshots taken while another thread locks.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <dlock.h>

#include "event_recorder.h"
#include "redis_harness.h"
#include "support.h"

/* ---- cases ---------------------------------------------------------------- */

Test(events, bounds_and_names)
{
	const int64_t *bounds = dlock_stat_bounds_us();

	for (int i = 1; i < DLOCK_STAT_BUCKETS - 1; i++)
		cr_assert_lt(bounds[i - 1], bounds[i]);
	cr_assert_eq(bounds[0], 100);
	cr_assert_eq(bounds[DLOCK_STAT_BUCKETS - 2], 1800000000LL);
	cr_assert_str_eq(dlock_stat_event_type_str(DLOCK_STAT_ACQUIRED), "acquired");
	cr_assert_str_eq(dlock_stat_event_type_str(DLOCK_STAT_BRAIN_SPLIT), "brain-split");
	cr_assert_str_eq(dlock_stat_event_type_str(99), "unknown");
	cr_assert_eq(dlock_client_stats(NULL, NULL), DLOCK_EINVAL);
	dlock_stats_free(NULL);
}

Test(events, acquire_then_release_reports_both_and_counts_them, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	recorder r;
	seen_event acq, rel;
	char owner[80];

	cr_assert_not_null(s);
	rec_init(&r);
	dlock_client *c = hooked_client(rh_server_uri(s), &r, 0, 0);
	dlock_lock *l = dl_lock(c, "events:plain");

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG)); /* reentrant: one hold, count 2 */
	dl_sleep_ms(50);
	dl_pass(dlock_lock_release(l, NULL));
	cr_assert_eq(rec_count(&r, DLOCK_STAT_RELEASED), 0, "the first of two unlocks released");
	dl_pass(dlock_lock_release(l, NULL));

	cr_assert(rec_wait(&r, DLOCK_STAT_ACQUIRED, 0, &acq));
	cr_assert(rec_wait(&r, DLOCK_STAT_RELEASED, 0, &rel));
	dl_owner(c, owner, sizeof(owner));
	cr_assert_str_eq(acq.name, "events:plain");
	cr_assert_str_eq(acq.owner, owner);
	cr_assert_eq(acq.ev.attempts, 1);
	cr_assert_eq(acq.ev.votes, 1);
	cr_assert_eq(acq.ev.members, 1);
	cr_assert(acq.ev.wait_ms >= 0 && acq.ev.wait_ms < 1000, "wait %lld ms",
			(long long)acq.ev.wait_ms);
	cr_assert(rel.ev.hold_ms >= 45 && rel.ev.hold_ms < 5000, "held %lld ms",
			(long long)rel.ev.hold_ms);
	cr_assert_eq(rec_count(&r, DLOCK_STAT_ACQUIRED), 2);
	cr_assert_eq(rec_count(&r, DLOCK_STAT_RELEASED), 1);

	/* Held by another client: a try reports NOT_ACQUIRED, held by others. */
	dlock_client *other = dl_client(rh_server_uri(s), 0, 0);
	dlock_lock *ol = dl_lock(other, "events:plain");
	dl_pass(dlock_lock_acquire(ol, NULL, 0, 10000));
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), DLOCK_ENOTACQUIRED);
	seen_event na;
	cr_assert(rec_wait(&r, DLOCK_STAT_NOT_ACQUIRED, 0, &na));
	cr_assert_eq(na.ev.code, DLOCK_ENOTACQUIRED);
	cr_assert_eq(na.ev.attempts, 1);

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c));
	cr_assert_eq(st->acquired, 2);
	cr_assert_eq(st->not_acquired, 1);
	cr_assert_eq(st->failed, 0);
	cr_assert_eq(st->released, 1);
	cr_assert_eq(st->lost, 0);
	cr_assert_eq(st->held, 0);
	cr_assert_eq(st->wait.count, 3);
	cr_assert_eq(sum_counts(&st->wait), 3);
	cr_assert_eq(st->hold.count, 1);
	cr_assert_geq(st->hold.sum_us, 45000);
	cr_assert_eq(st->nnodes, 1);
	cr_assert(strstr(rh_server_uri(s), st->nodes[0].node) != NULL, "node %s",
			st->nodes[0].node);
	cr_assert_geq(st->nodes[0].commands, 5, "%llu commands",
			(unsigned long long)st->nodes[0].commands);
	cr_assert_eq(st->nodes[0].rtt.count, st->nodes[0].commands);
	cr_assert_eq(sum_counts(&st->nodes[0].rtt), st->nodes[0].commands);
	cr_assert_eq(st->nodes[0].up, 1);
	cr_assert_eq(st->nodes[0].downs, 0);
	dlock_stats_free(st);

	dlock_lock_release(ol, NULL);
	dlock_lock_free(ol);
	dlock_lock_free(l);
	dlock_client_free(other);
	dlock_client_free(c);
	rh_server_free(s);
}

Test(events, every_kind_reports_its_acquisition_and_release, .timeout = 30)
{
	static const dlock_lock_kind kinds[] = { DLOCK_LOCK_PLAIN, DLOCK_LOCK_FAIR, DLOCK_LOCK_FENCED,
		DLOCK_LOCK_READ, DLOCK_LOCK_WRITE };
	const int n = (int)(sizeof(kinds) / sizeof(kinds[0]));
	rh_server *s = rh_server_start(NULL);
	recorder r;

	rec_init(&r);
	dlock_client *c = hooked_client(rh_server_uri(s), &r, 0, 0);
	for (int i = 0; i < n; i++) {
		char name[32];
		dlock_lock *l;

		snprintf(name, sizeof(name), "events:kind-%d", i);
		dl_pass(dlock_lock_new(&l, c, name, dl_kind(kinds[i])));
		dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		dl_pass(dlock_lock_release(l, NULL));
		cr_assert_eq(rec_count(&r, DLOCK_STAT_ACQUIRED), i + 1, "kind %d", (int)kinds[i]);
		cr_assert_eq(rec_count(&r, DLOCK_STAT_RELEASED), i + 1, "kind %d", (int)kinds[i]);
		dlock_lock_free(l);
	}

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c));
	cr_assert_eq(st->acquired, (uint64_t)n);
	cr_assert_eq(st->released, (uint64_t)n);
	cr_assert_eq(st->held, 0);
	dlock_stats_free(st);
	dlock_client_free(c);
	rh_server_free(s);
}

Test(events, force_unlock_elsewhere_is_reported_lost, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	recorder r;
	seen_event lost;
	int deleted = 0;

	rec_init(&r);
	dlock_client *c = hooked_client(rh_server_uri(s), &r, 500, 600);
	dlock_lock *l = dl_lock(c, "events:forced");
	dlock_client *other = dl_client(rh_server_uri(s), 0, 0);
	dlock_lock *ol = dl_lock(other, "events:forced");

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_lock_force_release(&deleted, ol));
	cr_assert_eq(deleted, 1);
	cr_assert(rec_wait(&r, DLOCK_STAT_LOST, 3000, &lost), "no LOST within 3 s");
	cr_assert_eq(lost.ev.reason, DLOCK_LOST_GONE, "reason %d", lost.ev.reason);
	cr_assert_str_eq(lost.name, "events:forced");
	cr_assert_geq(lost.ev.hold_ms, 0);
	cr_assert_eq(rec_count(&r, DLOCK_STAT_BRAIN_SPLIT), 0, "nobody else held it");

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c));
	cr_assert_eq(st->lost, 1);
	cr_assert_eq(st->held, 0);
	cr_assert_eq(st->hold.count, 1);
	dlock_stats_free(st);

	dlock_lock_free(ol);
	dlock_lock_free(l);
	dlock_client_free(other);
	dlock_client_free(c);
	rh_server_free(s);
}

/* The key deleted and taken by another owner in one step: the next renewal
 * finds it held by someone else. */
Test(events, renewal_that_finds_another_owner_reports_brain_split, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	recorder r;
	seen_event split, lost;
	char owner[80];

	rec_init(&r);
	dlock_client *c = hooked_client(rh_server_uri(s), &r, 500, 600);
	dlock_lock *l = dl_lock(c, "events:split");

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_owner(c, owner, sizeof(owner));
	redisReply *rep = rh_command(s,
			"EVAL %s 1 %s %s",
			"redis.call('del', KEYS[1]); redis.call('hset', KEYS[1], ARGV[1], 1); "
			"return redis.call('pexpire', KEYS[1], 10000)",
			"events:split", "someone-else:1");
	cr_assert_not_null(rep);
	freeReplyObject(rep);

	cr_assert(rec_wait(&r, DLOCK_STAT_BRAIN_SPLIT, 3000, &split), "no BRAIN_SPLIT within 3 s");
	cr_assert(rec_wait(&r, DLOCK_STAT_LOST, 1000, &lost));
	cr_assert_str_eq(split.name, "events:split");
	cr_assert_str_eq(split.owner, owner, "our owner, not the other");
	cr_assert(strstr(rh_server_uri(s), split.node) != NULL, "node %s", split.node);
	cr_assert_eq(lost.ev.reason, DLOCK_LOST_GONE);
	cr_assert_eq(rec_count(&r, DLOCK_STAT_BRAIN_SPLIT), 1);

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c));
	cr_assert_eq(st->brain_splits, 1);
	cr_assert_eq(st->lost, 1);
	dlock_stats_free(st);

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

Test(events, killed_server_goes_down_once_and_comes_back_up_once, .timeout = 60)
{
	rh_server *s = rh_server_start(NULL);
	recorder r;
	seen_event down, failed;

	rec_init(&r);
	dlock_client *c = hooked_client(rh_server_uri(s), &r, 200, 600);
	dlock_lock *l = dl_lock(c, "events:down");

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(250); /* at least one renewal answered */
	cr_assert_eq(rh_server_kill(s), 0);
	cr_assert(rec_wait(&r, DLOCK_STAT_RENEWAL_FAILED, 3000, &failed), "no RENEWAL_FAILED");
	cr_assert(rec_wait(&r, DLOCK_STAT_NODE_DOWN, 3000, &down), "no NODE_DOWN");
	cr_assert(failed.ev.code < 0);
	cr_assert(down.ev.code == DLOCK_ECONN || down.ev.code == DLOCK_ETIMEDOUT, "code %s",
			dlock_strerror(down.ev.code));
	cr_assert(strstr(rh_server_uri(s), down.node) != NULL, "node %s", down.node);
	/* More failures meanwhile (renewals until the hold is lost): still one event. */
	cr_assert(rec_wait(&r, DLOCK_STAT_LOST, 3000, NULL), "the hold was not lost");
	cr_assert_eq(dlock_client_ping(c) < 0, 1);
	cr_assert_eq(rec_count(&r, DLOCK_STAT_NODE_DOWN), 1);

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c));
	cr_assert_eq(st->nodes[0].up, 0);
	cr_assert_eq(st->nodes[0].downs, 1);
	cr_assert_geq(st->nodes[0].errors, 2);
	cr_assert_geq(st->renewal_failures, 1);
	dlock_stats_free(st);

	cr_assert_eq(rh_server_restart(s), 0);
	int64_t until = rh_now_ms() + 5000;
	while (dlock_client_ping(c) != 0 && rh_now_ms() < until)
		dl_sleep_ms(20);
	dl_pass(dlock_client_ping(c));
	dl_pass(dlock_client_ping(c));
	cr_assert_eq(rec_count(&r, DLOCK_STAT_NODE_UP), 1);
	cr_assert_eq(rec_count(&r, DLOCK_STAT_NODE_DOWN), 1);
	dl_pass(dlock_client_stats(&st, c));
	cr_assert_eq(st->nodes[0].up, 1);
	cr_assert_eq(st->nodes[0].downs, 1);
	dlock_stats_free(st);

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

typedef struct snapper {
	dlock_client *c;
	atomic_int stop;
	int snaps;
	int failed;
} snapper;

static void *snap_loop(void *arg)
{
	snapper *p = arg;

	while (!atomic_load(&p->stop)) {
		dlock_stats *st;

		if (dlock_client_stats(&st, p->c) != 0 || st->nnodes != 1 ||
				st->nodes[0].rtt.count > st->nodes[0].commands + 1000)
			p->failed = 1;
		dlock_stats_free(st);
		p->snaps++;
	}
	return NULL;
}

Test(events, snapshots_from_another_thread_while_locking, .timeout = 60)
{
	rh_server *s = rh_server_start(NULL);
	recorder r;
	snapper p = { 0 };
	pthread_t th;
	const int n = 300;

	rec_init(&r);
	p.c = hooked_client(rh_server_uri(s), &r, 0, 0);
	dlock_lock *l = dl_lock(p.c, "events:busy");
	cr_assert_eq(pthread_create(&th, NULL, snap_loop, &p), 0);
	for (int i = 0; i < n; i++) {
		dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		dl_pass(dlock_lock_release(l, NULL));
	}
	atomic_store(&p.stop, 1);
	pthread_join(th, NULL);
	cr_assert_eq(p.failed, 0);
	cr_assert_gt(p.snaps, 0);

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, p.c));
	cr_assert_eq(st->acquired, (uint64_t)n);
	cr_assert_eq(st->released, (uint64_t)n);
	cr_assert_eq(st->wait.count, (uint64_t)n);
	cr_assert_eq(st->hold.count, (uint64_t)n);
	cr_assert_eq(st->held, 0);
	cr_assert_geq(st->nodes[0].commands, (uint64_t)(2 * n));
	cr_assert_eq(st->nodes[0].rtt.count, st->nodes[0].commands);
	cr_assert_gt(st->nodes[0].rtt.sum_us, 0);
	dlock_stats_free(st);

	dlock_lock_free(l);
	dlock_client_free(p.c);
	rh_server_free(s);
}

Test(events, permit_taken_and_given_back_reports_both, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	recorder r;
	dlock_semaphore_options so = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *sem;
	char id[DLOCK_PERMIT_ID_SIZE];
	seen_event acq, rel;

	rec_init(&r);
	dlock_client *c = hooked_client(rh_server_uri(s), &r, 0, 0);
	so.kind = DLOCK_SEMAPHORE_EXPIRABLE;
	dl_pass(dlock_semaphore_new(&sem, c, "events:sem", &so));
	dl_pass(dlock_semaphore_try_set_permits(NULL, sem, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, sem, 0, DLOCK_LEASE_WATCHDOG));
	char other[DLOCK_PERMIT_ID_SIZE];
	cr_assert_eq(dlock_semaphore_acquire_permit(other, sem, 0, 10000), DLOCK_ENOTACQUIRED);
	dl_sleep_ms(30);
	dl_pass(dlock_semaphore_release_permit(sem, id));

	cr_assert(rec_wait(&r, DLOCK_STAT_ACQUIRED, 0, &acq));
	cr_assert(rec_wait(&r, DLOCK_STAT_RELEASED, 0, &rel));
	cr_assert_str_eq(acq.name, "events:sem");
	cr_assert_str_eq(acq.owner, id, "the permit's id");
	cr_assert_eq(acq.ev.attempts, 1);
	cr_assert_geq(rel.ev.hold_ms, 25);
	cr_assert_eq(rec_count(&r, DLOCK_STAT_NOT_ACQUIRED), 1);

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c));
	cr_assert_eq(st->acquired, 1);
	cr_assert_eq(st->not_acquired, 1);
	cr_assert_eq(st->released, 1);
	cr_assert_eq(st->held, 0);
	dlock_stats_free(st);

	dlock_semaphore_free(sem);
	dlock_client_free(c);
	rh_server_free(s);
}

typedef struct done_flag {
	atomic_int done;
	int code;
} done_flag;

static void op_done(dlock_op *op, const dlock_result *res, void *ud)
{
	done_flag *d = ud;

	(void)op;
	d->code = res->code;
	atomic_store(&d->done, 1);
}

static void wait_done(done_flag *d)
{
	int64_t until = rh_now_ms() + 5000;

	while (!atomic_load(&d->done) && rh_now_ms() < until)
		dl_sleep_ms(2);
	cr_assert(atomic_load(&d->done), "the operation did not end within 5 s");
}

Test(events, async_fair_lock_reports_like_the_blocking_call, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	recorder r;
	dlock_lock *l;
	done_flag a = { 0 }, b = { 0 };

	rec_init(&r);
	dlock_client *c = hooked_client(rh_server_uri(s), &r, 0, 0);
	dl_pass(dlock_lock_new(&l, c, "events:async", dl_kind(DLOCK_LOCK_FAIR)));
	dl_pass(dlock_lock_acquire_async(NULL, l, "async-owner:1", 0, DLOCK_LEASE_WATCHDOG, op_done,
			&a));
	wait_done(&a);
	cr_assert_eq(a.code, 0);
	dl_pass(dlock_lock_release_async(NULL, l, "async-owner:1", op_done, &b));
	wait_done(&b);
	cr_assert_eq(b.code, 0);

	seen_event acq, rel;
	cr_assert(rec_wait(&r, DLOCK_STAT_ACQUIRED, 1000, &acq));
	cr_assert(rec_wait(&r, DLOCK_STAT_RELEASED, 1000, &rel));
	cr_assert_str_eq(acq.owner, "async-owner:1");
	cr_assert_str_eq(rel.owner, "async-owner:1");

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

/* The key taken over by another owner between two renewals, found by the
 * unlock: for each kind whose release can tell. */
Test(events, unlock_that_finds_another_owner_reports_brain_split, .timeout = 30)
{
	static const dlock_lock_kind kinds[] = { DLOCK_LOCK_PLAIN, DLOCK_LOCK_FAIR, DLOCK_LOCK_WRITE };
	rh_server *s = rh_server_start(NULL);
	recorder r;

	rec_init(&r);
	dlock_client *c = hooked_client(rh_server_uri(s), &r, 0, 0); /* 30 s watchdog: no renewal */
	for (int i = 0; i < 3; i++) {
		char name[32], field[32];
		dlock_lock *l;

		snprintf(name, sizeof(name), "events:usplit-%d", i);
		snprintf(field, sizeof(field), "someone-else:1%s",
				kinds[i] == DLOCK_LOCK_WRITE ? ":write" : "");
		dl_pass(dlock_lock_new(&l, c, name, dl_kind(kinds[i])));
		dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		redisReply *rep = rh_command(s, "EVAL %s 1 %s %s %s",
				"redis.call('del', KEYS[1]); redis.call('hset', KEYS[1], ARGV[1], 1); "
				"if ARGV[2] ~= '' then redis.call('hset', KEYS[1], 'mode', 'write'); end; "
				"return redis.call('pexpire', KEYS[1], 10000)",
				name, field, kinds[i] == DLOCK_LOCK_WRITE ? "w" : "");
		cr_assert_not_null(rep);
		freeReplyObject(rep);
		int rc = dlock_lock_release(l, NULL);
		cr_assert_eq(rc, DLOCK_ELOST, "kind %d: %s", (int)kinds[i], dlock_strerror(rc));
		cr_assert_eq(rec_count(&r, DLOCK_STAT_BRAIN_SPLIT), i + 1, "kind %d", (int)kinds[i]);
		dlock_lock_free(l);
	}

	/* Not ours and never believed ours: a plain "not owner", no brain split. */
	dlock_lock *l = dl_lock(c, "events:usplit-0");
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ENOTOWNER);
	cr_assert_eq(rec_count(&r, DLOCK_STAT_BRAIN_SPLIT), 3);

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c));
	cr_assert_eq(st->brain_splits, 3);
	cr_assert_eq(st->held, 0);
	dlock_stats_free(st);
	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}
