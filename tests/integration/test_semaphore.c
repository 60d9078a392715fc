/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Semaphores (Redisson's RSemaphore and RPermitExpirableSemaphore) on a
 * real redis-server: the count is set once, never more holders than
 * permits, a release wakes a waiter at once (pub/sub, not a poll), a
 * crashed holder's expirable permit comes back after its lease while a
 * renewed one outlives it, a canceled acquisition leaves nothing taken,
 * and the count can be changed.
 *
 * Keys: the count STRING <name>, the taken permits ZSET {name}:timeout,
 * the channel redisson_sc:{name}.
 *
 * Worker threads never call cr_assert: they record what happened and the
 * test's main thread asserts.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

TestSuite(semaphore, .init = dl_server_start, .fini = dl_server_stop);

static dlock_semaphore *sem_of(dlock_client *c, const char *name, dlock_semaphore_kind kind)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;

	o.kind = kind;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	return s;
}

static int64_t available(dlock_semaphore *s)
{
	int64_t n = -1;

	dl_pass(dlock_semaphore_available(&n, s));
	return n;
}

Test(semaphore, the_count_is_set_once, .timeout = 20)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-once", DLOCK_SEMAPHORE_PLAIN);
	int set = -1;

	dl_pass(dlock_semaphore_try_set_permits(&set, s, 3));
	cr_assert_eq(set, 1, "the first try_set_permits did not set the count");
	dl_pass(dlock_semaphore_try_set_permits(&set, s, 5));
	cr_assert_eq(set, 0, "a second try_set_permits changed a count already set");
	cr_assert_eq(available(s), 3);
	redisReply *r = rh_command(dl_srv, "GET sem-once");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, "3") == 0,
			"the count is not Redisson's STRING \"3\"");
	freeReplyObject(r);

	/* The same for the expirable kind, on its own name. */
	dlock_semaphore *e = sem_of(c, "sem-once-x", DLOCK_SEMAPHORE_EXPIRABLE);
	dl_pass(dlock_semaphore_try_set_permits(&set, e, 2));
	cr_assert_eq(set, 1);
	dl_pass(dlock_semaphore_try_set_permits(&set, e, 9));
	cr_assert_eq(set, 0);
	cr_assert_eq(available(e), 2);

	dlock_semaphore_free(e);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

/* ---- never more holders than permits -------------------------------------- */

#define HAMMER_THREADS 8
#define HAMMER_ROUNDS 25
#define HAMMER_PERMITS 3

typedef struct hammer {
	dlock_semaphore *s;
	atomic_int inside, most, done;
	dl_failures f;
} hammer;

static void *hammer_thread(void *arg)
{
	hammer *h = arg;

	for (int i = 0; i < HAMMER_ROUNDS; i++) {
		int rc = dlock_semaphore_acquire(h->s, 1, 20000);

		if (rc != 0) {
			dl_failures_record(&h->f, "acquire: %s (%s)", dlock_strerror(rc),
					dlock_semaphore_errmsg(h->s));
			return NULL;
		}
		int now = atomic_fetch_add(&h->inside, 1) + 1, m = atomic_load(&h->most);
		while (now > m && !atomic_compare_exchange_weak(&h->most, &m, now))
			;
		dl_sleep_ms(2);
		atomic_fetch_sub(&h->inside, 1);
		if ((rc = dlock_semaphore_release(h->s, 1)) != 0)
			dl_failures_record(&h->f, "release: %s (%s)", dlock_strerror(rc),
					dlock_semaphore_errmsg(h->s));
		atomic_fetch_add(&h->done, 1);
	}
	return NULL;
}

Test(semaphore, never_more_holders_than_permits, .timeout = 90)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	hammer h = { .s = sem_of(c, "sem-hammer", DLOCK_SEMAPHORE_PLAIN) };
	pthread_t t[HAMMER_THREADS];

	dl_failures_init(&h.f);
	dl_pass(dlock_semaphore_try_set_permits(NULL, h.s, HAMMER_PERMITS));
	for (int i = 0; i < HAMMER_THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, hammer_thread, &h), 0);
	for (int i = 0; i < HAMMER_THREADS; i++)
		pthread_join(t[i], NULL);
	dl_failures_assert_none(&h.f);
	cr_assert_eq(atomic_load(&h.done), HAMMER_THREADS * HAMMER_ROUNDS);
	cr_assert_leq(atomic_load(&h.most), HAMMER_PERMITS, "%d holders at once with %d permits",
			atomic_load(&h.most), HAMMER_PERMITS);
	cr_assert_eq(available(h.s), HAMMER_PERMITS, "permits leaked or made up");
	dlock_semaphore_free(h.s);
	dlock_client_free(c);
}

/* ---- a release wakes a waiter at once -------------------------------------- */

typedef struct waiter {
	dlock_semaphore *s;
	int64_t wait_ms;
	int rc;
	int64_t got_at;
	char id[DLOCK_PERMIT_ID_SIZE];
	int64_t lease_ms;
	dl_gate started;
} waiter;

