/* SPDX-License-Identifier: BSD-3-Clause */
/* One asynchronous operation's outcome, as the async tests check it (Criterion). */
#include <criterion/criterion.h>

#include <stdio.h>

#include "redis_harness.h"
#include "support.h"

void dl_note(dlock_op *op, const dlock_result *r, void *ud)
{
	dl_outcome *o = ud;

	(void)op;
	o->calls++;
	o->inside |= o->starting;
	o->code = r->code;
	o->lost_reason = r->lost_reason;
	o->value = r->value;
	o->validity = r->validity_ms;
	o->token = r->token;
	o->lock_info = r->lock_info;           /* ours now */
	o->semaphore_info = r->semaphore_info; /* ours now */
	o->has_holder = r->holder != NULL;
	if (r->holder != NULL)
		o->holder = *r->holder; /* valid during the callback only */
	o->at = rh_now_ms();
	snprintf(o->message, sizeof(o->message), "%s", r->message != NULL ? r->message : "");
}

void dl_note_checked(dlock_op *op, const dlock_result *r, void *ud)
{
	dl_note(op, r, ud);
	if (r->code < 0)
		cr_assert(r->message != NULL && r->message[0] != '\0', "code %d without a message",
				r->code);
}

dlock_client *dl_client_on(dlock_loop *loop, const char *label)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	o.label = label;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

void dl_drive(dlock_loop *loop, const dl_outcome *o)
{
	int64_t until = rh_now_ms() + 10000;

	while (o->calls == 0 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(o->calls, 1, "no callback within 10 s");
}

void dl_wait_one(dlock_loop *loop, int rc, const dl_outcome *o)
{
	cr_assert_eq(rc, 0, "start: %d (%s)", rc, dlock_errmsg_last());
	cr_assert_eq(o->calls, 0, "a callback from inside the call");
	dl_drive(loop, o);
}

void dl_no_second(dlock_loop *loop, const dl_outcome *o)
{
	int64_t until = rh_now_ms() + 200;

	while (rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(o->calls, 1, "%d callbacks", o->calls);
}

void dl_await_one(dlock_loop *loop, const dl_outcome *o, int64_t within_ms)
{
	int64_t until = rh_now_ms() + within_ms;

	while (o->calls == 0 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(o->calls, 1, "no callback within %lld ms", (long long)within_ms);
	cr_assert(!o->inside, "a callback from inside the call");
	dl_no_second(loop, o);
}

int dl_ended(const dl_outcome *o, int n)
{
	int done = 0;

	for (int i = 0; i < n; i++)
		done += o[i].calls > 0;
	return done;
}

void dl_drive_until(dlock_loop *loop, const dl_outcome *o, int n, int want, int64_t within_ms)
{
	int64_t end = rh_now_ms() + within_ms;

	while (dl_ended(o, n) < want && rh_now_ms() < end)
		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
	cr_assert_geq(dl_ended(o, n), want, "%d of %d operations ended within %lld ms",
			dl_ended(o, n), want, (long long)within_ms);
	for (int i = 0; i < n; i++)
		cr_assert_leq(o[i].calls, 1, "operation %d: %d callbacks", i, o[i].calls);
}
