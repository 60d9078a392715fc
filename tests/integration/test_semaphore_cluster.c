/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Semaphores on a Redis Cluster: the count, the taken permits and the
 * channel of one name share its slot ({name} hash tags), on whichever
 * primary serves it; a release wakes a waiter through the cluster's
 * (sharded, on Redis 7+) pub/sub; an expirable permit is renewed there.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

static rh_cluster *cl;

static void cluster_up(void)
{
	cl = rh_cluster_start(3, 0, NULL);
	cr_assert_not_null(cl, "could not start a cluster");
}

static void cluster_down(void)
{
	rh_cluster_free(cl);
	cl = NULL;
}

TestSuite(semaphore_cluster, .init = cluster_up, .fini = cluster_down, .timeout = 120);

static dlock_semaphore *sem_of(dlock_client *c, const char *name, dlock_semaphore_kind kind)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;

	o.kind = kind;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	return s;
}

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

Test(semaphore_cluster, semaphores_on_every_shard)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, 900);
	dlock_client *c2 = dl_client(rh_cluster_seed_uri(cl), 2000, 0);
	rh_server *seen[3];
	int shards = 0;

	for (int i = 0; shards < 3 && i < 1000; i++) {
		char name[32], key[64], id[DLOCK_PERMIT_ID_SIZE];
		rh_server *owner;
		int fresh = 1;

		snprintf(name, sizeof name, "sem-%d", i);
		owner = dl_slot_owner(cl, name);
		for (int k = 0; k < shards; k++)
			fresh = fresh && seen[k] != owner;
		if (!fresh)
			continue;
		seen[shards++] = owner;

		/* Plain: a release wakes a waiter of another client. */
		dlock_semaphore *s = sem_of(c, name, DLOCK_SEMAPHORE_PLAIN);
		waiter w = { .s = sem_of(c2, name, DLOCK_SEMAPHORE_PLAIN) };
		pthread_t t;
		dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
		dl_pass(dlock_semaphore_acquire(s, 1, 0));
		cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
		dl_sleep_ms(400);
		int64_t released = rh_now_ms();
		dl_pass(dlock_semaphore_release(s, 1));
		pthread_join(t, NULL);
		cr_assert_eq(w.rc, 0, "%s: %s", name, dlock_semaphore_errmsg(w.s));
		cr_assert_lt(w.got_at - released, 1000, "%s: woken %lld ms after the release", name,
				(long long)(w.got_at - released));
		dl_pass(dlock_semaphore_release(w.s, 1));
		int64_t n = -1;
		dl_pass(dlock_semaphore_available(&n, s));
		cr_assert_eq(n, 1, "%s: %lld available", name, (long long)n);
		dl_pass(dlock_semaphore_set_permits(s, 4));
		dl_pass(dlock_semaphore_add_permits(s, -1));
		dl_pass(dlock_semaphore_available(&n, s));
		cr_assert_eq(n, 3, "%s: %lld available", name, (long long)n);
		dlock_semaphore_free(w.s);
		dlock_semaphore_free(s);

		/* Expirable, renewed past its lease, on the same slot. */
		snprintf(name, sizeof name, "pes-%d", i);
		dlock_semaphore *x = sem_of(c, name, DLOCK_SEMAPHORE_EXPIRABLE);
		dl_pass(dlock_semaphore_try_set_permits(NULL, x, 1));
		dl_pass(dlock_semaphore_acquire_permit(id, x, 0, DLOCK_LEASE_WATCHDOG));
		snprintf(key, sizeof key, "{%s}:timeout", name);
		cr_assert_eq(rh_command_int(dl_slot_owner(cl, key), "ZCARD %s", key), 1);
		dl_sleep_ms(1500);
		cr_assert_eq(dlock_semaphore_check(x, id), 0, "%s: the renewed permit was lost",
				name);
		dl_pass(dlock_semaphore_release_permit(x, id));
		cr_assert_eq(rh_command_int(dl_slot_owner(cl, key), "ZCARD %s", key), 0);
		dl_pass(dlock_semaphore_available(&n, x));
		cr_assert_eq(n, 1, "%s: %lld available", name, (long long)n);
		dlock_semaphore_free(x);
	}
	cr_assert_eq(shards, 3);
	dlock_client_free(c2);
	dlock_client_free(c);
}