static void *wait_thread(void *arg)
{
	waiter *w = arg;

	dl_gate_add(&w->started, 1);
	if (dlock_semaphore_name(w->s) != NULL && w->lease_ms != 0)
		w->rc = dlock_semaphore_acquire_permit(w->id, w->s, w->wait_ms, w->lease_ms);
	else
		w->rc = dlock_semaphore_acquire(w->s, 1, w->wait_ms);
	w->got_at = rh_now_ms();
	return NULL;
}

Test(semaphore, a_release_wakes_a_waiter_at_once, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_client *c2 = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-wake", DLOCK_SEMAPHORE_PLAIN);
	waiter w = { .s = sem_of(c2, "sem-wake", DLOCK_SEMAPHORE_PLAIN), .wait_ms = 15000 };
	pthread_t t;

	dl_gate_init(&w.started);
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	dl_pass(dlock_semaphore_acquire(s, 1, 0));
	cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
	dl_gate_wait(&w.started, 1, rh_now_ms() + 5000);
	dl_sleep_ms(400); /* the waiter tried, failed and listens */
	dlock_semaphore_info *info = NULL;
	dl_pass(dlock_semaphore_query(&info, s));
	cr_assert_eq(dlock_semaphore_info_subscribers(info), 1, "the query counts %lld waiters, not 1",
			(long long)dlock_semaphore_info_subscribers(info));
	dlock_semaphore_info_free(info);
	int64_t released = rh_now_ms();
	dl_pass(dlock_semaphore_release(s, 1));
	pthread_join(t, NULL);
	cr_assert_eq(w.rc, 0, "the waiter did not get the permit: %s", dlock_strerror(w.rc));
	int64_t took = w.got_at - released;
	/* Its safety poll is DLOCK__SEM_POLL_MS (5 s): only the message wakes it this soon. */
	cr_assert_lt(took, 1000, "the waiter took %lld ms after the release", (long long)took);
	cr_assert_eq(available(s), 0);
	dl_gate_destroy(&w.started);
	dlock_semaphore_free(w.s);
	dlock_semaphore_free(s);
	dlock_client_free(c2);
	dlock_client_free(c);
}

Test(semaphore, a_short_wait_ends_not_acquired, .timeout = 20)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-short", DLOCK_SEMAPHORE_PLAIN);

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 2));
	cr_assert_eq(dlock_semaphore_acquire(s, 3, 0), DLOCK_ENOTACQUIRED);
	int64_t t0 = rh_now_ms();
	cr_assert_eq(dlock_semaphore_acquire(s, 3, 300), DLOCK_ENOTACQUIRED);
	int64_t took = rh_now_ms() - t0;
	cr_assert(took >= 280 && took < 2000, "a 300 ms wait took %lld ms", (long long)took);
	cr_assert_eq(available(s), 2, "a failed acquire took permits");
	dl_pass(dlock_semaphore_acquire(s, 2, 0));
	cr_assert_eq(available(s), 0);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

/* ---- expirable permits ----------------------------------------------------- */

Test(semaphore, a_crashed_holders_permit_comes_back_after_its_lease, .timeout = 30)
{
	dlock_client *dead = dl_client(rh_server_uri(dl_srv), 0, 1500);
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *ds = sem_of(dead, "sem-crash", DLOCK_SEMAPHORE_EXPIRABLE);
	dlock_semaphore *s = sem_of(c, "sem-crash", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE], id2[DLOCK_PERMIT_ID_SIZE];

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, ds, 0, DLOCK_LEASE_WATCHDOG));
	cr_assert_eq(strlen(id), 32);
	cr_assert_eq(rh_command_int(dl_srv, "ZCARD {sem-crash}:timeout"), 1,
			"the permit is not in Redisson's timeout set");
	cr_assert_eq(dlock_semaphore_acquire_permit(id2, s, 0, 5000), DLOCK_ENOTACQUIRED);
	/* The holder dies: nobody renews, nobody releases. */
	int64_t died = rh_now_ms();
	dlock_semaphore_free(ds);
	dlock_client_free(dead);
	dl_pass(dlock_semaphore_acquire_permit(id2, s, 10000, 5000));
	int64_t took = rh_now_ms() - died;
	cr_assert(took < 3000, "the dead holder's permit came back after %lld ms (lease 1500)",
			(long long)took);
	cr_assert_neq(strcmp(id, id2), 0);
	dl_pass(dlock_semaphore_release_permit(s, id2));
	cr_assert_eq(available(s), 1);
	cr_assert_eq(rh_command_int(dl_srv, "ZCARD {sem-crash}:timeout"), 0);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

Test(semaphore, a_leased_permit_wakes_its_waiter_when_the_lease_ends, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-lease", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE], id2[DLOCK_PERMIT_ID_SIZE];

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	int64_t t0 = rh_now_ms();
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, 800));
	dl_pass(dlock_semaphore_acquire_permit(id2, s, 10000, 5000));
	int64_t took = rh_now_ms() - t0;
	cr_assert(took >= 700 && took < 2000, "a permit leased for 800 ms came back after %lld ms",
			(long long)took);
	cr_assert_eq(dlock_semaphore_check(s, id), DLOCK_ELOST);
	cr_assert_eq(dlock_semaphore_release_permit(s, id), DLOCK_ELOST,
			"releasing an expired permit is not reported lost");
	dl_pass(dlock_semaphore_release_permit(s, id2));
	cr_assert_eq(dlock_semaphore_release_permit(s, id2), DLOCK_ENOTOWNER);
	cr_assert_eq(available(s), 1);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

