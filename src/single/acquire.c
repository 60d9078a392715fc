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

/* A fair waiter asks again at least this often while others are ahead of it. */
#define FAIR_POLL_MS 50

/* A wait that meets a transient error tries again after a backoff between these. */
#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 1000

/* How long an acquire waits for replies a server owes to given-up commands
 * (one that just woke up sends them at once; a hung one costs no more). */
#define OWED_GRACE_MS 20

/* Fair-lock deadlines are Redisson's data: epoch milliseconds. */
int64_t dlock__wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The owner is `<this client's uuid>:...`: no other client can hold it. */
static int owned_by_client(const dlock_client *c, const char *owner)
{
	return strncmp(owner, c->id, 36) == 0 && owner[36] == ':';
}

int dlock__acquire_prepare(dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms,
		dlock__acquire *a)
{
	int own;
	int64_t lease = lease_ms < 0 ? l->client->opts.watchdog_timeout_ms : lease_ms;
	int rc = dlock__resolve_owner(l, owner, a->owner_buf, sizeof(a->owner_buf), &a->owner);
	dlock__call *c = &a->call;

	if (rc < 0)
		return rc;
	a->lease_ms = lease_ms;
	a->token = 0;
	/* A thread's own owner (this client's uuid) can only be held through
	 * this client, so its record is the truth: no record means no holds,
	 * and a count one higher than recorded can only be a lost reply of ours.
	 * An explicit owner may be shared with other clients and processes: its
	 * count is only compared after a reply of ours was lost - unless it is
	 * named after this client (`<uuid>:<id>`, dlock_client_owner(), as
	 * Redisson names its owners): that one is this client's too. */
	own = owner == NULL || owned_by_client(l->client, owner);
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
	default:
		c->script = &dlock__script_acquire;
	}
	dlock__call_keys_done(c);
	dlock__call_push(c, a->lease_s, dlock__fmt_i64(a->lease_s, lease));
	dlock__call_push(c, a->owner, strlen(a->owner));
	dlock__call_push(c, a->believed_s, dlock__fmt_i64(a->believed_s, a->believed));
	if (l->kind == DLOCK_LOCK_FAIR) {
		/* Redisson: a try with a wait queues with that wait, others with the lock's. */
		int64_t place = wait_ms > 0 ? wait_ms : l->fair_wait_ms;

		dlock__call_push(c, a->wait_s, dlock__fmt_i64(a->wait_s, place));
		dlock__call_push(c, a->now_s, dlock__fmt_i64(a->now_s, dlock__wall_ms()));
		dlock__call_push(c, wait_ms != 0 ? "1" : "0", 1);
	}
	/* Last, for every kind: the owner is the calling thread's (see scripts.c). */
	dlock__call_push(c, owner == NULL ? "1" : "0", 1);
	return 0;
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
		*ttl = FAIR_POLL_MS;
		return dlock__seterr_node(rc, c->node.label,
				"lock %s is free, but %lld waiter(s) asked first (fair lock)",
				l->shown, (long long)(-1000 - got.ttl));
	}
	if (rc == DLOCK_ENOTACQUIRED) {
		*ttl = got.ttl;
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
		dlock_lock_unlock_as(l, a->owner);
		rc = dlock__seterr_node(DLOCK_ENOMEM, c->node.label,
				"lock %s: out of memory recording the hold", l->shown);
	}
	return rc;
}

/*
 * The undo of an attempt whose reply may never come: it takes back exactly
 * the hold that attempt would have made (count believed + 1; nothing if
 * the attempt never ran). NULL when the count before is unknown (an
 * explicit owner without a record): then a late hold expires by its lease.
 * NULL too for a fair waiter that keeps waiting: undoing would cost it its
 * place (Redisson issue 5019); its next attempt adopts a late hold instead.
 */
const dlock__call *dlock__acquire_undo(dlock_lock *l, const dlock__acquire *a, int64_t wait_ms,
		int keep_place, dlock__rollback *u)
{
	if (a->believed < 0 || keep_place)
		return NULL;
	dlock__rollback_prepare(l, a->owner, a->believed + 1, wait_ms, u);
	return &u->call;
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
 * count is unknown): give back exactly this hold - for a re-entry, only
 * the count it added - and fail with the check's code.
 */
