/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: slot maps from topology replies. The input is fed to
 * hiredis's RESP reader as a server would send it; every reply read is then
 * read as CLUSTER SHARDS (plain and TLS ports, with and without an asked
 * host) and as CLUSTER SLOTS. Reading must never crash, must fail only with
 * DLOCK_EPROTO (DLOCK_ESERVER for an error reply) and leave no map then, and
 * a map it makes must hold what slotmap.h promises.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>

#include "core/topology/slot.h"
#include "core/topology/slotmap.h"
#include "dlock/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_node(const dlock__slotnode *n)
{
	if (!n || !n->host || !*n->host || n->port < 1 || n->port > 65535 || (n->id && !*n->id))
		abort();
}

static void check(int rc, dlock__slotmap *m, const redisReply *r)
{
	if (rc != 0) {
		if (m || (rc != DLOCK_EPROTO && rc != DLOCK_ESERVER) ||
				(rc == DLOCK_ESERVER) != (r->type == REDIS_REPLY_ERROR))
			abort();
		return;
	}
	size_t n = dlock__slotmap_count(m), covered = 0;
	for (uint32_t s = 0; s < DLOCK__SLOTS; s++) {
		int p = dlock__slotmap_primary(m, (uint16_t)s);
		if (p < -1 || (p >= 0 && (size_t)p >= n))
			abort();
		covered += p >= 0;
	}
	if (covered != dlock__slotmap_covered(m))
		abort();
	for (size_t i = 0; i < n; i++) {
		check_node(dlock__slotmap_node(m, (int)i));
		for (size_t k = 0; k < dlock__slotmap_replica_count(m, (int)i); k++)
			check_node(dlock__slotmap_replica(m, (int)i, k));
	}
	int idx = dlock__slotmap_moved(m, 7, "fuzz.example", 7000);
	if (idx < 0 || dlock__slotmap_primary(m, 7) != idx)
		abort();
	dlock__slotmap_free(m);
}

static void read_all(const redisReply *r)
{
	dlock__slotmap *m = NULL;
	for (int tls = 0; tls < 2; tls++) {
		int rc = dlock__slotmap_from_shards(&m, r, tls ? NULL : "asked", tls);
		check(rc, m, r);
	}
	int rc = dlock__slotmap_from_slots(&m, r, "asked");
	check(rc, m, r);
	rc = dlock__slotmap_from_slots(&m, r, NULL);
	check(rc, m, r);
}

/* As in fuzz_reply.c: hiredis 0.14 allocates a huge aggregate's array up front. */
static int huge_aggregate(const uint8_t *data, size_t size)
{
	for (size_t i = 0; i < size; i++) {
		size_t digits = 0;
		if (data[i] != '*')
			continue;
		while (i + 1 + digits < size && data[i + 1 + digits] >= '0' &&
				data[i + 1 + digits] <= '9')
			digits++;
		if (digits > 4)
			return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (huge_aggregate(data, size))
		return 0;
	redisReader *reader = redisReaderCreate();
	void *reply = NULL;
	if (reader == NULL)
		return 0;
	if (redisReaderFeed(reader, (const char *)data, size) == REDIS_OK) {
		while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply != NULL) {
			read_all(reply);
			freeReplyObject(reply);
			reply = NULL;
		}
	}
	redisReaderFree(reader);
	return 0;
}