Test(semaphore, a_renewed_permit_outlives_its_lease, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 600);
	dlock_client *other = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-renew", DLOCK_SEMAPHORE_EXPIRABLE);
	dlock_semaphore *o = sem_of(other, "sem-renew", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE], id2[DLOCK_PERMIT_ID_SIZE];

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(2500); /* four leases */
	cr_assert_eq(dlock_semaphore_check(s, id), 0, "the renewed permit was lost");
	cr_assert_eq(dlock_semaphore_acquire_permit(id2, o, 0, 5000), DLOCK_ENOTACQUIRED,
			"another client took the permit of a living holder");
	cr_assert_eq(available(o), 0);
	dl_pass(dlock_semaphore_release_permit(s, id));
	cr_assert_eq(available(o), 1);
	dlock_semaphore_free(o);
	dlock_semaphore_free(s);
	dlock_client_free(other);
	dlock_client_free(c);
}

static dl_lost lost_rec;

Test(semaphore, a_renewal_that_finds_the_permit_gone_reports_it_lost, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 900);
	dlock_semaphore *s = sem_of(c, "sem-gone", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];

	dl_lost_init(&lost_rec);
	dl_pass(dlock_semaphore_set_lost_cb(s, dl_on_lost, &lost_rec));
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, DLOCK_LEASE_WATCHDOG));
	cr_assert_eq(rh_command_int(dl_srv, "DEL {sem-gone}:timeout"), 1);
	cr_assert_eq(dl_lost_wait(&lost_rec, rh_now_ms() + 5000), 1, "no lost callback");
	cr_assert_eq(lost_rec.reason, DLOCK_LOST_GONE);
	cr_assert_str_eq(lost_rec.owner, id, "a semaphore's event names the permit");
	cr_assert_str_eq(lost_rec.name, "sem-gone");
	cr_assert_str_eq(lost_rec.node, dlock_client_node(c));
	cr_assert_eq(dlock_semaphore_check(s, id), DLOCK_ELOST);
	dlock_semaphore_free(s);
	dlock_client_free(c);
	dl_lost_destroy(&lost_rec);
}

/*
 * A paused server takes no renewal for longer than the lease: the holder's
 * check says lost. The server comes back at once and runs the renewals it
 * was owed (given up by the client), so it would still renew the permit -
 * but a loss the holder was told of is final: the callback comes, the
 * permit is renewed no more, and it comes back when its lease on the
 * server ends.
 */
Test(semaphore, a_permit_seen_lost_stays_lost_and_comes_back, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 200, 1500);
	dlock_client *other = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-seen-lost", DLOCK_SEMAPHORE_EXPIRABLE);
	dlock_semaphore *o = sem_of(other, "sem-seen-lost", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];
	int64_t paused_at, lost_at = 0, held_again_at = 0, t;

	dl_lost_init(&lost_rec);
	dl_pass(dlock_semaphore_set_lost_cb(s, dl_on_lost, &lost_rec));
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, DLOCK_LEASE_WATCHDOG));
	/* A renewal has reached the server: it knows the script, so the late
	 * EVALSHAs run (else NOSCRIPT). */
	dl_sleep_ms(700);
	cr_assert_eq(dlock_semaphore_check(s, id), 0);
	cr_assert_eq(rh_server_pause(dl_srv), 0);
	paused_at = rh_now_ms();
	while (lost_at == 0 && (t = rh_now_ms()) - paused_at < 3000) {
		if (dlock_semaphore_check(s, id) == DLOCK_ELOST)
			lost_at = t;
		dl_sleep_ms(2);
	}
	/* Back as soon as the holder was told: before the next renewal. */
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	cr_assert_neq(lost_at, 0, "no renewal reached the server for 3000 ms (lease 1500 ms),"
				  " and the permit was still called held");
	while ((t = rh_now_ms()) - lost_at < 2500) {
		if (held_again_at == 0 && dlock_semaphore_check(s, id) != DLOCK_ELOST)
			held_again_at = t;
		dl_sleep_ms(5);
	}
	cr_assert_eq(held_again_at, 0,
			"the check said lost %lld ms into the pause, then held again %lld ms"
			" into it",
			(long long)(lost_at - paused_at), (long long)(held_again_at - paused_at));
	cr_assert_eq(dl_lost_wait(&lost_rec, rh_now_ms() + 1000), 1,
			"the loss the check reported %lld ms into the pause never came through"
			" the lost callback",
			(long long)(lost_at - paused_at));
	cr_assert_str_eq(lost_rec.owner, id);
	/* Renewed no more: it comes back once the late renewals' lease ends. */
	t = rh_now_ms();
	while (available(o) != 1 && rh_now_ms() - t < 4000)
		dl_sleep_ms(50);
	cr_assert_eq(available(o), 1, "the lost permit is still taken %lld ms after the pause",
			(long long)(rh_now_ms() - paused_at));
	cr_assert_eq(dlock_semaphore_release_permit(s, id), DLOCK_ELOST);
	dlock_semaphore_free(o);
	dlock_semaphore_free(s);
	dlock_client_free(other);
	dlock_client_free(c);
	dl_lost_destroy(&lost_rec);
}

