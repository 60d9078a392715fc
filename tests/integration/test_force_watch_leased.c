/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watch_force_unlock for holds with a fixed lease (no watchdog): plain,
 * fenced, fair, read and write holds and an expirable semaphore's permit
 * taken for 20 s listen on their channel as watchdog holds do, and a
 * force unlock from another client is reported lost within a couple of
 * seconds, not when the lease ends. A message that is not a loss (a stray
 * PUBLISH, another holder's release) makes the holder check, and the
 * check extends nothing: the lease the caller asked for stays the lease.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define WATCHDOG_MS 30000
#define LEASE_MS 20000
/* A force unlock is reported within this (generous: a busy machine). */
#define HEARD_WITHIN_MS 2000

TestSuite(force_watch_leased, .init = dl_server_start, .fini = dl_server_stop, .timeout = 40);

enum kind { PLAIN, FENCED, FAIR, READ, WRITE };

static dlock_client *client_with(int watch)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.watchdog_timeout_ms = WATCHDOG_MS;
	o.watch_force_unlock = watch;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

static dlock_lock *lock_of(dlock_client *c, const char *name, enum kind kind)
{
	static const dlock_lock_kind kinds[] = { DLOCK_LOCK_PLAIN, DLOCK_LOCK_FENCED,
		DLOCK_LOCK_FAIR, DLOCK_LOCK_READ, DLOCK_LOCK_WRITE };
	dlock_lock *l = NULL;

	dl_pass(dlock_lock_new(&l, c, name, dl_kind(kinds[kind])));
	return l;
}

/* The channel a hold of `kind` listens on. */
static void channel_of(char *buf, size_t len, const char *name, enum kind kind)
{
	if (kind == READ || kind == WRITE)
		snprintf(buf, len, "redisson_rwlock:{%s}", name);
	else
		snprintf(buf, len, "redisson_lock__channel:{%s}", name);
}

/* The server shows `want` subscribers of channel within 2 s. */
/* The lost callback fired once within HEARD_WITHIN_MS of `since`, for a key gone. */
static void assert_heard(dl_lost *lost, int64_t since, const char *what)
{
	int fired = dl_lost_wait(lost, since + HEARD_WITHIN_MS + 4000);
	int64_t took;

	pthread_mutex_lock(&lost->mu);
	took = lost->at_ms - since;
	pthread_mutex_unlock(&lost->mu);
	cr_assert_eq(fired, 1, "%s: lost callback fired %d times in 6 s", what, fired);
	cr_assert_leq(took, HEARD_WITHIN_MS, "%s: reported lost %lld ms after the force unlock",
			what, (long long)took);
	cr_assert_eq(lost->reason, DLOCK_LOST_GONE, "%s: reason %d", what, lost->reason);
	cr_log_info("%s: lost %lld ms after the force unlock", what, (long long)took);
}

/* Force-unlock name through a plain handle of a client of its own (as
 * `dlock unlock --force` does: it cannot know the kind). */
static int64_t force_from_elsewhere(const char *name)
{
	dlock_client *c = client_with(0);
	dlock_lock *l = lock_of(c, name, PLAIN);
	int deleted = -1;
	int64_t at;

	dl_pass(dlock_lock_force_release(&deleted, l));
	at = rh_now_ms();
	cr_assert_eq(deleted, 1, "the force unlock of %s deleted nothing", name);
	dlock_lock_free(l);
	dlock_client_free(c);
	return at;
}

/*
 * A MONITOR connection: the commands the server runs from now on, in the
 * order it runs them. It tells when the holder's check of a message ran
 * (after the PUBLISH), without guessing how long that takes.
 */
static redisContext *monitor(void)
{
	redisContext *m = dl_raw_connect(rh_server_port(dl_srv), 2000);
	redisReply *r;

	cr_assert_not_null(m);
	r = redisCommand(m, "MONITOR");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "MONITOR refused");
	freeReplyObject(r);
	return m;
}

/* Read monitored commands until one containing every one of `words`
 * (ignoring case) comes, within 3 s; fails the test if none does. */