int dlock__acquire_unsynced(dlock_lock *l, const dlock__acquire *a, int64_t wait_ms, int code)
{
	char msg[DLOCK__ERRMSG_MAX];
	dlock__rollback u;
	redisReply *r = NULL;
	int rc;

	snprintf(msg, sizeof(msg), "%s", dlock__errmsg_thread());
	dlock__rollback_prepare(l, a->owner, a->count, wait_ms, &u);
	/* Never synced itself: a give-back waits for no replica. */
	rc = dlock__client_run_call(l->client, &u.call, 1, NULL, &r);
	if (rc == 0)
		rc = dlock__reply_check(&l->client->node, r, "rollback");
	dlock__rollback_finish(l, a->owner, a->count - 1, rc, r);
	freeReplyObject(r);
	if (rc < 0)
		return dlock__seterr(code,
				"%s; the hold could not be given back (%s): it expires with its "
				"lease",
				msg, dlock__errmsg_thread());
	return dlock__seterr(code,
			"%s; given back: check the replicas (INFO replication) or lower "
			"sync_replicas",
			msg);
}

/* The acquire, with the WAIT behind it when the client asks replicas to acknowledge. */
static int run_acquire(dlock_lock *l, dlock__acquire *a, int64_t wait_ms, int keep_place,
		redisReply **r, int64_t *ttl)
{
	int64_t sent_at = dlock__now_ms();
	redisReply *wr = NULL;
	dlock__rollback u;
	dlock__sync s;
	int syncing = dlock__sync_prepare(&s, l->client), wrc = 0, rc;

	/* Safe to repeat after a dropped connection when the count before is
	 * known: see the acquire script. A timed-out attempt may still run when
	 * the server wakes up: its undo follows it on the same connection. */
	if (syncing)
		rc = dlock__client_run_synced(l->client, &a->call, a->believed >= 0,
				dlock__acquire_undo(l, a, wait_ms, keep_place, &u), &s, r, &wrc, &wr);
	else
		rc = dlock__client_run_call(l->client, &a->call, a->believed >= 0,
				dlock__acquire_undo(l, a, wait_ms, keep_place, &u), r);
	if (rc == 0)
		rc = dlock__acquire_finish(l, a, *r, sent_at, ttl);
	if (rc == 0 && syncing && (rc = dlock__acquire_sync_check(l, wrc, wr)) < 0)
		rc = dlock__acquire_unsynced(l, a, wait_ms, rc);
	freeReplyObject(wr);
	return rc;
}

/*
 * One acquire attempt. Returns 0 acquired, DLOCK_ENOTACQUIRED with *ttl
 * (how long to sleep before asking again) when someone else holds it, or an
 * error; *retry says whether a wait should try again after it. Too few
 * replicas acknowledging (DLOCK_ENOSYNC) is tried again like a transient
 * error: the acquisition was given back, and the replicas may catch up.
 * *unsettled: set when an attempt sent without its undo (keep_place) got
 * no answer - it may still take the lock - and cleared by any answer (the
 * next attempt is sent only once nothing is owed, so it sees what the
 * late one did, and adopts a hold it made).
 */
static int attempt(dlock_lock *l, dlock__acquire *a, int64_t wait_ms, int keep_place,
		int64_t *ttl, int *retry, int *unsettled)
{
	redisReply *r = NULL;
	/* A server that owes replies may just be waking up: give them a moment. */
	int rc = dlock__client_owes(l->client, l->name, l->name_len,
			dlock__deadline_in(l->client->opts.command_timeout_ms < OWED_GRACE_MS
							? l->client->opts.command_timeout_ms
							: OWED_GRACE_MS));

	*retry = 1;
	if (rc < 0)
		return rc;
	rc = run_acquire(l, a, wait_ms, keep_place, &r, ttl);
	if (r == NULL && (rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT || rc == DLOCK_EPROTO)) {
		dlock__holds_uncertain(l, a->owner);
		*unsettled = *unsettled || keep_place;
	} else if (r != NULL) {
		*unsettled = 0;
	}
	*retry = rc == DLOCK_ENOTACQUIRED || rc == DLOCK_ENOSYNC || dlock__acquire_transient(l->client, rc, r);
	freeReplyObject(r);
	return rc;
}

/* A fair waiter that stops waiting leaves the queue, moving those behind it
 * up. A leave that times out stays queued on its connection and runs when
 * the server does; a dropped connection is retried once (leaving is
 * idempotent); beyond that the place expires after its wait. */
static void fair_leave(dlock_lock *l, const char *owner, int64_t wait_ms)
{
	char place[24];
	dlock__call call = { &dlock__script_fair_leave, 0, 0, { NULL }, { 0 } };
	redisReply *r = NULL;

	dlock__call_push(&call, l->queue, l->queue_len);
	dlock__call_push(&call, l->timeouts, l->timeouts_len);
	dlock__call_keys_done(&call);
	dlock__call_push(&call, owner, strlen(owner));
	dlock__call_push(&call, place,
			dlock__fmt_i64(place, wait_ms > 0 ? wait_ms : l->fair_wait_ms));
	dlock__client_run_call(l->client, &call, 1, NULL, &r);
	freeReplyObject(r);
}

