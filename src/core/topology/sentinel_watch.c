/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The failover watch of a Sentinel-managed node: a connection to one
 * sentinel subscribed to the channels on which sentinels announce a new
 * primary, driven by the client's reactor thread. The sentinel that leads a
 * failover says +promoted-slave as soon as the replica it chose is a
 * primary, and +switch-master only once the other replicas follow it
 * (seconds later); the others say +switch-master when they hear of it. Without it a client keeps
 * its connections to a demoted primary, which takes writes until Sentinel
 * reconfigures it (up to ~10 s): renewals that go there do not reach the new
 * primary, whose copy of the hold then expires.
 */
#include <stddef.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/net/conn.h"
#include "core/base/error.h"
#include "core/topology/sentinel.h"
#include "core/topology/sentinel_watch.h"
#include "core/base/time.h"

#define RETRY_MS 500
#define SWITCHED "+switch-master"
#define PROMOTED "+promoted-slave"

void dlock__watch_init(dlock__watch *w, dlock__sentinel *s, void (*changed)(void *arg),
		void *arg)
{
	memset(w, 0, sizeof(*w));
	w->s = s;
	w->changed = changed;
	w->arg = arg;
}

void dlock__watch_close(dlock__watch *w, int forked)
{
	if (forked) { /* the loop is the parent's: only this copy's memory */
		dlock__conn_close(w->x.c);
		w->x.c = NULL;
	} else {
		dlock__exchange_stop(&w->x);
	}
	w->subscribing = 0;
	dlock__conn_close(w->conn);
	w->conn = NULL;
}

static void lost_connection(dlock__watch *w)
{
	dlock__watch_close(w, 0);
	w->retry_at = dlock__now_ms() + RETRY_MS;
}

static const char *const subscribe_argv[3] = { "SUBSCRIBE", SWITCHED, PROMOTED };
static const size_t subscribe_lens[3] = { 9, sizeof(SWITCHED) - 1, sizeof(PROMOTED) - 1 };

/* The first channel's confirmation came (the second is read and skipped
 * with the messages), or the subscribing failed. */
static void subscribed(dlock__exchange *x, int rc, redisReply *reply)
{
	dlock__watch *w = (dlock__watch *)((char *)x - offsetof(dlock__watch, x));

	freeReplyObject(reply);
	w->subscribing = 0;
	if (rc < 0) {
		lost_connection(w);
	} else {
		w->conn = dlock__exchange_keep(x);
		dlock__sentinel_suspect(w->s);
	}
	w->changed(w->arg);
}

/* Subscribe at the next sentinel in turn. What was announced while no
 * connection listened is unknown: the address is asked again before use. */
static void subscribe(dlock__watch *w, dlock__loop *loop)
{
	const dlock__node *sn = dlock__sentinel_node(w->s, w->next);

	w->next = (w->next + 1) % dlock__sentinel_count(w->s);
	if (dlock__exchange_start(&w->x, loop, sn, dlock__deadline_in(sn->connect_timeout_ms), 3,
			    (const char **)subscribe_argv, subscribe_lens, "SUBSCRIBE",
			    subscribed) < 0)
		lost_connection(w);
	else
		w->subscribing = 1;
}

int64_t dlock__watch_tend(dlock__watch *w, dlock__loop *loop)
{
	if (w->s == NULL || w->conn != NULL || w->subscribing)
		return DLOCK__NEVER;
	if (dlock__now_ms() >= w->retry_at)
		subscribe(w, loop);
	return w->conn != NULL || w->subscribing ? DLOCK__NEVER : w->retry_at;
}

int dlock__watch_fd(const dlock__watch *w, short *events)
{
	if (w->conn == NULL)
		return -1;
	*events = dlock__conn_events(w->conn);
	return w->conn->fd;
}

/* A pub/sub push ["message", channel, text] telling that this node's primary moved. */
static int announces_move(dlock__watch *w, const redisReply *r)
{
	const redisReply *chan, *text;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
			r->element[0]->type != REDIS_REPLY_STRING ||
			strcmp(r->element[0]->str, "message") != 0 ||
			r->element[1]->type != REDIS_REPLY_STRING ||
			r->element[2]->type != REDIS_REPLY_STRING)
		return 0;
	chan = r->element[1];
	text = r->element[2];
	if (strcmp(chan->str, SWITCHED) == 0)
		return dlock__sentinel_switched(w->s, text->str, text->len);
	if (strcmp(chan->str, PROMOTED) == 0)
		return dlock__sentinel_promoted(w->s, text->str, text->len);
	return 0;
}

int dlock__watch_read(dlock__watch *w)
{
	int switched = 0;

	while (w->conn != NULL) {
		redisReply *r = NULL;
		int rc = dlock__conn_read(w->conn, &r, "SUBSCRIBE", 0);

		if (rc == DLOCK__AGAIN)
			break;
		if (rc < 0) {
			lost_connection(w);
			break;
		}
		if (announces_move(w, r))
			switched = 1;
		freeReplyObject(r);
	}
	return switched;
}
