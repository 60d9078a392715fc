/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Releasing a single-server lock: one hold of an owner (with the count the
 * client believes it has, so a repeat counts once: scripts.h), or the
 * whole lock by force.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fmt.h"
#include "single/acquire.h"
#include "single/lock_internal.h"
#include "single/lock_op.h"
#include "single/replies.h"
#include "single/scripts.h"
#include "core/drive/stats.h"

/* The release script of l's kind (they share keys and arguments). */
static dlock__script *release_script(const dlock_lock *l)
{
	switch (l->kind) {
	case DLOCK_LOCK_FAIR:
		return &dlock__script_fair_release;
	case DLOCK_LOCK_READ:
		return &dlock__script_rw_release_read;
	case DLOCK_LOCK_WRITE:
		return &dlock__script_rw_release_write;
	default:
		return &dlock__script_release;
	}
}

/* What a release publishes: "1" (wake every waiter) for a writer, as Redisson's. */
const char *dlock__release_message(const dlock_lock *l)
{
	return l->kind == DLOCK_LOCK_WRITE ? "1" : "0";
}

int dlock__release_prepare(dlock_lock *l, const char *owner, dlock__release *r)
{
	int fair = l->kind == DLOCK_LOCK_FAIR;
	int64_t believed;
	int own, rc, herd;

	r->epoch = 0;
	r->retry_safe = 0;
	rc = dlock__resolve_owner(l, owner, r->owner_buf, sizeof(r->owner_buf), &r->owner);
	if (rc < 0)
		return rc;
	dlock__fmt_i64(r->lease_s, dlock__holds_lease(l, r->owner));
	/* The count this client last saw, whoever the owner (an explicit one
	 * taken by another process too is as trusted as the acquire's exact
	 * "one more"). An owner of this client's own with no record holds
	 * nothing (as for the acquire): a repeat cannot take what is not
	 * there. An explicit owner with none may be held elsewhere, and an
	 * acquire whose answer never came leaves the count in doubt by one:
	 * then a repeat could not be told from a first run. */
	own = owner == NULL || dlock__owned_by_client(l->client, r->owner);
	believed = dlock__holds_count(l, r->owner, 1);
	if (believed < 0 && own)
		believed = 0;
	r->retry_safe = (believed >= 1 || (believed == 0 && own)) &&
			dlock__holds_count(l, r->owner, 0) < 0;
	if (!r->retry_safe)
		believed = -1;
	dlock__fmt_i64(r->believed_s, believed);
	r->repeat[0] = '0';
	r->repeat[1] = '\0';

#define ARG(p, len) dlock__call_push(&r->call, (p), (len))
	dlock__call_begin(&r->call, release_script(l)); /* r may be on a caller's stack */
	ARG(l->name, l->name_len);
	if (fair) {
		ARG(l->queue, l->queue_len);
		ARG(l->timeouts, l->timeouts_len);
	}
	ARG(l->channel, l->channel_len);
	/* A plain or fenced lock's waiters, once this handle has been among
	 * them: a release wakes the live ones (scripts.c). Not before: an
	 * uncontended release costs nothing more, and a user whom the server
	 * lets touch only Redisson's keys can still release. */
	herd = l->waiters != NULL && atomic_load(&l->herd_met);
	if (herd)
		ARG(l->waiters, l->waiters_len);
	dlock__call_keys_done(&r->call);
	ARG(dlock__release_message(l), 1);
	ARG(r->lease_s, strlen(r->lease_s));
	ARG(r->owner, strlen(r->owner));
	if (fair)
		ARG(r->now_s, dlock__fmt_i64(r->now_s, dlock__wall_ms()));
	ARG(r->believed_s, strlen(r->believed_s));
	ARG(r->repeat, 1);
	if (herd) {
		ARG(l->wake, l->wake_len);
		ARG(DLOCK__HERD_WATCHERS_ARG, strlen(DLOCK__HERD_WATCHERS_ARG));
	}
#undef ARG
	r->epoch = dlock__holds_release_begin(l, r->owner);
	return 0;
}

void dlock__release_clear(dlock_lock *l, dlock__release *r)
{
	if (r->epoch != 0)
		dlock__holds_release_end(l, r->owner, r->epoch);
	r->epoch = 0;
}

int dlock__release_finish(dlock_lock *l, dlock__release *r, const redisReply *reply)
{
	dlock_client *c = l->client;
	int64_t left;
	int rc = dlock__reply_check(&c->node, reply, "unlock");

	if (rc < 0) {
		/* Refused (as Redisson, renewal ends with the unlock whatever it
		 * answered): a caller that does not retry, such as a RedLock
		 * released on its quorum elsewhere, must not leave it renewed. */
		dlock__holds_unsure_release(l, r->owner);
		return rc;
	}
	rc = dlock__parse_release(reply, &left);
	if (rc == DLOCK_ENOTOWNER && r->epoch != 0) {
		/* This client recorded the hold and the server has none: it was
		 * lost (expired, deleted, the server reset) before the unlock,
		 * whether or not the watchdog had noticed yet. */
		int was_lost = dlock__holds_released(l, r->owner, -1);

		/* Others hold it now: two owners believed it theirs (dlock/stats.h). */
		if (left == -2 && !was_lost)
			dlock__stat_brain_split(c, l->name, c->node.label, r->owner);

		return dlock__seterr_node(DLOCK_ELOST, c->node.label,
				"lock %s was lost before the unlock: %s", l->shown,
				was_lost ? "the watchdog had found it lost"
					 : "the hold was gone from the server (expired or deleted)");
	}
	if (rc == DLOCK_ENOTOWNER)
		return dlock__seterr_node(
				rc, c->node.label, "unlock %s: not held by %s", l->shown, r->owner);
	if (rc < 0) {
		dlock__holds_unsure_release(l, r->owner);
		return dlock__seterr_node(rc, c->node.label,
				"unlock %s: unexpected reply (type %d)", l->shown, reply->type);
	}
	dlock__holds_released(l, r->owner, left);
	return 0;
}

