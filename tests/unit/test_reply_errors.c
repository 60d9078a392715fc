/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Server errors mapped to dlock's codes, as Redis 7 sends them and as
 * Redis 6 wraps those a script's redis.call raised (the texts below are
 * 6.2.5's, verbatim).
 */
#include <string.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include "dlock/errors.h"
#include "core/net/conn.h"

static redisReply error_reply(const char *text)
{
	redisReply r;

	memset(&r, 0, sizeof r);
	r.type = REDIS_REPLY_ERROR;
	r.str = (char *)text;
	r.len = strlen(text);
	return r;
}

static const char wrongtype6[] =
		"ERR Error running script (call to f_30ada88aea1b8902e826c526ebaa64270516b3ec): "
		"@user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value";
static const char readonly6[] =
		"ERR Error running script (call to f_30ada88aea1b8902e826c526ebaa64270516b3ec): "
		"@user_script:1: @user_script: 1: -READONLY You can't write against a read only "
		"replica.";

Test(reply_errors, a_wrong_type_is_one_on_every_version)
{
	dlock__node node;
	redisReply r7 = error_reply("WRONGTYPE Operation against a key holding the wrong kind "
				    "of value script: f_30ad, on @user_script:1."),
		   r6 = error_reply(wrongtype6);

	memset(&node, 0, sizeof node);
	cr_assert_eq(dlock__reply_check(&node, &r7, "acquire"), DLOCK_EWRONGTYPE);
	cr_assert_eq(dlock__reply_check(&node, &r6, "acquire"), DLOCK_EWRONGTYPE);
}

Test(reply_errors, a_write_on_a_replica_is_seen_through_the_wrapping)
{
	redisReply r6 = error_reply(readonly6), r7 = error_reply("READONLY You can't write");

	cr_assert(dlock__reply_is_error(&r6, "READONLY"));
	cr_assert(dlock__reply_is_error(&r7, "READONLY"));
	cr_assert_not(dlock__reply_is_error(&r6, "WRONGTYPE"));
}

Test(reply_errors, other_script_errors_stay_server_errors)
{
	dlock__node node;
	redisReply r = error_reply("ERR Error running script (call to f_1): @user_script:3: "
				   "user_script:3: Script attempted to access nonexistent global "
				   "variable 'WRONGTYPE'"),
		   plain = error_reply("ERR unknown command 'WAITAOF'");

	memset(&node, 0, sizeof node);
	cr_assert_eq(dlock__reply_check(&node, &r, "acquire"), DLOCK_ESERVER);
	cr_assert_eq(dlock__reply_check(&node, &plain, "acquire"), DLOCK_ESERVER);
	cr_assert(dlock__reply_is_error(&plain, "ERR unknown command"));
}

/* Redis 7 answers a command of more than 10 arguments sent before AUTH with
 * this, not NOAUTH (and hangs up): the same refusal, said as NOAUTH. */
Test(reply_errors, a_long_command_before_auth_is_an_auth_error)
{
	dlock__node node;
	redisReply r = error_reply("ERR Protocol error: unauthenticated multibulk length"),
		   noauth = error_reply("NOAUTH Authentication required.");

	memset(&node, 0, sizeof node);
	cr_assert_eq(dlock__reply_check(&node, &r, "lock query"), DLOCK_EAUTH);
	cr_assert(strstr(dlock_errmsg_last(), "NOAUTH") != NULL, "%s", dlock_errmsg_last());
	cr_assert(strstr(dlock_errmsg_last(), "unauthenticated multibulk length") != NULL, "%s",
			dlock_errmsg_last());
	cr_assert_eq(dlock__reply_check(&node, &noauth, "acquire"), DLOCK_EAUTH);
}
