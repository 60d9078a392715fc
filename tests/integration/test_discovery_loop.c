/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Discovery is an operation on the caller's loop: an acquire on a
 * redis+sentinel:// client whose only sentinel is paused (SIGSTOP: it takes
 * the connection, never answers) leaves the caller's loop free - its own
 * timer keeps firing - and ends with an error naming the sentinel.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

#define MASTER "disco"
#define CONNECT_MS 3000
#define TICK_MS 20

static rh_server *data, *sent;

static void topo_up(void)
{
	char monitor[96];

	cr_assert_not_null(data = rh_server_start(NULL));
	snprintf(monitor, sizeof monitor, "sentinel monitor " MASTER " 127.0.0.1 %d 1",
			rh_server_port(data));
	const char *conf[] = { monitor, NULL };
	cr_assert_not_null(sent = rh_sentinel_start(NULL, conf));
}

static void topo_down(void)
{
	rh_server_free(sent);
	rh_server_free(data);
}

TestSuite(discovery_loop, .init = topo_up, .fini = topo_down, .timeout = 60);

/* The caller's own loop: a tick every TICK_MS beside the dlock loop's
 * descriptor, until o ends (bounded). The longest gap between ticks. */
static int64_t ride(dlock_loop *loop, const dl_outcome *o, int64_t limit_ms)
{
	int64_t t0 = rh_now_ms(), last = t0, gap = 0;

	while (o->calls == 0 && rh_now_ms() < t0 + limit_ms) {
		struct pollfd p = { .fd = dlock_loop_fd(loop), .events = POLLIN };
		int64_t now;

		poll(&p, 1, TICK_MS);
		cr_assert(dlock_loop_run(loop, 0) >= 0, "%s", dlock_errmsg_last());
		now = rh_now_ms(); /* the tick */
		if (now - last > gap)
			gap = now - last;
		last = now;
	}
	return gap;
}

/* An acquire on the caller's loop while the only sentinel (asking for
 * `password` when not NULL) is paused. */
static void acquire_with_the_sentinel_paused(rh_server *s, const char *password)
{
	dlock_client_options opts = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_lock *l = NULL;
	dl_outcome o = { 0 };
	char uri[128], where[64];
	int64_t t0, gap, begun;

	snprintf(uri, sizeof uri, "redis+sentinel://127.0.0.1:%d/" MASTER, rh_server_port(s));
	snprintf(where, sizeof where, "sentinel 127.0.0.1:%d", rh_server_port(s));
	dl_pass(dlock_loop_new(&loop, NULL));
	opts.loop = loop;
	opts.lazy_connect = 1;
	opts.connect_timeout_ms = CONNECT_MS;
	opts.command_timeout_ms = 1000;
	opts.sentinel_password = password;
	cr_assert_eq(rh_server_pause(s), 0);
	t0 = rh_now_ms();
	dlock_client *c = dl_client_opts(uri, &opts);
	dl_pass(dlock_lock_new(&l, c, "disco:lock", NULL));
	dl_pass(dlock_lock_acquire_async(NULL, l, "me:1", 0, 10000, dl_note, &o));
	begun = rh_now_ms() - t0;
	gap = ride(loop, &o, 3 * CONNECT_MS);
	rh_server_resume(s);
	cr_assert_eq(o.calls, 1, "the acquire did not end within %d ms", 3 * CONNECT_MS);
	cr_assert_lt(begun, CONNECT_MS / 3, "opening the client and starting the acquire took %lld ms",
			(long long)begun);
	cr_assert_lt(gap, CONNECT_MS / 3,
			"the caller's loop stopped for %lld ms while the sentinel was asked",
			(long long)gap);
	cr_assert_neq(o.code, 0, "acquired with no primary known");
	cr_assert(strstr(o.message, where) != NULL, "\"%s\" does not name %s", o.message, where);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(discovery_loop, a_paused_sentinel_never_blocks_the_callers_loop)
{
	acquire_with_the_sentinel_paused(sent, NULL);
}

/* With a password the sentinel's handshake (AUTH) goes with the question:
 * its answer is awaited on the loop too. */
Test(discovery_loop, a_paused_sentinel_asking_a_password_never_blocks_the_callers_loop)
{
	/* A sentinel's clients authenticate as its ACL's default user. */
	redisReply *r = rh_command(sent, "ACL SETUSER default on >sesame");

	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "the sentinel took no password");
	freeReplyObject(r);
	acquire_with_the_sentinel_paused(sent, "sesame");
}

/*
 * The same for a cluster client whose slot map must be read again (a
 * command timed out: a primary may have failed over) while its nodes are
 * paused: the reading is an operation on the loop, and the acquire routes
 * by the map it knows meanwhile.
 */
static rh_cluster *cluster;

static void cluster_up(void)
{
	cr_assert_not_null(cluster = rh_cluster_start(3, 0, NULL));
}

static void cluster_down(void)
{
	rh_cluster_free(cluster);
}

TestSuite(discovery_cluster, .init = cluster_up, .fini = cluster_down, .timeout = 90);

#define CLUSTER_CONNECT_MS 6000

Test(discovery_cluster, a_suspect_slot_map_is_read_again_off_the_callers_loop)
{
	dlock_client_options opts = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_lock *l = NULL;
	dl_outcome first = { 0 }, second = { 0 };
	int64_t gap;

	dl_pass(dlock_loop_new(&loop, NULL));
	opts.loop = loop;
	opts.connect_timeout_ms = CLUSTER_CONNECT_MS;
	opts.command_timeout_ms = 500;
	dlock_client *c = dl_client_opts(rh_cluster_seed_uri(cluster), &opts); /* reads the map */
	dl_pass(dlock_lock_new(&l, c, "disco:cluster", NULL));
	for (int i = 0; i < rh_cluster_size(cluster); i++)
		cr_assert_eq(rh_server_pause(rh_cluster_server(cluster, i)), 0);
	/* It times out: the map is suspect from now on. */
	dl_pass(dlock_lock_acquire_async(NULL, l, "me:1", 0, 10000, dl_note, &first));
	ride(loop, &first, 3 * CLUSTER_CONNECT_MS);
	cr_assert_eq(first.calls, 1, "the first acquire did not end");
	dl_sleep_ms(150); /* a suspect map is read again at most every 100 ms */
	dl_pass(dlock_lock_acquire_async(NULL, l, "me:1", 0, 10000, dl_note, &second));
	gap = ride(loop, &second, 3 * CLUSTER_CONNECT_MS);
	for (int i = 0; i < rh_cluster_size(cluster); i++)
		rh_server_resume(rh_cluster_server(cluster, i));
	cr_assert_eq(second.calls, 1, "the second acquire did not end");
	cr_assert_neq(second.code, 0, "acquired on a paused cluster");
	cr_assert_lt(gap, CLUSTER_CONNECT_MS / 3,
			"the caller's loop stopped for %lld ms while the slot map was read",
			(long long)gap);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}