/*
 * A fair waiter gives up. When an attempt sent without its undo is still
 * unanswered, the undo goes now: it takes back the hold that attempt may
 * make and leaves the queue. On another connection than the attempt, it
 * usually runs after it (a paused server serves its clients in order); when
 * it does not, the late hold expires with its lease and the place with its
 * wait.
 */
void dlock__acquire_fair_give_up(dlock_lock *l, const dlock__acquire *a, int64_t wait_ms, int unsettled)
{
	dlock__rollback u;
	redisReply *r = NULL;
	int rc;

	if (!unsettled || a->believed < 0) {
		fair_leave(l, a->owner, wait_ms);
		return;
	}
	dlock__rollback_prepare(l, a->owner, a->believed + 1, wait_ms, &u);
	rc = dlock__client_run_call(l->client, &u.call, 1, NULL, &r);
	dlock__rollback_finish(l, a->owner, a->believed, rc, r);
	freeReplyObject(r);
}

/*
 * Whether a fair waiter keeps its place when this attempt's reply does not
 * come: it does while it will still be waiting then (the undo that leaves
 * the queue is for a waiter that stops). One that ends its wait at a
 * transient error (a quorum's member) or before the reply is due does not.
 */
int dlock__acquire_keeps_place(dlock_lock *l, int64_t wait_ms, int ride_out_errors, int64_t deadline)
{
	if (l->kind != DLOCK_LOCK_FAIR || wait_ms == 0 || !ride_out_errors)
		return 0;
	return deadline == DLOCK__NEVER ||
			deadline - dlock__now_ms() > l->client->opts.command_timeout_ms;
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

/* The channel a waiter listens on: the lock's, or for a fair lock its own. */
char *dlock__acquire_channel(dlock_lock *l, const char *owner, size_t *len)
{
	size_t olen = strlen(owner);
	char *ch;

	if (l->kind != DLOCK_LOCK_FAIR) {
		*len = l->channel_len;
		return l->channel;
	}
	ch = dlock__malloc(l->channel_len + 1 + olen + 1);
	if (ch == NULL)
		return NULL;
	memcpy(ch, l->channel, l->channel_len);
	ch[l->channel_len] = ':';
	memcpy(ch + l->channel_len + 1, owner, olen + 1);
	*len = l->channel_len + 1 + olen;
	return ch;
}

/*
 * When to look again after a failed attempt. Contention: when the holder's
 * TTL runs out (an unlock message wakes the waiter sooner); a fair waiter
 * at least every FAIR_POLL_MS (the head may be gone without a message).
 * A transient error: after a backoff that doubles from RETRY_MIN_MS to
 * RETRY_MAX_MS, jittered so that waiters do not come back in step.
 */
int64_t dlock__acquire_next_look(dlock_lock *l, int rc, int64_t ttl, int64_t *backoff, int64_t now)
{
	if (rc == DLOCK_ENOTACQUIRED) {
		*backoff = 0;
		if (l->kind == DLOCK_LOCK_FAIR && (ttl < 0 || ttl > FAIR_POLL_MS))
			ttl = FAIR_POLL_MS;
		return ttl >= 0 ? now + ttl : DLOCK__NEVER;
	}
	*backoff = *backoff == 0 ? RETRY_MIN_MS : *backoff * 2;
	if (*backoff > RETRY_MAX_MS)
		*backoff = RETRY_MAX_MS;
	return now + *backoff / 2 + (int64_t)(dlock__random() % (uint64_t)(*backoff / 2 + 1));
}

/* In a cluster the channel's slot may have moved to another node (a slot
 * moved, a primary failed over): listen there from now on. */
static void follow_channel(dlock_lock *l, const char *channel, size_t len, dlock__reactor **rx,
		dlock__sub **sub, uint64_t *seen)
{
	dlock__reactor *now = dlock__client_reactor_for(l->client, channel, len);

	if (now == *rx || now == NULL)
		return;
	if (*sub != NULL)
		dlock__sub_leave(*rx, *sub);
	*rx = now;
	*sub = dlock__sub_join(now, channel, len);
	*seen = 0;
}

/*
 * The wait, as Redisson does it: after a failed attempt join the channel,
 * then try again each time an unlock message arrives, the subscription
 * becomes active, or the holder's TTL runs out - whichever comes first. A
 * lost message costs at most the holder's TTL. Transient errors are tried
 * again until the wait is used up (the last one is returned then) - or,
 * for a server that never answered, until its first-contact period is; a
 * cancel (dlock_client_cancel_waits) ends it with DLOCK_ECANCELED.
 */
int dlock__lock_acquire(dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms,
		uint64_t cancels, int ride_out_errors, int64_t *token, int64_t *holder_ttl)
{
	dlock__acquire a;
	int64_t started, deadline, ttl = -1, backoff = 0;
	dlock__reactor *rx = NULL;
	dlock__sub *sub = NULL;
	uint64_t seen = 0;
	char *channel = NULL;
	size_t channel_len = 0;
	int rc, retry, unsettled = 0;

	if ((rc = dlock__acquire_check_times(l, wait_ms, lease_ms)) < 0)
		return rc;
	if ((rc = dlock__client_check_fork(l->client)) < 0)
		return rc;
	if ((rc = dlock__acquire_prepare(l, owner, wait_ms, lease_ms, &a)) < 0)
		return rc;
	started = dlock__now_ms();
	deadline = dlock__deadline_in(wait_ms);
	rc = attempt(l, &a, wait_ms, dlock__acquire_keeps_place(l, wait_ms, ride_out_errors, deadline), &ttl,
			&retry, &unsettled);
	retry = retry && (ride_out_errors || rc == DLOCK_ENOTACQUIRED);
	if (rc == 0 || !retry || wait_ms == 0)
		goto done;

	/* In a cluster the channel's node listens; when none is known now, the
	 * wait looks again at each wake-up time instead of being woken. */
	channel = dlock__acquire_channel(l, a.owner, &channel_len);
	if (channel != NULL)
		rx = dlock__client_reactor_for(l->client, channel, channel_len);
	if (rx != NULL)
		sub = dlock__sub_join(rx, channel, channel_len);
	if (channel == NULL || (rx != NULL && sub == NULL)) {
		rc = dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory", l->shown);
	} else {
		for (;;) {
			int64_t now = dlock__now_ms(), wake = dlock__acquire_next_look(l, rc, ttl, &backoff, now);

			if (now >= deadline)
				break;
			if (dlock__client_first_contact_over(l->client, rc, started, wake)) {
				rc = dlock__seterr_never_answered();
				break;
			}
			if (sub != NULL)
				dlock__sub_wait(rx, sub, &seen, wake < deadline ? wake : deadline);
			else
				dlock__sleep_until(wake < deadline ? wake : deadline);
			if (dlock__client_cancels(l->client) != cancels) {
				rc = dlock__seterr(DLOCK_ECANCELED,
						"lock %s: the wait was canceled", l->shown);
				break;
			}
			/* The count may have changed meanwhile (another thread, same owner). */
			if ((rc = dlock__acquire_prepare(l, owner, wait_ms, lease_ms, &a)) < 0)
				break;
			rc = attempt(l, &a, wait_ms,
					dlock__acquire_keeps_place(l, wait_ms, ride_out_errors, deadline), &ttl,
					&retry, &unsettled);
			if (rc == 0 || !retry || (!ride_out_errors && rc != DLOCK_ENOTACQUIRED))
				break;
			follow_channel(l, channel, channel_len, &rx, &sub, &seen);
		}
		if (sub != NULL)
			dlock__sub_leave(rx, sub);
	}
	if (l->kind == DLOCK_LOCK_FAIR && rc != 0)
		dlock__acquire_fair_give_up(l, &a, wait_ms, unsettled);
	if (channel != l->channel)
		dlock__free(channel);
done:
	if (rc == 0 && token != NULL)
		*token = a.token;
	if (rc == DLOCK_ENOTACQUIRED && holder_ttl != NULL)
		*holder_ttl = ttl;
	return rc;
}

static int lock_acquire(
		dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms, int64_t *token)
{
	return dlock__errbuf_record(&l->err,
			dlock__lock_acquire(l, owner, wait_ms, lease_ms,
					dlock__client_cancels(l->client), 1, token, NULL));
}

int dlock_lock_lock(dlock_lock *l, int64_t lease_ms)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: NULL handle");
	return lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, lease_ms, NULL);
}

int dlock_lock_try(dlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: NULL handle");
	return lock_acquire(l, NULL, wait_ms, lease_ms, NULL);
}

int dlock_lock_try_as(dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms)
{
	if (l == NULL || owner == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: NULL %s", l ? "owner" : "handle");
	return lock_acquire(l, owner, wait_ms, lease_ms, NULL);
}

int dlock_lock_try_fenced(
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
