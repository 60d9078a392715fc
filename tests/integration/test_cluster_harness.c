/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cluster harness itself (tests/harness/rh_cluster.h), on a real
 * 3-primary, 1-replica-each cluster: its accessors, a slot move (with -ASK
 * while it is under way, -MOVED after), a manual failover, and a teardown
 * that leaves no process and no directory. Slot ownership is checked in
 * another node's CLUSTER SHARDS and by what the nodes answer to commands.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "rh_cluster.h"

#define NSERVERS 6

static redisReply *cmd(rh_server *s, const char *fmt, const char *key)
{
	redisReply *r = rh_command(s, fmt, key);
	cr_assert_not_null(r, "no answer from port %d", rh_server_port(s));
	return r;
}

/* The reply to `fmt key` on s is the error "want..." (prefix). */
static void expect_error(rh_server *s, const char *fmt, const char *key, const char *want)
{
	redisReply *r = cmd(s, fmt, key);
	cr_assert(r->type == REDIS_REPLY_ERROR && strncmp(r->str, want, strlen(want)) == 0,
			"port %d, %s: \"%s\", want \"%s...\"", rh_server_port(s), key,
			r->str ? r->str : "(not an error)", want);
	freeReplyObject(r);
}

static void expect_value(rh_server *s, const char *key, const char *want)
{
	redisReply *r = cmd(s, "GET %s", key);
	cr_assert(r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0,
			"port %d, GET %s: type %d \"%s\"", rh_server_port(s), key, r->type,
			r->str ? r->str : "");
	freeReplyObject(r);
}

/* A server that is neither a nor b (a third view). */
static rh_server *other_than(rh_cluster *c, rh_server *a, rh_server *b)
{
	for (int i = 0; i < rh_cluster_size(c); i++)
		if (rh_cluster_server(c, i) != a && rh_cluster_server(c, i) != b)
			return rh_cluster_server(c, i);
	return NULL;
}

static void check_accessors(rh_cluster *c)
{
	cr_assert_eq(rh_cluster_size(c), NSERVERS);
	cr_assert_null(rh_cluster_server(c, NSERVERS));
	cr_assert_null(rh_cluster_server(c, -1));
	const char *seed = rh_cluster_seed_uri(c);
	cr_assert(strncmp(seed, "redis+cluster://", 16) == 0, "%s", seed);
	int commas = 0;
	for (const char *p = seed; *p; p++)
		commas += *p == ',';
	cr_assert_eq(commas, NSERVERS - 1, "%s", seed);
	for (int i = 0; i < NSERVERS; i++) {
		rh_server *s = rh_cluster_server(c, i);
		char addr[32];
		snprintf(addr, sizeof addr, "127.0.0.1:%d", rh_server_port(s));
		cr_assert(strstr(seed, addr) != NULL, "%s lacks %s", seed, addr);
		cr_assert_eq(rh_cluster_index(c, s), i);
		cr_assert_eq(strlen(rh_cluster_node_id(c, i)), 40);
		for (int j = 0; j < i; j++)
			cr_assert_str_neq(rh_cluster_node_id(c, i), rh_cluster_node_id(c, j));
		/* As created: the primaries first. */
		cr_assert_eq(rh_cluster_is_primary(c, i), i < 3, "server %d", i);
	}
	cr_assert_eq(rh_cluster_key_slot(c, "foo"), 12182);
	cr_assert_eq(rh_cluster_key_slot(c, "{user1000}.following"), 3443);
	for (int slot = 0; slot < 16384; slot += 4096) {
		rh_server *owner = rh_cluster_slot_owner(c, NULL, slot);
		cr_assert_not_null(owner, "slot %d", slot);
		cr_assert_eq(rh_cluster_is_primary(c, rh_cluster_index(c, owner)), 1);
		for (int i = 0; i < NSERVERS; i++)
			cr_assert_eq(rh_cluster_slot_owner(c, rh_cluster_server(c, i), slot), owner,
					"slot %d in server %d's view", slot, i);
	}
}

