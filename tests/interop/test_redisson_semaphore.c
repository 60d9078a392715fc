/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RSemaphore and RPermitExpirableSemaphore against the real Redisson (Java):
 * one count shared by both languages, a release on either side wakes a
 * waiter on the other through redisson_sc:{name}, and an expirable permit
 * taken by dlock is one Redisson sees by its id and gets back after its
 * lease (and the reverse).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "interop.h"
#include "redis_harness.h"
#include "support.h"

static java_peer *peer;
static dlock_client *cli;

static void setup(void)
{
	dl_server_start();
	peer = jp_start(rh_server_uri(dl_srv), 30000);
	cli = dl_client(rh_server_uri(dl_srv), 5000, 30000);
}

static void teardown(void)
{
	jp_stop(peer);
	dlock_client_free(cli);
	dl_server_stop();
}

TestSuite(redisson_semaphore, .init = setup, .fini = teardown, .timeout = 180);

static dlock_semaphore *sem_on(dlock_client *c, const char *name, dlock_semaphore_kind kind)
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

static int take_one(void *arg)
{
	return dlock_semaphore_acquire(arg, 1, 15000);
}

Test(redisson_semaphore, a_java_release_wakes_a_dlock_waiter)
{
	dlock_semaphore *s = sem_on(cli, "sem-j2c", DLOCK_SEMAPHORE_PLAIN);
	jp_reply r;
	io_call w;

	cr_assert_str_eq(jp_ok(peer, &r, "w1", "sem-set sem-j2c 1"), "true");
	cr_assert_eq(available(s), 1, "dlock does not read Redisson's count");
	jp_ok(peer, &r, "w1", "sem-acquire sem-j2c 1");
	cr_assert_eq(dlock_semaphore_acquire(s, 1, 0), DLOCK_ENOTACQUIRED,
			"dlock took a permit Redisson holds");
	io_call_start(&w, take_one, s);
	dl_sleep_ms(IO_SETTLE_MS);
	cr_assert_eq(io_call_poll(&w, 0), 0, "the dlock waiter did not wait");
	jp_ok(peer, &r, "w1", "sem-release sem-j2c 1");
	cr_assert_eq(io_call_join(&w), 0, "%s", dlock_semaphore_errmsg(s));
	io_wake(peer, "RSemaphore release wake-up, Redisson -> dlock", r.t_start_ns, w.t_end_ns);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "sem-avail sem-j2c"), "0");
	dl_pass(dlock_semaphore_release(s, 1));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "sem-avail sem-j2c"), "1");
	dlock_semaphore_free(s);
}

Test(redisson_semaphore, a_dlock_release_wakes_a_java_waiter)
{
	dlock_semaphore *s = sem_on(cli, "sem-c2j", DLOCK_SEMAPHORE_PLAIN);
	jp_reply r;
	int set = 0;

	dl_pass(dlock_semaphore_try_set_permits(&set, s, 1));
	cr_assert_eq(set, 1);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "sem-set sem-c2j 5"), "false",
			"Redisson set a count dlock had set");
	dl_pass(dlock_semaphore_acquire(s, 1, 0));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "sem-try sem-c2j 1 0"), "false",
			"Redisson took the permit dlock holds");
	long seq = jp_send(peer, "w1", "sem-try sem-c2j 1 15000");
	dl_sleep_ms(IO_SETTLE_MS);
	cr_assert_eq(jp_poll(peer, seq, 0, &r), 0, "the Redisson waiter did not wait");
	int64_t released = jp_now_ns();
	dl_pass(dlock_semaphore_release(s, 1));
	jp_wait(peer, seq, &r);
	cr_assert(r.ok && strcmp(r.value, "true") == 0, "Redisson's tryAcquire: %s", r.value);
	io_wake(peer, "RSemaphore release wake-up, dlock -> Redisson", released, r.t_end_ns);
	cr_assert_eq(available(s), 0);
	jp_ok(peer, &r, "w1", "sem-release sem-c2j 1");
	cr_assert_eq(available(s), 1);
	dlock_semaphore_free(s);
}