/*
 * One renewal fails (the server paused for a moment): the next one comes
 * soon enough to keep the permit, as the lock watchdog keeps a lock - also
 * with a short watchdog timeout, where a second's wait would outlast it.
 */
Test(semaphore, one_failed_renewal_does_not_lose_the_permit, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 200, 1500);
	dlock_semaphore *s = sem_of(c, "sem-one-failure", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];
	int64_t t0, lost_at = 0, t;

	dl_lost_init(&lost_rec);
	dl_pass(dlock_semaphore_set_lost_cb(s, dl_on_lost, &lost_rec));
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, DLOCK_LEASE_WATCHDOG));
	t0 = rh_now_ms();
	dl_sleep_ms(350);
	/* The renewal due at 500 ms meets a paused server and times out. */
	cr_assert_eq(rh_server_pause(dl_srv), 0);
	dl_sleep_ms(450);
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	while (lost_at == 0 && (t = rh_now_ms()) - t0 < 3000) {
		if (dlock_semaphore_check(s, id) != 0)
			lost_at = t;
		dl_sleep_ms(5);
	}
	cr_assert_eq(lost_at, 0,
			"the permit was lost %lld ms after it was taken: the server was paused"
			" only from 350 to 800 ms (watchdog timeout 1500 ms)",
			(long long)(lost_at - t0));
	cr_assert_eq(dl_lost_count(&lost_rec), 0);
	dl_pass(dlock_semaphore_release_permit(s, id));
	dlock_semaphore_free(s);
	dlock_client_free(c);
	dl_lost_destroy(&lost_rec);
}

/* ---- async and cancel ------------------------------------------------------ */

typedef struct outcome {
	dl_gate g;
	int code;
	char id[DLOCK_PERMIT_ID_SIZE];
} outcome;

static void on_done(dlock_op *op, const dlock_result *r, void *ud)
{
	outcome *o = ud;

	o->code = r->code;
	(void)op;
	snprintf(o->id, sizeof(o->id), "%s", r->permit_id != NULL ? r->permit_id : "");
	dl_gate_add(&o->g, 1);
}

