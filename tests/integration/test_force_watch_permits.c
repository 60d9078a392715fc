/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watch_force_unlock for an expirable semaphore's renewed permits: a force
 * release (every taken permit given back, the count published on
 * redisson_sc:{name}) is heard by the holder within a second, not at its
 * next renewal (a third of a 30 s watchdog here); without the option, or
 * for a deletion that publishes nothing (Redisson's delete()), the next
 * renewal finds it. The permits given back go to the waiters.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define WATCHDOG_MS 30000
#define HEARD_WITHIN_MS 1000

TestSuite(force_watch_permits, .init = dl_server_start, .fini = dl_server_stop, .timeout = 30);

static dlock_client *client_with(int watch, int64_t watchdog_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.watchdog_timeout_ms = watchdog_ms;
	o.watch_force_unlock = watch;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

static dlock_semaphore *sem_on(dlock_client *c, const char *name, dlock_semaphore_kind kind)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;

	o.kind = kind;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	return s;
}

/* The semaphore's count (GET name), -1 when there is none. */
static long long count_of(const char *name)
{
	redisReply *r = rh_command(dl_srv, "GET %s", name);
	long long n = -1;

	cr_assert_not_null(r);
	if (r->type == REDIS_REPLY_STRING)
		n = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return n;
}

/* Force-release name's permits through a client of its own; returns when. */
static int64_t force_release_elsewhere(const char *name, int64_t want_freed)
{
	dlock_client *c = client_with(0, WATCHDOG_MS);
	dlock_semaphore *s = sem_on(c, name, DLOCK_SEMAPHORE_EXPIRABLE);
	int64_t freed = -1, at;

	dl_pass(dlock_semaphore_force_release(&freed, s));
	at = rh_now_ms();
	cr_assert_eq(freed, want_freed, "freed %lld permits, want %lld", (long long)freed,
			(long long)want_freed);
	dlock_semaphore_free(s);
	dlock_client_free(c);
	return at;
}

/* A holder of a renewed permit, its lost callback recording into lost. */
typedef struct holder {
	dlock_client *c;
	dlock_semaphore *s;
	char id[DLOCK_PERMIT_ID_SIZE];
} holder;

static void hold_one(holder *h, dl_lost *lost, const char *name, int watch, int64_t watchdog_ms)
{
	h->c = client_with(watch, watchdog_ms);
	h->s = sem_on(h->c, name, DLOCK_SEMAPHORE_EXPIRABLE);
	dl_pass(dlock_semaphore_set_lost_cb(h->s, dl_on_lost, lost));
	dl_pass(dlock_semaphore_try_set_permits(NULL, h->s, 1));
	dl_pass(dlock_semaphore_acquire_permit(h->id, h->s, 0, DLOCK_LEASE_WATCHDOG));
}

static void holder_free(holder *h)
{
	dlock_semaphore_free(h->s);
	dlock_client_free(h->c);
}

static void assert_lost_within(dl_lost *lost, int64_t since, int64_t bound, const char *what)
{
	int fired = dl_lost_wait(lost, since + bound + 4000);
	int64_t took;

	pthread_mutex_lock(&lost->mu);
	took = lost->at_ms - since;
	pthread_mutex_unlock(&lost->mu);
	cr_assert_eq(fired, 1, "%s: lost callback fired %d times", what, fired);
	cr_assert_leq(took, bound, "%s: reported lost %lld ms after (bound %lld)", what,
			(long long)took, (long long)bound);
	cr_assert_eq(lost->reason, DLOCK_LOST_GONE, "%s: reason %d", what, lost->reason);
}

Test(force_watch_permits, a_permit_hears_a_force_release_within_1s)
{
	dl_lost lost;
	holder h;
	int64_t forced_at;

	dl_lost_init(&lost);
	hold_one(&h, &lost, "fwp:heard", 1, WATCHDOG_MS);
	dl_await_numsub(dl_srv, "redisson_sc:{fwp:heard}", 1, 2000);
	forced_at = force_release_elsewhere("fwp:heard", 1);
	assert_lost_within(&lost, forced_at, HEARD_WITHIN_MS, "a force release");
	cr_assert_str_eq(lost.owner, h.id);
	cr_assert_eq(dlock_semaphore_check(h.s, h.id), DLOCK_ELOST);
	/* The permit is back in the count, and a lost permit listens no more. */
	cr_assert_eq(count_of("fwp:heard"), 1);
	dl_await_numsub(dl_srv, "redisson_sc:{fwp:heard}", 0, 2000);
	cr_assert_eq(dlock_semaphore_release_permit(h.s, h.id), DLOCK_ELOST);
	holder_free(&h);
	dl_lost_destroy(&lost);
}

/* Without the option nothing listens, and the next renewal (every 500 ms
 * here) finds the permit gone: the same as a force release that comes
 * before the holder listens. */
Test(force_watch_permits, without_listening_the_next_renewal_finds_it)
{
	dl_lost lost;
	holder h;
	int64_t forced_at;

	dl_lost_init(&lost);
	hold_one(&h, &lost, "fwp:renewal", 0, 1500);
	dl_sleep_ms(100);
	cr_assert_eq(dl_numsub(dl_srv, "redisson_sc:{fwp:renewal}"), 0, "a holder subscribed, option off");
	forced_at = force_release_elsewhere("fwp:renewal", 1);
	assert_lost_within(&lost, forced_at, 500 + HEARD_WITHIN_MS, "a force release unheard");
	holder_free(&h);
	dl_lost_destroy(&lost);
}

/* Redisson's delete() of a semaphore publishes nothing: the listening
 * holder finds it at its next renewal all the same. */
Test(force_watch_permits, a_silent_deletion_is_found_at_the_next_renewal)
{
	dl_lost lost;
	holder h;
	int64_t deleted_at;

	dl_lost_init(&lost);
	hold_one(&h, &lost, "fwp:deleted", 1, 1500);
	dl_await_numsub(dl_srv, "redisson_sc:{fwp:deleted}", 1, 2000);
	cr_assert_eq(rh_command_int(dl_srv, "DEL fwp:deleted {fwp:deleted}:timeout"), 2);
	deleted_at = rh_now_ms();
	assert_lost_within(&lost, deleted_at, 500 + HEARD_WITHIN_MS, "a deletion");
	holder_free(&h);
	dl_lost_destroy(&lost);
}

typedef struct waiter {
	dlock_semaphore *s;
	char id[DLOCK_PERMIT_ID_SIZE];
	int rc;
	int64_t at;
} waiter;

static void *wait_for_permit(void *arg)
{
	waiter *w = arg;

	w->rc = dlock_semaphore_acquire_permit(w->id, w->s, 10000, DLOCK_LEASE_WATCHDOG);
	w->at = rh_now_ms();
	return NULL;
}

/* The permits given back go to whoever waits, woken by the message. */
Test(force_watch_permits, a_waiter_gets_the_permit_given_back_at_once)
{
	dl_lost lost;
	holder h;
	dlock_client *c = client_with(1, WATCHDOG_MS);
	waiter w = { sem_on(c, "fwp:waiter", DLOCK_SEMAPHORE_EXPIRABLE), "", -1, 0 };
	pthread_t th;
	int64_t forced_at;

	dl_lost_init(&lost);
	hold_one(&h, &lost, "fwp:waiter", 1, WATCHDOG_MS);
	cr_assert_eq(pthread_create(&th, NULL, wait_for_permit, &w), 0);
	dl_await_numsub(dl_srv, "redisson_sc:{fwp:waiter}", 2, 2000);
	forced_at = force_release_elsewhere("fwp:waiter", 1);
	pthread_join(th, NULL);
	dl_pass(w.rc);
	cr_assert_leq(w.at - forced_at, HEARD_WITHIN_MS, "the waiter got it %lld ms after",
			(long long)(w.at - forced_at));
	assert_lost_within(&lost, forced_at, HEARD_WITHIN_MS, "the holder");
	dl_pass(dlock_semaphore_release_permit(w.s, w.id));
	cr_assert_eq(count_of("fwp:waiter"), 1);
	dlock_semaphore_free(w.s);
	dlock_client_free(c);
	holder_free(&h);
	dl_lost_destroy(&lost);
}

/* Nothing taken: nothing freed, nothing published; a plain semaphore does
 * not know which permits are taken: refused. */
Test(force_watch_permits, nothing_taken_frees_nothing_and_a_plain_one_is_refused)
{
	dlock_client *c = client_with(0, WATCHDOG_MS);
	dlock_semaphore *e = sem_on(c, "fwp:none", DLOCK_SEMAPHORE_EXPIRABLE);
	dlock_semaphore *p = sem_on(c, "fwp:plain", DLOCK_SEMAPHORE_PLAIN);
	int64_t freed = -1;

	dl_pass(dlock_semaphore_try_set_permits(NULL, e, 3));
	dl_pass(dlock_semaphore_force_release(&freed, e));
	cr_assert_eq(freed, 0);
	cr_assert_eq(count_of("fwp:none"), 3);
	cr_assert_eq(dlock_semaphore_force_release(&freed, p), DLOCK_EINVAL);
	cr_assert(strstr(dlock_semaphore_errmsg(p), "expirable") != NULL, "%s",
			dlock_semaphore_errmsg(p));
	dlock_semaphore_free(e);
	dlock_semaphore_free(p);
	dlock_client_free(c);
}
