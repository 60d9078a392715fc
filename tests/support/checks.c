/* SPDX-License-Identifier: BSD-3-Clause */
/* Assertion sequences several test files repeated (Criterion). */
#include <criterion/criterion.h>

#include <inttypes.h>

#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

/* Both bounds in the message, so a flaky timing says how far off it was. */
static void assert_took(const char *call, int64_t took, int64_t lo_ms, int64_t hi_ms)
{
	cr_assert(took >= lo_ms && took <= hi_ms,
			"%s returned after %" PRId64 " ms, want %" PRId64 "..%" PRId64 " ms", call,
			took, lo_ms, hi_ms);
}

static void assert_rc(const char *call, dlock_lock *l, int rc, int want)
{
	cr_assert_eq(rc, want, "%s: rc %d (%s) %s, want %d (%s)", call, rc, dlock_strerror(rc),
			dlock_lock_errmsg(l), want, dlock_strerror(want));
}

int64_t dl_assert_try(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, int want, int64_t lo_ms,
		int64_t hi_ms)
{
	char call[96];
	int64_t t0 = rh_now_ms();
	int rc = dlock_lock_acquire(l, NULL, wait_ms, lease_ms);
	int64_t took = rh_now_ms() - t0;

	snprintf(call, sizeof call, "dlock_lock_acquire(wait %" PRId64 ", NULL, lease %" PRId64 ")", wait_ms,
			lease_ms);
	assert_rc(call, l, rc, want);
	assert_took(call, took, lo_ms, hi_ms);
	return took;
}

int64_t dl_assert_lock(dlock_lock *l, int64_t lease_ms, int want, int64_t lo_ms, int64_t hi_ms)
{
	char call[64];
	int64_t t0 = rh_now_ms();
	int rc = dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, lease_ms);
	int64_t took = rh_now_ms() - t0;

	snprintf(call, sizeof call, "dlock_lock_acquire(lease %" PRId64 ", NULL, DLOCK_WAIT_FOREVER)", lease_ms);
	assert_rc(call, l, rc, want);
	assert_took(call, took, lo_ms, hi_ms);
	return took;
}

void dl__free_locks(dlock_lock *const *locks, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dlock_lock_free(locks[i]);
}

void dl__close_clients(dlock_client *const *clients, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dlock_client_free(clients[i]);
}

void dl_assert_one_lock(dlock_lock *a, dlock_lock *b)
{
	dl_pass(dlock_lock_acquire(a, NULL, DLOCK_WAIT_FOREVER, 10000));
	dl_assert_try(b, 0, 1000, DLOCK_ENOTACQUIRED, 0, 1000);
	dl_pass(dlock_lock_release(a, NULL));
	dl_assert_try(b, 0, 1000, 0, 0, 1000);
	dl_pass(dlock_lock_release(b, NULL));
}

typedef struct waiter {
	dlock_lock *l;
	int rc;
	int64_t at_ms;
} waiter;

static void *wait_then_release(void *arg)
{
	waiter *w = arg;

	w->rc = dlock_lock_acquire(w->l, NULL, DLOCK_WAIT_FOREVER, 10000);
	w->at_ms = rh_now_ms();
	if (w->rc == 0)
		w->rc = dlock_lock_release(w->l, NULL);
	return NULL;
}

void dl_assert_unlock_wakes(dlock_lock *holder, dlock_lock *waiter_lock)
{
	waiter w = { waiter_lock, -1, 0 };
	pthread_t t;
	int64_t unlocked;

	dl_pass(dlock_lock_acquire(holder, NULL, DLOCK_WAIT_FOREVER, 20000));
	cr_assert_eq(pthread_create(&t, NULL, wait_then_release, &w), 0);
	dl_sleep_ms(300); /* the waiter is subscribed and waiting */
	unlocked = rh_now_ms();
	dl_pass(dlock_lock_release(holder, NULL));
	pthread_join(t, NULL);
	cr_assert_eq(w.rc, 0, "the waiter: %s", dlock_lock_errmsg(waiter_lock));
	cr_assert(w.at_ms - unlocked < 2000,
			"the waiter woke %lld ms after the unlock (lease 20 s)",
			(long long)(w.at_ms - unlocked));
}

static void *waiter_main(void *arg)
{
	dl_waiter *w = arg;

	w->started = rh_now_ms();
	w->rc = dlock_lock_acquire(w->l, w->owner, w->wait_ms, DLOCK_LEASE_WATCHDOG);
	w->returned = rh_now_ms();
	return NULL;
}

void dl_waiter_start(dl_waiter *w, dlock_client *c, dlock_lock *l, int64_t wait_ms)
{
	memset(w, 0, sizeof *w);
	w->l = l;
	w->wait_ms = wait_ms;
	dl_owner(c, w->owner, sizeof w->owner);
	cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
}

void dl_waiter_join(dl_waiter *w)
{
	cr_assert_eq(pthread_join(w->th, NULL), 0);
}

void dl_on_lost(const dlock_lost_event *ev, void *ud)
{
	dl_lost_note(ud, ev);
}

rh_server *dl_slot_owner(rh_cluster *c, const char *key)
{
	rh_server *s = rh_cluster_slot_owner(c, NULL, rh_cluster_key_slot(c, key));

	cr_assert_not_null(s, "no node serves the slot of %s", key);
	return s;
}

rh_server *dl_other_primary(rh_cluster *c, const rh_server *s)
{
	for (int i = 0; i < rh_cluster_size(c); i++) {
		rh_server *x = rh_cluster_server(c, i);

		if (x != s && rh_cluster_is_primary(c, i) == 1)
			return x;
	}
	cr_assert_fail("no other primary");
	return NULL;
}

int64_t dl_longest_loop_turn(dlock_loop *loop, int64_t for_ms, int64_t turn_ms)
{
	int64_t until = rh_now_ms() + for_ms, longest = 0;

	while (rh_now_ms() < until) {
		int64_t t = rh_now_ms();

		if (dlock_loop_run(loop, turn_ms) < 0)
			return -1;
		if (rh_now_ms() - t > longest)
			longest = rh_now_ms() - t;
	}
	return longest;
}

int64_t dl_numsub(rh_server *s, const char *channel)
{
	redisReply *r = rh_command(s, "PUBSUB NUMSUB %s", channel);
	int64_t n;

	cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
					r->element[1]->type == REDIS_REPLY_INTEGER,
			"PUBSUB NUMSUB %s: no [channel, count] reply", channel);
	n = r->element[1]->integer;
	freeReplyObject(r);
	return n;
}

void dl_await_numsub(rh_server *s, const char *channel, int64_t want, int64_t timeout_ms)
{
	int64_t deadline = rh_now_ms() + timeout_ms, n;

	while ((n = dl_numsub(s, channel)) != want && rh_now_ms() < deadline)
		dl_sleep_ms(5);
	cr_assert_eq(n, want, "%s: %" PRId64 " subscriber(s) after %" PRId64 " ms, want %" PRId64,
			channel, n, timeout_ms, want);
}