Test(semaphore, an_async_acquire_canceled_leaves_no_permit_taken, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-cancel", DLOCK_SEMAPHORE_PLAIN);
	dlock_semaphore *x = sem_of(c, "sem-cancel-x", DLOCK_SEMAPHORE_EXPIRABLE);
	outcome o = { .code = 1 };
	dlock_op *op = NULL;

	dl_gate_init(&o.g);
	/* A waiter canceled while it waits. */
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	dl_pass(dlock_semaphore_acquire(s, 1, 0));
	dl_pass(dlock_semaphore_acquire_async(&op, s, 1, DLOCK_WAIT_FOREVER, on_done, &o));
	dl_sleep_ms(200);
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	cr_assert_eq(dl_gate_wait(&o.g, 1, rh_now_ms() + 5000), 1, "no callback after cancel");
	cr_assert_eq(o.code, DLOCK_ECANCELED);
	dl_pass(dlock_semaphore_release(s, 1));
	dl_sleep_ms(200);
	cr_assert_eq(available(s), 1, "the canceled waiter took a permit");

	/* Canceled at once, its attempt likely still out, many times over. */
	for (int i = 0; i < 20; i++) {
		dl_pass(dlock_semaphore_acquire_async(&op, s, 1, 5000, on_done, &o));
		dl_pass(dlock_op_cancel(op));
		dlock_op_free(op);
		cr_assert_eq(dl_gate_wait(&o.g, 2 + i, rh_now_ms() + 5000), 2 + i);
		cr_assert(o.code == DLOCK_ECANCELED || o.code == 0, "%s", dlock_strerror(o.code));
		if (o.code == 0)
			dl_pass(dlock_semaphore_release(s, 1));
	}
	cr_assert_eq(available(s), 1, "a canceled acquisition kept a permit");

	/* An expirable one: its undo gives back its permit. */
	int base = dl_gate_get(&o.g);
	dl_pass(dlock_semaphore_try_set_permits(NULL, x, 1));
	for (int i = 0; i < 20; i++) {
		dl_pass(dlock_semaphore_acquire_permit_async(&op, x, 5000, 60000, on_done, &o));
		dl_pass(dlock_op_cancel(op));
		dlock_op_free(op);
		cr_assert_eq(dl_gate_wait(&o.g, base + 1 + i, rh_now_ms() + 5000), base + 1 + i);
		if (o.code == 0)
			dl_pass(dlock_semaphore_release_permit(x, o.id));
		else
			cr_assert_eq(o.code, DLOCK_ECANCELED, "%s", dlock_strerror(o.code));
	}
	dl_sleep_ms(200); /* an undo queued behind an abandoned attempt */
	cr_assert_eq(available(x), 1, "a canceled acquisition kept a permit");
	cr_assert_eq(rh_command_int(dl_srv, "ZCARD {sem-cancel-x}:timeout"), 0);

	/* And one that succeeds hands over its permit id. */
	dl_pass(dlock_semaphore_acquire_permit_async(&op, x, 1000, 60000, on_done, &o));
	cr_assert_eq(dl_gate_wait(&o.g, base + 21, rh_now_ms() + 5000), base + 21);
	cr_assert_eq(o.code, 0);
	cr_assert_eq(strlen(o.id), 32);
	dl_pass(dlock_semaphore_release_permit(x, o.id));

	dl_gate_destroy(&o.g);
	dlock_semaphore_free(x);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

/* ---- changing the count ---------------------------------------------------- */

Test(semaphore, the_count_can_be_changed, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-count", DLOCK_SEMAPHORE_PLAIN);
	dlock_semaphore *x = sem_of(c, "sem-count-x", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];

	dl_pass(dlock_semaphore_add_permits(s, 2)); /* creates it */
	cr_assert_eq(available(s), 2);
	dl_pass(dlock_semaphore_add_permits(s, 3));
	cr_assert_eq(available(s), 5);
	dl_pass(dlock_semaphore_set_permits(s, 1));
	cr_assert_eq(available(s), 1);
	dl_pass(dlock_semaphore_add_permits(s, -1));
	cr_assert_eq(available(s), 0);

	/* Expirable: set_permits sets the total, permits taken included. */
	dl_pass(dlock_semaphore_try_set_permits(NULL, x, 3));
	dl_pass(dlock_semaphore_acquire_permit(id, x, 0, 60000));
	cr_assert_eq(available(x), 2);
	dl_pass(dlock_semaphore_set_permits(x, 5));
	cr_assert_eq(available(x), 4, "a total of 5 with one taken leaves 4");
	dl_pass(dlock_semaphore_set_permits(x, 1));
	cr_assert_eq(available(x), 0);
	dl_pass(dlock_semaphore_release_permit(x, id));
	cr_assert_eq(available(x), 1);

	/* A waiter for more permits than there are wakes when they are added. */
	waiter w = { .s = s, .wait_ms = 10000 };
	pthread_t t;
	dl_gate_init(&w.started);
	cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
	dl_gate_wait(&w.started, 1, rh_now_ms() + 5000);
	dl_sleep_ms(300);
	int64_t added = rh_now_ms();
	dl_pass(dlock_semaphore_add_permits(s, 1));
	pthread_join(t, NULL);
	cr_assert_eq(w.rc, 0, "%s", dlock_strerror(w.rc));
	cr_assert_lt(w.got_at - added, 1000, "woken %lld ms after add_permits",
			(long long)(w.got_at - added));
	dl_gate_destroy(&w.started);

	/* Bad input changes nothing. */
	cr_assert_eq(dlock_semaphore_try_set_permits(NULL, s, -1), DLOCK_EINVAL);
	cr_assert_eq(dlock_semaphore_acquire(s, 0, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_semaphore_acquire(x, 1, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_semaphore_release_permit(x, "not-an-id"), DLOCK_EINVAL);
	redisReply *r = rh_command(dl_srv, "HSET sem-hash f 1");
	freeReplyObject(r);
	dlock_semaphore *h = sem_of(c, "sem-hash", DLOCK_SEMAPHORE_PLAIN);
	cr_assert_eq(dlock_semaphore_acquire(h, 1, 0), DLOCK_EWRONGTYPE, "%s",
			dlock_semaphore_errmsg(h));
	dlock_semaphore_free(h);
	dlock_semaphore_free(x);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

/* ---- an attempt whose answer never came ------------------------------------- */

static int64_t keys_matching(const char *pattern)
{
	redisReply *r = rh_command(dl_srv, "KEYS %s", pattern);
	int64_t n;

	cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
	n = (int64_t)r->elements;
	freeReplyObject(r);
	return n;
}

Test(semaphore, an_attempt_given_up_on_a_paused_server_takes_nothing_extra, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 200, 0);
	waiter w = { .s = sem_of(c, "sem-paused", DLOCK_SEMAPHORE_PLAIN), .wait_ms = 8000 };
	pthread_t t;

	dl_gate_init(&w.started);
	dl_pass(dlock_semaphore_try_set_permits(NULL, w.s, 1));
	/* The server knows the script: a late EVALSHA runs (else NOSCRIPT). */
	dl_pass(dlock_semaphore_acquire(w.s, 1, 0));
	dl_pass(dlock_semaphore_release(w.s, 1));
	cr_assert_eq(rh_server_pause(dl_srv), 0);
	cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
	dl_sleep_ms(700); /* attempts time out and are given up, owing their answers */
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	pthread_join(t, NULL);
	cr_assert_eq(w.rc, 0, "%s", dlock_strerror(w.rc));
	dl_sleep_ms(300); /* the undos queued behind the abandoned attempts have run */
	cr_assert_eq(available(w.s), 0, "an abandoned attempt's permit was not given back "
					 "(or given back twice)");
	dl_pass(dlock_semaphore_release(w.s, 1));
	cr_assert_eq(available(w.s), 1);
	/* Receipts are deleted once answered, or consumed by their undo. */
	int64_t t0 = rh_now_ms(), left;
	while ((left = keys_matching("dlock_semaphore_undo:*")) > 0 && rh_now_ms() - t0 < 2000)
		dl_sleep_ms(20);
	cr_assert_eq(left, 0, "%lld receipts left behind", (long long)left);
	dl_gate_destroy(&w.started);
	dlock_semaphore_free(w.s);
	dlock_client_free(c);
}

Test(semaphore, async_releases_give_permits_back, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-arel", DLOCK_SEMAPHORE_PLAIN);
	dlock_semaphore *x = sem_of(c, "sem-arel-x", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];
	outcome o = { .code = 1 };
	dlock_op *op = NULL;

	dl_gate_init(&o.g);
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 3));
	dl_pass(dlock_semaphore_acquire(s, 3, 0));
	dl_pass(dlock_semaphore_release_async(&op, s, 2, on_done, &o));
	dl_pass(dlock_op_cancel(op)); /* a release finishes anyway */
	dlock_op_free(op);
	cr_assert_eq(dl_gate_wait(&o.g, 1, rh_now_ms() + 5000), 1);
	cr_assert_eq(o.code, 0, "%s", dlock_strerror(o.code));
	cr_assert_eq(available(s), 2);

	dl_pass(dlock_semaphore_try_set_permits(NULL, x, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, x, 0, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_semaphore_release_permit_async(NULL, x, id, on_done, &o));
	cr_assert_eq(dl_gate_wait(&o.g, 2, rh_now_ms() + 5000), 2);
	cr_assert_eq(o.code, 0, "%s", dlock_strerror(o.code));
	cr_assert_eq(dlock_semaphore_check(x, id), DLOCK_ENOTOWNER);
	cr_assert_eq(available(x), 1);
	dl_pass(dlock_semaphore_release_permit_async(NULL, x, id, on_done, &o));
	cr_assert_eq(dl_gate_wait(&o.g, 3, rh_now_ms() + 5000), 3);
	cr_assert_eq(o.code, DLOCK_ENOTOWNER, "%s", dlock_strerror(o.code));
	cr_assert_eq(dlock_semaphore_release_permit_async(NULL, x, "zz", on_done, &o), DLOCK_EINVAL);
	/* One twin per blocking call: each kind's own, the other's is refused. */
	cr_assert_eq(dlock_semaphore_release_async(NULL, x, 1, on_done, &o), DLOCK_EINVAL);
	cr_assert_eq(dlock_semaphore_release_permit_async(NULL, s, id, on_done, &o), DLOCK_EINVAL);
	cr_assert_eq(dlock_semaphore_acquire_async(NULL, x, 1, 0, on_done, &o), DLOCK_EINVAL);
	cr_assert_eq(dlock_semaphore_acquire_permit_async(NULL, s, 0, 1000, on_done, &o),
			DLOCK_EINVAL);
	cr_assert_str_neq(dlock_semaphore_errmsg(x), "");
	cr_assert_eq(dl_gate_get(&o.g), 3, "a refused call called back");

	dl_gate_destroy(&o.g);
	dlock_semaphore_free(x);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

/* ---- over a Unix socket ----------------------------------------------------- */

static char unix_dir[96], unix_sock[128], unix_uri[256];
static rh_server *unix_srv;

static void unix_up(void)
{
	char cwd[64];

	/* Under the working directory, named absolutely (the server runs elsewhere). */
	cr_assert_not_null(getcwd(cwd, sizeof cwd), "the working directory's name is too long");
	snprintf(unix_dir, sizeof unix_dir, "%s/dlock-sem-XXXXXX", cwd);
	cr_assert_not_null(mkdtemp(unix_dir));
	snprintf(unix_sock, sizeof unix_sock, "%s/redis.sock", unix_dir);
	snprintf(unix_uri, sizeof unix_uri, "unix://%s", unix_sock);
	const char *args[] = { "--unixsocket", unix_sock, "--unixsocketperm", "700", NULL };
	unix_srv = rh_server_start(args);
	cr_assert_not_null(unix_srv, "could not start redis-server on %s", unix_sock);
}

static void unix_down(void)
{
	rh_server_free(unix_srv);
	unlink(unix_sock);
	rmdir(unix_dir);
}

TestSuite(semaphore_unix, .init = unix_up, .fini = unix_down, .timeout = 30);

Test(semaphore_unix, a_release_wakes_a_waiter_and_a_permit_is_renewed)
{
	dlock_client *c = dl_client(unix_uri, 2000, 600);
	dlock_client *c2 = dl_client(unix_uri, 2000, 0);
	dlock_semaphore *s = sem_of(c, "sem-unix", DLOCK_SEMAPHORE_PLAIN);
	dlock_semaphore *x = sem_of(c, "pes-unix", DLOCK_SEMAPHORE_EXPIRABLE);
	waiter w = { .s = sem_of(c2, "sem-unix", DLOCK_SEMAPHORE_PLAIN), .wait_ms = 15000 };
	char id[DLOCK_PERMIT_ID_SIZE];
	pthread_t t;

	dl_gate_init(&w.started);
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	dl_pass(dlock_semaphore_acquire(s, 1, 0));
	cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
	dl_gate_wait(&w.started, 1, rh_now_ms() + 5000);
	dl_sleep_ms(400);
	int64_t released = rh_now_ms();
	dl_pass(dlock_semaphore_release(s, 1));
	pthread_join(t, NULL);
	cr_assert_eq(w.rc, 0, "%s", dlock_strerror(w.rc));
	cr_assert_lt(w.got_at - released, 1000, "woken %lld ms after the release",
			(long long)(w.got_at - released));

	dl_pass(dlock_semaphore_try_set_permits(NULL, x, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, x, 0, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(1500);
	cr_assert_eq(dlock_semaphore_check(x, id), 0, "the renewed permit was lost");
	dl_pass(dlock_semaphore_release_permit(x, id));

	dl_gate_destroy(&w.started);
	dlock_semaphore_free(w.s);
	dlock_semaphore_free(x);
	dlock_semaphore_free(s);
	dlock_client_free(c2);
	dlock_client_free(c);
}

/* The handle the lost callback frees and the gate it counts its calls on. */
typedef struct freeing {
	dlock_semaphore *s;
	dl_gate g;
} freeing;

static void free_on_lost(const dlock_lost_event *ev, void *ud)
{
	freeing *f = ud;

	(void)ev;
	if (dl_gate_get(&f->g) == 0)
		dlock_semaphore_free(f->s); /* the handle stays valid until the calls are over */
	dl_gate_add(&f->g, 1);
}

Test(semaphore, the_lost_callback_may_free_the_semaphore, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 900);
	dlock_semaphore *s = sem_of(c, "sem-free-lost", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];
	freeing f;

	f.s = s;
	dl_gate_init(&f.g);
	dl_pass(dlock_semaphore_set_lost_cb(s, free_on_lost, &f));
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 2));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, DLOCK_LEASE_WATCHDOG));
	cr_assert_eq(rh_command_int(dl_srv, "DEL {sem-free-lost}:timeout"), 1);
	/* Two permits lost in one renewal: one call each, the first frees it. */
	cr_assert_eq(dl_gate_wait(&f.g, 2, rh_now_ms() + 5000), 2, "no lost callbacks");
	dl_sleep_ms(100);
	dl_gate_destroy(&f.g);
	dlock_client_free(c);
}