/* Move the slot of {mv}: one key first (-ASK for it), then the rest. */
static void check_move(rh_cluster *c)
{
	int slot = rh_cluster_key_slot(c, "{mv}a");
	rh_server *from = rh_cluster_slot_owner(c, NULL, slot), *to = NULL;
	for (int i = 0; i < 3 && !to; i++)
		if (rh_cluster_server(c, i) != from)
			to = rh_cluster_server(c, i);
	cr_assert_not_null(from);
	static const char *const keys[] = { "{mv}a", "{mv}b" };
	for (int k = 0; k < 2; k++) {
		redisReply *r = cmd(from, "SET %s v", keys[k]);
		cr_assert_eq(r->type, REDIS_REPLY_STATUS);
		freeReplyObject(r);
	}

	rh_slot_move mv;
	cr_assert_eq(rh_cluster_move_begin(c, slot, to, &mv), 0);
	cr_assert(mv.from == from && mv.to == to && mv.slot == slot);
	cr_assert_eq(rh_cluster_move_keys(c, &mv, 1), 1);
	char ask[64];
	snprintf(ask, sizeof ask, "ASK %d 127.0.0.1:%d", slot, rh_server_port(to));
	redisReply *n = rh_command(from, "CLUSTER COUNTKEYSINSLOT %d", slot);
	cr_assert(n && n->type == REDIS_REPLY_INTEGER && n->integer == 1);
	freeReplyObject(n);
	redisReply *ea = cmd(from, "EXISTS %s", keys[0]);
	/* The key that moved: the source answers -ASK for it (a key it lacks). */
	int moved = ea->type == REDIS_REPLY_ERROR ? 0 : 1;
	freeReplyObject(ea);
	expect_error(from, "GET %s", keys[moved], ask);
	expect_value(from, keys[1 - moved], "v");
	char moved_to_from[64];
	snprintf(moved_to_from, sizeof moved_to_from, "MOVED %d 127.0.0.1:%d", slot,
			rh_server_port(from));
	expect_error(to, "GET %s", keys[moved], moved_to_from);
	redisReply *asking = rh_command(to, "ASKING");
	cr_assert(asking && asking->type == REDIS_REPLY_STATUS);
	freeReplyObject(asking);
	expect_value(to, keys[moved], "v"); /* the same connection, after ASKING */

	cr_assert_eq(rh_cluster_move_end(c, &mv), 0);
	rh_server *third = other_than(c, from, to);
	cr_assert_eq(rh_cluster_slot_owner(c, third, slot), to, "in a third node's CLUSTER SHARDS");
	char moved_to_to[64];
	snprintf(moved_to_to, sizeof moved_to_to, "MOVED %d 127.0.0.1:%d", slot,
			rh_server_port(to));
	expect_error(from, "GET %s", keys[0], moved_to_to);
	expect_value(to, keys[0], "v");
	expect_value(to, keys[1], "v");
	/* And back in one call, with a pause between the steps. */
	cr_assert_eq(rh_cluster_move_slot(c, slot, from, 50), 0);
	cr_assert_eq(rh_cluster_slot_owner(c, third, slot), from);
	expect_value(from, keys[1], "v");
}

static void check_failover(rh_cluster *c)
{
	rh_server *old = rh_cluster_slot_owner(c, NULL, 0);
	cr_assert_not_null(old);
	int64_t t0 = rh_now_ms();
	rh_server *promoted = rh_cluster_failover(c, old, 20000);
	cr_assert_not_null(promoted, "failover of port %d", rh_server_port(old));
	cr_log_info("failover in %lld ms", (long long)(rh_now_ms() - t0));
	cr_assert_neq(promoted, old);
	cr_assert_eq(rh_cluster_is_primary(c, rh_cluster_index(c, promoted)), 1);
	cr_assert_eq(rh_cluster_is_primary(c, rh_cluster_index(c, old)), 0);
	rh_server *third = other_than(c, old, promoted);
	cr_assert_eq(rh_cluster_slot_owner(c, third, 0), promoted, "in a third node's view");
	/* A write to slot 0's new primary; the old one redirects there. */
	char moved[64];
	snprintf(moved, sizeof moved, "MOVED 0 127.0.0.1:%d", rh_server_port(promoted));
	expect_error(old, "SET %s x", "", moved); /* "" hashes to slot 0 */
	redisReply *r = cmd(promoted, "SET %s x", "");
	cr_assert_eq(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	cr_assert_eq(rh_cluster_await_ok(c, 5000), 0);
}

Test(cluster_harness, start_move_failover_teardown, .timeout = 180)
{
	int64_t t0 = rh_now_ms();
	rh_cluster *c = rh_cluster_start(3, 1, NULL);
	cr_assert_not_null(c, "the cluster did not start (see stderr)");
	cr_log_info("3x2 cluster up in %lld ms", (long long)(rh_now_ms() - t0));
	cr_assert_lt(rh_now_ms() - t0, 60000);

	check_accessors(c);
	check_move(c);
	check_failover(c);

	pid_t pids[NSERVERS];
	char dirs[NSERVERS][4096];
	for (int i = 0; i < NSERVERS; i++) {
		pids[i] = rh_server_pid(rh_cluster_server(c, i));
		snprintf(dirs[i], sizeof dirs[i], "%s", rh_server_dir(rh_cluster_server(c, i)));
		cr_assert_gt(pids[i], 0);
	}
	rh_cluster_free(c);
	for (int i = 0; i < NSERVERS; i++) {
		cr_assert(kill(pids[i], 0) == -1 && errno == ESRCH, "server %d still runs", i);
		cr_assert(access(dirs[i], F_OK) != 0, "%s still there", dirs[i]);
	}
	rh_cluster_free(NULL);
}

Test(cluster_harness, refuses_too_few_primaries, .timeout = 10)
{
	cr_assert_null(rh_cluster_start(2, 1, NULL));
	cr_assert_null(rh_cluster_start(3, -1, NULL));
}

/* With --requirepass: redis-cli and MIGRATE are given the password too. */
Test(cluster_harness, with_a_password, .timeout = 120)
{
	static const char *const extra[] = { "--requirepass", "s3cret", "--masterauth", "s3cret",
		NULL };
	rh_cluster *c = rh_cluster_start(3, 0, extra);
	cr_assert_not_null(c, "the cluster did not start (see stderr)");
	cr_assert_eq(rh_cluster_size(c), 3);
	int slot = rh_cluster_key_slot(c, "{pw}k");
	rh_server *from = rh_cluster_slot_owner(c, NULL, slot);
	rh_server *to = rh_cluster_server(c, rh_cluster_index(c, from) == 0 ? 1 : 0);
	redisReply *r = cmd(from, "SET %s v", "{pw}k");
	cr_assert_eq(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	cr_assert_eq(rh_cluster_move_slot(c, slot, to, 0), 0);
	cr_assert_eq(rh_cluster_slot_owner(c, NULL, slot), to);
	expect_value(to, "{pw}k", "v");
	rh_cluster_free(c);
}