static void await_monitored(redisContext *m, const char *const *words, const char *what)
{
	int64_t deadline = rh_now_ms() + 3000;

	while (rh_now_ms() < deadline) {
		redisReply *r = dl_next_reply(m, (int)(deadline - rh_now_ms()));
		int all = r != NULL && r->type == REDIS_REPLY_STATUS;

		for (size_t i = 0; all && words[i] != NULL; i++)
			all = strcasestr(r->str, words[i]) != NULL;
		if (r != NULL)
			freeReplyObject(r);
		if (all)
			return;
		if (r == NULL)
			break;
	}
	cr_assert_fail("%s: not seen by the server within 3 s", what);
}

static int64_t pttl(const char *key)
{
	return rh_command_int(dl_srv, "PTTL %s", key);
}

/* ---- a force unlock is heard -------------------------------------------- */

static void leased_hold_hears_a_force_unlock(enum kind kind, const char *name, int await_sub)
{
	char channel[128];
	dl_lost lost;
	dlock_client *c = client_with(1);
	dlock_lock *l = lock_of(c, name, kind);
	int64_t forced_at, validity = 0;

	dl_lost_init(&lost);
	channel_of(channel, sizeof channel, name, kind);
	dl_pass(dlock_lock_set_lost_cb(l, dl_on_lost, &lost));
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, LEASE_MS));
	/* Without waiting for it, the force unlock may come before the
	 * subscription is active: the check it makes then finds it. */
	if (await_sub)
		dl_await_numsub(dl_srv, channel, 1, 2000);
	forced_at = force_from_elsewhere(name);
	assert_heard(&lost, forced_at, name);
	cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ELOST);
	cr_assert_eq(dlock_lock_validity_ms(&validity, l, NULL), DLOCK_ELOST);
	dl_await_numsub(dl_srv, channel, 0, 2000); /* a lost hold listens no more */
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ELOST, "%s", dlock_lock_errmsg(l));

	dlock_lock_free(l);
	dlock_client_free(c);
	dl_lost_destroy(&lost);
}

Test(force_watch_leased, plain_hold_hears_a_force_unlock)
{
	leased_hold_hears_a_force_unlock(PLAIN, "fwl:plain", 1);
}

Test(force_watch_leased, fenced_hold_hears_a_force_unlock)
{
	leased_hold_hears_a_force_unlock(FENCED, "fwl:fenced", 1);
}

Test(force_watch_leased, fair_hold_hears_a_force_unlock)
{
	leased_hold_hears_a_force_unlock(FAIR, "fwl:fair", 1);
}

Test(force_watch_leased, read_hold_hears_a_force_unlock)
{
	leased_hold_hears_a_force_unlock(READ, "fwl:read", 1);
}

Test(force_watch_leased, write_hold_hears_a_force_unlock)
{
	leased_hold_hears_a_force_unlock(WRITE, "fwl:write", 1);
}

/* Right after the acquisition, maybe before the hold's subscription is
 * active: the check made when it becomes active finds the key gone. */
Test(force_watch_leased, a_force_unlock_right_after_the_acquisition_is_heard)
{
	leased_hold_hears_a_force_unlock(PLAIN, "fwl:early", 0);
}

/* ---- a check extends nothing -------------------------------------------- */

/* A stray message on the hold's channel: the holder checks (the server
 * runs its script after the PUBLISH), and the key's PTTL has not gone up. */