Test(semaphore, cancel_waits_ends_a_forever_wait, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	waiter w = { .s = sem_of(c, "sem-cw", DLOCK_SEMAPHORE_PLAIN), .wait_ms = DLOCK_WAIT_FOREVER };
	pthread_t t;

	dl_gate_init(&w.started);
	dl_pass(dlock_semaphore_try_set_permits(NULL, w.s, 0));
	cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
	dl_gate_wait(&w.started, 1, rh_now_ms() + 5000);
	dl_sleep_ms(300);
	int64_t asked = rh_now_ms();
	dl_pass(dlock_client_cancel_waits(c));
	pthread_join(t, NULL);
	cr_assert_eq(w.rc, DLOCK_ECANCELED, "%s", dlock_strerror(w.rc));
	cr_assert_lt(w.got_at - asked, 1000, "the wait ended %lld ms after the cancel",
			(long long)(w.got_at - asked));
	cr_assert_eq(available(w.s), 0);
	dl_gate_destroy(&w.started);
	dlock_semaphore_free(w.s);
	dlock_client_free(c);
}

/* ---- validity and query ------------------------------------------------------ */

Test(semaphore, a_permits_validity_counts_from_its_last_confirmed_renewal, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 300, 900);
	dlock_semaphore *s = sem_of(c, "sem-validity", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE], leased[DLOCK_PERMIT_ID_SIZE];
	int64_t ms = -1, t0;

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 2));
	cr_assert_eq(dlock_semaphore_validity_ms(&ms, s, "00112233445566778899aabbccddeeff"),
			DLOCK_ENOTOWNER, "a permit never taken has a validity");
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_semaphore_acquire_permit(leased, s, 0, 1200));
	dl_pass(dlock_semaphore_validity_ms(&ms, s, id));
	cr_assert(ms > 600 && ms <= 900, "a fresh watchdog permit: validity %lld ms of 900",
			(long long)ms);
	/* Renewed every 300 ms: after two leases it still has most of one. */
	dl_sleep_ms(1800);
	dl_pass(dlock_semaphore_validity_ms(&ms, s, id));
	cr_assert(ms > 400 && ms <= 900, "a renewed permit: validity %lld ms of 900",
			(long long)ms);
	/* The fixed lease only shrinks, and ends. */
	cr_assert_eq(dlock_semaphore_validity_ms(&ms, s, leased), DLOCK_ELOST,
			"a 1200 ms lease still valid after 1800 ms (%lld ms)", (long long)ms);
	cr_assert_eq(ms, 0);

	/* A paused server: the validity runs down from the last renewal it confirmed. */
	dl_pass(dlock_semaphore_validity_ms(&ms, s, id));
	cr_assert_eq(rh_server_pause(dl_srv), 0);
	t0 = rh_now_ms();
	while (dlock_semaphore_validity_ms(&ms, s, id) == 0 && rh_now_ms() - t0 < 3000)
		dl_sleep_ms(20);
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	cr_assert(rh_now_ms() - t0 <= 950, "the validity lasted %lld ms past the pause (lease 900)",
			(long long)(rh_now_ms() - t0));
	cr_assert_eq(dlock_semaphore_check(s, id), DLOCK_ELOST);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

