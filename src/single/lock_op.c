/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared part of a single lock's asynchronous operations (single/lock_op.h). */
#include <stdio.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/cmd_op.h"
#include "core/drive/reactor.h"
#include "single/lock_op.h"

dlock__loop *dlock__lock_loop(dlock_lock *l)
{
	return dlock__reactor_loop(l->client->reactor);
}

int dlock__lock_op_new(dlock__lock_op **out, size_t size, dlock_lock *l, const char *owner,
		dlock_op_cb cb, void *userdata, const dlock__lock_op_steps *steps)
{
	dlock__lock_op *o;
	const char *checked;
	int rc;

	*out = NULL;
	if (l == NULL || owner == NULL || cb == NULL)
		return dlock__seterr(DLOCK_EINVAL, "%s: NULL %s", steps->what,
				l == NULL ? "lock" : owner == NULL ? "owner" : "callback");
	if ((rc = dlock__client_check_fork(l->client)) < 0 ||
			(rc = dlock__resolve_owner(l, owner, NULL, 0, &checked)) < 0)
		return dlock__errbuf_record(&l->err, rc);
	o = dlock__calloc(1, size);
	if (o == NULL || (o->owner = dlock__strdup(owner)) == NULL) {
		dlock__free(o);
		return dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory", l->shown);
	}
	dlock__op_init(&o->op, dlock__lock_loop(l), cb, userdata);
	o->op.start = steps->start;
	o->op.cancel = steps->cancel;
	o->op.destroy = steps->destroy;
	o->l = l;
	atomic_fetch_add(&l->refs, 1); /* the handle outlives the op, freed or not */
	dlock__client_handle_added(l->client, 1); /* the client outlives the op */
	*out = o;
	return 0;
}

void dlock__lock_op_submit(dlock__lock_op *o, dlock_op **out)
{
	dlock__op_submit_out(&o->op, out);
}

void dlock__ending_note(dlock_op *op, const dlock_result *r, void *userdata)
{
	dlock__ending *e = userdata;

	(void)op;
	e->done = 1;
	e->code = r->code;
	e->token = r->token;
	e->holder_ttl = r->holder_ttl_ms;
	e->validity = r->validity_ms;
	e->value = r->value;
	snprintf(e->message, sizeof(e->message), "%s", r->message);
}

int dlock__lock_op_block(dlock__lock_op *o, dlock__ending *e)
{
	int rc = dlock__op_block(&o->op, o->l->client, &e->done);

	if (rc < 0)
		return rc;
	return e->code < 0 ? dlock__seterr(e->code, "%s", e->message) : 0;
}

void dlock__lock_op_free(dlock__lock_op *o)
{
	dlock_lock *l = o->l;

	dlock__client_handle_added(l->client, -1);
	dlock__free(o->owner);
	dlock__free(o);
	dlock__lock_unref(l); /* the last free when the caller freed it meanwhile */
}

int dlock__lock_op_redirect(dlock_lock *l, const redisReply *r, int *redirects, dlock_client **to)
{
	return dlock__cmd_redirect(l->client, r, redirects, to, l->name, l->name_len);
}

void dlock__lock_cmd_unref(void *l)
{
	dlock__lock_unref(l);
}

int dlock__lock_cmd_new(dlock__cmd_op **out, size_t size, const dlock__cmd_kind *kind, dlock_lock *l,
		dlock_op_cb cb, void *userdata)
{
	*out = NULL;
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "%s: NULL lock", kind->what);
	atomic_fetch_add(&l->refs, 1); /* the handle outlives the op, freed or not */
	return dlock__cmd_op_new(out, size, kind, l, l->client, &l->err, l->shown, cb, userdata);
}
