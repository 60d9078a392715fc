/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Events and stats of locks over several nodes: a RedLock with a member
 * down (one event with its votes, on the first member's client), a
 * MultiLock, a RedLock whose majority is deleted (one LOST, none of its
 * parts'), a cluster client's one node per member and a Sentinel client's
 * primary.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include <dlock.h>

#include "event_recorder.h"
#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

/* n clients (command timeout 300 ms, lazy, watchdog_ms) with the hook, a member `name` each. */
static void members_up(rh_server **s, dlock_client **c, dlock_lock **m, int n, const char *name,
		recorder *r, int64_t watchdog_ms)
{
	for (int i = 0; i < n; i++) {
		dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

		o.connect_timeout_ms = o.command_timeout_ms = 300;
		if (watchdog_ms > 0)
			o.watchdog_timeout_ms = watchdog_ms;
		o.lazy_connect = 1;
		o.on_event = on_event;
		o.event_userdata = r;
		c[i] = dl_client_opts(rh_server_uri(s[i]), &o);
		m[i] = dl_lock(c[i], name);
	}
}

static void members_down(rh_server **s, dlock_client **c, dlock_lock **m, int n)
{
	for (int i = 0; i < n; i++) {
		dlock_lock_free(m[i]);
		dlock_client_free(c[i]);
		rh_server_free(s[i]);
	}
}

Test(events, redlock_with_a_member_down_reports_once_with_its_votes, .timeout = 60)
{
	rh_server *s[3];
	recorder r;
	dlock_client *c[3];
	dlock_lock *m[3];
	dlock_redlock *rl = NULL;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	seen_event acq, rel;

	rec_init(&r);
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	members_up(s, c, m, 3, "events:redlock", &r, 0);
	ro.restart_guard_ms = 0;
	dl_pass(dlock_redlock_new(&rl, m, 3, &ro));
	cr_assert_eq(rh_server_kill(s[2]), 0);

	dl_pass(dlock_redlock_acquire(rl, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(20);
	dl_pass(dlock_redlock_release(rl, NULL));

	cr_assert_eq(rec_count(&r, DLOCK_STAT_ACQUIRED), 1, "one ACQUIRED, not one per member");
	cr_assert_eq(rec_count(&r, DLOCK_STAT_RELEASED), 1, "one RELEASED, not one per member");
	cr_assert(rec_wait(&r, DLOCK_STAT_ACQUIRED, 0, &acq));
	cr_assert(rec_wait(&r, DLOCK_STAT_RELEASED, 0, &rel));
	cr_assert_eq(acq.ev.votes, 2);
	cr_assert_eq(acq.ev.members, 3);
	cr_assert_geq(acq.ev.attempts, 1);
	cr_assert_str_eq(acq.name, "events:redlock");
	cr_assert_geq(rel.ev.hold_ms, 15);

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c[0]));
	cr_assert_eq(st->acquired, 1);
	cr_assert_eq(st->released, 1);
	cr_assert_eq(st->held, 0);
	dlock_stats_free(st);
	dl_pass(dlock_client_stats(&st, c[1]));
	cr_assert_eq(st->acquired, 0, "member 1's client reports no lock events");
	cr_assert_eq(st->held, 0);
	cr_assert_geq(st->nodes[0].commands, 2);
	dlock_stats_free(st);
	dl_pass(dlock_client_stats(&st, c[2]));
	cr_assert_eq(st->nodes[0].commands, 0);
	cr_assert_geq(st->nodes[0].errors, 1);
	cr_assert_eq(st->nodes[0].downs, 0, "never answered: not down");
	dlock_stats_free(st);

	dlock_redlock_free(rl);
	members_down(s, c, m, 3);
}

Test(events, multilock_reports_all_members_granted_once, .timeout = 60)
{
	rh_server *s[3];
	recorder r;
	dlock_client *c[3];
	dlock_lock *m[3];
	dlock_multilock *ml = NULL;
	seen_event acq;

	rec_init(&r);
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	members_up(s, c, m, 3, "events:multi", &r, 0);
	dl_pass(dlock_multilock_new(&ml, m, 3, NULL));
	dl_pass(dlock_multilock_acquire(ml, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_multilock_release(ml, NULL));
	cr_assert_eq(rec_count(&r, DLOCK_STAT_ACQUIRED), 1);
	cr_assert_eq(rec_count(&r, DLOCK_STAT_RELEASED), 1);
	cr_assert(rec_wait(&r, DLOCK_STAT_ACQUIRED, 0, &acq));
	cr_assert_eq(acq.ev.votes, 3);
	cr_assert_eq(acq.ev.members, 3);

	dlock_multilock_free(ml);
	members_down(s, c, m, 3);
}

Test(events, redlock_majority_deleted_is_lost_once, .timeout = 60)
{
	rh_server *s[3];
	recorder r;
	dlock_client *c[3];
	dlock_lock *m[3];
	dlock_redlock *rl = NULL;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	seen_event lost;

	rec_init(&r);
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	members_up(s, c, m, 3, "events:redlost", &r, 600);
	ro.restart_guard_ms = 0;
	dl_pass(dlock_redlock_new(&rl, m, 3, &ro));
	dl_pass(dlock_redlock_acquire(rl, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	cr_assert_eq(rh_command_int(s[0], "DEL %s", "events:redlost"), 1);
	cr_assert_eq(rh_command_int(s[1], "DEL %s", "events:redlost"), 1);
	cr_assert(rec_wait(&r, DLOCK_STAT_LOST, 3000, &lost), "no LOST within 3 s");
	dl_sleep_ms(300); /* the other member's renewal, had it reported */
	cr_assert_eq(rec_count(&r, DLOCK_STAT_LOST), 1, "one LOST: the RedLock's, not its parts'");
	cr_assert_eq(lost.ev.reason, DLOCK_LOST_GONE);
	cr_assert_str_eq(lost.name, "events:redlost");

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c[0]));
	cr_assert_eq(st->lost, 1);
	cr_assert_eq(st->held, 0);
	dlock_stats_free(st);
	for (int i = 1; i < 3; i++) {
		dl_pass(dlock_client_stats(&st, c[i]));
		cr_assert_eq(st->lost, 0);
		cr_assert_eq(st->held, 0);
		dlock_stats_free(st);
	}

	dlock_redlock_release(rl, NULL);
	dlock_redlock_free(rl);
	members_down(s, c, m, 3);
}

Test(events, cluster_client_lists_one_node_per_member, .timeout = 120)
{
	rh_cluster *cl = rh_cluster_start(3, 0, NULL);
	recorder r;
	const int n = 30;

	cr_assert_not_null(cl, "could not start a cluster");
	rec_init(&r);
	dlock_client *c = hooked_client(rh_cluster_seed_uri(cl), &r, 2000, 0);
	for (int i = 0; i < n; i++) { /* 30 names: all 3 shards but with odds of 1e-5 */
		char name[32];

		snprintf(name, sizeof(name), "events:shard-%d", i);
		dlock_lock *l = dl_lock(c, name);
		dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
		dl_pass(dlock_lock_release(l, NULL));
		dlock_lock_free(l);
	}

	dlock_stats *st;
	uint64_t commands = 0;
	dl_pass(dlock_client_stats(&st, c));
	cr_assert_eq(st->acquired, (uint64_t)n);
	cr_assert_eq(st->released, (uint64_t)n);
	cr_assert_geq(st->nnodes, 3, "%zu nodes", st->nnodes);
	for (size_t i = 0; i < st->nnodes; i++) {
		commands += st->nodes[i].commands;
		cr_assert_eq(st->nodes[i].rtt.count, st->nodes[i].commands);
		cr_assert(strchr(st->nodes[i].node, ':') != NULL, "node %s", st->nodes[i].node);
	}
	cr_assert_geq(commands, (uint64_t)(2 * n), "%llu commands", (unsigned long long)commands);
	dlock_stats_free(st);

	dlock_client_free(c);
	rh_cluster_free(cl);
}

/* One primary and one sentinel (quorum 1): the client's one node names the
 * primary it reached. */
Test(events, sentinel_client_names_the_primary_it_reached, .timeout = 60)
{
	rh_server *primary = rh_server_start(NULL), *sentinel;
	char monitor[96], uri[96], where[32];
	recorder r;

	cr_assert_not_null(primary);
	snprintf(monitor, sizeof(monitor), "sentinel monitor evm 127.0.0.1 %d 1",
			rh_server_port(primary));
	const char *conf[] = { monitor, NULL };
	cr_assert_not_null(sentinel = rh_sentinel_start(NULL, conf));
	snprintf(uri, sizeof(uri), "redis+sentinel://127.0.0.1:%d/evm", rh_server_port(sentinel));
	rec_init(&r);
	dlock_client *c = hooked_client(uri, &r, 2000, 0);
	dlock_lock *l = dl_lock(c, "events:sentinel");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
	dl_pass(dlock_lock_release(l, NULL));

	dlock_stats *st;
	dl_pass(dlock_client_stats(&st, c));
	snprintf(where, sizeof(where), "127.0.0.1:%d", rh_server_port(primary));
	cr_assert_eq(st->nnodes, 1);
	cr_assert(strstr(st->nodes[0].node, where) != NULL, "node %s, primary %s",
			st->nodes[0].node, where);
	cr_assert_geq(st->nodes[0].commands, 2);
	cr_assert_eq(st->acquired, 1);
	dlock_stats_free(st);

	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(sentinel);
	rh_server_free(primary);
}
