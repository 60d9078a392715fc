/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test harness: who serves a slot, manual failovers and slot moves on a
 * cluster from rh_cluster_start() (see rh_cluster.h). Deliberately its own
 * small reading of CLUSTER SHARDS / CLUSTER SLOTS, not the library's: the
 * harness is what the library's cluster support is tested against.
 */
#include "rh_cluster_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- who serves a slot ---------------------------------------------------- */

static int is_text(const redisReply *r, const char *s)
{
	return r && r->type == REDIS_REPLY_STRING && strcmp(r->str, s) == 0;
}

static const redisReply *field(const redisReply *list, const char *name)
{
	if (!list || list->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < list->elements; i += 2)
		if (is_text(list->element[i], name))
			return list->element[i + 1];
	return NULL;
}

static void fill(int *ports, long long start, long long end, int port)
{
	for (long long s = start; s <= end && s < RHC_SLOTS; s++)
		if (s >= 0)
			ports[s] = port;
}

/* The port of the shard's primary: the first online master, else the first master. */
static int shard_primary_port(const redisReply *nodes)
{
	int any = 0;
	for (size_t j = 0; nodes && nodes->type == REDIS_REPLY_ARRAY && j < nodes->elements; j++) {
		const redisReply *n = nodes->element[j], *port = field(n, "port");
		if (!is_text(field(n, "role"), "master") || !port ||
				port->type != REDIS_REPLY_INTEGER)
			continue;
		if (is_text(field(n, "health"), "online"))
			return (int)port->integer;
		if (!any)
			any = (int)port->integer;
	}
	return any;
}

static int from_shards(const redisReply *r, int *ports)
{
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *slots = field(r->element[i], "slots");
		int port = shard_primary_port(field(r->element[i], "nodes"));
		if (!slots || slots->type != REDIS_REPLY_ARRAY)
			return -1;
		for (size_t k = 0; k + 1 < slots->elements; k += 2)
			fill(ports, slots->element[k]->integer, slots->element[k + 1]->integer,
					port);
	}
	return 0;
}

static int from_slots(const redisReply *r, int *ports)
{
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
				e->element[2]->type != REDIS_REPLY_ARRAY ||
				e->element[2]->elements < 2)
			return -1;
		fill(ports, e->element[0]->integer, e->element[1]->integer,
				(int)e->element[2]->element[1]->integer);
	}
	return 0;
}

int rhc_owner_ports(rh_server *s, int *ports)
{
	memset(ports, 0, RHC_SLOTS * sizeof *ports);
	redisReply *r = rh_command(s, "CLUSTER SHARDS");
	int rc = -1;
	if (r && r->type == REDIS_REPLY_ARRAY) {
		rc = from_shards(r, ports);
	} else if (r && r->type == REDIS_REPLY_ERROR) {
		freeReplyObject(r); /* Redis 6: no CLUSTER SHARDS */
		r = rh_command(s, "CLUSTER SLOTS");
		if (r && r->type == REDIS_REPLY_ARRAY)
			rc = from_slots(r, ports);
	}
	if (r)
		freeReplyObject(r);
	return rc;
}

static int first_running(const rh_cluster *c)
{
	for (int i = 0; i < c->n; i++)
		if (rhc_running(c, i))
			return i;
	return -1;
}

rh_server *rh_cluster_slot_owner(rh_cluster *c, rh_server *asked, int slot)
{
	if (!c || slot < 0 || slot >= RHC_SLOTS)
		return NULL;
	if (!asked) {
		int i = first_running(c);
		if (i < 0)
			return NULL;
		asked = c->servers[i];
	}
	int *ports = malloc(RHC_SLOTS * sizeof *ports);
	rh_server *owner = NULL;
	if (ports && rhc_owner_ports(asked, ports) == 0 && ports[slot] > 0)
		owner = rhc_by_port(c, ports[slot]);
	free(ports);
	return owner;
}

int rh_cluster_key_slot(rh_cluster *c, const char *key)
{
	int i = c && key ? first_running(c) : -1;
	if (i < 0)
		return -1;
	int64_t slot = rh_command_int(c->servers[i], "CLUSTER KEYSLOT %s", key);
	return slot >= 0 && slot < RHC_SLOTS ? (int)slot : -1;
}

/* Until the deadline: does every running server say `owner` serves `slot`? */
int rhc_await_owner(rh_cluster *c, int slot, rh_server *owner, int64_t deadline)
{
	for (;;) {
		int agreed = 1;
		for (int i = 0; i < c->n && agreed; i++)
			if (rhc_running(c, i))
				agreed = rh_cluster_slot_owner(c, c->servers[i], slot) == owner;
		if (agreed)
			return 0;
		if (rh_now_ms() >= deadline)
			return -1;
		rhc_sleep_ms(50);
	}
}

