/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RedLock against 3 and 5 real redis-server processes: the quorum with every
 * node up, with a minority or a majority killed (before and while holding),
 * with a paused node, with members held by another owner, an acquisition
 * that outlives its lease, waiting for holders, and bad arguments.
 *
 * Every RedLock here uses command and connect timeouts of 200 ms and the
 * restart guard off (window 0): these tests are not about the guard.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define MAXN 5
#define CMD_TIMEOUT_MS 200
/* Scheduling slack on a loaded two-core machine for "about one timeout". */
#define MARGIN_MS 150

/* ---- helpers ------------------------------------------------------------ */

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A set of servers and which of them still answer (not killed, not paused). */
typedef struct cluster {
	rh_server *s[MAXN];
	int up[MAXN];
	int n;
	const char *uris[MAXN];
	dl_lost lost; /* a watched RedLock's lost callbacks (watched_redlock) */
	int watched;
} cluster;

static void cluster_start(cluster *c, int n)
{
	memset(c, 0, sizeof *c);
	cr_assert_leq(n, MAXN);
	cr_assert_eq(rh_servers_start(c->s, n, NULL), 0, "could not start %d servers", n);
	c->n = n;
	for (int i = 0; i < n; i++) {
		c->up[i] = 1;
		c->uris[i] = rh_server_uri(c->s[i]);
	}
}

static void cluster_free(cluster *c)
{
	for (int i = 0; i < c->n; i++)
		rh_server_free(c->s[i]);
	if (c->watched)
		dl_lost_destroy(&c->lost);
	memset(c, 0, sizeof *c);
}

static void cluster_kill(cluster *c, int i)
{
	cr_assert_eq(rh_server_kill(c->s[i]), 0, "kill server %d", i);
	c->up[i] = 0;
}

static void cluster_pause(cluster *c, int i)
{
	cr_assert_eq(rh_server_pause(c->s[i]), 0, "pause server %d", i);
	c->up[i] = 0;
}

static void cluster_resume(cluster *c, int i)
{
	cr_assert_eq(rh_server_resume(c->s[i]), 0, "resume server %d", i);
	c->up[i] = 1;
}

/* "127.0.0.1:PORT" of server i. */
static void node_label(cluster *c, int i, char *buf, size_t len)
{
	snprintf(buf, len, "127.0.0.1:%d", rh_server_port(c->s[i]));
}

static dlock_redlock *open_redlock(
		cluster *c, const char *name, int watchdog_ms, int command_timeout_ms)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_redlock *r = NULL;

	co.command_timeout_ms = command_timeout_ms;
	co.connect_timeout_ms = CMD_TIMEOUT_MS;
	if (watchdog_ms > 0)
		co.watchdog_timeout_ms = watchdog_ms;
	ro.restart_guard_ms = 0;
	int rc = dlock_redlock_new_from_uris(&r, c->uris, (size_t)c->n, name, &co, &ro);
	cr_assert_eq(rc, 0, "redlock_open: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	cr_assert_not_null(r);
	cr_assert_eq(dlock_redlock_size(r), (size_t)c->n);
	return r;
}

static size_t quorum_of(int n)
{
	return (size_t)n / 2 + 1;
}

static dlock_member_status status_of(dlock_redlock *r, int i)
{
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	cr_assert_eq(dlock_redlock_member_status(&st, r, (size_t)i), 0);
	return st;
}

static size_t count_votes(dlock_redlock *r, int n, dlock_vote vote)
{
	size_t k = 0;
	for (int i = 0; i < n; i++)
		k += status_of(r, i).vote == vote;
	return k;
}

/*
 * 1 when server i holds `name` as exactly one field `<uuid>:<tid of this
 * thread>` with count "1".
 */
static int held_by_me_once(cluster *c, int i, const char *name)
{
	char suffix[32];
	int ok = 0;

	snprintf(suffix, sizeof suffix, ":%" PRIu64, dlock_thread_id());
	redisReply *r = rh_command(c->s[i], "HGETALL %s", name);
	cr_assert_not_null(r, "HGETALL on server %d failed", i);
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
		const char *f = r->element[0]->str, *v = r->element[1]->str;
		size_t fl = strlen(f), sl = strlen(suffix);
		ok = fl == 36 + sl && strcmp(f + 36, suffix) == 0 && strcmp(v, "1") == 0;
	}
	freeReplyObject(r);
	return ok;
}

