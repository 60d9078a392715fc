/* SPDX-License-Identifier: BSD-3-Clause */
/* An operation of one command on a handle's client (core/drive/cmd_op.h). */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/cmd_op.h"
#include "core/drive/reactor.h"
#include "core/topology/cluster.h"
#include "core/topology/slot.h"

#define CMD_OF(ml) ((dlock__cmd_op *)((char *)(ml) - offsetof(dlock__cmd_op, ml)))

static void conclude(dlock__cmd_op *o, int rc)
{
	dlock__op_finish(&o->op, dlock__errbuf_record(o->err, rc));
}

static void send_command(dlock__cmd_op *o);

/* The first key: where a cluster routes the command. */
static void first_key(const dlock__cmd_op *o, const char **key, size_t *len)
{
	if (o->argc > 0) {
		*key = o->argc > 1 ? o->argv[1] : "";
		*len = o->argc > 1 ? o->lens[1] : 0;
	} else {
		*key = o->call.nkeys > 0 ? dlock__call_argv(&o->call)[0] : "";
		*len = o->call.nkeys > 0 ? dlock__call_lens(&o->call)[0] : 0;
	}
}

static void command_done(dlock__mux_loop *ml)
{
	dlock__cmd_op *o = CMD_OF(ml);
	redisReply *r = o->mop.reply;
	const char *key;
	size_t len;
	int rc = o->mop.rc;

	o->in_flight = 0;
	first_key(o, &key, &len);
	if (rc < 0) {
		dlock__seterr(rc, "%s", o->mop.errmsg);
	} else if ((rc = dlock__cmd_redirect(o->client, r, &o->redirects, &o->send_to, key, len)) >
			0) {
		o->asking = rc == 2;
		dlock__mux_loop_end(ml);
		dlock__mux_clear(&o->mop, 1);
		send_command(o); /* not run there: again at the node named */
		return;
	} else if (rc == 0 && (rc = dlock__reply_check(&o->mop.client->node, r, o->kind->what)) == 0) {
		rc = o->kind->judge(o, r);
	}
	dlock__mux_loop_end(ml);
	dlock__mux_clear(&o->mop, 1);
	conclude(o, rc);
}

/* Send the command (again, after a redirect, to the member named). */
static void send_command(dlock__cmd_op *o)
{
	int rc;

	memset(&o->mop, 0, sizeof(o->mop));
	o->mop.client = o->send_to != NULL ? o->send_to : o->client;
	o->mop.asking = o->asking;
	o->send_to = NULL;
	o->asking = 0;
	if (o->argc > 0) {
		o->mop.argv = o->argv;
		o->mop.lens = o->lens;
		o->mop.argc = o->argc;
	} else {
		o->mop.call = &o->call;
	}
	o->mop.no_retry = o->kind->changes && !o->kind->retry_safe;
	rc = dlock__mux_loop_begin(&o->ml, o->op.loop, &o->mop, 1, NULL, NULL, command_done);
	if (rc < 0) {
		conclude(o, dlock__seterr(rc, "%s %s: out of memory", o->kind->what, o->shown));
		return;
	}
	o->in_flight = 1;
}

static void start(dlock_op *op)
{
	dlock__cmd_op *o = (dlock__cmd_op *)op;
	int rc;

	if (o->kind->prepare != NULL && (rc = o->kind->prepare(o)) != 0) {
		conclude(o, rc < 0 ? rc : 0); /* 1: answered without a command */
		return;
	}
	send_command(o);
}

static void cancel(dlock_op *op)
{
	dlock__cmd_op *o = (dlock__cmd_op *)op;

	if (o->kind->changes)
		return; /* it finishes */
	if (o->in_flight) { /* a query: nothing to give back */
		o->in_flight = 0;
		dlock__mux_loop_end(&o->ml);
		dlock__mux_clear(&o->mop, 1);
	}
	conclude(o, dlock__seterr(DLOCK_ECANCELED, "%s %s: canceled", o->kind->what, o->shown));
}

static void destroy(dlock_op *op)
{
	dlock__cmd_op *o = (dlock__cmd_op *)op;
	const dlock__cmd_kind *kind = o->kind;
	void *handle = o->handle;
	dlock_client *c = o->client;

	if (kind->clear != NULL)
		kind->clear(o);
	dlock__free(o);
	kind->unref(handle); /* the last free when the caller freed it meanwhile */
	dlock__client_handle_added(c, -1);
}

