/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Replicas for the harness: a redis-server started with --replicaof one of
 * ours, and the wait until the primary lists it online (see
 * redis_harness.h). Built on the public harness calls only.
 */
#include "redis_harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define RH_REPLICA_ONLINE_MS 20000
#define RH_REPLICA_POLL_MS 10

static void rh_nap(int ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
	}
}

/* The replicas INFO replication lists as state=online; -1 on error. */
static int rh_online(rh_server *primary)
{
	redisReply *r = rh_command(primary, "INFO replication");
	int n = 0;

	if (r == NULL || r->type != REDIS_REPLY_STRING) {
		if (r != NULL)
			freeReplyObject(r);
		return -1;
	}
	for (const char *p = r->str; (p = strstr(p, "state=online")) != NULL; p++)
		n++;
	freeReplyObject(r);
	return n;
}

/*
 * "online" on the primary means the transfer is done; the replica may still
 * be loading it and acknowledges nothing until it has: write, and WAIT for
 * n acknowledgements (the harness's connection is the one that wrote).
 * 1 when they came.
 */
static int rh_acked(rh_server *primary, int n, int64_t deadline)
{
	int64_t left = deadline - rh_now_ms();
	redisReply *r = rh_command(primary, "SET rh:replica-probe 1");

	if (r != NULL)
		freeReplyObject(r);
	/* Below rh_command's 1 s socket timeout; the caller asks again. */
	if (left > 800)
		left = 800;
	if (left < 1)
		left = 1;
	return rh_command_int(primary, "WAIT %d %lld", n, (long long)left) >= n;
}

int rh_wait_replicas(rh_server *primary, int n, int timeout_ms)
{
	int64_t deadline = rh_now_ms() + timeout_ms;

	for (;;) {
		int online = rh_online(primary);

		if (online >= n && rh_acked(primary, n, deadline))
			return 0;
		if (rh_now_ms() >= deadline) {
			fprintf(stderr, "redis_harness: %d of %d replicas online after %d ms\n",
					online, n, timeout_ms);
			return -1;
		}
		rh_nap(RH_REPLICA_POLL_MS);
	}
}

rh_server *rh_replica_start(rh_server *primary)
{
	char port[16];
	const char *extra[] = { "--replicaof", "127.0.0.1", port, NULL };
	int before = rh_online(primary);
	redisReply *r;
	rh_server *replica;

	if (before < 0)
		return NULL;
	/* The first sync would otherwise wait 5 s for more replicas to join it. */
	r = rh_command(primary, "CONFIG SET repl-diskless-sync-delay 0");
	if (r != NULL)
		freeReplyObject(r);
	snprintf(port, sizeof port, "%d", rh_server_port(primary));
	replica = rh_server_start(extra);
	if (replica != NULL && rh_wait_replicas(primary, before + 1, RH_REPLICA_ONLINE_MS) != 0) {
		rh_server_free(replica);
		return NULL;
	}
	return replica;
}
