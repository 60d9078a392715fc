/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Waits that end by themselves (first_contact_timeout_ms, issue 21): a
 * server that never answered since its client was opened is tried for the
 * first-contact period only, errors no wait heals (wrong password) end a
 * wait at once, and a server that answered once is still waited for across
 * a restart. The same for RedLock: too few members left that can answer
 * ends the wait; one member that never answers does not matter.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

/* The period the tests give. No try starts later than a connect timeout
 * before its end, so a wait ends within it. */
#define PERIOD_MS 1000
#define CONNECT_MS 200

static dlock_client *lazy_client(const char *uri, int64_t first_contact_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.connect_timeout_ms = CONNECT_MS;
	o.command_timeout_ms = 1000;
	o.lazy_connect = 1;
	o.first_contact_timeout_ms = first_contact_ms;
	return dl_client_opts(uri, &o);
}

/* "redis://127.0.0.1:PORT" of a loopback port nothing listens on, and its node label. */
static void dead_uri(char *uri, size_t len, char *node, size_t node_len)
{
	int port = rh_free_port();

	snprintf(uri, len, "redis://127.0.0.1:%d", port);
	snprintf(node, node_len, "127.0.0.1:%d", port);
}

Test(first_contact, a_port_nothing_listens_on_ends_a_forever_wait, .timeout = 30)
{
	char uri[64], node[64];
	dead_uri(uri, sizeof uri, node, sizeof node);
	dlock_client *c = lazy_client(uri, PERIOD_MS);
	dlock_lock *l = dl_lock(c, "first-contact");

	/* It kept trying (the fourth try, always within the period, comes 375 ms
	 * in at the earliest: backoffs from 50 ms, doubling, half random) and
	 * stopped within the period. */
	int64_t took = dl_assert_try(l, DLOCK_WAIT_FOREVER, 10000, DLOCK_ECONN, 300, PERIOD_MS);
	const char *msg = dlock_lock_errmsg(l);
	cr_expect(strstr(msg, node) != NULL && strstr(msg, "never answered since start") != NULL,
			"after %" PRId64 " ms the message should name %s and say it never "
			"answered: %s",
			took, node, msg);
	dlock_lock_free(l);
	dlock_client_free(c);
}