/* EXISTS name on server i (asserting the command worked). */
static int64_t key_exists(cluster *c, int i, const char *name)
{
	int64_t e = rh_command_int(c->s[i], "EXISTS %s", name);
	cr_assert_neq(e, INT64_MIN, "EXISTS on server %d failed", i);
	return e;
}

/*
 * Poll until every answering server satisfies "DBSIZE == 0" (keys_too) or
 * "EXISTS name == 0" (!keys_too), or limit_ms passed. Returns -1 when all are
 * clean, else the index of a server that is not.
 */
static int wait_clean(cluster *c, const char *name, int keys_too, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;
	for (;;) {
		int dirty = -1;
		for (int i = 0; i < c->n && dirty < 0; i++) {
			if (!c->up[i])
				continue;
			int64_t v = keys_too ? rh_command_int(c->s[i], "DBSIZE")
					     : key_exists(c, i, name);
			cr_assert_neq(v, INT64_MIN, "DBSIZE on server %d failed", i);
			if (v != 0)
				dirty = i;
		}
		if (dirty < 0 || rh_now_ms() > end)
			return dirty;
		dl_sleep_ms(10);
	}
}

static void assert_all_dbsize_zero(cluster *c, const char *name, int64_t limit_ms)
{
	int dirty = wait_clean(c, name, 1, limit_ms);
	if (dirty >= 0) {
		redisReply *k = rh_command(c->s[dirty], "KEYS *");
		char keys[512] = "";
		if (k && k->type == REDIS_REPLY_ARRAY)
			for (size_t j = 0; j < k->elements && strlen(keys) < 400; j++)
				snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s ",
						k->element[j]->str);
		if (k)
			freeReplyObject(k);
		cr_assert_fail("server %d still has keys %lld ms later: %s", dirty,
				(long long)limit_ms, keys);
	}
}

/* Pre-hold `name` on server i for a foreign owner (raw commands). */
static void foreign_hold(cluster *c, int i, const char *name, int64_t pexpire_ms)
{
	cr_assert_eq(rh_command_int(c->s[i], "HSET %s %s %s", name, "foreign:1", "1"), 1);
	cr_assert_eq(rh_command_int(c->s[i], "PEXPIRE %s %lld", name, (long long)pexpire_ms), 1);
}

/* 1 when server i holds exactly {foreign:1 -> 1} under name. */
static int foreign_intact(cluster *c, int i, const char *name)
{
	redisReply *r = rh_command(c->s[i], "HGETALL %s", name);
	cr_assert_not_null(r);
	int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
			strcmp(r->element[0]->str, "foreign:1") == 0 &&
			strcmp(r->element[1]->str, "1") == 0;
	freeReplyObject(r);
	return ok;
}

/* No answering server has the key limit_ms later (else: which, with its PTTL). */
static void assert_key_gone(cluster *c, const char *name, int64_t limit_ms, const char *after)
{
	int dirty = wait_clean(c, name, 0, limit_ms);
	cr_assert_eq(dirty, -1, "server %d still has the lock key %lld ms after %s (PTTL %lld)",
			dirty, (long long)limit_ms, after,
			dirty >= 0 ? (long long)rh_command_int(c->s[dirty], "PTTL %s", name) : 0LL);
}

/* The RedLock first, then its servers. */
static void cluster_done(cluster *c, dlock_redlock *r)
{
	dlock_redlock_free(r);
	cluster_free(c);
}

