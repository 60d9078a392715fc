/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The small script calls the layers above send in batches, one per member
 * (core/mux/mux.h): give back an acquire, renew a hold, raise a fencing token.
 * Only this layer knows a lock's keys; the caller only sends the calls.
 */
#include <string.h>

#include "core/base/fmt.h"
#include "single/acquire.h"
#include "single/lock_internal.h"
#include "single/scripts.h"

void dlock__rollback_prepare(dlock_lock *l, const char *owner, int64_t expect, int64_t wait_ms,
		dlock__rollback *u)
{
	dlock__call *c = &u->call;
	int fair = l->kind == DLOCK_LOCK_FAIR;

	c->script = fair ? &dlock__script_fair_undo
			: l->kind == DLOCK_LOCK_READ ? &dlock__script_rw_rollback_read
			: l->kind == DLOCK_LOCK_WRITE ? &dlock__script_rw_rollback_write
						       : &dlock__script_rollback;
	c->argc = 0;
	dlock__call_push(c, l->name, l->name_len);
	if (fair) {
		dlock__call_push(c, l->queue, l->queue_len);
		dlock__call_push(c, l->timeouts, l->timeouts_len);
	}
	dlock__call_push(c, l->channel, l->channel_len);
	dlock__call_keys_done(c);
	dlock__call_push(c, dlock__release_message(l), 1);
	dlock__call_push(c, owner, strlen(owner));
	dlock__call_push(c, u->count, dlock__fmt_i64(u->count, expect));
	dlock__call_push(c, u->lease, dlock__fmt_i64(u->lease, dlock__holds_lease(l, owner)));
	if (fair)
		dlock__call_push(c, u->wait,
				dlock__fmt_i64(u->wait, dlock__fair_place_ms(l, wait_ms)));
}

void dlock__rollback_finish(
		dlock_lock *l, const char *owner, int64_t believed, int rc, const redisReply *reply)
{
	int64_t left = believed > 0 ? believed : 0;

	/* The plain and read-write rollbacks answer the holds left, or -1 when
	 * it had not been taken (nothing changed); the fair undo does not say. */
	if (l->kind != DLOCK_LOCK_FAIR && rc == 0 && reply != NULL &&
			reply->type == REDIS_REPLY_INTEGER) {
		if (reply->integer < 0)
			return;
		left = reply->integer;
	}
	/* Unreachable: forget the hold so nobody renews it; it expires. */
	dlock__holds_undone(l, owner, left);
}

/* A call of `script` on one key, its arguments to come. */
static void one_key(dlock__call *c, dlock__script *script, const char *key, size_t len)
{
	c->script = script;
	c->argc = 0;
	dlock__call_push(c, key, len);
	dlock__call_keys_done(c);
}

void dlock__renew_prepare(dlock_lock *l, const char *owner, int64_t ttl, dlock__renew *r)
{
	dlock__call *c = &r->call;

	one_key(c, &dlock__script_renew, l->name, l->name_len);
	dlock__call_push(c, r->ttl, dlock__fmt_i64(r->ttl, ttl));
	dlock__call_push(c, owner, strlen(owner));
	r->form[0] = dlock__lock_form(l);
	r->form[1] = '\0';
	dlock__call_push(c, r->form, strlen(r->form));
}

int dlock__renew_succeeded(const redisReply *reply)
{
	return reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
			reply->element[0]->type == REDIS_REPLY_INTEGER &&
			reply->element[0]->integer == 1;
}

void dlock__token_raise_prepare(dlock_lock *l, int64_t max, dlock__token_raise *t)
{
	one_key(&t->call, &dlock__script_token_raise, l->token_key, l->token_key_len);
	dlock__call_push(&t->call, t->max, dlock__fmt_i64(t->max, max));
}

int dlock__token_raised(const redisReply *reply, int64_t max)
{
	return reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer >= max;
}
