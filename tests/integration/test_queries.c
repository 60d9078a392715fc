/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The read-only queries against real servers: a lock's holders and TTL
 * (dlock_lock_query), and the quorum queries of MultiLock and RedLock -
 * settled by the members that answer, refused (ENOQUORUM) when they
 * cannot settle it, never guessed.
 */
#include <string.h>

#include <criterion/criterion.h>

#include <dlock.h>

#include "redis_harness.h"

#define NSRV 3

static rh_server *srv[NSRV];
static dlock_client *cli[NSRV];
static dlock_lock *lk[NSRV];

static void open_all(const char *name)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	int i;

	o.command_timeout_ms = 300;
	o.connect_timeout_ms = 300;
	cr_assert_eq(rh_servers_start(srv, NSRV, NULL), 0, "servers did not start");
	for (i = 0; i < NSRV; i++) {
		cr_assert_eq(dlock_client_new(&cli[i], rh_server_uri(srv[i]), &o), 0, "%s",
				dlock_errmsg_last());
		cr_assert_eq(dlock_lock_new(&lk[i], cli[i], name, NULL), 0, "%s",
				dlock_errmsg_last());
	}
}

static void close_all(void)
{
	int i;

	for (i = 0; i < NSRV; i++) {
		dlock_lock_free(lk[i]);
		dlock_client_free(cli[i]);
		rh_server_free(srv[i]);
	}
	rh_cleanup_all();
}

Test(queries, lock_query_names_each_holder_with_its_count_and_the_ttl, .fini = close_all)
{
	dlock_lock_info *info = NULL;
	char me[64];

	open_all("q-holders");
	cr_assert_eq(dlock_lock_query(&info, lk[0]), 0, "%s", dlock_lock_errmsg(lk[0]));
	cr_assert_eq(dlock_lock_info_holders(info), 0, "a free lock has no holder");
	cr_assert_eq(dlock_lock_info_ttl_ms(info), -2);
	dlock_lock_info_free(info);

	cr_assert_eq(dlock_lock_acquire(lk[0], NULL, 0, 30000), 0);
	cr_assert_eq(dlock_lock_acquire(lk[0], NULL, 0, 30000), 0, "reentrant");
	cr_assert_eq(dlock_lock_query(&info, lk[0]), 0, "%s", dlock_lock_errmsg(lk[0]));
	dlock_client_owner(me, cli[0], dlock_thread_id());
	cr_assert_eq(dlock_lock_info_holders(info), 1);
	cr_assert_str_eq(dlock_lock_info_holder_owner(info, 0), me);
	cr_assert_eq(dlock_lock_info_holder_count(info, 0), 2);
	cr_assert(dlock_lock_info_ttl_ms(info) > 29000 && dlock_lock_info_ttl_ms(info) <= 30000,
			"ttl %lld", (long long)dlock_lock_info_ttl_ms(info));
	cr_assert_null(dlock_lock_info_holder_owner(info, 1), "past the end");
	cr_assert_eq(dlock_lock_info_holder_count(info, 1), 0);
	dlock_lock_info_free(info);
	cr_assert_eq(dlock_lock_release(lk[0], NULL), 0);
	cr_assert_eq(dlock_lock_release(lk[0], NULL), 0);
}

Test(queries, lock_query_refuses_a_key_that_is_not_a_lock, .fini = close_all)
{
	dlock_lock_info *info = (dlock_lock_info *)&info;

	open_all("q-wrongtype");
	freeReplyObject(rh_command(srv[0], "SET q-wrongtype x"));
	cr_assert_eq(dlock_lock_query(&info, lk[0]), DLOCK_EWRONGTYPE);
	cr_assert_null(info, "*out is NULL on failure");
	cr_assert_neq(strstr(dlock_lock_errmsg(lk[0]), "WRONGTYPE"), NULL, "%s",
			dlock_lock_errmsg(lk[0]));
}

Test(queries, redlock_is_locked_by_a_quorum_and_says_when_it_cannot_tell, .fini = close_all)
{
	dlock_redlock *rl = NULL;
	int locked = -1, held = -1;
	int64_t ttl = 0;

	open_all("q-redlock");
	cr_assert_eq(dlock_redlock_new(&rl, lk, NSRV, NULL), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_redlock_quorum(rl), 2);
	cr_assert_eq(dlock_redlock_is_locked(&locked, rl), 0, "%s", dlock_redlock_errmsg(rl));
	cr_assert_eq(locked, 0);
	cr_assert_eq(dlock_redlock_acquire(rl, NULL, 0, 20000), 0, "%s", dlock_redlock_errmsg(rl));
	cr_assert_eq(dlock_redlock_is_locked(&locked, rl), 0, "%s", dlock_redlock_errmsg(rl));
	cr_assert_eq(locked, 1);
	cr_assert_eq(dlock_redlock_is_held(&held, rl, NULL), 0, "%s", dlock_redlock_errmsg(rl));
	cr_assert_eq(held, 1, "held by the calling thread");
	cr_assert_eq(dlock_redlock_is_held(&held, rl, "someone-else"), 0);
	cr_assert_eq(held, 0);
	cr_assert_eq(dlock_redlock_member_ttl_ms(&ttl, rl, 1), 0, "%s", dlock_redlock_errmsg(rl));
	cr_assert(ttl > 19000 && ttl <= 20000, "member ttl %lld", (long long)ttl);
	cr_assert_eq(dlock_redlock_member_ttl_ms(&ttl, rl, NSRV), DLOCK_EINVAL);

	/* One member down: the two left still settle it. */
	rh_server_kill(srv[2]);
	cr_assert_eq(dlock_redlock_is_locked(&locked, rl), 0, "%s", dlock_redlock_errmsg(rl));
	cr_assert_eq(locked, 1);
	/* A second one down: one answer cannot settle a quorum of two. */
	rh_server_kill(srv[1]);
	cr_assert_eq(dlock_redlock_is_locked(&locked, rl), DLOCK_ENOQUORUM);
	cr_assert_neq(strstr(dlock_redlock_errmsg(rl), "cannot tell"), NULL, "%s",
			dlock_redlock_errmsg(rl));
	dlock_redlock_release(rl, NULL);
	dlock_redlock_free(rl);
}

Test(queries, multilock_needs_every_member_to_be_locked, .fini = close_all)
{
	dlock_multilock *ml = NULL;
	int locked = -1;

	open_all("q-multi");
	cr_assert_eq(dlock_multilock_new(&ml, lk, NSRV, NULL), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_multilock_quorum(ml), NSRV);
	cr_assert_eq(dlock_lock_acquire(lk[0], NULL, 0, 20000), 0);
	cr_assert_eq(dlock_multilock_is_locked(&locked, ml), 0, "%s", dlock_multilock_errmsg(ml));
	cr_assert_eq(locked, 0, "one member of three is not the MultiLock");
	cr_assert_eq(dlock_lock_release(lk[0], NULL), 0);
	cr_assert_eq(dlock_multilock_acquire(ml, NULL, 0, 20000), 0, "%s", dlock_multilock_errmsg(ml));
	cr_assert_eq(dlock_multilock_is_locked(&locked, ml), 0, "%s", dlock_multilock_errmsg(ml));
	cr_assert_eq(locked, 1);
	cr_assert_eq(dlock_multilock_release(ml, NULL), 0);
	dlock_multilock_free(ml);
}