Test(redisson_semaphore, a_dlock_permit_is_seen_by_java_and_comes_back_after_its_lease)
{
	dlock_semaphore *s = sem_on(cli, "pes-lease", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];
	jp_reply r;

	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-set pes-lease 1"), "true");
	int64_t taken = jp_now_ns();
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, 1500));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-avail pes-lease"), "0");
	/* Redisson finds the permit by the id dlock reports. */
	int64_t left = strtoll(jp_ok(peer, &r, "w1", "pes-lease pes-lease %s", id), NULL, 10);
	cr_assert(left > 0 && left <= 1500, "Redisson sees %" PRId64 " ms left on dlock's permit", left);
	/* Redisson waits for it and gets it when the lease ends (its waiter
	 * sleeps until the earliest lease end dlock's data shows). */
	jp_ok(peer, &r, "w1", "pes-try pes-lease 10000 60000");
	cr_assert_str_neq(r.value, "null", "Redisson did not get the permit after its lease");
	int64_t after_ms = (r.t_end_ns - taken) / 1000000;
	cr_assert(after_ms >= 1300 && after_ms < 4000,
			"Redisson got the permit %" PRId64 " ms after dlock took it (lease 1500)", after_ms);
	char java_id[DLOCK_PERMIT_ID_SIZE];
	snprintf(java_id, sizeof(java_id), "%.32s", r.value);
	cr_assert_eq(dlock_semaphore_release_permit(s, id), DLOCK_ELOST,
			"dlock's expired permit was not reported lost");
	/* dlock gives back Redisson's permit by its id. */
	dl_pass(dlock_semaphore_release_permit(s, java_id));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-avail pes-lease"), "1");
	dlock_semaphore_free(s);
}

Test(redisson_semaphore, a_renewed_dlock_permit_stays_taken_for_java)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 5000, 900);
	dlock_semaphore *s = sem_on(c, "pes-renew", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];
	jp_reply r;

	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-set pes-renew 1"), "true");
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(2500);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-try pes-renew 0 1000"), "null",
			"Redisson took a permit dlock renews");
	int64_t left = strtoll(jp_ok(peer, &r, "w1", "pes-lease pes-renew %s", id), NULL, 10);
	/* Redisson reads the lease against the time its call began; a renewal
	 * that lands while the call is on its way moves the end 900 ms past a
	 * later moment. So: at most 900 ms plus the call's own duration. */
	int64_t call_ms = (r.t_end_ns - r.t_start_ns) / 1000000 + 1;
	cr_assert(left > 0 && left <= 900 + call_ms, "%" PRId64 " ms left (the call took %" PRId64
			" ms)", left, call_ms);
	dl_pass(dlock_semaphore_release_permit(s, id));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-tryrelease pes-renew %s", id), "false");
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-avail pes-renew"), "1");
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

Test(redisson_semaphore, a_java_permit_release_wakes_a_dlock_waiter)
{
	dlock_semaphore *s = sem_on(cli, "pes-j2c", DLOCK_SEMAPHORE_EXPIRABLE);
	char id[DLOCK_PERMIT_ID_SIZE];
	jp_reply r;

	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-set pes-j2c 1"), "true");
	snprintf(id, sizeof(id), "%.32s", jp_ok(peer, &r, "w1", "pes-acquire pes-j2c 60000"));
	cr_assert_eq(strlen(id), 32, "Redisson's permit id: %s", id);
	cr_assert_eq(available(s), 0);
	char mine[DLOCK_PERMIT_ID_SIZE];
	cr_assert_eq(dlock_semaphore_acquire_permit(mine, s, 0, 5000), DLOCK_ENOTACQUIRED);
	/* Redisson releases its permit: dlock's waiter wakes on the message,
	 * long before the permit's 60 s lease. */
	int64_t t0 = jp_now_ns();
	long seq = jp_send(peer, "w1", "pes-release pes-j2c %s", id);
	dl_pass(dlock_semaphore_acquire_permit(mine, s, 10000, 5000));
	int64_t t1 = jp_now_ns();
	jp_wait(peer, seq, &r);
	cr_assert(r.ok, "%s", r.value);
	io_wake(peer, "RPermitExpirableSemaphore release, Redisson -> dlock", t0, t1);
	dl_pass(dlock_semaphore_release_permit(s, mine));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-avail pes-j2c"), "1");
	dlock_semaphore_free(s);
}
