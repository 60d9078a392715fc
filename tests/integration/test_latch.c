/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A used unlock latch (redisson_unlock_latch:{name}:<request-id>) is never
 * left behind: its DEL is sent even when every pooled connection is busy at
 * the moment of the unlock, and even when the client is closed right after.
 *
 * Reaches inside (tests/CMakeLists.txt lists it): the busy pool is made
 * deterministic by borrowing the pool's only connection.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <dlock.h>

#include "core/drive/client.h"
#include "core/base/time.h"
#include "redis_harness.h"
#include "support.h"

TestSuite(latch, .init = dl_server_start, .fini = dl_server_stop);

/* How long a deleted-by-design key may stay: the DEL's short ride-along delay, on a busy machine. */
#define GONE_WITHIN_MS 1000

static dlock_client *pool_of(int size)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.pool_size = size;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

/* The keys left under the latch prefix, after waiting up to GONE_WITHIN_MS for them to go. */
static int64_t latches_left(int64_t *waited_ms)
{
	int64_t t0 = rh_now_ms(), n;
	for (;;) {
		redisReply *r = rh_command(dl_srv, "KEYS redisson_unlock_latch:*");
		cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
		n = (int64_t)r->elements;
		freeReplyObject(r);
		if (n == 0 || rh_now_ms() - t0 >= GONE_WITHIN_MS)
			break;
		dl_sleep_ms(10);
	}
	*waited_ms = rh_now_ms() - t0;
	return n;
}

Test(latch, a_delete_asked_while_the_only_connection_is_busy_still_runs, .timeout = 20)
{
	dlock_client *c = pool_of(1);
	static const char key[] = "redisson_unlock_latch:{busy}:00000000000000000000000000000001";
	dlock__conn *busy = NULL;
	int64_t waited;

	cr_assert_eq(rh_command_int(dl_srv, "EXISTS %s", key), 0);
	redisReply *set = rh_command(dl_srv, "SET %s 1 PX 20000", key);
	cr_assert(set != NULL && set->type == REDIS_REPLY_STATUS);
	freeReplyObject(set);

	/* Another thread's command holds the pool's only connection when the
	 * unlock that used the latch asks for its deletion. */
	dl_pass(dlock__client_conn_get(c, &busy, dlock__deadline_in(5000)));
	dlock__client_forget(c, key, strlen(key));
	dlock__client_conn_put(c, busy);

	int64_t left = latches_left(&waited);
	cr_assert_eq(left, 0, "the latch is still there %lld ms after its connection came back (PTTL %lld ms)",
			(long long)waited, (long long)rh_command_int(dl_srv, "PTTL %s", key));
	dlock_client_close(c);
}

#define THREADS 4
#define ROUNDS 200

typedef struct worker {
	dlock_client *c;
	int id;
	dl_failures *fail;
} worker;

/* Lock and unlock names of its own: every unlock writes a latch. */
static void *churn(void *arg)
{
	worker *w = arg;
	char name[32];

	for (int i = 0; i < ROUNDS; i++) {
		snprintf(name, sizeof name, "churn:%d:%d", w->id, i % 8);
		dlock_lock *l = NULL;
		int rc = dlock_lock_new(&l, w->c, name, NULL);
		if (rc == 0)
			rc = dlock_lock_lock(l, DLOCK_LEASE_WATCHDOG);
		if (rc == 0)
			rc = dlock_lock_unlock(l);
		if (rc != 0)
			dl_failures_record(w->fail, "%s round %d: %s (%s)", name, i, dlock_strerror(rc),
					l ? dlock_lock_errmsg(l) : dlock_errmsg_last());
		dlock_lock_free(l);
		if (rc != 0)
			break;
	}
	return NULL;
}

Test(latch, threads_sharing_one_connection_leave_no_latch, .timeout = 60)
{
	dlock_client *c = pool_of(1);
	pthread_t th[THREADS];
	worker w[THREADS];
	dl_failures fail;
	int64_t waited;

	dl_failures_init(&fail);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (worker){ c, i, &fail };
		cr_assert_eq(pthread_create(&th[i], NULL, churn, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	dl_failures_assert_none(&fail);

	int64_t left = latches_left(&waited);
	cr_assert_eq(left, 0, "%lld of %d unlock latches left %lld ms after the last unlock",
			(long long)left, THREADS * ROUNDS, (long long)waited);
	dlock_client_close(c);
}

Test(latch, a_client_closed_right_after_an_unlock_leaves_no_latch, .timeout = 20)
{
	dlock_client *c = pool_of(2);
	dlock_lock *l = dl_lock(c, "closing");
	int64_t waited;

	dl_pass(dlock_lock_lock(l, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_lock_unlock(l));
	dlock_lock_free(l);
	dl_pass(dlock_client_close(c));

	int64_t left = latches_left(&waited);
	cr_assert_eq(left, 0, "%lld unlock latch left %lld ms after the client closed",
			(long long)left, (long long)waited);
}