/* Unlock, and no server keeps a key 500 ms later. */
static void unlock_everywhere(cluster *c, dlock_redlock *r, const char *name)
{
	int rc = dlock_redlock_release(r, NULL);
	cr_assert_eq(rc, 0, "unlock: %s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	assert_all_dbsize_zero(c, name, 500);
}

/* n fresh servers and `name` held on them under a 1000 ms watchdog; c->lost
 * records its lost callbacks. */
static dlock_redlock *watched_redlock(cluster *c, int n, const char *name)
{
	cluster_start(c, n);
	dl_lost_init(&c->lost);
	c->watched = 1;
	dlock_redlock *r = open_redlock(c, name, 1000, CMD_TIMEOUT_MS);
	cr_assert_eq(dlock_redlock_set_lost_cb(r, dl_on_lost, &c->lost), 0);
	int rc = dlock_redlock_acquire(r, NULL, 0, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, 0, "%s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	return r;
}

/* n fresh servers, those in kill_idx killed, and a RedLock on `name` over all. */
static dlock_redlock *some_killed(
		cluster *c, int n, const int *kill_idx, int nkill, const char *name)
{
	cluster_start(c, n);
	for (int k = 0; k < nkill; k++)
		cluster_kill(c, kill_idx[k]);
	return open_redlock(c, name, 0, CMD_TIMEOUT_MS);
}

/* ---- 1. every node up --------------------------------------------------- */

static void all_up(int n)
{
	char name[32];
	cluster c;
	int64_t validity = -1;

	snprintf(name, sizeof name, "rl:all-up:%d", n);
	cluster_start(&c, n);
	dlock_redlock *r = open_redlock(&c, name, 0, CMD_TIMEOUT_MS);

	/* First acquisition (connects lazily). */
	int64_t t0 = now_us();
	int rc = dl_redlock_acquire_v(&validity, r, NULL, 0, 10000);
	int64_t cold_us = now_us() - t0;
	cr_assert_eq(rc, 0, "try on %d nodes: %s (%s)", n, dlock_strerror(rc),
			dlock_redlock_errmsg(r));
	cr_assert(validity > 9800 && validity <= 10000, "validity %lld not in (9800, 10000]",
			(long long)validity);

	size_t have = 0;
	for (int i = 0; i < n; i++) {
		if (held_by_me_once(&c, i, name)) {
			have++;
			int64_t pttl = rh_command_int(c.s[i], "PTTL %s", name);
			cr_assert(pttl > 9000 && pttl <= 10000, "server %d: PTTL %lld", i,
					(long long)pttl);
		}
	}
	cr_assert_geq(have, quorum_of(n), "only %zu of %d servers hold the key as ours", have, n);
	size_t acquired = count_votes(r, n, DLOCK_VOTE_ACQUIRED);
	cr_assert_geq(acquired, quorum_of(n), "status: only %zu ACQUIRED", acquired);
	for (int i = 0; i < n; i++) {
		dlock_member_status st = status_of(r, i);
		char label[32];
		node_label(&c, i, label, sizeof label);
		cr_assert_str_eq(st.node, label);
		cr_assert(st.vote == DLOCK_VOTE_ACQUIRED || st.vote == DLOCK_VOTE_NONE,
				"server %d: vote %d (%s)", i, (int)st.vote, st.message);
	}
	cr_assert_eq(dlock_redlock_check(r, NULL), 0);

	unlock_everywhere(&c, r, name);
	cr_assert_eq(dlock_redlock_check(r, NULL), DLOCK_ENOTOWNER);

	/* Warm: connections are open now. Best of a few. */
	int64_t warm_us = INT64_MAX;
	for (int k = 0; k < 5; k++) {
		t0 = now_us();
		rc = dl_redlock_acquire_v(&validity, r, NULL, 0, 10000);
		int64_t us = now_us() - t0;
		cr_assert_eq(rc, 0, "warm try: %s (%s)", dlock_strerror(rc),
				dlock_redlock_errmsg(r));
		if (us < warm_us)
			warm_us = us;
		cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	}
	assert_all_dbsize_zero(&c, name, 500);
	fprintf(stderr, "redlock_nodes: uncontended try on %d nodes: first %lld us (with connects), warm best %lld us\n",
			n, (long long)cold_us, (long long)warm_us);

	cluster_done(&c, r);
}

Test(redlock_nodes, all_up_3_acquires_quorum_and_releases_everywhere, .timeout = 30)
{
	all_up(3);
}

Test(redlock_nodes, all_up_5_acquires_quorum_and_releases_everywhere, .timeout = 30)
{
	all_up(5);
}

/* ---- 2. watchdog mode ---------------------------------------------------- */

Test(redlock_nodes, watchdog_keeps_quorum_and_unlock_clears_all, .timeout = 30)
{
	const char *name = "rl:watchdog";
	cluster c;
	dlock_redlock *r = watched_redlock(&c, 3, name);

	/* 3.5 watchdog timeouts: without renewal every key would be gone. */
	dl_sleep_ms(3500);
	cr_assert_eq(dlock_redlock_check(r, NULL), 0);
	size_t alive = 0;
	for (int i = 0; i < 3; i++) {
		if (!held_by_me_once(&c, i, name))
			continue;
		int64_t pttl = rh_command_int(c.s[i], "PTTL %s", name);
		cr_assert(pttl > 0 && pttl <= 1000, "server %d: PTTL %lld after 3.5 s", i,
				(long long)pttl);
		alive++;
	}
	cr_assert_geq(alive, quorum_of(3), "only %zu servers still hold the key after 3.5 s",
			alive);

	unlock_everywhere(&c, r, name);
	/* And nothing renews it back into existence. */
	dl_sleep_ms(400);
	cr_assert_eq(wait_clean(&c, name, 0, 0), -1);

	cluster_done(&c, r);
}

/* ---- 3. a minority down before acquiring --------------------------------- */

static void minority_down(int n, const int *kill_idx, int nkill)
{
	char name[32];
	cluster c;
	int64_t validity = -1;

	snprintf(name, sizeof name, "rl:minority:%d", n);
	dlock_redlock *r = some_killed(&c, n, kill_idx, nkill, name);

	int64_t t0 = rh_now_ms();
	int rc = dl_redlock_acquire_v(&validity, r, NULL, 0, 10000);
	int64_t elapsed = rh_now_ms() - t0;
	cr_assert_eq(rc, 0, "%d of %d down: %s (%s)", nkill, n, dlock_strerror(rc),
			dlock_redlock_errmsg(r));
	cr_assert_lt(elapsed, CMD_TIMEOUT_MS + MARGIN_MS, "took %lld ms", (long long)elapsed);
	cr_assert(validity > 9800 && validity <= 10000, "validity %lld", (long long)validity);

	for (int k = 0; k < nkill; k++) {
		int i = kill_idx[k];
		dlock_member_status st = status_of(r, i);
		char label[32];
		node_label(&c, i, label, sizeof label);
		cr_assert_eq(st.vote, DLOCK_VOTE_ERROR, "killed server %d: vote %d", i,
				(int)st.vote);
		cr_assert_eq(st.error, DLOCK_ECONN, "killed server %d: error %s", i,
				dlock_strerror(st.error));
		cr_assert_not_null(strstr(st.message, label), "message \"%s\" does not name %s",
				st.message, label);
	}
	size_t have = 0;
	for (int i = 0; i < n; i++)
		if (c.up[i] && held_by_me_once(&c, i, name))
			have++;
	cr_assert_geq(have, quorum_of(n));
	cr_assert_geq(count_votes(r, n, DLOCK_VOTE_ACQUIRED), quorum_of(n));

	unlock_everywhere(&c, r, name);

	cluster_done(&c, r);
}

Test(redlock_nodes, one_of_3_killed_before_acquiring, .timeout = 30)
{
	const int k[] = { 0 };
	minority_down(3, k, 1);
}

Test(redlock_nodes, two_of_5_killed_before_acquiring, .timeout = 30)
{
	const int k[] = { 1, 3 };
	minority_down(5, k, 2);
}

/* ---- 4. nodes killed while the lock is held ------------------------------ */

Test(redlock_nodes, minority_killed_while_held_keeps_the_lock, .timeout = 30)
{
	const char *name = "rl:held-minority";
	cluster c;
	dlock_redlock *r = watched_redlock(&c, 5, name);

	/*
     * Kill two of the members the lock was taken on (any two of five must
     * be survivable: Redisson's RedLock takes every member it can and only
     * stops early after a failure, so all five are held and renewed).
     */
	char votes[64] = "";
	int victims[2], nv = 0;
	for (int i = 0; i < 5; i++) {
		dlock_member_status st = status_of(r, i);
		snprintf(votes + strlen(votes), sizeof votes - strlen(votes), "%d", (int)st.vote);
		if (st.vote == DLOCK_VOTE_ACQUIRED && nv < 2)
			victims[nv++] = i;
	}
	cr_assert_eq(nv, 2, "votes %s", votes);
	cluster_kill(&c, victims[0]);
	cluster_kill(&c, victims[1]);

	/* Three watchdog timeouts: the two dead members are lost, three renew. */
	dl_sleep_ms(3000);
	int rc = dlock_redlock_check(r, NULL);
	char held[16] = "";
	for (int i = 0; i < 5; i++)
		held[i] = dlock_lock_check(dlock_redlock_member(r, i), NULL) == 0 ? 'H' : '-';
	cr_assert_eq(rc, 0,
			"killed servers %d and %d of 5 while held: check says %s; votes at acquisition %s "
			"(1 = ACQUIRED, 0 = NONE), members still held %s",
			victims[0], victims[1], dlock_strerror(rc), votes, held);
	cr_assert_eq(dl_lost_count(&c.lost), 0, "lost callback fired with a quorum still held");
	size_t have = 0;
	for (int i = 0; i < 5; i++)
		if (c.up[i] && held_by_me_once(&c, i, name))
			have++;
	cr_assert_geq(have, 3, "only %zu live servers still hold the key", have);

	unlock_everywhere(&c, r, name);
	cr_assert_eq(dl_lost_count(&c.lost), 0);

	cluster_done(&c, r);
}

Test(redlock_nodes, majority_killed_while_held_is_lost_once, .timeout = 30)
{
	const char *name = "rl:held-majority";
	cluster c;
	dlock_redlock *r = watched_redlock(&c, 3, name);
	cr_assert_eq(dlock_redlock_check(r, NULL), 0);
	/* Kill two members the lock was taken on (the last two; with only two
     * taken, both of them). */
	char votes[16] = "";
	int victims[2], nv = 0;
	for (int i = 2; i >= 0; i--) {
		dlock_member_status st = status_of(r, i);
		votes[i] = (char)('0' + (int)st.vote);
		if (st.vote == DLOCK_VOTE_ACQUIRED && nv < 2)
			victims[nv++] = i;
	}
	votes[3] = '\0';
	cr_assert_eq(nv, 2, "votes %s", votes);
	cluster_kill(&c, victims[0]);
	cluster_kill(&c, victims[1]);
	int64_t killed_at = rh_now_ms();

	/* Renewal stops reaching them; within one timeout (+ margin) the TTL
     * they were last renewed with has run out: lost. */
	int fired = dl_lost_wait(&c.lost, killed_at + 1500);
	if (fired != 1) {
		int later = dl_lost_wait(&c.lost, killed_at + 3000);
		int rc = dlock_redlock_check(r, NULL);
		cr_assert_fail("lost callback fired %d times within 1.5 s of killing servers %d and %d "
			       "(votes at acquisition %s, 1 = ACQUIRED, 0 = NONE); %d times after 3 s; check says %s",
				fired, victims[1], victims[0], votes, later, dlock_strerror(rc));
	}
	cr_assert_eq(dlock_redlock_check(r, NULL), DLOCK_ELOST);
	cr_assert_str_eq(c.lost.name, dlock_lock_name(dlock_redlock_member(r, 0)));
	cr_assert_str_eq(c.lost.node, "(null)", "a quorum is lost, not one node");
	cr_assert_leq(c.lost.at_ms - killed_at, 1500);
	/* Exactly once: give a second loss report time to show up. */
	dl_sleep_ms(600);
	cr_assert_eq(dl_lost_count(&c.lost), 1, "lost callback fired %d times",
			dl_lost_count(&c.lost));
	cr_assert_eq(dlock_redlock_check(r, NULL), DLOCK_ELOST);

	/* The release still reaches the member that is alive. */
	(void)dlock_redlock_release(r, NULL);
	cr_assert_eq(wait_clean(&c, name, 0, 500), -1, "the surviving member still holds the key");
	cr_assert_eq(dl_lost_count(&c.lost), 1);

	cluster_done(&c, r);
}

/* ---- 5. a majority down -------------------------------------------------- */

static void majority_down(int n, const int *kill_idx, int nkill)
{
	char name[32];
	cluster c;
	int64_t validity = 12345;

	snprintf(name, sizeof name, "rl:majority:%d", n);
	dlock_redlock *r = some_killed(&c, n, kill_idx, nkill, name);

	int64_t t0 = rh_now_ms();
	int rc = dl_redlock_acquire_v(&validity, r, NULL, 1000, 10000);
	int64_t elapsed = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ENOQUORUM, "%d of %d down, wait 1000: %s (%s)", nkill, n,
			dlock_strerror(rc), dlock_redlock_errmsg(r));
	cr_assert_leq(elapsed, 1000 + 300, "took %lld ms with a 1000 ms wait", (long long)elapsed);
	const char *msg = dlock_redlock_errmsg(r);
	int named = 0;
	for (int k = 0; k < nkill; k++) {
		char label[32];
		node_label(&c, kill_idx[k], label, sizeof label);
		named |= strstr(msg, label) != NULL;
	}
	cr_assert(named, "message names no dead node: %s", msg);
	cr_assert_neq(dlock_redlock_check(r, NULL), 0);
	assert_all_dbsize_zero(&c, name, 0);

	t0 = rh_now_ms();
	rc = dl_redlock_acquire_v(&validity, r, NULL, 0, 10000);
	elapsed = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ENOQUORUM, "wait 0: %s (%s)", dlock_strerror(rc),
			dlock_redlock_errmsg(r));
	cr_assert_lt(elapsed, CMD_TIMEOUT_MS + MARGIN_MS, "one attempt took %lld ms",
			(long long)elapsed);
	for (int k = 0; k < nkill; k++) {
		dlock_member_status st = status_of(r, kill_idx[k]);
		cr_assert_eq(st.vote, DLOCK_VOTE_ERROR);
		cr_assert_eq(st.error, DLOCK_ECONN);
	}
	assert_all_dbsize_zero(&c, name, 0);

	cluster_done(&c, r);
}

