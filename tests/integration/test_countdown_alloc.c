/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The countdown latch under allocation failures (the torture runner of
 * tests/support, as test_alloc_failures.c): each allocation the library
 * makes on the calling thread fails in turn. Every call returns 0 or
 * DLOCK_ENOMEM, never anything else; after 0 it did its job, after
 * DLOCK_ENOMEM the latch is as it was or as a completed command left it;
 * nothing leaks (allocations, descriptors) once the objects are freed.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

static rh_server *srv;

static void up(void)
{
	dl_torture_install();
	srv = rh_server_start(NULL);
	cr_assert_not_null(srv, "redis-server did not start");
	/* The harness's cached connection, opened before any baseline. */
	cr_assert_eq(rh_command_int(srv, "EXISTS nothing"), 0);
}

static void down(void)
{
	rh_server_free(srv);
}

TestSuite(countdown_alloc, .init = up, .fini = down, .timeout = 180);

/* The key's count, or -1 when there is none. */
static long long raw_count(const char *name)
{
	redisReply *r = rh_command(srv, "GET %s", name);
	long long v = -1;

	cr_assert_not_null(r);
	if (r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return v;
}

typedef struct ctx {
	const char *name;
	dlock_client *c;
	dlock_countdown *l;
	pthread_t th;
	int64_t t0, t1;
} ctx;

static void open_setup(void *arg)
{
	ctx *x = arg;

	x->c = dl_client(rh_server_uri(srv), 1000, 0);
	x->l = NULL;
}

static void teardown(void *arg)
{
	ctx *x = arg;

	dlock_countdown_free(x->l);
	dlock_client_free(x->c);
	x->l = NULL;
	x->c = NULL;
}

static const char *errmsg(void *arg)
{
	ctx *x = arg;

	return x->l != NULL ? dlock_countdown_errmsg(x->l) : dlock_errmsg_last();
}

/* ---- the handle ------------------------------------------------------------ */

static int new_run(void *arg)
{
	ctx *x = arg;

	return dlock_countdown_new(&x->l, x->c, x->name, NULL);
}

static void new_check(void *arg, int rc, long k)
{
	ctx *x = arg;

	if (rc < 0)
		cr_assert_null(x->l, "k=%ld: *out set on failure", k);
	else
		cr_assert_str_eq(dlock_countdown_name(x->l), x->name);
}

Test(countdown_alloc, new_and_free)
{
	ctx x = { .name = "af:latch" };
	dl_torture t = { "countdown_new", open_setup, new_run, new_check, teardown, errmsg };

	dl_torture_run(&t, &x);
}

/* ---- set, count down, get ---------------------------------------------------- */

static void latch_setup(void *arg)
{
	ctx *x = arg;

	open_setup(x);
	dl_pass(dlock_countdown_new(&x->l, x->c, x->name, NULL));
	freeReplyObject(rh_command(srv, "DEL %s", x->name));
}

/* Set 2, count down once, read 1: each step only after the one before it worked. */
static int steps_run(void *arg)
{
	ctx *x = arg;
	int64_t n = -1;
	int set = 0, rc;

	if ((rc = dlock_countdown_try_set_count(&set, x->l, 2)) < 0 ||
			(rc = dlock_countdown_count_down(NULL, x->l)) < 0 ||
			(rc = dlock_countdown_count(&n, x->l)) < 0)
		return rc;
	return set == 1 && n == 1 ? 0 : DLOCK_EPROTO;
}

static void steps_check(void *arg, int rc, long k)
{
	ctx *x = arg;
	long long n = raw_count(x->name);

	/* Out of memory before, between or after the commands: never a count
	 * the commands that ran could not have left. */
	if (rc == 0)
		cr_assert_eq(n, 1, "k=%ld: the count is %lld after set 2 and one down", k, n);
	else
		cr_assert(n == -1 || n == 2 || n == 1, "k=%ld: the count is %lld", k, n);
}

Test(countdown_alloc, set_count_down_and_get)
{
	ctx x = { .name = "af:steps" };
	dl_torture t = { "countdown set/down/get", latch_setup, steps_run, steps_check, teardown,
		errmsg };

	dl_torture_run(&t, &x);
}

/* ---- an await that subscribes and is woken ------------------------------------ */

/* Another process's count down to zero, 300 ms into the wait (raw hiredis). */
static void *foreign_down(void *arg)
{
	ctx *x = arg;
	char channel[128];
	redisContext *c;
	redisReply *r;
	intptr_t ok;

	dl_sleep_ms(300);
	snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", x->name);
	c = redisConnect("127.0.0.1", rh_server_port(srv));
	if (c == NULL || c->err) {
		if (c)
			redisFree(c);
		return NULL;
	}
	r = redisCommand(c, "DEL %s", x->name);
	ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
	freeReplyObject(r);
	r = redisCommand(c, "PUBLISH %s 0", channel);
	ok &= r != NULL && r->type == REDIS_REPLY_INTEGER;
	freeReplyObject(r);
	redisFree(c);
	return (void *)ok;
}

static void await_setup(void *arg)
{
	ctx *x = arg;

	latch_setup(x);
	freeReplyObject(rh_command(srv, "SET %s 1", x->name));
	cr_assert_eq(pthread_create(&x->th, NULL, foreign_down, x), 0);
	x->t0 = rh_now_ms();
}

static int await_run(void *arg)
{
	ctx *x = arg;
	int rc = dlock_countdown_await(x->l, 5000);

	x->t1 = rh_now_ms();
	return rc;
}

static void await_check(void *arg, int rc, long k)
{
	ctx *x = arg;
	void *ok = NULL;

	pthread_join(x->th, &ok);
	cr_assert(ok != NULL, "the foreign count down failed");
	if (rc == 0)
		cr_assert(x->t1 - x->t0 < 4000, "k=%ld: woken after %lld ms: the message was missed",
				k, (long long)(x->t1 - x->t0));
}

Test(countdown_alloc, await_subscribes_and_is_woken)
{
	ctx x = { .name = "af:await" };
	dl_torture t = { "countdown_await (pub/sub)", await_setup, await_run, await_check,
		teardown, errmsg };

	dl_torture_run(&t, &x);
}

/* ---- waiters: an op of one read-only script ------------------------------------ */

static int64_t waiters_seen;

static int waiters_run(void *arg)
{
	waiters_seen = -1;
	return dlock_countdown_subscribers(&waiters_seen, ((ctx *)arg)->l);
}

static void waiters_check(void *arg, int rc, long k)
{
	(void)arg;
	if (rc == 0)
		cr_assert_eq(waiters_seen, 0, "k=%ld: %lld waiters, nobody listens", k,
				(long long)waiters_seen);
	else
		cr_assert_eq(waiters_seen, 0, "k=%ld: *waiters not 0 on failure", k);
}

Test(countdown_alloc, waiters)
{
	ctx x = { .name = "af:waiters" };
	dl_torture t = { "countdown waiters", latch_setup, waiters_run, waiters_check, teardown,
		errmsg };

	dl_torture_run(&t, &x);
}
