/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Semaphores through a Sentinel-managed primary (redis+sentinel://): the
 * client finds the primary by asking the sentinel, and a release wakes a
 * waiter there; an expirable permit is renewed there.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "redis_harness.h"
#include "support.h"

#define MASTER "semm"

static rh_server *primary, *sentinel;
static char uri[128];

static void up(void)
{
	char monitor[96];

	cr_assert_not_null(primary = rh_server_start(NULL));
	snprintf(monitor, sizeof monitor, "sentinel monitor " MASTER " 127.0.0.1 %d 1",
			rh_server_port(primary));
	const char *conf[] = { monitor, NULL };
	cr_assert_not_null(sentinel = rh_sentinel_start(NULL, conf));
	snprintf(uri, sizeof uri, "redis+sentinel://127.0.0.1:%d/" MASTER, rh_server_port(sentinel));
}

static void down(void)
{
	rh_server_free(sentinel);
	rh_server_free(primary);
}

TestSuite(semaphore_sentinel, .init = up, .fini = down, .timeout = 60);

typedef struct waiter {
	dlock_semaphore *s;
	int rc;
	int64_t got_at;
} waiter;

static void *wait_thread(void *arg)
{
	waiter *w = arg;

	w->rc = dlock_semaphore_acquire(w->s, 1, 15000);
	w->got_at = rh_now_ms();
	return NULL;
}

static dlock_semaphore *sem_of(dlock_client *c, const char *name, dlock_semaphore_kind kind)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;

	o.kind = kind;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	return s;
}

Test(semaphore_sentinel, a_release_wakes_a_waiter_and_a_permit_is_renewed)
{
	dlock_client *c = dl_client(uri, 2000, 600);
	dlock_client *c2 = dl_client(uri, 2000, 0);
	dlock_semaphore *s = sem_of(c, "sem-sentinel", DLOCK_SEMAPHORE_PLAIN);
	dlock_semaphore *x = sem_of(c, "pes-sentinel", DLOCK_SEMAPHORE_EXPIRABLE);
	waiter w = { .s = sem_of(c2, "sem-sentinel", DLOCK_SEMAPHORE_PLAIN) };
	char id[DLOCK_PERMIT_ID_SIZE];
	pthread_t t;

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	cr_assert_eq(rh_command_int(primary, "EXISTS sem-sentinel"), 1, "not on the primary");
	dl_pass(dlock_semaphore_acquire(s, 1, 0));
	cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
	dl_sleep_ms(400);
	int64_t released = rh_now_ms();
	dl_pass(dlock_semaphore_release(s, 1));
	pthread_join(t, NULL);
	cr_assert_eq(w.rc, 0, "%s", dlock_semaphore_errmsg(w.s));
	cr_assert_lt(w.got_at - released, 1000, "woken %lld ms after the release",
			(long long)(w.got_at - released));

	dl_pass(dlock_semaphore_try_set_permits(NULL, x, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, x, 0, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(1500);
	cr_assert_eq(dlock_semaphore_permit_check(x, id), 0, "the renewed permit was lost");
	cr_assert_eq(rh_command_int(primary, "ZCARD {pes-sentinel}:timeout"), 1);
	dl_pass(dlock_semaphore_release_permit(x, id));
	cr_assert_eq(rh_command_int(primary, "ZCARD {pes-sentinel}:timeout"), 0);

	dlock_semaphore_free(w.s);
	dlock_semaphore_free(x);
	dlock_semaphore_free(s);
	dlock_client_free(c2);
	dlock_client_free(c);
}
