/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Acquiring a single-server lock: one attempt (in two halves, so the quorum
 * engine can multiplex them), and the wait for a release.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fmt.h"
#include "core/base/ids.h"
#include "core/drive/debts.h"
#include "core/drive/sync.h"
#include "core/base/time.h"
#include "single/acquire.h"
#include "single/lock_internal.h"
#include "single/replies.h"
#include "single/scripts.h"

int64_t dlock__fair_place_ms(const dlock_lock *l, int64_t wait_ms)
{
	return wait_ms > 0 ? wait_ms + l->client->opts.command_timeout_ms : l->fair_wait_ms;
}

int dlock__owned_by_client(const dlock_client *c, const char *owner)
{
	return strncmp(owner, c->id, 36) == 0 && owner[36] == ':';
}

int dlock__acquire_prepare(dlock_lock *l, const char *owner, int vouched, int64_t wait_ms,
		int64_t lease_ms, dlock__acquire *a)
{
	int own;
	int64_t lease = lease_ms < 0 ? l->client->opts.watchdog_timeout_ms : lease_ms;
	int rc = dlock__resolve_owner(l, owner, a->owner_buf, sizeof(a->owner_buf), &a->owner);
	dlock__call *c = &a->call;

	if (rc < 0)
		return rc;
	a->lease_ms = lease_ms;
	a->token = 0;
	a->waiters = -1;
	a->role = 0;
	a->left = NULL;
	/* A thread's own owner (this client's uuid) can only be held through
	 * this client, so its record is the truth: no record means no holds,
	 * and a count one higher than recorded can only be a lost reply of ours.
	 * An explicit owner may be shared with other clients and processes: its
	 * count is only compared after a reply of ours was lost - unless it is
	 * named after this client (`<uuid>:<id>`, dlock_client_owner(), as
	 * Redisson names its owners): that one is this client's too. */
	own = owner == NULL || vouched || dlock__owned_by_client(l->client, owner);
	a->believed = dlock__holds_count(l, a->owner, own);
	if (a->believed < 0 && own)
		a->believed = 0;

	c->argc = 0;
	dlock__call_push(c, l->name, l->name_len);
	switch (l->kind) {
	case DLOCK_LOCK_FENCED:
		c->script = &dlock__script_acquire_fenced;
		dlock__call_push(c, l->token_key, l->token_key_len);
		break;
	case DLOCK_LOCK_FAIR:
		c->script = &dlock__script_fair_acquire;
		dlock__call_push(c, l->queue, l->queue_len);
		dlock__call_push(c, l->timeouts, l->timeouts_len);
		break;
	case DLOCK_LOCK_READ:
		c->script = &dlock__script_rw_acquire_read;
		break;
	case DLOCK_LOCK_WRITE:
		c->script = &dlock__script_rw_acquire_write;
		break;
	default:
		c->script = &dlock__script_acquire;
	}
	dlock__call_keys_done(c);
	dlock__call_push(c, a->lease_s, dlock__fmt_i64(a->lease_s, lease));
	dlock__call_push(c, a->owner, strlen(a->owner));
	dlock__call_push(c, a->believed_s, dlock__fmt_i64(a->believed_s, a->believed));
	if (l->kind == DLOCK_LOCK_FAIR) {
		int64_t place = dlock__fair_place_ms(l, wait_ms);

		dlock__call_push(c, a->wait_s, dlock__fmt_i64(a->wait_s, place));
		dlock__call_push(c, a->now_s, dlock__fmt_i64(a->now_s, dlock__wall_ms()));
		dlock__call_push(c, wait_ms != 0 ? "1" : "0", 1);
	}
	/* Last, for every kind: the owner is the calling thread's (see scripts.c). */
	dlock__call_push(c, owner == NULL ? "1" : "0", 1);
	return 0;
}

void dlock__acquire_herd(const dlock_lock *l, dlock__acquire *a, int tell, int roles)
{
	dlock__call *c = &a->call;

	/* ARGV[5] to [8], after the owner flag every kind ends with (scripts.c);
	 * the waiters' ZSET last among the keys. */
	if (l->taken == NULL || c->argc != c->nkeys + 4 || c->argc + 5 > DLOCK__CALL_MAX)
		return;
	dlock__call_push(c, l->taken, l->taken_len);
	dlock__call_push(c, tell ? "1" : "0", 1);
	if (!roles)
		return;
	dlock__call_add_key(c, l->waiters, l->waiters_len);
	dlock__call_push(c, l->wake, l->wake_len);
	dlock__call_push(c, DLOCK__HERD_WATCHERS_ARG, strlen(DLOCK__HERD_WATCHERS_ARG));
}

void dlock__acquire_wait_key(const dlock_lock *l, dlock__acquire *a, const char *key, size_t len)
{
	dlock__call *c = &a->call;

	/* KEYS[4] of the fair acquire (scripts.c). */
	if (l->kind == DLOCK_LOCK_FAIR && c->nkeys == 3 && c->argc < DLOCK__CALL_MAX) {
		dlock__call_add_key(c, key, len);
		a->left = key;
		a->left_len = len;
	}
}