static void a_message_extends_nothing(enum kind kind, const char *name)
{
	char channel[128], quoted[128];
	dl_lost lost;
	dlock_client *c = client_with(1);
	dlock_lock *l = lock_of(c, name, kind);
	redisContext *m;
	int64_t before, after;

	dl_lost_init(&lost);
	channel_of(channel, sizeof channel, name, kind);
	snprintf(quoted, sizeof quoted, "\"%s\"", name);
	dl_pass(dlock_lock_set_lost_cb(l, dl_on_lost, &lost));
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, LEASE_MS));
	dl_await_numsub(dl_srv, channel, 1, 2000);
	m = monitor();
	before = pttl(name);
	cr_assert(before > 0 && before <= LEASE_MS, "PTTL %lld after a %d ms lease",
			(long long)before, LEASE_MS);
	cr_assert_eq(rh_command_int(dl_srv, "PUBLISH %s 0", channel), 1);
	await_monitored(m, (const char *const[]){ "\"publish\"", channel, NULL }, "the PUBLISH");
	await_monitored(m, (const char *const[]){ "\"evalsha\"", quoted, NULL },
			"the holder's check after the message");
	after = pttl(name);
	cr_assert_leq(after, before, "%s: PTTL %lld after the check, %lld before: extended", name,
			(long long)after, (long long)before);
	cr_assert_eq(dl_lost_count(&lost), 0, "a stray message reported a loss");
	cr_assert_eq(dlock_lock_check(l, NULL), 0);
	dl_pass(dlock_lock_release(l, NULL));

	redisFree(m);
	dlock_lock_free(l);
	dlock_client_free(c);
	dl_lost_destroy(&lost);
}

Test(force_watch_leased, a_message_does_not_extend_a_plain_lease)
{
	a_message_extends_nothing(PLAIN, "fwl:x-plain");
}

Test(force_watch_leased, a_message_does_not_extend_a_fenced_lease)
{
	a_message_extends_nothing(FENCED, "fwl:x-fenced");
}

Test(force_watch_leased, a_message_does_not_extend_a_fair_lease)
{
	a_message_extends_nothing(FAIR, "fwl:x-fair");
}

Test(force_watch_leased, a_message_does_not_extend_a_read_lease)
{
	a_message_extends_nothing(READ, "fwl:x-read");
}

Test(force_watch_leased, a_message_does_not_extend_a_write_lease)
{
	a_message_extends_nothing(WRITE, "fwl:x-write");
}

/* Without the option a leased hold subscribes to nothing. */
Test(force_watch_leased, without_the_option_nothing_listens)
{
	dlock_client *c = client_with(0);
	dlock_lock *l = lock_of(c, "fwl:off", PLAIN);

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, LEASE_MS));
	dl_sleep_ms(200); /* time for a subscription that must not come */
	cr_assert_eq(dl_numsub(dl_srv, "redisson_lock__channel:{fwl:off}"), 0, "a leased hold subscribed");
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* A lease that ran out is not a loss: a message after its end reports
 * nothing (`run` ends such a job with 124, not 70). */
Test(force_watch_leased, a_lease_that_ran_out_is_not_reported_lost)
{
	dl_lost lost;
	dlock_client *c = client_with(1);
	dlock_lock *l = lock_of(c, "fwl:ran-out", PLAIN);
	int64_t deadline, validity = 1;

	dl_lost_init(&lost);
	dl_pass(dlock_lock_set_lost_cb(l, dl_on_lost, &lost));
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 1500));
	dl_await_numsub(dl_srv, "redisson_lock__channel:{fwl:ran-out}", 1, 2000);
	deadline = rh_now_ms() + 5000;
	while (rh_command_int(dl_srv, "EXISTS fwl:ran-out") == 1 && rh_now_ms() < deadline)
		dl_sleep_ms(20);
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS fwl:ran-out"), 0, "the lease never ended");
	dlock_lock_validity_ms(&validity, l, NULL);
	cr_assert_eq(validity, 0);
	rh_command_int(dl_srv, "PUBLISH redisson_lock__channel:{fwl:ran-out} 0");
	/* The message's check sees the lease over: it stops listening. */
	dl_await_numsub(dl_srv, "redisson_lock__channel:{fwl:ran-out}", 0, 2000);
	cr_assert_eq(dl_lost_wait(&lost, rh_now_ms() + 1000), 0, "a lease's end reported lost");

	dlock_lock_free(l);
	dlock_client_free(c);
	dl_lost_destroy(&lost);
}

/* Nothing comes on the channel: the hold stops listening by itself soon
 * after its lease ends (no subscription left behind by a lease let run out). */
