/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An asynchronous wait that spans an outage (the server paused, then
 * resumed shortly before the wait ends) ends with the answer of a server
 * that is back - the lock held, no permit, the count still above zero -
 * never with an error of the outage it outlived. The waits are woken by a
 * message just before the pause (a fair waiter polls), so that they look
 * during it and meet its errors; many at once, so that some have no retry
 * due between the resume and the end of their wait (their backoff has
 * grown to a second by then).
 */
#include <criterion/criterion.h>

#include <string.h>

#include <hiredis/hiredis.h>

#include <hiredis/hiredis.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(async_outage, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

enum { WAITS = 24 };

/* The waits last WAIT_MS; the server is paused from PAUSE_AT to RESUME_AT
 * (ms after they start): after the resume there is time for an answer
 * but not for the backoff. */
#define WAIT_MS 5000
#define PAUSE_AT 500
#define RESUME_AT 4500

static dlock_client *client_on(dlock_loop *loop)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	o.command_timeout_ms = 200;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

static void set_string(const char *key, const char *value)
{
	redisReply *r = rh_command(dl_srv, "SET %s %s", key, value);

	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "SET %s", key);
	freeReplyObject(r);
}

/* A message the waits read once the loop runs again (it is not run meanwhile). */
static void publish(const char *channel, const char *message)
{
	cr_assert_geq(rh_command_int(dl_srv, "PUBLISH %s %s", channel, message), 1,
			"nobody listens on %s", channel);
	dl_sleep_ms(50); /* delivered to this process */
}

/* Drive the loop through the outage until every wait has ended; the
 * time from t0. Just before the pause, `message` on `channel` (if any)
 * wakes the waits: they read it once the loop runs, with the server paused. */
static int64_t ride_out(dlock_loop *loop, const dl_outcome *o, int64_t t0, const char *channel,
		const char *message)
{
	int paused = 0, resumed = 0, done = 0;

	while (done < WAITS && rh_now_ms() < t0 + WAIT_MS + 10000) {
		int64_t at = rh_now_ms() - t0;

		if (!paused && at >= PAUSE_AT) {
			cr_assert_eq(done, 0, "%d waits ended before the outage", done);
			if (channel != NULL)
				publish(channel, message);
			cr_assert_eq(rh_server_pause(dl_srv), 0);
			paused = 1;
		}
		if (paused && !resumed && at >= RESUME_AT) {
			cr_assert_eq(rh_server_resume(dl_srv), 0);
			resumed = 1;
		}
		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
		done = 0;
		for (int i = 0; i < WAITS; i++)
			done += o[i].calls > 0;
	}
	if (!resumed)
		rh_server_resume(dl_srv);
	cr_assert_eq(done, WAITS, "%d of %d waits ended within 10 s of their end", done, WAITS);
	return rh_now_ms() - t0;
}

/* Every wait ended with `code` and a message naming `what`. */
static void assert_all(const dl_outcome *o, int code, const char *what)
{
	for (int i = 0; i < WAITS; i++) {
		cr_assert_eq(o[i].calls, 1, "wait %d: %d callbacks", i, o[i].calls);
		cr_assert_eq(o[i].code, code, "wait %d ended with %d (%s), not %d", i, o[i].code,
				o[i].message, code);
		cr_assert(strstr(o[i].message, what) != NULL, "wait %d: \"%s\" does not say \"%s\"", i,
				o[i].message, what);
	}
}

/* WAITS waits on `name` of `kind`, held by another process's owner for
 * longer than the test; `channel` wakes them (NULL: a fair waiter polls). */
static void lock_waits_over_an_outage(const char *name, dlock_lock_kind kind, const char *channel)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l = NULL;
	dl_outcome o[WAITS] = { 0 };
	char owner[64];
	int64_t t0, took;

	cr_assert_eq(rh_command_int(dl_srv, "HSET %s someone:1 1", name), 1);
	cr_assert_eq(rh_command_int(dl_srv, "PEXPIRE %s 60000", name), 1);
	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	dl_pass(dlock_lock_new(&l, c, name, dl_kind(kind)));
	t0 = rh_now_ms();
	for (int i = 0; i < WAITS; i++) {
		dlock_client_owner(owner, c, (uint64_t)i);
		dl_pass(dlock_lock_acquire_async(NULL, l, owner, WAIT_MS, 10000, dl_note, &o[i]));
	}
	took = ride_out(loop, o, t0, channel, "0");
	assert_all(o, DLOCK_ENOTACQUIRED, "held by another owner");
	cr_assert_lt(took, WAIT_MS + 2000, "the waits of %d ms ended after %lld ms", WAIT_MS,
			(long long)took);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_outage, a_lock_wait_over_an_outage_ends_not_acquired)
{
	lock_waits_over_an_outage("outage:lock", DLOCK_LOCK_PLAIN,
			"redisson_lock__channel:{outage:lock}");
}

Test(async_outage, a_fair_lock_wait_over_an_outage_ends_not_acquired)
{
	lock_waits_over_an_outage("outage:fair", DLOCK_LOCK_FAIR, NULL);
}

Test(async_outage, a_semaphore_wait_over_an_outage_ends_not_acquired)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_semaphore *s = NULL;
	dl_outcome o[WAITS] = { 0 };
	int64_t took;

	set_string("outage:sem", "0");
	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	dl_pass(dlock_semaphore_new(&s, c, "outage:sem", NULL));
	for (int i = 0; i < WAITS; i++)
		dl_pass(dlock_semaphore_acquire_async(NULL, s, 1, WAIT_MS, dl_note, &o[i]));
	took = ride_out(loop, o, rh_now_ms(), "redisson_sc:{outage:sem}", "1");
	assert_all(o, DLOCK_ENOTACQUIRED, "outage:sem");
	cr_assert_lt(took, WAIT_MS + 2000, "the waits of %d ms ended after %lld ms", WAIT_MS,
			(long long)took);
	dlock_semaphore_free(s);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_outage, a_latch_wait_over_an_outage_ends_with_the_count)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_countdown *d = NULL;
	dl_outcome o[WAITS] = { 0 };
	int64_t took;

	set_string("outage:latch", "1");
	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	dl_pass(dlock_countdown_new(&d, c, "outage:latch", NULL));
	for (int i = 0; i < WAITS; i++)
		dl_pass(dlock_countdown_await_async(NULL, d, WAIT_MS, dl_note, &o[i]));
	took = ride_out(loop, o, rh_now_ms(), "redisson_countdownlatch__channel__{outage:latch}",
			"1");
	assert_all(o, DLOCK_ETIMEDOUT, "the count was still 1");
	cr_assert_lt(took, WAIT_MS + 2000, "the waits of %d ms ended after %lld ms", WAIT_MS,
			(long long)took);
	dlock_countdown_free(d);
	dlock_client_free(c);
	dlock_loop_free(loop);
}