Test(semaphore, a_query_shows_the_count_and_the_permits_without_changing_them, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-query", DLOCK_SEMAPHORE_EXPIRABLE);
	dlock_semaphore *p = sem_of(c, "sem-query-plain", DLOCK_SEMAPHORE_PLAIN);
	char a[DLOCK_PERMIT_ID_SIZE], b[DLOCK_PERMIT_ID_SIZE];
	dlock_semaphore_info *info = NULL;
	size_t i;

	dl_pass(dlock_semaphore_query(&info, s));
	cr_assert_eq(dlock_semaphore_info_is_set(info), 0, "no count set, yet the query found one");
	cr_assert_eq(dlock_semaphore_info_permits(info), 0);
	dlock_semaphore_info_free(info);

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 3));
	dl_pass(dlock_semaphore_acquire_permit(a, s, 0, 20000));
	dl_pass(dlock_semaphore_acquire_permit(b, s, 0, 100));
	dl_sleep_ms(200); /* b's lease passes: shown, not given back */
	dl_pass(dlock_semaphore_query(&info, s));
	cr_assert_eq(dlock_semaphore_info_is_set(info), 1);
	cr_assert_eq(dlock_semaphore_info_available(info), 1);
	cr_assert_eq(dlock_semaphore_info_permits(info), 2);
	for (i = 0; i < 2; i++) {
		const char *id = dlock_semaphore_info_permit_id(info, i);
		int64_t ttl = dlock_semaphore_info_permit_ttl_ms(info, i);

		if (strcmp(id, a) == 0)
			cr_assert(ttl > 19000 && ttl <= 20000, "permit a: %lld ms left of 20000",
					(long long)ttl);
		else
			cr_assert(strcmp(id, b) == 0 && ttl == 0, "permit %s: %lld ms left", id,
					(long long)ttl);
	}
	cr_assert_null(dlock_semaphore_info_permit_id(info, 2));
	dlock_semaphore_info_free(info);
	cr_assert_eq(rh_command_int(dl_srv, "ZCARD {sem-query}:timeout"), 2,
			"the query gave the expired permit back");

	dl_pass(dlock_semaphore_try_set_permits(NULL, p, 4));
	dl_pass(dlock_semaphore_query(&info, p));
	cr_assert_eq(dlock_semaphore_info_available(info), 4);
	cr_assert_eq(dlock_semaphore_info_permits(info), 0);
	dlock_semaphore_info_free(info);

	/* A lock's key is not a semaphore's. */
	rh_command_int(dl_srv, "HSET sem-query-hash a:1 1");
	dlock_semaphore *h = sem_of(c, "sem-query-hash", DLOCK_SEMAPHORE_EXPIRABLE);
	cr_assert_eq(dlock_semaphore_query(&info, h), DLOCK_EWRONGTYPE);
	cr_assert_null(info);
	dlock_semaphore_free(h);
	dlock_semaphore_free(p);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

