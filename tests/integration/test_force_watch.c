/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watch_force_unlock: a watchdog hold listens on its lock's unlock channel
 * and checks itself when a message comes, so a force unlock from another
 * client is reported lost within a second instead of at the next renewal
 * (a third of a 30 s watchdog here). Plain, fenced and fair holds, a
 * RedLock's members, a dropped pub/sub connection; and what must not
 * happen: a loss reported for our own unlock and re-lock, a subscription
 * left behind, or a hold that hears anything with the option off.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

/* Long enough that a renewal on the watchdog's schedule (every 10 s) can
 * never be what finds the loss within the bounds below. */
#define WATCHDOG_MS 30000
/* The target of issue 21: a force unlock noticed within this. */
#define HEARD_WITHIN_MS 1000

enum kind { PLAIN, FENCED, FAIR, READ, WRITE };

static dlock_client *client_on(rh_server *s, int watch)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.watchdog_timeout_ms = WATCHDOG_MS;
	o.watch_force_unlock = watch;
	return dl_client_opts(rh_server_uri(s), &o);
}

static dlock_lock *lock_of(dlock_client *c, const char *name, enum kind kind)
{
	dlock_lock *l = NULL;

	if (kind == FENCED)
		dl_pass(dlock_lock_new(&l, c, name, dl_kind(DLOCK_LOCK_FENCED)));
	else if (kind == FAIR)
		dl_pass(dlock_lock_new(&l, c, name, dl_kind(DLOCK_LOCK_FAIR)));
	else if (kind == READ)
		dl_pass(dlock_lock_new(&l, c, name, dl_kind(DLOCK_LOCK_READ)));
	else if (kind == WRITE)
		dl_pass(dlock_lock_new(&l, c, name, dl_kind(DLOCK_LOCK_WRITE)));
	else
		dl_pass(dlock_lock_new(&l, c, name, NULL));
	return l;
}

/* The server shows `want` subscribers of channel within 2 s. */
/* Force-unlock name on s through a client of its own (no watch). */
static void force_from_elsewhere(rh_server *s, const char *name, enum kind kind)
{
	dlock_client *c = client_on(s, 0);
	dlock_lock *l = lock_of(c, name, kind);
	int deleted = -1;

	dl_pass(dlock_lock_force_release(&deleted, l));
	cr_assert_eq(deleted, 1, "the force unlock of %s deleted nothing", name);
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* The holder's lost callback fired within HEARD_WITHIN_MS of `forced_at`. */
static void assert_heard(dl_lost *lost, int64_t forced_at, const char *what)
{
	int fired = dl_lost_wait(lost, forced_at + 5000);

	pthread_mutex_lock(&lost->mu);
	int64_t took = lost->at_ms - forced_at;
	pthread_mutex_unlock(&lost->mu);
	cr_assert_eq(fired, 1, "%s: lost callback fired %d times in 5 s", what, fired);
	cr_assert_leq(took, HEARD_WITHIN_MS, "%s: reported lost %lld ms after the force unlock",
			what, (long long)took);
	cr_log_info("%s: lost %lld ms after the force unlock", what, (long long)took);
}

/* A held lock of `kind`, force-unlocked by another client (through a
 * handle of `forcer`, or by `script`, one of Redisson's, when not NULL):
 * lost at once. */
static void forced_is_heard(enum kind kind, enum kind forcer, const char *script,
		const char *name, const char *channel)
{
	dl_lost lost;
	dl_lost_init(&lost);
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = client_on(s, 1);
	dlock_lock *l = lock_of(c, name, kind);
	dl_pass(dlock_lock_set_lost_cb(l, dl_on_lost, &lost));

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_await_numsub(s, channel, 1, 2000);
	int64_t forced_at = rh_now_ms();
	if (script != NULL)
		cr_assert_eq(rh_command_int(s, "EVAL %s 2 %s %s %s %s", script, name, channel,
					     kind == WRITE ? "1" : "0", "publish"),
				1, "Redisson's force unlock of %s deleted nothing", name);
	else
		force_from_elsewhere(s, name, forcer);
	assert_heard(&lost, forced_at, name);
	cr_assert_eq(lost.reason, DLOCK_LOST_GONE, "reason %d", lost.reason);
	cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ELOST);
	/* A lost hold listens no more. */
	dl_await_numsub(s, channel, 0, 2000);
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ELOST, "%s", dlock_lock_errmsg(l));

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
	dl_lost_destroy(&lost);
}

