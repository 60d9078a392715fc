/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test harness: moving one slot between primaries of a cluster from
 * rh_cluster_start(), the way the cluster specification's "Live
 * resharding" describes it (see rh_cluster.h): IMPORTING on the target,
 * MIGRATING on the source, MIGRATE the keys, SETSLOT NODE everywhere.
 * Between begin and end the source answers -ASK for keys already moved and
 * the target serves them only after ASKING.
 */
#include "rh_cluster_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RHC_MOVE_TIMEOUT_MS 10000
#define RHC_KEYS_PER_MIGRATE 100

/* The reply of `what` on s (freed here): 0 when it is OK, else -1 with it on stderr. */
static int rhc_ok(rh_server *s, const char *what, redisReply *r)
{
	int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
	if (!ok)
		fprintf(stderr, "rh_cluster: %s on port %d: %s\n", what, rh_server_port(s),
				r && r->str ? r->str : "no answer");
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

int rh_cluster_move_begin(rh_cluster *c, int slot, rh_server *to, rh_slot_move *mv)
{
	int t = rh_cluster_index(c, to);
	rh_server *from = t >= 0 ? rh_cluster_slot_owner(c, NULL, slot) : NULL;
	int f = rh_cluster_index(c, from);
	if (f < 0 || from == to || !mv) {
		fprintf(stderr,
				"rh_cluster: move of slot %d: no owner, or no target of ours "
				"that is not the owner\n",
				slot);
		return -1;
	}
	mv->slot = slot;
	mv->from = from;
	mv->to = to;
	if (rhc_ok(to, "SETSLOT IMPORTING",
			    rh_command(to, "CLUSTER SETSLOT %d IMPORTING %s", slot, c->ids[f])) !=
			0)
		return -1;
	return rhc_ok(from, "SETSLOT MIGRATING",
			rh_command(from, "CLUSTER SETSLOT %d MIGRATING %s", slot, c->ids[t]));
}

/* MIGRATE keys[0..n) from mv->from to mv->to; 0 or -1. */
static int rhc_migrate(rh_cluster *c, const rh_slot_move *mv, const redisReply *keys, size_t n)
{
	const char **argv = calloc(n + 10, sizeof *argv);
	size_t *lens = calloc(n + 10, sizeof *lens);
	char port[16];
	int rc = -1;
	if (argv && lens) {
		size_t k = 0;
		snprintf(port, sizeof port, "%d", rh_server_port(mv->to));
		const char *head[] = { "MIGRATE", "127.0.0.1", port, "", "0", "5000" };
		for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
			argv[k++] = head[i];
		if (c->password) {
			argv[k++] = "AUTH";
			argv[k++] = c->password;
		}
		argv[k++] = "KEYS";
		for (size_t i = 0; i < n; i++) {
			argv[k] = keys->element[i]->str;
			lens[k++] = keys->element[i]->len;
		}
		for (size_t i = 0; i < k; i++)
			if (lens[i] == 0)
				lens[i] = strlen(argv[i]);
		redisReply *r = rh_command_argv(mv->from, (int)k, argv, lens);
		/* NOKEY: the keys expired meanwhile; nothing to move is no failure. */
		if (r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "NOKEY") == 0) {
			freeReplyObject(r);
			rc = 0;
		} else {
			rc = rhc_ok(mv->from, "MIGRATE", r);
		}
	}
	free(argv);
	free(lens);
	return rc;
}

int rh_cluster_move_keys(rh_cluster *c, const rh_slot_move *mv, int max_keys)
{
	if (!c || !mv)
		return -1;
	int moved = 0;
	while (max_keys <= 0 || moved < max_keys) {
		int want = RHC_KEYS_PER_MIGRATE;
		if (max_keys > 0 && max_keys - moved < want)
			want = max_keys - moved;
		redisReply *keys =
				rh_command(mv->from, "CLUSTER GETKEYSINSLOT %d %d", mv->slot, want);
		int strings = keys && keys->type == REDIS_REPLY_ARRAY;
		for (size_t i = 0; strings && i < keys->elements; i++)
			strings = keys->element[i]->type == REDIS_REPLY_STRING;
		if (!strings) {
			rhc_ok(mv->from, "CLUSTER GETKEYSINSLOT", keys);
			return -1;
		}
		size_t n = keys->elements;
		int rc = n > 0 ? rhc_migrate(c, mv, keys, n) : 0;
		freeReplyObject(keys);
		if (rc != 0)
			return -1;
		if (n == 0)
			break;
		moved += (int)n;
	}
	return moved;
}

int rh_cluster_move_end(rh_cluster *c, const rh_slot_move *mv)
{
	int t = rh_cluster_index(c, mv ? mv->to : NULL);
	if (t < 0 || rh_cluster_move_keys(c, mv, 0) < 0)
		return -1;
	/* The target first, then the source, then the other primaries (the spec's order). */
	const char *id = c->ids[t];
	if (rhc_ok(mv->to, "SETSLOT NODE",
			    rh_command(mv->to, "CLUSTER SETSLOT %d NODE %s", mv->slot, id)) != 0 ||
			rhc_ok(mv->from, "SETSLOT NODE",
					rh_command(mv->from, "CLUSTER SETSLOT %d NODE %s", mv->slot,
							id)) != 0)
		return -1;
	for (int i = 0; i < c->n; i++) {
		rh_server *s = c->servers[i];
		if (s == mv->to || s == mv->from || !rhc_running(c, i) ||
				rh_cluster_is_primary(c, i) != 1)
			continue;
		if (rhc_ok(s, "SETSLOT NODE",
				    rh_command(s, "CLUSTER SETSLOT %d NODE %s", mv->slot, id)) != 0)
			return -1;
	}
	if (rhc_await_owner(c, mv->slot, mv->to, rh_now_ms() + RHC_MOVE_TIMEOUT_MS) != 0) {
		fprintf(stderr,
				"rh_cluster: slot %d: not every node says port %d serves it "
				"after %d ms\n",
				mv->slot, rh_server_port(mv->to), RHC_MOVE_TIMEOUT_MS);
		return -1;
	}
	return 0;
}

int rh_cluster_move_slot(rh_cluster *c, int slot, rh_server *to, int pause_ms)
{
	rh_slot_move mv;
	if (rh_cluster_move_begin(c, slot, to, &mv) != 0)
		return -1;
	if (pause_ms > 0)
		rhc_sleep_ms(pause_ms);
	if (rh_cluster_move_keys(c, &mv, 0) < 0)
		return -1;
	if (pause_ms > 0)
		rhc_sleep_ms(pause_ms);
	return rh_cluster_move_end(c, &mv);
}