int dlock__acquire_finish(dlock_lock *l, dlock__acquire *a, const redisReply *r, int64_t sent_at,
		int64_t *ttl)
{
	dlock_client *c = l->client;
	dlock__acquired got;
	int rc = dlock__reply_check(&c->node, r, "acquire");

	if (rc < 0)
		return rc;
	rc = dlock__parse_acquire(r, l->kind == DLOCK_LOCK_FENCED, &got);
	if (rc == DLOCK_ENOTACQUIRED && l->kind == DLOCK_LOCK_FAIR && got.ttl <= -1000) {
		/* Nobody holds it; others asked first (the fair script's answer). */
		*ttl = DLOCK__FAIR_POLL_MS;
		return dlock__seterr_node(rc, c->node.label,
				"lock %s is free, but %lld waiter(s) asked first (fair lock)",
				l->shown, (long long)(-1000 - got.ttl));
	}
	if (rc == DLOCK_ENOTACQUIRED && l->kind == DLOCK_LOCK_WRITE && got.ttl == DLOCK__RW_UPGRADE)
		/* Final: waiting would wait for the owner's own read hold. */
		return dlock__seterr_node(DLOCK_EINVAL, c->node.label,
				"lock %s: %s holds the read lock; upgrade from read to write is "
				"not supported: release the read lock first",
				l->shown, a->owner);
	if (rc == DLOCK_ENOTACQUIRED) {
		*ttl = got.ttl;
		a->waiters = got.waiters;
		a->role = got.role;
		return dlock__seterr_node(rc, c->node.label,
				"lock %s is held by another owner (ttl %lld ms)", l->shown,
				(long long)got.ttl);
	}
	if (rc < 0)
		return dlock__seterr_node(rc, c->node.label,
				"acquire %s: unexpected reply (type %d)", l->shown, r->type);
	a->count = got.count;
	a->token = got.token;
	rc = dlock__holds_acquired(l, a->owner, got.count, a->lease_ms, sent_at);
	if (rc < 0) {
		/* Nobody would renew or track it: give the hold back. */
		dlock_lock_release(l, a->owner);
		rc = dlock__seterr_node(DLOCK_ENOMEM, c->node.label,
				"lock %s: out of memory recording the hold", l->shown);
	}
	return rc;
}

/*
 * Whether a wait rides out this failure: the server may answer again in a
 * moment (restarting, loading its data, busy with a script, a hung or
 * partitioned link, replies still owed). A wrong type, refused credentials,
 * a bad argument, a read-only replica (the URI names the wrong server), a
 * server out of memory (noeviction: nothing frees it by itself) or a TLS
 * handshake refused (an untrusted certificate) are final.
 */
int dlock__acquire_transient(dlock_client *c, int rc, const redisReply *r)
{
	static const char *const busy[] = { "LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN" };
	size_t i;

	if (rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT)
		return !dlock__client_refused(c, rc); /* TLS refused: final */
	for (i = 0; rc == DLOCK_ESERVER && r != NULL && i < sizeof(busy) / sizeof(*busy); i++)
		if (dlock__reply_is_error(r, busy[i]))
			return 1;
	return 0;
}

int dlock__acquire_sync_check(dlock_lock *l, int sync_rc, const redisReply *sync_reply)
{
	char what[96];
	int synced, rc;

	snprintf(what, sizeof(what), "lock %s", l->shown);
	rc = dlock__sync_check(l->client, sync_rc, sync_reply, what, &synced);
	atomic_store(&l->synced, synced);
	return rc;
}

/*
 * The acquisition was made but too few replicas acknowledged it (or their
 * count is unknown), so it was given back - exactly this hold, for a
 * re-entry only the count it added (dlock__rollback_prepare with a->count,
 * sent as a step of the acquire's op): record the give-back's outcome (rc,
 * r) and fail with the check's code and message (msg).
 */
int dlock__acquire_unsynced(dlock_lock *l, const dlock__acquire *a, int code, const char *msg,
		int rc, const redisReply *r)
{
	if (rc == 0)
		rc = dlock__reply_check(&l->client->node, r, "rollback");
	dlock__rollback_finish(l, a->owner, a->count - 1, rc, r);
	if (rc < 0)
		return dlock__seterr(code,
				"%s; the hold could not be given back (%s): it expires with its "
				"lease",
				msg, dlock__errmsg_thread());
	if (code != DLOCK_ENOSYNC)
		return dlock__seterr(code, "%s; given back", msg);
	return dlock__seterr(code,
			"%s; given back: check the replicas (INFO replication) or lower %s", msg,
			l->client->opts.sync_aof > 0 ? "sync_aof" : "sync_replicas");
}