static void force_unlock_is_heard(enum kind kind, const char *name, const char *channel)
{
	forced_is_heard(kind, kind, NULL, name, channel);
}

Test(force_watch, plain_hold_hears_a_force_unlock_within_1s, .timeout = 30)
{
	force_unlock_is_heard(PLAIN, "fw:plain", "redisson_lock__channel:{fw:plain}");
}

Test(force_watch, fenced_hold_hears_a_force_unlock_within_1s, .timeout = 30)
{
	force_unlock_is_heard(FENCED, "fw:fenced", "redisson_lock__channel:{fw:fenced}");
}

Test(force_watch, fair_hold_hears_a_force_unlock_within_1s, .timeout = 30)
{
	force_unlock_is_heard(FAIR, "fw:fair", "redisson_lock__channel:{fw:fair}");
}

/* The halves of a read-write lock listen on redisson_rwlock:{name}, where
 * every force unlock of the name publishes: the command line's (a plain
 * handle: it cannot know the kind), a half's own, and Redisson's. */
Test(force_watch, read_hold_hears_the_command_lines_force_unlock_within_1s, .timeout = 30)
{
	forced_is_heard(READ, PLAIN, NULL, "fw:read", "redisson_rwlock:{fw:read}");
}

Test(force_watch, write_hold_hears_the_command_lines_force_unlock_within_1s, .timeout = 30)
{
	forced_is_heard(WRITE, PLAIN, NULL, "fw:write", "redisson_rwlock:{fw:write}");
}

Test(force_watch, read_hold_hears_its_halfs_force_unlock_within_1s, .timeout = 30)
{
	forced_is_heard(READ, READ, NULL, "fw:read-half", "redisson_rwlock:{fw:read-half}");
}

Test(force_watch, write_hold_hears_redissons_force_unlock_within_1s, .timeout = 30)
{
	forced_is_heard(WRITE, WRITE, dl_redisson_write_force_unlock, "fw:write-rs",
			"redisson_rwlock:{fw:write-rs}");
}

Test(force_watch, read_hold_hears_redissons_force_unlock_within_1s, .timeout = 30)
{
	forced_is_heard(READ, READ, dl_redisson_read_force_unlock, "fw:read-rs",
			"redisson_rwlock:{fw:read-rs}");
}

/* What a plain handle's force unlock of a read-write lock publishes is
 * what Redisson's force unlock of the half in that mode does: "0" for read
 * mode, "1" for write mode (a "0" after it, as dlock's write release), on
 * redisson_rwlock:{name}; nothing on the RLock's channel, where Redisson's
 * read-write waiters do not listen. */
