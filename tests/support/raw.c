/* SPDX-License-Identifier: BSD-3-Clause */
/* Raw hiredis connections, for checks that must not go through dlock. */
#include <poll.h>

#include <criterion/criterion.h>

#include "redis_harness.h"
#include "support.h"

redisContext *dl_raw_connect(int port, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

	cr_assert_not_null(c);
	cr_assert_eq(c->err, 0, "raw connect: %s", c->errstr);
	cr_assert_eq(redisSetTimeout(c, tv), REDIS_OK);
	return c;
}

redisReply *dl_next_reply(redisContext *c, int timeout_ms)
{
	int64_t deadline = rh_now_ms() + timeout_ms;

	for (;;) {
		void *reply = NULL;
		struct pollfd p = { c->fd, POLLIN, 0 };
		int64_t left;

		cr_assert_eq(redisGetReplyFromReader(c, &reply), REDIS_OK, "reader: %s", c->errstr);
		if (reply != NULL)
			return reply;
		left = deadline - rh_now_ms();
		if (left <= 0)
			return NULL;
		if (poll(&p, 1, (int)left) > 0)
			cr_assert_eq(redisBufferRead(c), REDIS_OK, "read: %s", c->errstr);
	}
}

redisContext *dl_subscribe(int port, const char *channel)
{
	redisContext *c = dl_raw_connect(port, 2000);
	redisReply *r;
	int done = 0;

	cr_assert_eq(redisAppendCommand(c, "SUBSCRIBE %s", channel), REDIS_OK);
	while (!done)
		cr_assert_eq(redisBufferWrite(c, &done), REDIS_OK);
	r = dl_next_reply(c, 2000);
	cr_assert_not_null(r, "no SUBSCRIBE confirmation for %s", channel);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->elements, 3);
	cr_assert_str_eq(r->element[0]->str, "subscribe");
	cr_assert_str_eq(r->element[1]->str, channel);
	freeReplyObject(r);
	return c;
}

void dl_expect_message(redisContext *c, const char *channel, const char *payload, int timeout_ms)
{
	redisReply *r = dl_next_reply(c, timeout_ms);

	cr_assert_not_null(r, "no message on %s within %d ms", channel, timeout_ms);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->elements, 3);
	cr_assert_str_eq(r->element[0]->str, "message");
	cr_assert_str_eq(r->element[1]->str, channel);
	cr_assert_eq(r->element[2]->type, REDIS_REPLY_STRING);
	cr_assert_str_eq(r->element[2]->str, payload, "payload on %s", channel);
	freeReplyObject(r);
}