/* The server runs an acquisition and drops its connection before the reply
 * gets out (here: an output buffer limit of one byte; in life, CLIENT KILL
 * or a proxy at the wrong moment). The client resends it on a new
 * connection, once: the permit must be taken once, not twice. */
Test(semaphore, an_acquisition_resent_after_its_reply_was_lost_takes_one_permit, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = sem_of(c, "sem-resent", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];
	redisReply *r;
	int rc;

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 3));
	cr_assert_eq(available(s), 3); /* a pooled connection, and the scripts loaded */
	r = rh_command(dl_srv, "CONFIG SET client-output-buffer-limit %s", "normal 1 0 0");
	cr_assert(r != NULL && r->type != REDIS_REPLY_ERROR);
	freeReplyObject(r);
	rc = dlock_semaphore_acquire_permit(id, s, 0, 10000);
	r = rh_command(dl_srv, "CONFIG SET client-output-buffer-limit %s", "normal 0 0 0");
	cr_assert(r != NULL && r->type != REDIS_REPLY_ERROR);
	freeReplyObject(r);
	cr_assert_eq(rc, DLOCK_ECONN, "both sends lost their replies: %s",
			dlock_semaphore_errmsg(s));
	/* Run twice on the server, taken once: one permit out, its id in the set. */
	cr_assert_eq(rh_command_int(dl_srv, "ZCARD {sem-resent}:timeout"), 1);
	cr_assert_eq(available(s), 2, "a resent acquisition took a second permit");
	dlock_semaphore_free(s);
	dlock_client_free(c);
}
