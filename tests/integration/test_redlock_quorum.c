/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A RedLock decides at its quorum, with the restart guard on: a stopped
 * server (SIGSTOP) costs neither the acquisition nor the caller its
 * command timeout, and the acquire it received while stopped never stays
 * behind on it once it resumes.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define N 5
/* Long, so that waiting for the stopped server shows. */
#define CMD_TIMEOUT_MS 3000

typedef struct five {
	rh_server *s[N];
	const char *uris[N];
} five;

static dlock_redlock *open_five(five *f, const char *name)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_redlock *r = NULL;

	cr_assert_eq(rh_servers_start(f->s, N, NULL), 0, "could not start %d servers", N);
	for (int i = 0; i < N; i++)
		f->uris[i] = rh_server_uri(f->s[i]);
	co.command_timeout_ms = CMD_TIMEOUT_MS;
	/* The guard on, with a window the fresh servers are already past:
	 * their votes count whatever the others show. */
	ro.restart_guard_ms = 1;
	int rc = dlock_redlock_new_from_uris(&r, f->uris, N, name, &co, &ro);
	cr_assert_eq(rc, 0, "redlock: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	return r;
}

static void close_five(five *f, dlock_redlock *r)
{
	dlock_redlock_free(r);
	for (int i = 0; i < N; i++)
		rh_server_free(f->s[i]);
}

/* 1 once `name` is gone from server s, within limit_ms. */
static int key_gone_within(rh_server *s, const char *name, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;

	while (rh_command_int(s, "EXISTS %s", name) != 0) {
		if (rh_now_ms() > end)
			return 0;
		dl_sleep_ms(10);
	}
	return 1;
}

Test(redlock_quorum, stopped_server_costs_no_timeout_and_its_late_grant_goes_back, .timeout = 60)
{
	const char *name = "rq:stopped";
	five f;
	dlock_redlock *r = open_five(&f, name);
	int64_t validity = -1;

	/* Warm: connections open, the servers' starts known for them (the
	 * first start read comes before the connection it is kept for). */
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(dlock_redlock_try(&validity, r, 0, 10000), 0, "%s",
				dlock_redlock_errmsg(r));
		cr_assert_eq(dlock_redlock_unlock(r), 0, "%s", dlock_redlock_errmsg(r));
	}

	cr_assert_eq(rh_server_pause(f.s[4]), 0);
	int64_t t0 = rh_now_ms();
	int rc = dlock_redlock_try(&validity, r, 0, 10000);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(rc, 0, "%s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	/* Not the stopped server's timeout: a third of it, generously. */
	cr_assert_lt(took, CMD_TIMEOUT_MS / 3, "took %lld ms with one of 5 stopped (timeout %d)",
			(long long)took, CMD_TIMEOUT_MS);
	cr_assert(validity > 9000 && validity <= 10000, "validity %lld", (long long)validity);

	size_t acquired = 0;
	for (int i = 0; i < N; i++) {
		dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
		cr_assert_eq(dlock_redlock_status(&st, r, (size_t)i), 0);
		acquired += st.vote == DLOCK_VOTE_ACQUIRED;
		if (i == 4)
			cr_assert(st.vote == DLOCK_VOTE_NONE && strstr(st.message, "pending") != NULL,
					"stopped server: vote %d (%s)", (int)st.vote, st.message);
	}
	cr_assert_geq(acquired, 3);
	cr_assert_eq(dlock_redlock_check(r, NULL), 0);

	/* Resumed: it runs the acquire it queued, and the give-back behind it. */
	cr_assert_eq(rh_server_resume(f.s[4]), 0);
	cr_assert(key_gone_within(f.s[4], name, 3000),
			"the late grant stayed on the resumed server: PTTL %lld",
			(long long)rh_command_int(f.s[4], "PTTL %s", name));
	cr_assert_eq(dlock_redlock_check(r, NULL), 0, "the quorum's holds are kept");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(f.s[i], "EXISTS %s", name), 1, "server %d", i);

	cr_assert_eq(dlock_redlock_unlock(r), 0, "%s", dlock_redlock_errmsg(r));
	for (int i = 0; i < N; i++)
		cr_assert(key_gone_within(f.s[i], name, 2000), "server %d kept the key", i);
	close_five(&f, r);
}
