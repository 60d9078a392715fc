/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: mapping server replies to results. The input is fed to
 * hiredis's RESP reader as a server would send it; every reply read is then
 * mapped as an error reply, an acquire answer (plain and fenced) and a
 * release answer. The mapping must never crash and must keep its promises.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>

#include "core/net/conn.h"
#include "dlock/errors.h"
#include "single/replies.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void map(const redisReply *r)
{
	dlock__node node;
	dlock__acquired got;
	int64_t left;
	int rc;

	memset(&node, 0, sizeof(node));
	strcpy(node.label, "fuzz:0");
	rc = dlock__reply_check(&node, r, "fuzz");
	if (rc != 0 && rc != DLOCK_ESERVER && rc != DLOCK_EWRONGTYPE && rc != DLOCK_EAUTH)
		abort();
	if ((rc == 0) == (r->type == REDIS_REPLY_ERROR))
		abort();
	for (int fenced = 0; fenced < 2; fenced++) {
		rc = dlock__parse_acquire(r, fenced, &got);
		if (rc == 0 && got.count < 1)
			abort();
		if (rc != 0 && rc != DLOCK_ENOTACQUIRED && rc != DLOCK_EPROTO)
			abort();
	}
	rc = dlock__parse_release(r, &left);
	if ((rc == 0) != (left >= 0) || (rc != 0 && rc != DLOCK_ENOTOWNER && rc != DLOCK_EPROTO))
		abort();
}

/*
 * hiredis 0.14's reader allocates an aggregate's element array as soon as it
 * reads the header, so "*9999999999" makes it ask for gigabytes (hiredis 1.x
 * caps this with maxelements). That is hiredis's allocator, not dlock's
 * mapping, and a Redis server never sends such a reply to dlock's scripts:
 * leave aggregates of more than 9999 elements out.
 */
static int huge_aggregate(const uint8_t *data, size_t size)
{
	size_t i, digits;

	for (i = 0; i < size; i++) {
		if (data[i] != '*')
			continue;
		for (digits = 0; i + 1 + digits < size && data[i + 1 + digits] >= '0' &&
				data[i + 1 + digits] <= '9'; digits++)
			;
		if (digits > 4)
			return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	redisReader *reader;
	void *reply = NULL;

	if (huge_aggregate(data, size))
		return 0;
	reader = redisReaderCreate();
	if (reader == NULL)
		return 0;
	if (redisReaderFeed(reader, (const char *)data, size) == REDIS_OK) {
		while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply != NULL) {
			map(reply);
			freeReplyObject(reply);
			reply = NULL;
		}
	}
	redisReaderFree(reader);
	return 0;
}