Test(force_watch_leased, a_leased_hold_stops_listening_when_its_lease_ends)
{
	dl_lost lost;
	dlock_client *c = client_with(1);
	dlock_lock *l = lock_of(c, "fwl:ends", PLAIN);
	int64_t taken;

	dl_lost_init(&lost);
	dl_pass(dlock_lock_set_lost_cb(l, dl_on_lost, &lost));
	taken = rh_now_ms();
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 1500));
	dl_await_numsub(dl_srv, "redisson_lock__channel:{fwl:ends}", 1, 2000);
	while (dl_numsub(dl_srv, "redisson_lock__channel:{fwl:ends}") != 0 && rh_now_ms() < taken + 6000)
		dl_sleep_ms(20);
	cr_assert_eq(dl_numsub(dl_srv, "redisson_lock__channel:{fwl:ends}"), 0,
			"still listening 6 s after a 1.5 s lease was taken");
	cr_assert_geq(rh_now_ms() - taken, 1400, "stopped listening before the lease ended");
	cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ELOST, "the lease ran out");
	cr_assert_eq(dl_lost_count(&lost), 0, "a lease's end reported lost");

	dlock_lock_free(l);
	dlock_client_free(c);
	dl_lost_destroy(&lost);
}

/* ---- permits ------------------------------------------------------------- */

typedef struct holder {
	dlock_client *c;
	dlock_semaphore *s;
	char id[DLOCK_PERMIT_ID_SIZE];
} holder;

static void take_permit(holder *h, const char *name, int watch, dl_lost *lost)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;

	o.kind = DLOCK_SEMAPHORE_EXPIRABLE;
	h->c = client_with(watch);
	h->s = NULL;
	dl_pass(dlock_semaphore_new(&h->s, h->c, name, &o));
	if (lost != NULL)
		dl_pass(dlock_semaphore_set_lost_cb(h->s, dl_on_lost, lost));
	dl_pass(dlock_semaphore_try_set_permits(NULL, h->s, 2));
	dl_pass(dlock_semaphore_acquire_permit(h->id, h->s, 0, LEASE_MS));
}

static void holder_free(holder *h)
{
	dlock_semaphore_free(h->s);
	dlock_client_free(h->c);
}

static int64_t force_release_elsewhere(const char *name)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_client *c = client_with(0);
	dlock_semaphore *s = NULL;
	int64_t freed = -1, at;

	o.kind = DLOCK_SEMAPHORE_EXPIRABLE;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	dl_pass(dlock_semaphore_force_release(&freed, s));
	at = rh_now_ms();
	cr_assert_eq(freed, 1, "freed %lld permits, want 1", (long long)freed);
	dlock_semaphore_free(s);
	dlock_client_free(c);
	return at;
}

static void leased_permit_hears_a_force_release(const char *name, int await_sub)
{
	char channel[128];
	dl_lost lost;
	holder h;
	int64_t forced_at;

	dl_lost_init(&lost);
	snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
	take_permit(&h, name, 1, &lost);
	if (await_sub)
		dl_await_numsub(dl_srv, channel, 1, 2000);
	forced_at = force_release_elsewhere(name);
	assert_heard(&lost, forced_at, "a leased permit");
	cr_assert_eq(dlock_semaphore_check(h.s, h.id), DLOCK_ELOST);
	dl_await_numsub(dl_srv, channel, 0, 2000);

	holder_free(&h);
	dl_lost_destroy(&lost);
}

Test(force_watch_leased, a_leased_permit_hears_a_force_release)
{
	leased_permit_hears_a_force_release("fwl:permit", 1);
}

/* Maybe before the subscription is active: its first check finds it. */
Test(force_watch_leased, a_force_release_right_after_the_acquisition_is_heard)
{
	leased_permit_hears_a_force_release("fwl:p-early", 0);
}

/* A leased permit let run out stops listening by itself soon after its
 * lease ends, with nothing on the channel. */
