/* SPDX-License-Identifier: BSD-3-Clause */
#include "interop.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <time.h>

static void *io_call_main(void *arg)
{
	io_call *c = arg;
	c->thread_id = dlock_thread_id();
	int rc = c->fn(c->arg);
	int64_t t = jp_now_ns();
	pthread_mutex_lock(&c->mu);
	c->rc = rc;
	c->t_end_ns = t;
	c->done = 1;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

void io_call_start(io_call *c, int (*fn)(void *), void *arg)
{
	*c = (io_call){ .fn = fn, .arg = arg };
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	cr_assert_eq(pthread_create(&c->thread, NULL, io_call_main, c), 0);
}

int io_call_poll(io_call *c, int64_t timeout_ms)
{
	int64_t deadline = jp_now_ns() + timeout_ms * 1000000;
	struct timespec ts = { .tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000 };
	pthread_mutex_lock(&c->mu);
	while (!c->done && pthread_cond_timedwait(&c->cv, &c->mu, &ts) == 0) {
	}
	int done = c->done;
	pthread_mutex_unlock(&c->mu);
	return done;
}

int io_call_join(io_call *c)
{
	if (!io_call_poll(c, 30000))
		cr_assert_fail("a dlock call did not return in 30 s");
	pthread_join(c->thread, NULL);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	return c->rc;
}

double io_wake(const java_peer *p, const char *what, int64_t from_ns, int64_t to_ns)
{
	double ms = (double)(to_ns - from_ns) / 1e6;
	fprintf(stderr, "interop %s: %.2f ms (Redisson %s)\n", what, ms, jp_version(p));
	cr_assert(ms >= 0 && ms <= IO_WAKE_MAX_MS,
			"%s: woke after %.1f ms; a pub/sub wake-up takes milliseconds, a missed one the "
			"whole %d ms lease",
			what, ms, IO_LONG_LEASE_MS);
	return ms;
}

void io_call_unlock(io_call *c, dlock_client *client, dlock_lock *l)
{
	char owner[128];
	cr_assert_eq(dlock_client_owner(owner, client, c->thread_id), 0);
	int rc = dlock_lock_release(l, owner);
	cr_assert_eq(rc, 0, "unlock as %s: %s", owner, dlock_lock_errmsg(l));
}