/* ---- failover ------------------------------------------------------------ */

/* A running replica of primary whose link is up, or -1. */
/* Is s a replica of `primary` whose link is up (INFO replication)? */
static int synced_replica_of(rh_server *s, const rh_server *primary)
{
	char *repl = rhc_text(s, "INFO", "replication");
	char role[16] = "", port[16] = "", link[16] = "";

	if (repl) {
		rhc_get(repl, "role", role, sizeof role);
		rhc_get(repl, "master_port", port, sizeof port);
		rhc_get(repl, "master_link_status", link, sizeof link);
	}
	free(repl);
	return strcmp(role, "slave") == 0 && atoi(port) == rh_server_port(primary) &&
			strcmp(link, "up") == 0;
}

static int replica_of(rh_cluster *c, const rh_server *primary)
{
	for (int i = 0; i < c->n; i++)
		if (rhc_running(c, i) && synced_replica_of(c->servers[i], primary))
			return i;
	return -1;
}

/* A slot the primary serves now, or -1. */
static int a_slot_of(rh_server *primary)
{
	int *ports = malloc(RHC_SLOTS * sizeof *ports);
	int found = -1;
	if (ports && rhc_owner_ports(primary, ports) == 0)
		for (int s = 0; s < RHC_SLOTS && found < 0; s++)
			if (ports[s] == rh_server_port(primary))
				found = s;
	free(ports);
	return found;
}

/* Until the deadline: is `old` a synced replica of `promoted`? */
static int await_demoted(rh_server *old, rh_server *promoted, int64_t deadline)
{
	for (;;) {
		if (synced_replica_of(old, promoted))
			return 0;
		if (rh_now_ms() >= deadline)
			return -1;
		rhc_sleep_ms(50);
	}
}

/* How long a manual failover may take before it is asked for again. */
#define RHC_MF_RETRY_MS 6000

/* CLUSTER FAILOVER to a replica; 1 when it was accepted. */
static int send_failover(rh_server *replica)
{
	redisReply *ok = rh_command(replica, "CLUSTER FAILOVER");
	int sent = ok && ok->type == REDIS_REPLY_STATUS;

	if (!sent)
		fprintf(stderr, "rh_cluster: CLUSTER FAILOVER on port %d: %s\n",
				rh_server_port(replica), ok ? ok->str : "no answer");
	if (ok)
		freeReplyObject(ok);
	return sent;
}

rh_server *rh_cluster_failover(rh_cluster *c, rh_server *primary, int timeout_ms)
{
	int p = rh_cluster_index(c, primary);
	int r = p >= 0 ? replica_of(c, primary) : -1;
	int slot = r >= 0 ? a_slot_of(primary) : -1;
	if (slot < 0) {
		fprintf(stderr,
				"rh_cluster: failover: port %d is no primary of ours with slots "
				"and a replica\n",
				rh_server_port(primary));
		return NULL;
	}
	rh_server *promoted = c->servers[r];
	int64_t deadline = rh_now_ms() + timeout_ms;
	/* Redis drops a manual failover the old primary does not take part in
	 * within 5 s (CLUSTER_MF_TIMEOUT; it happens on a busy machine): ask again. */
	for (;;) {
		int64_t round = rh_now_ms() + RHC_MF_RETRY_MS;

		if (!send_failover(promoted))
			return NULL;
		if (rhc_await_owner(c, slot, promoted, round < deadline ? round : deadline) == 0 ||
				rh_now_ms() >= deadline)
			break;
		fprintf(stderr,
				"rh_cluster: the failover of port %d was not done in %d ms; asking "
				"again\n",
				rh_server_port(primary), RHC_MF_RETRY_MS);
	}
	const char *lacks = NULL;
	if (rhc_await_owner(c, slot, promoted, deadline) != 0)
		lacks = "every node to say the replica serves the slots";
	else if (await_demoted(primary, promoted, deadline) != 0)
		lacks = "the old primary to be the new one's synced replica";
	else if (rh_cluster_await_ok(c,
				 (int)(deadline > rh_now_ms() ? deadline - rh_now_ms() : 0)) != 0)
		lacks = "the cluster to be whole again";
	if (!lacks)
		return promoted;
	fprintf(stderr, "rh_cluster: failover of port %d to %d: %d ms were not enough for %s\n",
			rh_server_port(primary), rh_server_port(promoted), timeout_ms, lacks);
	return NULL;
}
