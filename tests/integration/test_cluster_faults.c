/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A Redis Cluster under faults and change: a primary killed (SIGKILL)
 * while a hold renews and another client waits - kept when it replicated,
 * reported LOST when it did not; slots resharded with redis-cli while
 * clients take and release locks (never two holders, every call within
 * its deadline); and a RedLock whose members are three clusters.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

#define WATCHDOG_MS 10000

/* The replica of primary p (the harness makes one per primary). */
static rh_server *replica_of(rh_cluster *c, rh_server *p)
{
	for (int i = 0; i < rh_cluster_size(c); i++) {
		rh_server *s = rh_cluster_server(c, i);
		redisReply *r = s != p ? rh_command(s, "ROLE") : NULL;
		int mine = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
				strcmp(r->element[0]->str, "slave") == 0 &&
				r->element[2]->integer == rh_server_port(p);

		if (r)
			freeReplyObject(r);
		if (mine)
			return s;
	}
	cr_assert_fail("no replica of the primary");
	return NULL;
}

/* Wait until `s` is a primary serving key's slot in every node's view. */
static void await_promoted(rh_cluster *c, rh_server *s, const char *key)
{
	int64_t end = rh_now_ms() + 30000;

	while (rh_cluster_slot_owner(c, s, rh_cluster_key_slot(c, key)) != s) {
		cr_assert_lt(rh_now_ms(), end, "the replica was not promoted within 30 s");
		dl_sleep_ms(20);
	}
}

/* A number in a server's INFO replication ("field:value"), or -1. */
static int64_t replication_field(rh_server *s, const char *field)
{
	redisReply *r = rh_command(s, "INFO replication");
	int64_t v = -1;
	const char *at;

	if (r != NULL && r->type == REDIS_REPLY_STRING && (at = strstr(r->str, field)) != NULL &&
			at[strlen(field)] == ':')
		v = strtoll(at + strlen(field) + 1, NULL, 10);
	if (r != NULL)
		freeReplyObject(r);
	return v;
}

/* Print what the new primary says of itself, to tell a hold that never
 * arrived from one deleted later. */
static void print_reply(rh_server *s, const char *what)
{
	redisReply *r = rh_command(s, what);

	cr_log_error("%s: %s", what,
			r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
				r->type == REDIS_REPLY_ERROR) ? r->str : "(no text reply)");
	if (r)
		freeReplyObject(r);
}

static void explain_missing_hold(rh_server *replica, int64_t p0, int64_t p, int64_t t_promoted,
		dl_lost *lost)
{
	cr_log_error("PTTL right after the promotion %lld, then %lld (%lld ms after it); "
		     "holder told lost: %d", (long long)p0, (long long)p,
			(long long)(rh_now_ms() - t_promoted), dl_lost_count(lost));
	print_reply(replica, "INFO replication");
	print_reply(replica, "INFO keyspace");
	print_reply(replica, "INFO stats");
	print_reply(replica, "CLUSTER NODES");
}

/*
 * SIGKILL of the primary serving a held lock, `replicated` or not. The
 * cluster promotes the replica; the holder keeps the lock if its hold had
 * reached the replica, and is told it lost it if not; the waiter gets the
 * lock from the new primary either way, within its wait.
 */