Test(force_watch, plain_force_unlock_of_a_rwlock_publishes_redissons_message, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = client_on(s, 0);
	dlock_lock *r = lock_of(c, "fw:msg", READ), *w = lock_of(c, "fw:msg", WRITE);
	redisContext *rw = dl_subscribe(rh_server_port(s), "redisson_rwlock:{fw:msg}");
	redisContext *plain = dl_subscribe(rh_server_port(s), "redisson_lock__channel:{fw:msg}");
	redisReply *none;

	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	force_from_elsewhere(s, "fw:msg", PLAIN);
	dl_expect_message(rw, "redisson_rwlock:{fw:msg}", "0", 2000);
	dl_pass(dlock_lock_acquire(w, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	force_from_elsewhere(s, "fw:msg", PLAIN);
	dl_expect_message(rw, "redisson_rwlock:{fw:msg}", "1", 2000);
	dl_expect_message(rw, "redisson_rwlock:{fw:msg}", "0", 2000);
	none = dl_next_reply(plain, 200);
	cr_assert_null(none, "a message on the RLock's channel");

	redisFree(rw);
	redisFree(plain);
	dlock_lock_free(r);
	dlock_lock_free(w);
	dlock_client_free(c);
	rh_server_free(s);
}

/* The contrast the option buys: without it, nothing for 2 s (the watchdog
 * would find it at its next renewal, 10 s after the acquisition). */
Test(force_watch, without_the_option_a_force_unlock_goes_unheard_for_2s, .timeout = 30)
{
	dl_lost lost;
	dl_lost_init(&lost);
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = client_on(s, 0);
	dlock_lock *l = lock_of(c, "fw:off", PLAIN);
	dl_pass(dlock_lock_set_lost_cb(l, dl_on_lost, &lost));

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(100);
	cr_assert_eq(dl_numsub(s, "redisson_lock__channel:{fw:off}"), 0, "a hold subscribed");
	int64_t forced_at = rh_now_ms();
	force_from_elsewhere(s, "fw:off", PLAIN);
	int fired = dl_lost_wait(&lost, forced_at + 2000);
	cr_assert_eq(fired, 0, "lost callback fired %lld ms after the force unlock, option off",
			(long long)(lost.at_ms - forced_at));
	/* The unlock still finds out. */
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ELOST, "%s", dlock_lock_errmsg(l));

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
	dl_lost_destroy(&lost);
}

/* A RedLock of 3 on watching clients: a force unlock on 2 members leaves
 * no quorum, and its lost callback fires within 1 s. */
Test(force_watch, redlock_loses_its_quorum_to_force_unlocks_within_1s, .timeout = 40)
{
	rh_server *s[3];
	const char *uris[3];
	const char *name = "fw:redlock", *channel = "redisson_lock__channel:{fw:redlock}";
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_redlock *r = NULL;
	dl_lost lost;

	dl_lost_init(&lost);
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	for (int i = 0; i < 3; i++)
		uris[i] = rh_server_uri(s[i]);
	co.watchdog_timeout_ms = WATCHDOG_MS;
	co.watch_force_unlock = 1;
	ro.restart_guard_ms = 0;
	dl_pass(dlock_redlock_new_from_uris(&r, uris, 3, name, &co, &ro));
	dl_pass(dlock_redlock_set_lost_cb(r, dl_on_lost, &lost));
	dl_pass(dlock_redlock_acquire(r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	for (int i = 0; i < 3; i++)
		dl_await_numsub(s[i], channel, 1, 2000);

	int64_t forced_at = rh_now_ms();
	force_from_elsewhere(s[0], name, PLAIN);
	force_from_elsewhere(s[1], name, PLAIN);
	assert_heard(&lost, forced_at, "RedLock of 3, 2 force-unlocked");
	cr_assert_neq(dlock_redlock_check(r, NULL), 0, "the RedLock still says held");
	cr_assert_eq(dlock_redlock_release(r, NULL), DLOCK_ELOST, "%s", dlock_redlock_errmsg(r));
	for (int i = 0; i < 3; i++)
		dl_await_numsub(s[i], channel, 0, 2000);

	dlock_redlock_free(r);
	for (int i = 0; i < 3; i++)
		rh_server_free(s[i]);
	dl_lost_destroy(&lost);
}

/* Our own unlock publishes on the channel we listen on; neither it nor the
 * re-lock that follows is a loss, however quickly they come. */
Test(force_watch, own_unlock_and_relock_is_not_a_loss, .timeout = 30)
{
	dl_lost lost;
	dl_lost_init(&lost);
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = client_on(s, 1);
	dlock_lock *l = lock_of(c, "fw:relock", PLAIN);
	dl_pass(dlock_lock_set_lost_cb(l, dl_on_lost, &lost));

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_await_numsub(s, "redisson_lock__channel:{fw:relock}", 1, 2000);
	for (int i = 0; i < 50; i++) {
		dl_pass(dlock_lock_release(l, NULL));
		dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		if (i % 10 == 0)
			dl_sleep_ms(20); /* let some messages be read while held */
	}
	/* Every message has been read and checked by now. */
	int fired = dl_lost_wait(&lost, rh_now_ms() + 1000);
	cr_assert_eq(fired, 0, "own unlock and re-lock reported lost (reason %d)", lost.reason);
	cr_assert_eq(dlock_lock_check(l, NULL), 0);
	dl_pass(dlock_lock_release(l, NULL));
	dl_await_numsub(s, "redisson_lock__channel:{fw:relock}", 0, 2000);

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
	dl_lost_destroy(&lost);
}

/* A message on the channel costs one renewal of the hold, now: the key's
 * TTL is back at the watchdog timeout, 1.5 s before the watchdog's round. */
Test(force_watch, a_message_renews_the_hold_at_once, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = client_on(s, 1);
	dlock_lock *l = lock_of(c, "fw:message", PLAIN);

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_await_numsub(s, "redisson_lock__channel:{fw:message}", 1, 2000);
	dl_sleep_ms(1500);
	int64_t before = rh_command_int(s, "PTTL fw:message");
	cr_assert_leq(before, WATCHDOG_MS - 1400, "PTTL %lld before the message", (long long)before);
	cr_assert_eq(rh_command_int(s, "PUBLISH redisson_lock__channel:{fw:message} 0"), 1);
	int64_t deadline = rh_now_ms() + HEARD_WITHIN_MS, pttl;
	while ((pttl = rh_command_int(s, "PTTL fw:message")) <= before && rh_now_ms() < deadline)
		dl_sleep_ms(5);
	cr_assert_gt(pttl, before, "PTTL %lld, %lld before the message: not renewed within 1 s",
			(long long)pttl, (long long)before);
	cr_assert_eq(dlock_lock_check(l, NULL), 0);
	dl_pass(dlock_lock_release(l, NULL));

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

/* The pub/sub connection is killed and the key deleted before it is back,
 * unheard: the holder checks when the connection drops and again when it
 * has resubscribed, and finds out either way. */
Test(force_watch, deletion_while_pubsub_is_down_is_still_found, .timeout = 30)
{
	dl_lost lost;
	dl_lost_init(&lost);
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = client_on(s, 1);
	dlock_lock *l = lock_of(c, "fw:dropped", PLAIN);
	dl_pass(dlock_lock_set_lost_cb(l, dl_on_lost, &lost));

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_await_numsub(s, "redisson_lock__channel:{fw:dropped}", 1, 2000);
	cr_assert_geq(rh_command_int(s, "CLIENT KILL TYPE pubsub"), 1);
	int64_t forced_at = rh_now_ms();
	cr_assert_eq(rh_command_int(s, "EVAL %s 1 %s", "return redis.call('del', KEYS[1])",
				     "fw:dropped"),
			1);
	/* Nobody heard it: the one subscriber was just killed. */
	assert_heard(&lost, forced_at, "a deletion while pub/sub was down");

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
	dl_lost_destroy(&lost);
}

typedef struct waiter {
	dlock_lock *l;
	int rc;
} waiter;

static void *wait_as_b(void *arg)
{
	waiter *w = arg;

	w->rc = dlock_lock_acquire(w->l, "owner-b", 800, DLOCK_LEASE_WATCHDOG);
	return NULL;
}

/* A hold and a waiter on one name share one subscription; it goes with the last. */
Test(force_watch, holds_and_waiters_of_a_name_share_one_subscription, .timeout = 30)
{
	const char *channel = "redisson_lock__channel:{fw:shared}";
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = client_on(s, 1);
	dlock_lock *l = lock_of(c, "fw:shared", PLAIN);
	waiter w = { l, 0 };
	pthread_t th;

	dl_pass(dlock_lock_acquire(l, "owner-a", 0, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_lock_acquire(l, "owner-a", 0, DLOCK_LEASE_WATCHDOG)); /* re-entered */
	dl_await_numsub(s, channel, 1, 2000);
	cr_assert_eq(pthread_create(&th, NULL, wait_as_b, &w), 0);
	dl_sleep_ms(300);
	cr_assert_eq(dl_numsub(s, channel), 1, "a waiter beside the hold subscribed again");
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(w.rc, DLOCK_ENOTACQUIRED, "%s", dlock_strerror(w.rc));
	cr_assert_eq(dl_numsub(s, channel), 1, "the waiter's leaving took the hold's subscription");
	dl_pass(dlock_lock_release(l, "owner-a"));
	cr_assert_eq(dl_numsub(s, channel), 1, "one hold of two released: still listening");
	dl_pass(dlock_lock_release(l, "owner-a"));
	dl_await_numsub(s, channel, 0, 2000);

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}
