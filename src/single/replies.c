/* SPDX-License-Identifier: BSD-3-Clause */
#include "dlock/errors.h"
#include "single/replies.h"

int dlock__parse_acquire(const redisReply *r, int fenced, dlock__acquired *out)
{
	size_t want = fenced ? 2 : 1;

	out->count = 0;
	out->token = 0;
	out->ttl = -1;
	out->waiters = -1;
	out->role = 0;
	if (r == NULL)
		return DLOCK_EPROTO;
	if (r->type == REDIS_REPLY_INTEGER) {
		out->ttl = r->integer;
		return DLOCK_ENOTACQUIRED;
	}
	/* {0, pttl, listeners, role}: busy, asked with the "taken" channel (scripts.c). */
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 && r->element != NULL &&
			r->element[0] != NULL && r->element[0]->type == REDIS_REPLY_INTEGER &&
			r->element[0]->integer == 0 && r->element[1] != NULL &&
			r->element[1]->type == REDIS_REPLY_INTEGER && r->element[2] != NULL &&
			r->element[2]->type == REDIS_REPLY_INTEGER && r->element[3] != NULL &&
			r->element[3]->type == REDIS_REPLY_INTEGER) {
		out->ttl = r->element[1]->integer;
		out->waiters = r->element[2]->integer;
		out->role = r->element[3]->integer == 1 || r->element[3]->integer == 2
				? (int)r->element[3]->integer
				: 0;
		return DLOCK_ENOTACQUIRED;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != want || r->element == NULL ||
			r->element[0] == NULL || r->element[0]->type != REDIS_REPLY_INTEGER ||
			r->element[0]->integer < 1)
		return DLOCK_EPROTO;
	if (fenced && (r->element[1] == NULL || r->element[1]->type != REDIS_REPLY_INTEGER))
		return DLOCK_EPROTO;
	out->count = r->element[0]->integer;
	if (fenced)
		out->token = r->element[1]->integer;
	return 0;
}

int dlock__parse_release(const redisReply *r, int64_t *left)
{
	*left = -1;
	if (r == NULL)
		return DLOCK_EPROTO;
	if (r->type == REDIS_REPLY_NIL)
		return DLOCK_ENOTOWNER;
	if (r->type == REDIS_REPLY_INTEGER && r->integer == -2) {
		*left = -2; /* not the owner, and others hold it now */
		return DLOCK_ENOTOWNER;
	}
	if (r->type != REDIS_REPLY_INTEGER || r->integer < 0)
		return DLOCK_EPROTO;
	*left = r->integer;
	return 0;
}
