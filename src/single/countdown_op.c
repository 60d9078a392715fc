/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A countdown latch's operations as one state machine on a loop: the
 * asynchronous calls run it on the client's loop, the blocking calls on a
 * loop of the calling thread (core/drive/cmd_op.c's dlock__op_block), so there
 * is one implementation of each. Every command is a multiplexed run
 * (core/mux/mux_loop.h): scripts as EVALSHA with the EVAL fall-back, the
 * SPUBLISH twin on a cluster with sharded pub/sub, a cluster's MOVED/ASK
 * followed.
 *
 * set, count down, get count, delete: one command, then the end.
 * Every one runs as the waiter (wait.c) with the latch's steps; a command
 * that is not an await is its one attempt (no wait).
 * await:
 *   LISTEN (the latch's channel, before the first look, so that a zero
 *   reached in between is heard) -> LOOK (a read-only script) --0--> done
 *      LOOK --count > 0, or a transient error--> WAITING
 *      WAITING --message, subscription made, backoff timer--> LOOK
 *      WAITING --deadline--> a last LOOK, then DLOCK_ETIMEDOUT (or its transient error)
 *   A message while a look is out makes another look follow at once (the
 *   first may have read the count before the change); every message wakes
 *   every waiter ("0" opens the latch for all). There is no polling: a
 *   waiter with count > 0 sleeps until a message or its deadline.
 *   cancel: the look under way is dropped (read only: nothing to undo).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fmt.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/mux/mux_loop.h"
#include "core/loop/op.h"
#include "core/topology/cluster.h"
#include "single/acquire.h"
#include "single/countdown_internal.h"
#include "single/lock_op.h"
#include "single/scripts.h"
#include "single/wait.h"

/* clang-format off: the Lua keeps its own layout */

/*
 * Redisson's data and messages (RedissonCountDownLatch, CountDownLatchPubSub:
 * ZERO_COUNT_MESSAGE 0, NEW_COUNT_MESSAGE 1); the replies are dlock's own.
 * Each script: KEYS name, channel. Every "redis.call('publish'" becomes
 * SPUBLISH on a sharded cluster (dlock__script_for).
 */

/* The latch's scripts go on only for a latch, a count alone or nothing
 * (scripts.h: kind_of); they keep dlock's latch mark with the key. */
#define LATCH_KIND_CHECK \
	DLOCK__LUA_KIND \
	"do local kind = kind_of(KEYS[1]); " \
	"  if kind ~= 'none' and kind ~= 'count' and kind ~= 'latch' then " \
	"    return refuse(kind, 'a count-down latch'); " \
	"  end; " \
	"end; "

/*
 * dlock's latch mark, dlock_latch:{name} (scripts.h), says "a latch": "1"
 * while the count lives; when a count down reaches zero it stays as "0",
 * opened, for LATCH_OPEN_KEEP, so that a wait or a look that comes after
 * the opening passes (Redisson deletes the key: a missing key alone cannot
 * tell an opened latch from a typo). A mark without its count is an
 * opened latch (Redisson's count down to zero leaves a "1").
 */
#define LATCH_OPEN_KEEP "86400000"
#define LATCH_OPENED \
	"local function opened() " \
	"  local m = latch_mark(KEYS[1]); " \
	"  if redis.call('exists', m) == 0 then return false; end; " \
	"  if redis.call('pttl', m) < 0 then redis.call('set', m, 0, 'px', " LATCH_OPEN_KEEP "); end; " \
	"  return true; " \
	"end; "

/* ARGV: count, "1". Reply: 1 set, 0 the key existed. */
static dlock__script script_set = DLOCK__SCRIPT("latch set",
		LATCH_KIND_CHECK
		"if redis.call('exists', KEYS[1]) == 1 then "
		"  return 0; "
		"end; "
		"redis.call('set', KEYS[1], ARGV[1]); "
		"redis.call('set', latch_mark(KEYS[1]), 1); "
		"redis.call('publish', KEYS[2], ARGV[2]); "
		"return 1;");

/* ARGV: "0". Reply: the count left (0 once at zero: deleted, announced),
 * -1 when there was no latch (Redisson's DECR and DEL of it change
 * nothing either). */
static dlock__script script_down = DLOCK__SCRIPT("latch count down",
		LATCH_KIND_CHECK
		LATCH_OPENED
		"if redis.call('exists', KEYS[1]) == 0 then "
		"  if opened() then return 0; end; "
		"  return -1; "
		"end; "
		"local v = redis.call('decr', KEYS[1]); "
		"if v <= 0 then "
		"  redis.call('del', KEYS[1]); "
		"  redis.call('set', latch_mark(KEYS[1]), 0, 'px', " LATCH_OPEN_KEEP "); "
		"end; "
		"if v == 0 then "
		"  redis.call('publish', KEYS[2], ARGV[1]); "
		"end; "
		"if v < 0 then "
		"  v = 0; "
		"end; "
		"return v;");

/* ARGV: "1". Reply: 1 deleted (announced), 0 none. */
static dlock__script script_delete = DLOCK__SCRIPT("latch delete",
		LATCH_KIND_CHECK
		"if redis.call('del', KEYS[1], latch_mark(KEYS[1])) == 0 then "
		"  return 0; "
		"end; "
		"redis.call('publish', KEYS[2], ARGV[1]); "
		"return 1;");

/* ARGV: unused. Reply: the count, 0 for an opened latch, -1 when there is none. */
static dlock__script script_get = DLOCK__SCRIPT("latch get count",
		LATCH_KIND_CHECK
		LATCH_OPENED
		"local v = redis.call('get', KEYS[1]); "
		"if v == false then "
		"  if opened() then return 0; end; "
		"  return -1; "
		"end; "
		"return tonumber(v);");

/* clang-format on */

typedef struct latch_op {
	dlock_op op; /* first */
	dlock__waiter w;
	dlock_countdown *c;
	dlock__latch_kind kind;
	int64_t arg;   /* set: the count */
	int64_t value; /* the answer (the result's value) */
	/* the command */
	dlock_client *send_to; /* a cluster's redirect: the member named */
	int asking;
	dlock__call call;
	char num[24];
	dlock__mux_op mop;
} latch_op;

#define LOP(p, field) ((latch_op *)((char *)(p) - offsetof(latch_op, field)))

static const char *const what_of[] = { "dlock_countdown_try_set_count",
	"dlock_countdown_count_down", "dlock_countdown_count", "dlock_countdown_delete",
	"dlock_countdown_await" };

/* The operation is over (the waiter listens no more). */
static void end(dlock__waiter *w, int rc)
{
	latch_op *o = LOP(w, w);

	o->op.result.value = rc == 0 ? o->value : 0;
	dlock__op_finish(&o->op, dlock__errbuf_record(&o->c->err, rc));
}

/* The reply's integer, for the scripts; DLOCK_EPROTO for another shape. */
static int integer_of(latch_op *o, const redisReply *r, int64_t min, int64_t max)
{
	if (r->type == REDIS_REPLY_INTEGER && r->integer >= min && r->integer <= max) {
		o->value = r->integer;
		return 0;
	}
	return dlock__seterr_node(DLOCK_EPROTO, o->mop.client->node.label,
			"%s %s: unexpected reply (type %d)", o->call.script->name, o->c->shown,
			r->type);
}

/* What the command's reply says, into o->value: 0, or an error with its message. */
static int judge(latch_op *o, const redisReply *r)
{
	int rc = dlock__reply_check(&o->mop.client->node, r, o->call.script->name);

	/* DECR of a string that is no number: the key is not a latch. */
	if (rc == DLOCK_ESERVER && r->str != NULL && strstr(r->str, "not an integer") != NULL)
		rc = dlock__seterr_node(DLOCK_EWRONGTYPE, o->mop.client->node.label,
				"latch %s: the key is not a count (%s)", o->c->shown, r->str);
	if (rc < 0)
		return rc;
	switch (o->kind) {
	case DLOCK__LATCH_SET:
	case DLOCK__LATCH_DELETE:
		return integer_of(o, r, 0, 1);
	default:
		if ((rc = integer_of(o, r, -1, INT64_MAX)) < 0)
			return rc;
		/* No latch: at zero for an await (Redisson's), else what the
		 * handle's options ask. */
		if (o->value < 0 && (o->kind == DLOCK__LATCH_AWAIT || !o->c->report_missing))
			o->value = 0;
		return 0;
	}
}

/*
 * A command came back as a cluster's redirect: where to send it again. 1
 * (MOVED) or 2 (ASK) with o->send_to set, 0 for no redirect, < 0 when the
 * member cannot be opened or after too many.
 */
static int redirect(latch_op *o, const redisReply *r)
{
	dlock__cluster *cl = o->c->client->node.cluster;
	int kind;

	if (cl == NULL || r == NULL || r->type != REDIS_REPLY_ERROR)
		return 0;
	kind = dlock__cluster_follow(cl, r, &o->send_to);
	if (kind > 0 && ++o->w.redirects > DLOCK__MAX_REDIRECTS)
		return dlock__seterr(DLOCK_ESERVER,
				"%s: more than %d MOVED/ASK redirects for latch %s "
				"(resharding under way?)",
				o->c->client->node.label, DLOCK__MAX_REDIRECTS, o->c->shown);
	return kind;
}

/*
 * What the command's answer says. An await: done at zero, else not yet -
 * DLOCK_ETIMEDOUT should the wait be over (no polling: a message wakes it);
 * a transient error waits a backoff. Any other command ends with it.
 */
static dlock__wait_verdict judge_answer(dlock__waiter *w, int *out, int64_t *next)
{
	latch_op *o = LOP(w, w);
	redisReply *r = o->mop.reply;
	int rc = o->mop.rc;

	(void)next; /* DLOCK__NEVER */
	if (rc == 0 && (rc = redirect(o, r)) > 0) {
		o->asking = rc == 2; /* not run there: again at the member named */
		return DLOCK__WAIT_AGAIN;
	}
	if (rc == 0)
		rc = judge(o, r);
	else
		dlock__seterr(rc, "%s", o->mop.errmsg);
	*out = rc;
	if (rc == 0 && (o->kind != DLOCK__LATCH_AWAIT || o->value == 0))
		return DLOCK__WAIT_GOT;
	if (rc == 0) {
		*out = dlock__seterr(DLOCK_ETIMEDOUT,
				"latch %s: the count was still %lld when the wait of %lld ms ended",
				o->c->shown, (long long)o->value, (long long)o->w.wait_ms);
		return DLOCK__WAIT_NOT_YET;
	}
	return o->kind == DLOCK__LATCH_AWAIT && dlock__acquire_transient(o->mop.client, rc, r)
			? DLOCK__WAIT_TRANSIENT
			: DLOCK__WAIT_FINAL;
}

/* The call of a script on the latch's key and channel, with one argument more. */
static void prepare_call(latch_op *o, dlock__script *s, const char *arg, size_t len,
		const char *message)
{
	dlock__call *c = &o->call;

	c->script = s;
	c->argc = 0;
	dlock__call_push(c, o->c->name, o->c->name_len);
	dlock__call_push(c, o->c->channel, o->c->channel_len);
	dlock__call_keys_done(c);
	if (arg != NULL)
		dlock__call_push(c, arg, len);
	dlock__call_push(c, message, 1);
}

static int send_command(dlock__waiter *w)
{
	latch_op *o = LOP(w, w);

	memset(&o->mop, 0, sizeof(o->mop));
	o->mop.client = o->send_to != NULL ? o->send_to : o->c->client;
	o->mop.asking = o->asking;
	o->send_to = NULL;
	o->asking = 0;
	switch (o->kind) {
	case DLOCK__LATCH_SET:
		prepare_call(o, &script_set, o->num, dlock__fmt_i64(o->num, o->arg), "1");
		break;
	case DLOCK__LATCH_DOWN:
		prepare_call(o, &script_down, NULL, 0, "0");
		break;
	case DLOCK__LATCH_DELETE:
		prepare_call(o, &script_delete, NULL, 0, "1");
		break;
	default:
		prepare_call(o, &script_get, NULL, 0, "0");
		break;
	}
	o->mop.call = &o->call;
	/* A set or count down whose reply was lost may have run: sent again
	 * it would answer "existed" or count twice. */
	o->mop.no_retry = o->kind == DLOCK__LATCH_SET || o->kind == DLOCK__LATCH_DOWN;
	return dlock__waiter_send(w, &o->mop, 1);
}

static const dlock__waiter_steps steps = {
	.noun = "latch",
	.attempt = send_command,
	.judge = judge_answer,
	.end = end,
};

static void start(dlock_op *op)
{
	/* An await listens before its first look: a zero reached after the
	 * look and before the subscription would go unheard. */
	dlock__waiter_start(&((latch_op *)op)->w, 1);
}

static void cancel(dlock_op *op)
{
	latch_op *o = (latch_op *)op;

	/* A look: nothing to give back. */
	dlock__waiter_cancel(&o->w, o->kind == DLOCK__LATCH_AWAIT ? "the wait" : "the query");
}

static void destroy(dlock_op *op)
{
	latch_op *o = (latch_op *)op;
	dlock_countdown *c = o->c;

	dlock__client_handle_added(c->client, -1);
	dlock__free(o);
	dlock__countdown_unref(c); /* the last free when the caller freed it meanwhile */
}

/* A new operation, not started. 0, or an error (no op, no callback). */
static int new_op(latch_op **out, dlock_countdown *c, dlock__latch_kind kind, int64_t arg,
		dlock_op_cb cb, void *userdata)
{
	latch_op *o;
	int rc;

	*out = NULL;
	if (c == NULL || cb == NULL)
		return dlock__seterr(DLOCK_EINVAL, "%s: NULL %s", what_of[kind],
				c == NULL ? "latch" : "callback");
	if (kind == DLOCK__LATCH_SET && arg < 1)
		return dlock__errbuf_record(&c->err,
				dlock__seterr(DLOCK_EINVAL,
						"latch %s: the count must be >= 1 (got %lld)",
						c->shown, (long long)arg));
	if (kind == DLOCK__LATCH_AWAIT && arg < DLOCK_WAIT_FOREVER)
		return dlock__errbuf_record(&c->err,
				dlock__seterr(DLOCK_EINVAL,
						"latch %s: the wait must be >= 0 ms or "
						"DLOCK_WAIT_FOREVER (got %lld)",
						c->shown, (long long)arg));
	if ((rc = dlock__client_check_fork(c->client)) < 0)
		return dlock__errbuf_record(&c->err, rc);
	o = dlock__calloc(1, sizeof(*o));
	if (o == NULL)
		return dlock__errbuf_record(&c->err,
				dlock__seterr(DLOCK_ENOMEM, "latch %s: out of memory", c->shown));
	dlock__op_init(&o->op, dlock__reactor_loop(c->client->reactor), cb, userdata);
	o->op.start = start;
	o->op.cancel = cancel;
	o->op.destroy = destroy;
	/* What may have run is not taken back: it finishes and tells. */
	o->op.uncancelable = kind == DLOCK__LATCH_SET || kind == DLOCK__LATCH_DOWN ||
			kind == DLOCK__LATCH_DELETE;
	o->c = c;
	o->kind = kind;
	o->arg = arg;
	dlock__waiter_init(&o->w, &steps, &o->op, c->client, c->shown, c->channel, c->channel_len,
			kind == DLOCK__LATCH_AWAIT ? arg : 0);
	o->w.li.every_message = 1; /* "0" opens the latch for every waiter */
	atomic_fetch_add(&c->refs, 1); /* the handle outlives the op, freed or not */
	dlock__client_handle_added(c->client, 1); /* the client outlives the op */
	*out = o;
	return 0;
}

static int start_async(dlock_op **out, dlock_countdown *c, dlock__latch_kind kind, int64_t arg,
		dlock_op_cb cb, void *userdata)
{
	latch_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	if ((rc = new_op(&o, c, kind, arg, cb, userdata)) < 0)
		return rc;
	dlock__op_submit_out(&o->op, out);
	return 0;
}

int dlock_countdown_try_set_count_async(dlock_op **out, dlock_countdown *c, int64_t count,
		dlock_op_cb cb, void *userdata)
{
	return start_async(out, c, DLOCK__LATCH_SET, count, cb, userdata);
}

int dlock_countdown_count_down_async(
		dlock_op **out, dlock_countdown *c, dlock_op_cb cb, void *userdata)
{
	return start_async(out, c, DLOCK__LATCH_DOWN, 0, cb, userdata);
}

int dlock_countdown_count_async(
		dlock_op **out, dlock_countdown *c, dlock_op_cb cb, void *userdata)
{
	return start_async(out, c, DLOCK__LATCH_COUNT, 0, cb, userdata);
}

int dlock_countdown_delete_async(dlock_op **out, dlock_countdown *c, dlock_op_cb cb, void *userdata)
{
	return start_async(out, c, DLOCK__LATCH_DELETE, 0, cb, userdata);
}

int dlock_countdown_await_async(dlock_op **out, dlock_countdown *c, int64_t wait_ms,
		dlock_op_cb cb, void *userdata)
{
	return start_async(out, c, DLOCK__LATCH_AWAIT, wait_ms, cb, userdata);
}

/* How a blocking call's operation ended (its callback's record). */
typedef struct ending {
	int done, code;
	int64_t value;
	char message[DLOCK__ERRMSG_MAX];
} ending;

static void note_end(dlock_op *op, const dlock_result *r, void *userdata)
{
	ending *e = userdata;

	(void)op;
	e->done = 1;
	e->code = r->code;
	e->value = r->value;
	snprintf(e->message, sizeof(e->message), "%s", r->message);
}

int dlock__countdown_block(dlock_countdown *c, dlock__latch_kind kind, int64_t arg, int64_t *value)
{
	ending e = { 0 };
	latch_op *o;
	int rc = new_op(&o, c, kind, arg, note_end, &e);

	if (rc < 0)
		return rc;
	o->w.canceled_with = kind == DLOCK__LATCH_AWAIT;
	o->w.cancels = dlock__client_cancels(c->client);
	if ((rc = dlock__op_block(&o->op, c->client, &e.done)) < 0)
		return dlock__errbuf_record(&c->err, rc);
	if (e.code < 0)
		return dlock__errbuf_record(&c->err, dlock__seterr(e.code, "%s", e.message));
	if (value != NULL)
		*value = e.value;
	return 0;
}