Test(force_watch_leased, a_leased_permit_stops_listening_when_its_lease_ends)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dl_lost lost;
	holder h;
	int64_t taken;

	dl_lost_init(&lost);
	o.kind = DLOCK_SEMAPHORE_EXPIRABLE;
	h.c = client_with(1);
	h.s = NULL;
	dl_pass(dlock_semaphore_new(&h.s, h.c, "fwl:p-ends", &o));
	dl_pass(dlock_semaphore_set_lost_cb(h.s, dl_on_lost, &lost));
	dl_pass(dlock_semaphore_try_set_permits(NULL, h.s, 2));
	taken = rh_now_ms();
	dl_pass(dlock_semaphore_acquire_permit(h.id, h.s, 0, 1500));
	dl_await_numsub(dl_srv, "redisson_sc:{fwl:p-ends}", 1, 2000);
	while (dl_numsub(dl_srv, "redisson_sc:{fwl:p-ends}") != 0 && rh_now_ms() < taken + 6000)
		dl_sleep_ms(20);
	cr_assert_eq(dl_numsub(dl_srv, "redisson_sc:{fwl:p-ends}"), 0,
			"still listening 6 s after a 1.5 s lease was taken");
	cr_assert_geq(rh_now_ms() - taken, 1400, "stopped listening before the lease ended");
	cr_assert_eq(dlock_semaphore_check(h.s, h.id), DLOCK_ELOST, "the lease ran out");
	cr_assert_eq(dl_lost_count(&lost), 0, "a lease's end reported lost");

	holder_free(&h);
	dl_lost_destroy(&lost);
}

/* The score of the permit (its lease's end, epoch ms) in the timeouts set. */
static long long score_of(const char *timeouts, const char *id)
{
	unsigned char raw[16];
	redisReply *r;
	long long v = -1;
	int i;

	for (i = 0; i < 16; i++) {
		unsigned int b;

		cr_assert_eq(sscanf(id + 2 * i, "%2x", &b), 1);
		raw[i] = (unsigned char)b;
	}
	r = rh_command(dl_srv, "ZSCORE %s %b", timeouts, raw, (size_t)16);
	cr_assert(r != NULL && r->type == REDIS_REPLY_STRING, "no score for permit %s", id);
	v = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return v;
}

/* Another holder's release publishes on the channel, and so does a stray
 * PUBLISH: the leased holder checks, and its permit's lease end has not
 * moved. */
Test(force_watch_leased, a_message_does_not_extend_a_leased_permit)
{
	dl_lost lost;
	holder h, other;
	redisContext *m;
	long long before, after;

	dl_lost_init(&lost);
	take_permit(&h, "fwl:p-ext", 1, &lost);
	dl_await_numsub(dl_srv, "redisson_sc:{fwl:p-ext}", 1, 2000);
	take_permit(&other, "fwl:p-ext", 0, NULL);
	before = score_of("{fwl:p-ext}:timeout", h.id);
	dl_pass(dlock_semaphore_release_permit(other.s, other.id));
	m = monitor();
	cr_assert_eq(rh_command_int(dl_srv, "PUBLISH redisson_sc:{fwl:p-ext} 1"), 1);
	await_monitored(m, (const char *const[]){ "\"publish\"", "redisson_sc:{fwl:p-ext}", NULL },
			"the PUBLISH");
	await_monitored(m, (const char *const[]){ "\"evalsha\"", "\"{fwl:p-ext}:timeout\"", NULL },
			"the holder's check after the message");
	after = score_of("{fwl:p-ext}:timeout", h.id);
	cr_assert_eq(after, before, "the lease end moved from %lld to %lld", before, after);
	cr_assert_eq(dl_lost_count(&lost), 0, "a message reported a loss");
	dl_pass(dlock_semaphore_check(h.s, h.id));
	dl_pass(dlock_semaphore_release_permit(h.s, h.id));
	dl_await_numsub(dl_srv, "redisson_sc:{fwl:p-ext}", 0, 2000);

	redisFree(m);
	holder_free(&other);
	holder_free(&h);
	dl_lost_destroy(&lost);
}