static void killed_primary(int replicated)
{
	rh_cluster *c = rh_cluster_start(3, 1, NULL);
	cr_assert_not_null(c);
	dlock_client *ca = dl_client(rh_cluster_seed_uri(c), 500, WATCHDOG_MS);
	dlock_client *cb = dl_client(rh_cluster_seed_uri(c), 500, WATCHDOG_MS);
	dlock_lock *a = dl_lock(ca, "killed"), *b = dl_lock(cb, "killed");
	rh_server *old = dl_slot_owner(c, "killed"), *replica = replica_of(c, old);
	dl_lost lost;
	dl_waiter w;

	dl_lost_init(&lost);
	cr_assert_eq(dlock_lock_set_lost_cb(a, dl_on_lost, &lost), 0);
	if (!replicated) { /* the replica never sees the hold */
		cr_assert_eq(rh_server_pause(replica), 0);
		cr_assert_eq(rh_command_int(old, "CLIENT KILL TYPE replica"), 1);
	}
	dl_pass(dlock_lock_acquire(a, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	int64_t hold_offset = -1;
	if (replicated) {
		cr_assert_eq(rh_command_int(old, "WAIT 1 5000"), 1, "the hold did not replicate");
		hold_offset = replication_field(old, "master_repl_offset");
	}
	dl_waiter_start(&w, cb, b, 30000);
	int64_t t_kill = rh_now_ms();
	cr_assert_eq(rh_server_kill(old), 0);
	if (!replicated)
		cr_assert_eq(rh_server_resume(replica), 0);
	await_promoted(c, replica, "killed");
	int64_t t_promoted = rh_now_ms();
	/*
	 * Whether the node promoted had the hold: its history with the old
	 * primary ends at second_repl_offset - 1. Under load the test's cluster
	 * (node timeout 1 s) may fail over spuriously before the kill, and the
	 * node promoted then is not the one WAIT heard from: the hold is gone
	 * from the cluster, and dlock must say so, as when it never replicated.
	 */
	int kept = replicated && replication_field(replica, "second_repl_offset") - 1 >= hold_offset;
	if (replicated && !kept)
		cr_log_info("the cluster promoted a node without the hold (its history ends at %lld, "
			    "the hold is at %lld): it must be reported lost",
				(long long)(replication_field(replica, "second_repl_offset") - 1),
				(long long)hold_offset);

	if (kept) {
		/* Renewals find the new primary and the hold on it: its TTL goes up. */
		int64_t p0 = rh_command_int(replica, "PTTL killed"), p;
		while ((p = rh_command_int(replica, "PTTL killed")) > 0 && p <= p0 &&
				rh_now_ms() < t_promoted + WATCHDOG_MS)
			dl_sleep_ms(50);
		if (p <= p0)
			explain_missing_hold(replica, p0, p, t_promoted, &lost);
		cr_assert_gt(p, p0, "the hold was not renewed on the new primary (PTTL %lld)",
				(long long)p);
		int64_t t_renewed = rh_now_ms();
		cr_log_info("cluster SIGKILL: renewed on the new primary %lld ms after the kill",
				(long long)(t_renewed - t_kill));
		cr_assert_eq(dl_lost_count(&lost), 0, "a hold that replicated was reported lost");
		dl_pass(dlock_lock_release(a, NULL));
	} else {
		cr_assert_eq(dl_lost_wait(&lost, rh_now_ms() + WATCHDOG_MS), 1,
				"the holder was not told its hold is gone");
		cr_assert_eq(lost.reason, DLOCK_LOST_GONE, "reason %d", lost.reason);
	}
	dl_waiter_join(&w);
	cr_assert_eq(w.rc, 0, "waiter: %s", dlock_lock_errmsg(b));
	cr_assert_leq(w.returned - w.started, 30000 + 2000, "the wait overran its deadline");
	cr_assert_eq(rh_command_int(replica, "HEXISTS killed %s", w.owner), 1);
	cr_log_info("cluster SIGKILL (%s): promoted %lld ms after the kill; the waiter held the "
		    "lock %lld ms after the kill",
			kept ? "replicated" : "not on the node promoted",
			(long long)(t_promoted - t_kill), (long long)(w.returned - t_kill));
	dl_pass(dlock_lock_release(b, w.owner));
	dl_free_locks(a, b);
	dl_close_clients(ca, cb);
	dl_lost_destroy(&lost);
	rh_cluster_free(c);
}

Test(cluster_faults, killed_primary_keeps_a_replicated_hold, .timeout = 120)
{
	killed_primary(1);
}

Test(cluster_faults, killed_primary_loses_an_unreplicated_hold, .timeout = 120)
{
	killed_primary(0);
}

/* ---- resharding under load ----------------------------------------------- */

#define WORKERS 4
#define NAMES 16

typedef struct load {
	rh_cluster *c;
	atomic_int stop;
	atomic_int holders[NAMES]; /* in this process: more than 1 is a double holder */
	atomic_int acquired, double_held, overran, errors;
	dl_failures failures;
} load;

typedef struct worker {
	load *ld;
	int id;
	pthread_t th;
} worker;

static void *work(void *arg)
{
	worker *wk = arg;
	load *ld = wk->ld;
	dlock_client *c = NULL;
	dlock_lock *l[NAMES];
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.command_timeout_ms = 1000;
	if (dlock_client_new(&c, rh_cluster_seed_uri(ld->c), &o) < 0) {
		dl_failures_record(&ld->failures, "open: %s", dlock_errmsg_last());
		return NULL;
	}
	for (int i = 0; i < NAMES; i++) {
		char name[16];

		snprintf(name, sizeof name, "rs-%d", i);
		if (dlock_lock_new(&l[i], c, name, NULL) < 0)
			dl_failures_record(&ld->failures, "lock_new: %s", dlock_errmsg_last());
	}
	for (unsigned k = (unsigned)wk->id; !atomic_load(&ld->stop); k += 7) {
		int i = (int)(k % NAMES);
		int64_t t0 = rh_now_ms();
		int rc = dlock_lock_acquire(l[i], NULL, 2000, 5000);

		/* the wait (2 s) plus one command timeout for the last attempt, and slack */
		if (rh_now_ms() - t0 > 2000 + 1000 + 1500)
			atomic_fetch_add(&ld->overran, 1);
		if (rc == 0) {
			if (atomic_fetch_add(&ld->holders[i], 1) != 0)
				atomic_fetch_add(&ld->double_held, 1);
			atomic_fetch_add(&ld->acquired, 1);
			atomic_fetch_sub(&ld->holders[i], 1);
			if (dlock_lock_release(l[i], NULL) < 0)
				atomic_fetch_add(&ld->errors, 1);
		} else if (rc != DLOCK_ENOTACQUIRED) {
			atomic_fetch_add(&ld->errors, 1);
		}
	}
	for (int i = 0; i < NAMES; i++)
		dlock_lock_free(l[i]);
	dlock_client_free(c);
	return NULL;
}

/* redis-cli --cluster reshard: `slots` slots from one primary to another. */
static int reshard(rh_cluster *c, int slots)
{
	char from[48], to[48], n[16], seed[32];
	int pf = -1, pt = -1, status = 0;

	for (int i = 0; i < rh_cluster_size(c) && pt < 0; i++)
		if (rh_cluster_is_primary(c, i) == 1)
			*(pf < 0 ? &pf : &pt) = i;
	snprintf(from, sizeof from, "%s", rh_cluster_node_id(c, pf));
	snprintf(to, sizeof to, "%s", rh_cluster_node_id(c, pt));
	snprintf(n, sizeof n, "%d", slots);
	snprintf(seed, sizeof seed, "127.0.0.1:%d", rh_server_port(rh_cluster_server(c, pf)));
	pid_t pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		dup2(devnull, 1);
		execlp("redis-cli", "redis-cli", "--cluster", "reshard", seed, "--cluster-from",
				from, "--cluster-to", to, "--cluster-slots", n, "--cluster-yes",
				(char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(cluster_faults, resharding_under_load_never_makes_two_holders, .timeout = 180)
{
	load ld;
	worker wk[WORKERS];

	memset(&ld, 0, sizeof ld);
	dl_failures_init(&ld.failures);
	ld.c = rh_cluster_start(3, 0, NULL);
	cr_assert_not_null(ld.c);
	for (int i = 0; i < WORKERS; i++) {
		wk[i].ld = &ld;
		wk[i].id = i;
		cr_assert_eq(pthread_create(&wk[i].th, NULL, work, &wk[i]), 0);
	}
	dl_sleep_ms(300);
	int before = atomic_load(&ld.acquired);
	int64_t t0 = rh_now_ms();
	cr_assert_eq(reshard(ld.c, 2000), 0, "redis-cli --cluster reshard failed");
	int64_t t1 = rh_now_ms();
	int during = atomic_load(&ld.acquired) - before;
	dl_sleep_ms(300);
	atomic_store(&ld.stop, 1);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(wk[i].th, NULL);
	dl_failures_assert_none(&ld.failures);
	cr_log_info("reshard of 2000 slots in %lld ms under load: %d acquisitions during it, %d in "
		    "all, %d errors (transient, retried by the callers), %d overran",
			(long long)(t1 - t0), during, atomic_load(&ld.acquired),
			atomic_load(&ld.errors), atomic_load(&ld.overran));
	cr_assert_eq(atomic_load(&ld.double_held), 0, "two holders at once");
	cr_assert_eq(atomic_load(&ld.overran), 0, "calls overran their deadline");
	cr_assert_gt(during, 0, "no lock was taken while the slots moved");
	rh_cluster_free(ld.c);
}

/* ---- a RedLock of clusters ----------------------------------------------- */

Test(cluster_faults, a_redlock_of_three_clusters, .timeout = 120)
{
	rh_cluster *c[3];
	dlock_redlock *rl = NULL;
	int64_t validity = 0;

	for (int i = 0; i < 3; i++)
		cr_assert_not_null(c[i] = rh_cluster_start(3, 0, NULL));
	const char *uris[] = { rh_cluster_seed_uri(c[0]), rh_cluster_seed_uri(c[1]),
		rh_cluster_seed_uri(c[2]) };
	dl_pass(dlock_redlock_new_from_uris(&rl, uris, 3, "across", NULL, NULL));
	dl_pass(dl_redlock_acquire_v(&validity, rl, NULL, 0, 10000));
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(dl_slot_owner(c[i], "across"), "EXISTS across"), 1,
				"not held in cluster %d", i + 1);
	dl_pass(dlock_redlock_release(rl, NULL));
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(dl_slot_owner(c[i], "across"), "EXISTS across"), 0);
	dlock_redlock_free(rl);

	/* Contended: someone else holds it in cluster 1 only. The restart guard
	 * then asks the uptimes of the servers that voted (the members serving
	 * the name in clusters 2 and 3) and counts their votes: 2 of 3. */
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_client *other = dl_client(rh_cluster_seed_uri(c[0]), 2000, 30000);
	dlock_lock *partial = dl_lock(other, "across");
	ro.restart_guard_ms = 500;
	dl_sleep_ms(2000); /* older than the guard's window (uptime has 1 s steps) */
	dl_pass(dlock_lock_acquire(partial, NULL, DLOCK_WAIT_FOREVER, 10000));
	dl_pass(dlock_redlock_new_from_uris(&rl, uris, 3, "across", NULL, &ro));
	dl_pass(dl_redlock_acquire_v(&validity, rl, NULL, 0, 10000));
	for (size_t i = 0; i < 3; i++) {
		dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;

		dl_pass(dlock_redlock_member_status(&st, rl, i));
		cr_assert_eq(st.vote, i == 0 ? DLOCK_VOTE_HELD : DLOCK_VOTE_ACQUIRED,
				"member %zu: vote %s (%s)", i, dl_vote_name(st.vote), st.message);
	}
	dl_pass(dlock_redlock_release(rl, NULL));
	dl_pass(dlock_lock_release(partial, NULL));
	dlock_redlock_free(rl);
	dl_free_locks(partial);
	dl_close_clients(other);
	for (int i = 0; i < 3; i++)
		rh_cluster_free(c[i]);
}