int dlock_lock_release(dlock_lock *l, const char *owner)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "release: NULL handle");
	return dlock__errbuf_record(&l->err, dlock__lock_release(l, owner));
}

/* A half of a read-write lock: deleted only in its own mode (Redisson's). */
static void force_rw_prepare(dlock_lock *l, dlock__call *call)
{
	call->script = &dlock__script_rw_force_release;
	call->argc = 0;
	dlock__call_push(call, l->name, l->name_len);
	dlock__call_push(call, l->channel, l->channel_len);
	dlock__call_keys_done(call);
	if (l->kind == DLOCK_LOCK_READ)
		dlock__call_push(call, "read", 4);
	else
		dlock__call_push(call, "write", 5);
	dlock__call_push(call, dlock__release_message(l), 1);
}

/* The force unlock as an operation of one script call (core/drive/cmd_op.h). */
typedef struct force_op {
	dlock__cmd_op co; /* first */
	char *rw_channel;
	size_t rw_len;
	char now[24];
	uint64_t before; /* the holds' epoch as it was sent */
} force_op;

/* Every other kind sends the fair keys and the read-write channel: the
 * script tells a fair lock by its queue and a read-write lock by its mode,
 * so a plain handle (the command line's) wakes fair waiters and read-write
 * holders too. */
static int force_prepare(dlock__cmd_op *co)
{
	force_op *f = (force_op *)co;
	dlock_lock *l = co->handle;
	dlock__call *call = &co->call;

	dlock__call_begin(call, &dlock__script_force_release);
	if (dlock__lock_is_rw(l)) {
		force_rw_prepare(l, call);
	} else {
		dlock__call_push(call, l->name, l->name_len);
		dlock__call_push(call, l->queue, l->queue_len);
		dlock__call_push(call, l->timeouts, l->timeouts_len);
		dlock__call_push(call, l->channel, l->channel_len);
		dlock__call_push(call, f->rw_channel, f->rw_len);
		dlock__call_keys_done(call);
		dlock__call_push(call, "0", 1);
		dlock__call_push(call, f->now, dlock__fmt_i64(f->now, dlock__wall_ms()));
	}
	f->before = dlock__holds_epoch(l);
	return 0;
}

static int force_judge(dlock__cmd_op *co, const redisReply *r)
{
	dlock_lock *l = co->handle;
	int rc = dlock__cmd_judge_int(co, r);

	/* A half left alone (the other mode) took no local hold with it. */
	if (rc == 0 && (!dlock__lock_is_rw(l) || r->integer != 0))
		dlock__holds_name_deleted(l, ((force_op *)co)->before);
	return rc;
}

static void force_clear(dlock__cmd_op *co)
{
	dlock__free(((force_op *)co)->rw_channel);
}

/* Changes the key, so not canceled; a repeat finds nothing more to delete. */
static const dlock__cmd_kind kind_force = { "dlock_lock_force_release", force_prepare, force_judge,
	force_clear, dlock__lock_cmd_unref, 1, 1 };

static int force_new(force_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	dlock__cmd_op *co;
	force_op *f;
	int rc = dlock__lock_cmd_new(&co, sizeof(force_op), &kind_force, l, cb, userdata);

	if (rc < 0)
		return rc;
	f = (force_op *)co;
	if (!dlock__lock_is_rw(l) &&
			(f->rw_channel = dlock__prefix_name("redisson_rwlock", l->name, l->name_len,
					 &f->rw_len)) == NULL) {
		co->op.destroy(&co->op);
		return dlock__errbuf_record(&l->err, dlock__seterr(DLOCK_ENOMEM,
				"force unlock %s: out of memory", l->shown));
	}
	*out = f;
	return 0;
}

int dlock_lock_force_release(int *deleted, dlock_lock *l)
{
	force_op *f;
	int64_t v = 0;
	int rc;

	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "force unlock: NULL handle");
	if ((rc = force_new(&f, l, dlock__cmd_blocking, NULL)) < 0)
		return rc;
	rc = dlock__cmd_op_block(&f->co, &v, NULL);
	if (rc == 0 && deleted != NULL)
		*deleted = (int)v;
	return rc;
}

int dlock_lock_force_release_async(dlock_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	force_op *f;
	int rc;

	if (out != NULL)
		*out = NULL;
	if ((rc = force_new(&f, l, cb, userdata)) < 0)
		return rc;
	return dlock__cmd_op_submit(&f->co, out);
}