/* The plain leave: the waiter's place goes, those behind it move up. */
static void fair_leave_prepare(dlock_lock *l, const dlock__acquire *a, int64_t wait_ms,
		dlock__fair_exit *x)
{
	dlock__call *c = &x->u.call;

	c->script = &dlock__script_fair_leave;
	c->argc = 0;
	dlock__call_push(c, l->queue, l->queue_len);
	dlock__call_push(c, l->timeouts, l->timeouts_len);
	dlock__call_keys_done(c);
	dlock__call_push(c, a->owner, strlen(a->owner));
	dlock__call_push(c, x->u.wait,
			dlock__fmt_i64(x->u.wait, dlock__fair_place_ms(l, wait_ms)));
}

/* The mark that stops a late attempt: the last key, its lifetime the last argument. */
static void fair_mark_left(dlock_lock *l, const dlock__acquire *a, int64_t wait_ms,
		dlock__fair_exit *x)
{
	dlock__call *c = &x->u.call;
	int64_t ttl = dlock__fair_place_ms(l, wait_ms) + l->client->opts.command_timeout_ms;

	dlock__call_add_key(c, a->left, a->left_len);
	dlock__call_push(c, x->left_ttl, dlock__fmt_i64(x->left_ttl, ttl));
}

/*
 * A fair waiter that stops waiting leaves the queue, moving those behind it
 * up. When an attempt sent without its undo is still unanswered, the undo
 * goes instead: it takes back the hold that attempt may make and leaves the
 * queue. On another connection than the attempt, it may run before it (the
 * attempt's connection timed out; a paused server that wakes serves its
 * connections in any order): then that attempt would take the lock or queue
 * again, and nobody would leave that place before it expires. So a leave
 * or undo sent while an attempt is unanswered also sets the wait's mark
 * (dlock__acquire_wait_key), which lasts as long as a place and a command
 * timeout more; the late attempt finds it and does nothing. A leave with
 * no reply owed writes nothing more than Redisson's. A leave that times out
 * stays queued on its connection and runs when the server does (it goes as
 * EVAL: single/acquire_op.c).
 */
const dlock__call *dlock__fair_exit_prepare(dlock_lock *l, const dlock__acquire *a,
		int64_t wait_ms, int unsettled, dlock__fair_exit *x)
{
	x->undo = unsettled && a->believed >= 0;
	if (x->undo)
		dlock__rollback_prepare(l, a->owner, a->believed + 1, wait_ms, &x->u);
	else
		fair_leave_prepare(l, a, wait_ms, x);
	if (unsettled && a->left != NULL)
		fair_mark_left(l, a, wait_ms, x);
	return &x->u.call;
}

const dlock__call *dlock__herd_exit_prepare(dlock_lock *l, const dlock__acquire *a,
		dlock__fair_exit *x)
{
	dlock__call *c = &x->u.call;

	x->undo = 0;
	dlock__call_begin(c, &dlock__script_herd_leave);
	dlock__call_push(c, l->waiters, l->waiters_len);
	dlock__call_keys_done(c);
	dlock__call_push(c, l->wake, l->wake_len);
	dlock__call_push(c, DLOCK__HERD_WATCHERS_ARG, strlen(DLOCK__HERD_WATCHERS_ARG));
	dlock__call_push(c, a->owner, strlen(a->owner));
	return c;
}

void dlock__fair_exit_finish(dlock_lock *l, const dlock__acquire *a, const dlock__fair_exit *x,
		int rc, const redisReply *r)
{
	if (x->undo)
		dlock__rollback_finish(l, a->owner, a->believed, rc, r);
}

int dlock__acquire_check_times(dlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
	if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
		return dlock__seterr(DLOCK_EINVAL,
				"lock %s: wait must be >= 0 or DLOCK_WAIT_FOREVER", l->shown);
	if (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG)
		return dlock__seterr(DLOCK_EINVAL,
				"lock %s: lease must be > 0 or DLOCK_LEASE_WATCHDOG", l->shown);
	return 0;
}

static int lock_acquire(
		dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms, int64_t *token)
{
	return dlock__errbuf_record(&l->err,
			dlock__lock_acquire(l, owner, wait_ms, lease_ms,
					dlock__client_cancels(l->client), 1, token, NULL));
}

int dlock_lock_acquire(dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: NULL handle");
	return lock_acquire(l, owner, wait_ms, lease_ms, NULL);
}

int dlock_lock_acquire_fenced(
		int64_t *token, dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms)
{
	if (l == NULL || token == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: NULL %s", l ? "token" : "handle");
	if (l->kind != DLOCK_LOCK_FENCED)
		return dlock__errbuf_record(&l->err,
				dlock__seterr(DLOCK_EINVAL,
						"lock %s is not fenced (make it with kind "
						"DLOCK_LOCK_FENCED)",
						l->shown));
	return lock_acquire(l, owner, wait_ms, lease_ms, token);
}