Test(redlock_nodes, two_of_3_killed_is_no_quorum, .timeout = 30)
{
	const int k[] = { 0, 2 };
	majority_down(3, k, 2);
}

Test(redlock_nodes, three_of_5_killed_is_no_quorum, .timeout = 30)
{
	const int k[] = { 1, 2, 4 };
	majority_down(5, k, 3);
}

/* ---- 6. a paused node ---------------------------------------------------- */

Test(redlock_nodes, paused_node_costs_at_most_a_timeout_and_is_released_later, .timeout = 30)
{
	const char *name = "rl:paused";
	cluster c;
	int64_t validity = -1;
	cluster_start(&c, 5);
	dlock_redlock *r = open_redlock(&c, name, 0, CMD_TIMEOUT_MS);
	cluster_pause(&c, 2);

	int64_t t0 = rh_now_ms();
	int rc = dl_redlock_acquire_v(&validity, r, NULL, 0, 10000);
	int64_t elapsed = rh_now_ms() - t0;
	cr_assert_eq(rc, 0, "%s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	cr_assert_lt(elapsed, CMD_TIMEOUT_MS + MARGIN_MS, "took %lld ms with one node paused",
			(long long)elapsed);
	cr_assert(validity > 9800 && validity <= 10000, "validity %lld", (long long)validity);
	dlock_member_status st = status_of(r, 2);
	cr_assert(st.vote == DLOCK_VOTE_NONE ||
					(st.vote == DLOCK_VOTE_ERROR &&
							st.error == DLOCK_ETIMEDOUT),
			"paused node: vote %d error %s (%s)", (int)st.vote,
			dlock_strerror(st.error), st.message);
	cr_assert_geq(count_votes(r, 5, DLOCK_VOTE_ACQUIRED), 3);

	cluster_resume(&c, 2);
	rc = dlock_redlock_release(r, NULL);
	cr_assert_eq(rc, 0, "unlock: %s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	/* The acquire the paused server received runs when it resumes; the
     * release went to it too and takes that back. */
	assert_key_gone(&c, name, 1000, "unlock");

	cluster_done(&c, r);
}

/* ---- 7. members held by another owner ------------------------------------ */

/* Five fresh servers, `name` held for 30 s by a foreign owner on those in
 * held[], and a RedLock on it over all five. */
static dlock_redlock *foreign_held(cluster *c, const char *name, const int *held, int nheld)
{
	cluster_start(c, 5);
	for (int k = 0; k < nheld; k++)
		foreign_hold(c, held[k], name, 30000);
	return open_redlock(c, name, 0, CMD_TIMEOUT_MS);
}

Test(redlock_nodes, foreign_holder_on_minority_does_not_block, .timeout = 30)
{
	const char *name = "rl:foreign-minority";
	const int held[] = { 0, 3 };
	cluster c;
	dlock_redlock *r = foreign_held(&c, name, held, 2);

	int64_t validity = -1;
	int rc = dl_redlock_acquire_v(&validity, r, NULL, 0, 10000);
	cr_assert_eq(rc, 0, "%s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	cr_assert(validity > 9800 && validity <= 10000, "validity %lld", (long long)validity);
	for (int i = 0; i < 5; i++) {
		dlock_member_status st = status_of(r, i);
		if (i == 0 || i == 3) {
			cr_assert_neq(st.vote, DLOCK_VOTE_ACQUIRED,
					"foreign-held server %d voted ACQUIRED", i);
			cr_assert(st.vote == DLOCK_VOTE_HELD || st.vote == DLOCK_VOTE_NONE,
					"server %d: vote %d", i, (int)st.vote);
			if (st.vote == DLOCK_VOTE_HELD)
				cr_assert(st.ttl_ms > 0 && st.ttl_ms <= 30000,
						"server %d: ttl_ms %lld", i, (long long)st.ttl_ms);
			cr_assert(foreign_intact(&c, i, name),
					"the foreign hold on server %d changed", i);
		}
	}
	cr_assert_geq(count_votes(r, 5, DLOCK_VOTE_ACQUIRED), 3);

	rc = dlock_redlock_release(r, NULL);
	cr_assert_eq(rc, 0, "unlock: %s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	for (int i = 0; i < 5; i++) {
		if (i == 0 || i == 3) {
			cr_assert(foreign_intact(&c, i, name),
					"unlock changed the foreign hold on server %d", i);
			int64_t pttl = rh_command_int(c.s[i], "PTTL %s", name);
			cr_assert(pttl > 20000, "server %d: foreign PTTL %lld", i, (long long)pttl);
		} else {
			cr_assert_eq(key_exists(&c, i, name), 0,
					"server %d still has the key after unlock", i);
		}
	}

	cluster_done(&c, r);
}

Test(redlock_nodes, foreign_holder_on_majority_is_not_acquired, .timeout = 30)
{
	const char *name = "rl:foreign-majority";
	const int held[] = { 1, 2, 4 };
	cluster c;
	dlock_redlock *r = foreign_held(&c, name, held, 3);

	int rc = dlock_redlock_acquire(r, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "%s (%s)", dlock_strerror(rc),
			dlock_redlock_errmsg(r));
	for (int i = 0; i < 5; i++) {
		if (i == 1 || i == 2 || i == 4) {
			cr_assert(foreign_intact(&c, i, name),
					"the foreign hold on server %d changed", i);
			int64_t pttl = rh_command_int(c.s[i], "PTTL %s", name);
			cr_assert(pttl > 20000, "server %d: foreign PTTL %lld", i, (long long)pttl);
			dlock_member_status st = status_of(r, i);
			cr_assert_neq(st.vote, DLOCK_VOTE_ACQUIRED);
		} else {
			cr_assert_eq(key_exists(&c, i, name), 0,
					"free server %d kept the key after a refused try", i);
			cr_assert_eq(rh_command_int(c.s[i], "DBSIZE"), 0);
		}
	}
	cr_assert_eq(dlock_redlock_check(r, NULL), DLOCK_ENOTOWNER);

	cluster_done(&c, r);
}

/* ---- 8. a quorum that comes after the lease ran out ---------------------- */

typedef struct try_job {
	dlock_redlock *r;
	int64_t wait_ms, lease_ms;
	int rc;
	int64_t validity;
	int64_t elapsed_ms;
	char errmsg[512];
} try_job;

static void *try_thread(void *arg)
{
	try_job *j = arg;
	int64_t t0 = rh_now_ms();
	j->rc = dl_redlock_acquire_v(&j->validity, j->r, NULL, j->wait_ms, j->lease_ms);
	j->elapsed_ms = rh_now_ms() - t0;
	snprintf(j->errmsg, sizeof j->errmsg, "%s", dlock_redlock_errmsg(j->r));
	return NULL;
}

Test(redlock_nodes, quorum_after_the_lease_is_expired, .timeout = 30)
{
	const char *name = "rl:expired";
	cluster c;
	cluster_start(&c, 3);
	dlock_redlock *r = open_redlock(&c, name, 0, 3000);
	cluster_pause(&c, 1);
	cluster_pause(&c, 2);

	try_job j = { .r = r, .wait_ms = 0, .lease_ms = 500, .rc = 1, .validity = 12345 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, try_thread, &j), 0);
	dl_sleep_ms(1000);
	cluster_resume(&c, 1);
	cluster_resume(&c, 2);
	cr_assert_eq(pthread_join(th, NULL), 0);

	cr_assert_eq(j.rc, DLOCK_EEXPIRED, "got %s (%s) after %lld ms", dlock_strerror(j.rc),
			j.errmsg, (long long)j.elapsed_ms);
	cr_assert(j.elapsed_ms >= 900 && j.elapsed_ms < 3000, "took %lld ms",
			(long long)j.elapsed_ms);
	cr_assert(strstr(j.errmsg, "expire") != NULL, "message does not mention expiry: %s",
			j.errmsg);
	cr_assert_eq(dlock_redlock_check(r, NULL), DLOCK_ENOTOWNER);
	assert_key_gone(&c, name, 1500, "the refused try");

	cluster_done(&c, r);
}

/* ---- 9. waiting for holders ---------------------------------------------- */

Test(redlock_nodes, waits_for_foreign_holders_to_expire, .timeout = 30)
{
	const char *name = "rl:wait";
	cluster c;
	cluster_start(&c, 3);
	dlock_redlock *r = open_redlock(&c, name, 0, CMD_TIMEOUT_MS);
	int64_t t0 = rh_now_ms();
	for (int i = 0; i < 3; i++)
		foreign_hold(&c, i, name, 800);

	int64_t v = -1;
	int rc = dl_redlock_acquire_v(&v, r, NULL, 3000, 5000);
	int64_t elapsed = rh_now_ms() - t0;
	cr_assert_eq(rc, 0, "%s (%s) after %lld ms", dlock_strerror(rc), dlock_redlock_errmsg(r),
			(long long)elapsed);
	cr_assert(elapsed >= 700 && elapsed <= 2000,
			"acquired after %lld ms, holders expired at 800", (long long)elapsed);
	cr_assert(v > 4800 && v <= 5000, "validity %lld", (long long)v);
	size_t have = 0;
	for (int i = 0; i < 3; i++) {
		if (held_by_me_once(&c, i, name)) {
			have++;
			int64_t pttl = rh_command_int(c.s[i], "PTTL %s", name);
			cr_assert(pttl > 0 && pttl <= 5000,
					"server %d: PTTL %lld (the real lease, not a provisional one)",
					i, (long long)pttl);
		}
	}
	cr_assert_geq(have, 2);

	cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	assert_all_dbsize_zero(&c, name, 500);

	cluster_done(&c, r);
}

/* ---- 10. argument errors -------------------------------------------------- */

Test(redlock_nodes, bad_arguments_are_einval, .timeout = 30)
{
	cluster c;
	cluster_start(&c, 3);
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	co.command_timeout_ms = CMD_TIMEOUT_MS;
	co.connect_timeout_ms = CMD_TIMEOUT_MS;
	ro.restart_guard_ms = 0;
	dlock_redlock *r = (dlock_redlock *)&c; /* must be reset to NULL on failure */

	cr_assert_eq(dlock_redlock_new_from_uris(&r, c.uris, 0, "rl:args", &co, &ro), DLOCK_EINVAL);
	cr_assert_null(r);
	cr_assert_neq(dlock_errmsg_last()[0], '\0');

	r = (dlock_redlock *)&c;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, NULL, 3, "rl:args", &co, &ro), DLOCK_EINVAL);
	cr_assert_null(r);
	cr_assert_neq(dlock_errmsg_last()[0], '\0');

	const char *bad[3] = { c.uris[0], "redis://127.0.0.1:notaport", c.uris[2] };
	r = (dlock_redlock *)&c;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, bad, 3, "rl:args", &co, &ro), DLOCK_EINVAL);
	cr_assert_null(r);
	cr_assert(strstr(dlock_errmsg_last(), "server 2 of 3") != NULL, "message: %s",
			dlock_errmsg_last());

	const char *bad2[3] = { c.uris[0], c.uris[1], "http://127.0.0.1:6379" };
	r = (dlock_redlock *)&c;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, bad2, 3, "rl:args", &co, &ro), DLOCK_EINVAL);
	cr_assert_null(r);
	cr_assert(strstr(dlock_errmsg_last(), "server 3 of 3") != NULL, "message: %s",
			dlock_errmsg_last());

	const char *nulluri[3] = { c.uris[0], NULL, c.uris[2] };
	r = (dlock_redlock *)&c;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, nulluri, 3, "rl:args", &co, &ro),
			DLOCK_EINVAL);
	cr_assert_null(r);
	cr_assert(strstr(dlock_errmsg_last(), "server 2 of 3") != NULL, "message: %s",
			dlock_errmsg_last());

	r = (dlock_redlock *)&c;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, c.uris, 3, "", &co, &ro), DLOCK_EINVAL);
	cr_assert_null(r);
	r = (dlock_redlock *)&c;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, c.uris, 3, NULL, &co, &ro), DLOCK_EINVAL);
	cr_assert_null(r);

	r = open_redlock(&c, "rl:args", 0, CMD_TIMEOUT_MS);
	int64_t v = 777;
	cr_assert_eq(dl_redlock_acquire_v(&v, r, NULL, 0, 0), DLOCK_EINVAL);
	cr_assert_neq(dlock_redlock_errmsg(r)[0], '\0');
	cr_assert(strstr(dlock_redlock_errmsg(r), "lease") != NULL, "message: %s",
			dlock_redlock_errmsg(r));
	cr_assert_eq(dl_redlock_acquire_v(&v, r, NULL, 0, -5), DLOCK_EINVAL);
	cr_assert_eq(dl_redlock_acquire_v(&v, r, NULL, -5, 1000), DLOCK_EINVAL);
	cr_assert_eq(dlock_redlock_check(r, NULL), DLOCK_ENOTOWNER);
	/* Nothing was written anywhere. */
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(c.s[i], "DBSIZE"), 0, "server %d", i);

	cluster_done(&c, r);
}