int dlock__cmd_op_new(dlock__cmd_op **out, size_t size, const dlock__cmd_kind *kind, void *handle,
		dlock_client *client, dlock__errbuf *err, const char *shown, dlock_op_cb cb,
		void *userdata)
{
	dlock__cmd_op *o = NULL;
	int rc;

	*out = NULL;
	if (cb == NULL)
		rc = dlock__seterr(DLOCK_EINVAL, "%s: NULL callback", kind->what);
	else if ((rc = dlock__client_check_fork(client)) == 0 &&
			(o = dlock__calloc(1, size)) == NULL)
		rc = dlock__seterr(DLOCK_ENOMEM, "%s %s: out of memory", kind->what, shown);
	if (rc < 0) {
		kind->unref(handle);
		return dlock__errbuf_record(err, rc);
	}
	dlock__op_init(&o->op, dlock__reactor_loop(client->reactor), cb, userdata);
	o->op.start = start;
	o->op.cancel = cancel;
	o->op.destroy = destroy;
	o->op.uncancelable = kind->changes; /* not even before it started */
	o->kind = kind;
	o->handle = handle;
	o->client = client;
	o->err = err;
	o->shown = shown;
	dlock__client_handle_added(client, 1); /* the client outlives the op */
	*out = o;
	return 0;
}

int dlock__cmd_op_submit(dlock__cmd_op *o, dlock_op **out)
{
	dlock__op_submit_out(&o->op, out);
	return 0;
}

/* How a blocking call's op ended (its callback's record). */
typedef struct ending {
	int done, code;
	int64_t value;
	void *obj;
	char message[DLOCK__ERRMSG_MAX];
} ending;

void dlock__cmd_blocking(dlock_op *op, const dlock_result *r, void *userdata)
{
	ending *e = userdata;

	(void)op;
	e->done = 1;
	e->code = r->code;
	e->value = r->value;
	e->obj = r->lock_info != NULL ? (void *)r->lock_info : (void *)r->semaphore_info;
	snprintf(e->message, sizeof(e->message), "%s", r->message);
}

int dlock__cmd_op_block(dlock__cmd_op *o, int64_t *value, void **obj)
{
	ending e = { 0 };
	dlock_client *c = o->client;
	dlock__errbuf *err = o->err;
	int rc;

	o->op.cb = dlock__cmd_blocking;
	o->op.userdata = &e;
	if ((rc = dlock__op_block(&o->op, c, &e.done)) < 0)
		return dlock__errbuf_record(err, rc);
	if (value != NULL)
		*value = e.value;
	if (obj != NULL)
		*obj = e.obj;
	return e.code < 0 ? dlock__seterr(e.code, "%s", e.message) : 0;
}

int dlock__cmd_redirect(dlock_client *c, const redisReply *r, int *redirects, dlock_client **to,
		const char *key, size_t len)
{
	dlock__cluster *cl = c->node.cluster;
	int kind;

	if (cl == NULL || r == NULL || r->type != REDIS_REPLY_ERROR)
		return 0;
	kind = dlock__cluster_follow(cl, r, to);
	if (kind > 0 && ++*redirects > DLOCK__MAX_REDIRECTS)
		return dlock__seterr(DLOCK_ESERVER,
				"%s: more than %d MOVED/ASK redirects for slot %u (resharding under way?)",
				c->node.label, DLOCK__MAX_REDIRECTS, dlock__key_slot(key, len));
	return kind;
}

int dlock__cmd_judge_int(dlock__cmd_op *o, const redisReply *r)
{
	if (r->type != REDIS_REPLY_INTEGER)
		return dlock__seterr_node(DLOCK_EPROTO, o->mop.client->node.label,
				"%s %s: unexpected reply type %d", o->kind->what, o->shown, r->type);
	o->op.result.value = r->integer;
	return 0;
}

int dlock__op_block(dlock_op *op, dlock_client *c, const int *done)
{
	dlock__loop spare, *loop = op->loop;
	int own = dlock__reactor_own_thread(c->reactor);

	/* A client with a thread of its own: the loop this call borrows (the
	 * thread's, or a spare one under an outer call). Else the caller's. */
	if (own)
		loop = dlock__loop_borrow(&spare);
	else
		loop->busy++;
	op->loop = loop;
	dlock__op_run(op, done);
	if (own)
		dlock__loop_give_back(loop, &spare);
	else
		loop->busy--;
	return 0;
}
