/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every public versioned struct - the client, lock and RedLock options, the
 * member status a MultiLock or RedLock fills, the allocator - refuses
 * version 0 and a version newer than this library knows with DLOCK_EINVAL
 * and one message shape: "<what>: unknown version N (this library knows
 * 1..M)". And the lock options' own checks: kind, fair_wait_ms. No server:
 * the client connects lazily and nothing here talks to it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <dlock.h>

#include "support.h"

/* A client that never connects: port 1, lazily. */
static dlock_client *idle_client(void)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	o.lazy_connect = 1;
	dl_pass(dlock_client_new(&c, "redis://127.0.0.1:1", &o));
	return c;
}

/* rc is DLOCK_EINVAL and the last message starts "<what>: unknown version N (... 1..M)". */
static void assert_refused(int rc, const char *what, unsigned int version, unsigned int current)
{
	char want[160];

	snprintf(want, sizeof want, "%s: unknown version %u (this library knows 1..%u)", what,
			version, current);
	cr_assert_eq(rc, DLOCK_EINVAL, "%s version %u: got %d (%s), not DLOCK_EINVAL", what,
			version, rc, dlock_strerror(rc));
	cr_assert_eq(strncmp(dlock_errmsg_last(), want, strlen(want)), 0,
			"%s version %u: the message is \"%s\", not \"%s...\"", what, version,
			dlock_errmsg_last(), want);
}

Test(versions, client_options_refuse_0_and_newer)
{
	const unsigned int cur = DLOCK_CLIENT_OPTIONS_VERSION;
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	assert_refused(dlock_client_options_init(&o, 0), "client options", 0, cur);
	assert_refused(dlock_client_options_init(&o, cur + 1), "client options", cur + 1, cur);
	o.version = 0;
	assert_refused(dlock_client_new(&c, "redis://127.0.0.1:1", &o), "client options", 0, cur);
	o.version = cur + 1;
	assert_refused(dlock_client_new(&c, "redis://127.0.0.1:1", &o), "client options", cur + 1,
			cur);
	cr_assert_null(c);
}

Test(versions, lock_options_refuse_0_and_newer)
{
	const unsigned int cur = DLOCK_LOCK_OPTIONS_VERSION;
	dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
	dlock_client *c = idle_client();
	dlock_lock *l = NULL;

	assert_refused(dlock_lock_options_init(&o, 0), "lock options", 0, cur);
	assert_refused(dlock_lock_options_init(&o, cur + 1), "lock options", cur + 1, cur);
	o.version = 0;
	assert_refused(dlock_lock_new(&l, c, "v", &o), "lock options", 0, cur);
	o.version = cur + 1;
	assert_refused(dlock_lock_new(&l, c, "v", &o), "lock options", cur + 1, cur);
	cr_assert_null(l);
	dlock_client_free(c);
}

Test(versions, redlock_options_refuse_0_and_newer)
{
	const unsigned int cur = DLOCK_REDLOCK_OPTIONS_VERSION;
	dlock_redlock_options o = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_client *c = idle_client();
	dlock_lock *l = dl_lock(c, "v");
	dlock_redlock *r = NULL;

	assert_refused(dlock_redlock_options_init(&o, 0), "redlock options", 0, cur);
	assert_refused(dlock_redlock_options_init(&o, cur + 1), "redlock options", cur + 1, cur);
	o.version = cur + 1;
	assert_refused(dlock_redlock_new(&r, &l, 1, &o), "redlock options", cur + 1, cur);
	cr_assert_null(r);
	dlock_lock_free(l);
	dlock_client_free(c);
}

Test(versions, multilock_options_refuse_0_and_newer)
{
	const unsigned int cur = DLOCK_MULTILOCK_OPTIONS_VERSION;
	dlock_multilock_options o = DLOCK_MULTILOCK_OPTIONS_INIT;
	dlock_client *c = idle_client();
	dlock_lock *l = dl_lock(c, "v");
	dlock_multilock *m = NULL;

	cr_assert_eq(o.version, cur);
	dl_pass(dlock_multilock_options_init(&o, cur));
	cr_assert_eq(o.version, cur);
	assert_refused(dlock_multilock_options_init(&o, 0), "multilock options", 0, cur);
	assert_refused(dlock_multilock_options_init(&o, cur + 1), "multilock options", cur + 1, cur);
	dl_pass(dlock_multilock_new(&m, &l, 1, &o));
	dlock_multilock_free(m);
	m = NULL;
	o.version = cur + 1;
	assert_refused(dlock_multilock_new(&m, &l, 1, &o), "multilock options", cur + 1, cur);
	cr_assert_null(m);
	o.version = 0;
	assert_refused(dlock_multilock_new(&m, &l, 1, &o), "multilock options", 0, cur);
	cr_assert_null(m);
	dlock_lock_free(l);
	dlock_client_free(c);
}

