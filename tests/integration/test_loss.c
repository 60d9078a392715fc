/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A held lock that is lost is reported lost: by the unlock that finds it
 * gone before the watchdog noticed, by an unlock that cannot reach the
 * server after the watchdog noticed, and by check() as soon as the key may
 * have expired - never "held" for longer than the key that grants it.
 * RLock and RedLock alike.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

/* Someone else deletes the key; the unlock comes before the next renewal. */
Test(loss, unlock_that_finds_the_hold_gone_says_lost, .timeout = 30)
{
	dl_single t;
	dl_single_up(&t, "loss:deleted", 500, 30000);

	cr_assert_eq(dlock_lock_acquire(t.l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(t.l));
	cr_assert_eq(rh_command_int(t.s, "DEL %s", "loss:deleted"), 1);
	int rc = dlock_lock_release(t.l, NULL);
	cr_assert_eq(rc, DLOCK_ELOST, "unlock of a deleted hold: %s (%s)", dlock_strerror(rc),
			dlock_lock_errmsg(t.l));
	cr_assert(strstr(dlock_lock_errmsg(t.l), "was lost before the unlock") != NULL, "%s",
			dlock_lock_errmsg(t.l));
	cr_assert(strstr(dlock_lock_errmsg(t.l), rh_server_uri(t.s) + strlen("redis://")) != NULL,
			"the message names the node: %s", dlock_lock_errmsg(t.l));
	/* The record is gone: a second unlock is a plain "not owner". */
	cr_assert_eq(dlock_lock_release(t.l, NULL), DLOCK_ENOTOWNER);
	/* Someone who never held it is told "not owner", not "lost". */
	dlock_lock *other = dl_lock(t.c, "loss:never");
	cr_assert_eq(dlock_lock_release(other, NULL), DLOCK_ENOTOWNER);

	dlock_lock_free(other);
	dl_single_down(&t);
}

/* The watchdog found it lost; the server is still unreachable at unlock. */
Test(loss, unlock_after_a_loss_is_lost_whatever_the_transport, .timeout = 30)
{
	dl_single t;
	dl_single_up(&t, "loss:unreachable", 150, 900);

	cr_assert_eq(dlock_lock_acquire(t.l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(t.l));
	cr_assert_eq(rh_server_pause(t.s), 0);
	int64_t until = rh_now_ms() + 3000;
	while (dlock_lock_check(t.l, NULL) == 0 && rh_now_ms() < until)
		dl_sleep_ms(10);
	int state = dlock_lock_check(t.l, NULL);
	int rc = dlock_lock_release(t.l, NULL);
	char msg[256];
	snprintf(msg, sizeof msg, "%s", dlock_lock_errmsg(t.l));
	cr_assert_eq(rh_server_resume(t.s), 0);

	cr_assert_eq(state, DLOCK_ELOST, "check: %s", dlock_strerror(state));
	cr_assert_eq(rc, DLOCK_ELOST, "unlock of a lost hold on a paused server: %s (%s)",
			dlock_strerror(rc), msg);
	dl_single_down(&t);
}

/* A leased hold is not "held" past its lease, and its unlock says lost. */
Test(loss, leased_hold_is_not_held_past_its_lease, .timeout = 30)
{
	dl_single t;
	dl_single_up(&t, "loss:lease", 500, 30000);

	int64_t t0 = rh_now_ms(), asked, last_held = t0;
	cr_assert_eq(dlock_lock_acquire(t.l, NULL, 0, 300), 0, "%s", dlock_lock_errmsg(t.l));
	cr_assert_eq(dlock_lock_check(t.l, NULL), 0);
	/* The time a check was asked, not when its answer was read: on a busy
	 * machine the thread may sleep between the two. */
	while ((asked = rh_now_ms(), dlock_lock_check(t.l, NULL)) == 0) {
		last_held = asked;
		dl_sleep_ms(2);
	}
	int64_t t_lost = rh_now_ms();
	cr_assert_leq(last_held - t0, 300, "check said held %lld ms into a 300 ms lease",
			(long long)(last_held - t0));
	cr_assert_geq(t_lost - t0, 250, "check said lost after only %lld ms of a 300 ms lease",
			(long long)(t_lost - t0));
	dl_sleep_ms(100);
	cr_assert_eq(rh_command_int(t.s, "EXISTS %s", "loss:lease"), 0);
	cr_assert_eq(dlock_lock_release(t.l, NULL), DLOCK_ELOST, "%s", dlock_lock_errmsg(t.l));

	dl_single_down(&t);
}

/*
 * check() does not lean on the background thread: with the server paused,
 * renewals cannot land, and check() says lost once the TTL (less drift)
 * since the last renewal has passed - not a moment after.
 */
Test(loss, check_is_never_later_than_the_key, .timeout = 30)
{
	dl_single t;
	dl_single_up(&t, "loss:check", 100, 1200);

	cr_assert_eq(dlock_lock_acquire(t.l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(t.l));
	/* Pause just after a renewal landed (the PTTL jumps up), so that no
     * renewal can extend the key between the reading and the pause. */
	int64_t prev = rh_command_int(t.s, "PTTL %s", "loss:check"), pttl, t_pttl;
	for (;;) {
		dl_sleep_ms(3);
		pttl = rh_command_int(t.s, "PTTL %s", "loss:check");
		t_pttl = rh_now_ms();
		if (pttl > prev)
			break;
		prev = pttl;
	}
	cr_assert(pttl > 0);
	cr_assert_eq(rh_server_pause(t.s), 0);
	while (dlock_lock_check(t.l, NULL) == 0 && rh_now_ms() < t_pttl + 3000)
		dl_sleep_ms(1);
	int64_t t_lost = rh_now_ms();
	cr_assert_eq(rh_server_resume(t.s), 0);
	cr_assert_leq(t_lost, t_pttl + pttl, "check said held %lld ms after the key's TTL ran out",
			(long long)(t_lost - t_pttl - pttl));
	cr_assert_eq(dlock_lock_release(t.l, NULL), DLOCK_ELOST, "%s", dlock_lock_errmsg(t.l));
	dl_single_down(&t);
}

/* A RedLock whose majority was deleted: its unlock says lost. */
Test(loss, redlock_unlock_after_majority_deleted_says_lost, .timeout = 30)
{
	rh_server *s[3];
	const char *uris[3];
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_redlock *r = NULL;

	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	for (int i = 0; i < 3; i++)
		uris[i] = rh_server_uri(s[i]);
	co.command_timeout_ms = 300;
	ro.restart_guard_ms = 0;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, uris, 3, "loss:redlock", &co, &ro), 0, "%s",
			dlock_errmsg_last());
	cr_assert_eq(dlock_redlock_acquire(r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s",
			dlock_redlock_errmsg(r));
	cr_assert_eq(rh_command_int(s[0], "DEL %s", "loss:redlock"), 1);
	cr_assert_eq(rh_command_int(s[1], "DEL %s", "loss:redlock"), 1);
	int rc = dlock_redlock_release(r, NULL);
	cr_assert_eq(rc, DLOCK_ELOST, "%s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	cr_assert_eq(rh_command_int(s[2], "EXISTS %s", "loss:redlock"), 0,
			"the remaining member was released");
	dlock_redlock_free(r);
	for (int i = 0; i < 3; i++)
		rh_server_free(s[i]);
}

/*
 * The table finds a handle's holds by the handle (not by walking every
 * hold): handles freed in any order, a hold taken again through a second
 * handle of its name (it is that handle's from then on), losses among them.
 * A loss is reported to the handle the hold belongs to, never to a freed
 * one, the holds of freed handles are forgotten and the others kept.
 */
#define IDX_N 48

static _Atomic int idx_lost[2][IDX_N];

static void idx_on_lost(const dlock_lost_event *ev, void *ud)
{
	(void)ev;
	atomic_fetch_add((_Atomic int *)ud, 1);
}

Test(loss, handles_freed_in_any_order_keep_the_holds_of_the_others, .timeout = 60)
{
	dl_single t;
	dlock_lock *a[IDX_N], *b[IDX_N] = { NULL };
	dlock_stats *st = NULL;
	char name[32];

	dl_single_up(&t, "idx:unused", 1000, 900);
	for (int i = 0; i < IDX_N; i++) {
		snprintf(name, sizeof name, "idx:%d", i);
		a[i] = dl_lock(t.c, name);
		atomic_store(&idx_lost[0][i], 0);
		atomic_store(&idx_lost[1][i], 0);
		dl_pass(dlock_lock_set_lost_cb(a[i], idx_on_lost, &idx_lost[0][i]));
		dl_pass(dlock_lock_acquire(a[i], NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		if (i % 4 == 0) { /* again through a second handle: the hold is b's now */
			b[i] = dl_lock(t.c, name);
			dl_pass(dlock_lock_set_lost_cb(b[i], idx_on_lost, &idx_lost[1][i]));
			dl_pass(dlock_lock_acquire(b[i], NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		}
	}
	/* Free some, in no particular order: a's of i % 5 == 2, b's of i % 8 == 4. */
	for (int i = IDX_N - 1; i >= 0; i -= 2) {
		int k = (i * 7) % IDX_N;

		if (k % 5 == 2) {
			dlock_lock_free(a[k]);
			a[k] = NULL;
		}
	}
	for (int i = 0; i < IDX_N; i++)
		if (b[i] != NULL && i % 8 == 4) {
			dlock_lock_free(b[i]);
			b[i] = NULL;
		}
	/* Someone else deletes every third key: the next renewal finds it gone. */
	for (int i = 0; i < IDX_N; i += 3) {
		snprintf(name, sizeof name, "idx:%d", i);
		rh_command_int(t.s, "DEL %s", name);
	}
	dl_sleep_ms(900);
	for (int i = 0; i < IDX_N; i++) {
		/* Whose hold: b's when there was one, until b was freed (forgotten). */
		int second = i % 4 == 0, gone = second ? b[i] == NULL : a[i] == NULL;
		dlock_lock *owner = second ? b[i] : a[i];
		int deleted = i % 3 == 0, held = 0;

		snprintf(name, sizeof name, "idx:%d", i);
		cr_assert_eq(atomic_load(&idx_lost[second][i]), deleted && !gone,
				"%s: %d loss reports to its %s handle", name,
				atomic_load(&idx_lost[second][i]), second ? "second" : "first");
		cr_assert_eq(atomic_load(&idx_lost[!second][i]), 0,
				"%s: a loss reported to the other handle", name);
		if (gone || deleted)
			continue;
		dl_pass(dlock_lock_is_held(&held, owner, NULL));
		cr_assert_eq(held, 1, "%s not kept", name);
		cr_assert_gt(rh_command_int(t.s, "PTTL %s", name), 0, "%s has no TTL left", name);
	}
	/* The rest freed, the other way round: nothing is left held. */
	for (int i = 0; i < IDX_N; i++) {
		dlock_lock_free(b[i]);
		dlock_lock_free(a[IDX_N - 1 - i]);
	}
	dl_pass(dlock_client_stats(&st, t.c));
	cr_assert_eq(st->held, 0, "%llu holds still counted", (unsigned long long)st->held);
	dlock_stats_free(st);
	dl_single_down(&t);
}