Test(first_contact, a_wrong_password_ends_a_forever_wait_at_once, .timeout = 30)
{
	const char *const extra[] = { "--requirepass", "s3cret", NULL };
	rh_server *s = rh_server_start(extra);
	cr_assert_not_null(s);
	char uri[96];
	snprintf(uri, sizeof uri, "redis://:wrong@127.0.0.1:%d", rh_server_port(s));
	/* No first-contact period: refused credentials end the wait anyway. */
	dlock_client *c = lazy_client(uri, 0);
	dlock_lock *l = dl_lock(c, "first-contact-auth");

	dl_assert_try(l, DLOCK_WAIT_FOREVER, 10000, DLOCK_EAUTH, 0, 1000);
	cr_expect_null(strstr(dlock_lock_errmsg(l), "wrong"), "the message shows the password: %s",
			dlock_lock_errmsg(l));
	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

Test(first_contact, a_server_that_answered_is_waited_for_across_a_restart, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = lazy_client(rh_server_uri(s), PERIOD_MS);
	dlock_lock *l = dl_lock(c, "first-contact-restart");
	dl_pass(dlock_client_ping(c)); /* it answered */

	cr_assert_eq(rh_server_kill(s), 0);
	dl_waiter w;
	dl_waiter_start(&w, c, l, DLOCK_WAIT_FOREVER);
	/* Down for twice the period: a server that answered is not given up on.
	 * (Restarted from this thread: the server dies with the thread that
	 * started it.) */
	dl_sleep_ms(2 * PERIOD_MS);
	cr_assert_eq(rh_server_restart(s), 0);
	dl_waiter_join(&w);
	cr_expect_eq(w.rc, 0, "rc %d (%s) after %" PRId64 " ms: %s", w.rc, dlock_strerror(w.rc),
			w.returned - w.started, dlock_lock_errmsg(l));
	cr_expect_geq(w.returned - w.started, 2 * PERIOD_MS - 100,
			"acquired after %" PRId64 " ms, while the server was down",
			w.returned - w.started);
	if (w.rc == 0)
		dl_pass(dlock_lock_release(l, w.owner));
	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

/* A RedLock of three: live servers first, then `dead` that never answer. */
typedef struct trio {
	rh_server *live[3];
	dlock_client *c[3];
	dlock_lock *l[3];
	dlock_redlock *r;
	char dead_node[64];
} trio;

static void trio_up(trio *t, int dead, const char *name)
{
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;

	memset(t, 0, sizeof(*t));
	for (int i = 0; i < 3; i++) {
		char uri[64];

		if (i < 3 - dead) {
			t->live[i] = rh_server_start(NULL);
			cr_assert_not_null(t->live[i]);
			snprintf(uri, sizeof uri, "%s", rh_server_uri(t->live[i]));
		} else {
			dead_uri(uri, sizeof uri, t->dead_node, sizeof t->dead_node);
		}
		t->c[i] = lazy_client(uri, PERIOD_MS);
		t->l[i] = dl_lock(t->c[i], name);
	}
	ro.restart_guard_ms = 0; /* not about the guard */
	dl_pass(dlock_redlock_new(&t->r, t->l, 3, &ro));
}

static void trio_down(trio *t)
{
	dlock_redlock_free(t->r);
	for (int i = 0; i < 3; i++) {
		dlock_lock_free(t->l[i]);
		dlock_client_free(t->c[i]);
		rh_server_free(t->live[i]);
	}
}

Test(first_contact, a_redlock_with_two_of_three_never_answering_ends_its_wait, .timeout = 30)
{
	trio t;
	trio_up(&t, 2, "first-contact-red2");
	int64_t validity = 0, t0 = rh_now_ms();
	int rc = dl_redlock_acquire_v(&validity, t.r, NULL, DLOCK_WAIT_FOREVER, 10000);
	int64_t took = rh_now_ms() - t0;
	const char *msg = dlock_redlock_errmsg(t.r);

	cr_expect_eq(rc, DLOCK_ENOQUORUM, "rc %d (%s) after %" PRId64 " ms: %s", rc,
			dlock_strerror(rc), took, msg);
	cr_expect_leq(took, PERIOD_MS,
			"a wait for two servers that never answered lasted %" PRId64 " ms "
			"(first-contact period %d ms)",
			took, PERIOD_MS);
	cr_expect(strstr(msg, t.dead_node) != NULL &&
					strstr(msg, "never answered since start") != NULL,
			"the message should name %s and say it never answered: %s", t.dead_node,
			msg);
	trio_down(&t);
}

Test(first_contact, a_redlock_with_one_of_three_never_answering_acquires, .timeout = 30)
{
	trio t;
	trio_up(&t, 1, "first-contact-red1");
	int64_t validity = 0, lease = PERIOD_MS + 500;

	/* Another owner holds it past the dead member's period: the wait goes
	 * on with the two members left, a quorum, and gets it at the lease's end. */
	dl_pass(dl_redlock_acquire_v(&validity, t.r, "other:1", 0, lease));
	int64_t t0 = rh_now_ms();
	int rc = dl_redlock_acquire_v(&validity, t.r, NULL, DLOCK_WAIT_FOREVER, 10000);
	int64_t took = rh_now_ms() - t0;
	cr_expect_eq(rc, 0, "rc %d (%s) after %" PRId64 " ms: %s", rc, dlock_strerror(rc), took,
			dlock_redlock_errmsg(t.r));
	cr_expect(took >= lease - 200 && took <= lease + 1000,
			"acquired after %" PRId64 " ms; the other owner's lease was %" PRId64 " ms",
			took, lease);
	if (rc == 0)
		dl_pass(dlock_redlock_release(t.r, NULL));
	trio_down(&t);
}