Test(versions, member_status_refuses_0_and_newer)
{
	const unsigned int cur = DLOCK_MEMBER_STATUS_VERSION;
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	dlock_client *c = idle_client();
	dlock_lock *l = dl_lock(c, "v");
	dlock_multilock *m = NULL;
	dlock_redlock *r = NULL;

	dl_pass(dlock_multilock_new(&m, &l, 1, NULL));
	dl_pass(dlock_redlock_new(&r, &l, 1, NULL));
	/* Before any acquisition: the defaults, with the member's node. */
	dl_pass(dlock_multilock_member_status(&st, m, 0));
	cr_assert_str_eq(st.node, dlock_client_node(c));
	cr_assert_eq(st.vote, DLOCK_VOTE_NONE);
	st.version = 0;
	assert_refused(dlock_multilock_member_status(&st, m, 0), "member status", 0, cur);
	assert_refused(dlock_redlock_member_status(&st, r, 0), "member status", 0, cur);
	st.version = cur + 1;
	assert_refused(dlock_multilock_member_status(&st, m, 0), "member status", cur + 1, cur);
	assert_refused(dlock_redlock_member_status(&st, r, 0), "member status", cur + 1, cur);
	cr_assert_eq(dlock_multilock_member_status(NULL, m, 0), DLOCK_EINVAL);
	dlock_redlock_free(r);
	dlock_multilock_free(m);
	dlock_lock_free(l);
	dlock_client_free(c);
}

Test(versions, allocator_refuses_0_and_newer)
{
	const unsigned int cur = DLOCK_ALLOCATOR_VERSION;
	dlock_allocator a = { 0, malloc, realloc, free };

	assert_refused(dlock_set_allocator(&a), "allocator", 0, cur);
	a.version = cur + 1;
	assert_refused(dlock_set_allocator(&a), "allocator", cur + 1, cur);
	a.version = cur;
	dl_pass(dlock_set_allocator(&a));
	dl_pass(dlock_set_allocator(NULL));
}

/* The init function and the INIT macro agree, as client options' do. */
Test(versions, lock_options_init_matches_the_macro)
{
	dlock_lock_options macro = DLOCK_LOCK_OPTIONS_INIT, fn;

	memset(&fn, 0xff, sizeof fn);
	dl_pass(dlock_lock_options_init(&fn, DLOCK_LOCK_OPTIONS_VERSION));
	cr_assert_eq(fn.version, macro.version);
	cr_assert_eq(fn.kind, DLOCK_LOCK_PLAIN);
	cr_assert_eq(fn.fair_wait_ms, DLOCK_FAIR_WAIT_DEFAULT);
	cr_assert_eq(dlock_lock_options_init(NULL, 1), DLOCK_EINVAL);
}

Test(versions, lock_options_refuse_an_unknown_kind_or_a_negative_fair_wait)
{
	dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
	dlock_client *c = idle_client();
	dlock_lock *l = NULL;
	int64_t token = 0;

	o.kind = (dlock_lock_kind)5; /* the first after DLOCK_LOCK_WRITE */
	cr_assert_eq(dlock_lock_new(&l, c, "v", &o), DLOCK_EINVAL);
	cr_assert_str_eq(dlock_errmsg_last(),
			"lock options: unknown kind 5 (plain 0, fair 1, fenced 2, read 3, write 4)");
	o.kind = (dlock_lock_kind)-1;
	cr_assert_eq(dlock_lock_new(&l, c, "v", &o), DLOCK_EINVAL);
	o.kind = DLOCK_LOCK_FAIR;
	o.fair_wait_ms = -1;
	cr_assert_eq(dlock_lock_new(&l, c, "v", &o), DLOCK_EINVAL);
	cr_assert_str_eq(dlock_errmsg_last(), "lock options: fair_wait_ms must be >= 0 (got -1)");
	/* Ignored by the other kinds, but checked whatever the kind: a typo shows. */
	o.kind = DLOCK_LOCK_FENCED;
	cr_assert_eq(dlock_lock_new(&l, c, "v", &o), DLOCK_EINVAL);
	cr_assert_null(l);
	/* NULL options: a plain lock, which has no token. */
	dl_pass(dlock_lock_new(&l, c, "v", NULL));
	cr_assert_eq(dlock_lock_acquire_fenced(&token, l, NULL, 0, 1000), DLOCK_EINVAL);
	cr_assert_neq(strstr(dlock_lock_errmsg(l), "DLOCK_LOCK_FENCED"), NULL, "%s",
			dlock_lock_errmsg(l));
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* dlock_client_free() is dlock_client_free() by another name; neither
 * fails: a lock made from the client keeps it until the lock is freed. */
Test(versions, client_close_is_client_free)
{
	dlock_client *c = idle_client();
	dlock_lock *l = dl_lock(c, "v");

	dlock_client_free(c);
	cr_assert_str_eq(dlock_lock_name(l), "v");
	dlock_lock_free(l); /* the client goes with it */
	dlock_client_free(NULL);
	dlock_client_free(NULL);
}
