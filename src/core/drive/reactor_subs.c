/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reactor's channels: one per channel some local waiter (a listener,
 * told by a task posted to its loop) or hold (a watcher, told through the
 * notice) listens on; whom a message wakes; how many are subscribed.
 */
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/drive/reactor_internal.h"

/* Ask the loop to look at what is due (from any thread). */
void dlock__reactor_wake(dlock__reactor *r)
{
	dlock__loop_post(r->loop, &r->tend_task);
}

static dlock__sub *find_sub(dlock__reactor *r, const char *channel, size_t len)
{
	dlock__sub *s;

	for (s = r->subs; s != NULL; s = s->next)
		if (s->len == len && memcmp(s->channel, channel, len) == 0)
			return s;
	return NULL;
}

/* Someone local still wants the channel subscribed. */
int dlock__sub_wanted(const dlock__sub *s)
{
	return s->watchers > 0 || s->listeners != NULL;
}

/* The holds listening on s should look at their lock now (r->mu held). */
void dlock__sub_want_check(dlock__reactor *r, dlock__sub *s)
{
	if (s->watchers > 0) {
		s->check = 1;
		r->checks = 1;
	}
}

/* Wake every waiter of s (r->mu held). */
void dlock__sub_wake_all(dlock__sub *s)
{
	dlock__listener *li;

	for (li = s->listeners; li != NULL; li = li->next)
		dlock__loop_post(li->loop, li->task);
}

/* Wake one waiter of s, the one that waited longest (r->mu held): it
 * goes to the back of the line (Redisson's "0" unlock message). */
static void wake_one(dlock__sub *s)
{
	dlock__listener *li = s->listeners, **p;

	if (li == NULL)
		return;
	dlock__loop_post(li->loop, li->task);
	if (li->next == NULL)
		return;
	s->listeners = li->next;
	for (p = &s->listeners; *p != NULL; p = &(*p)->next)
		;
	*p = li;
	li->next = NULL;
}

/* "0": wake one waiter, and every one that hears every message (r->mu held). */
static void wake_one_and_every_message(dlock__sub *s)
{
	dlock__listener *li;

	wake_one(s);
	for (li = s->listeners; li != NULL; li = li->next)
		if (li->every_message)
			dlock__loop_post(li->loop, li->task);
}

/* Wake as many waiters of s as a semaphore's message says permits are
 * available (r->mu held), each at most once. */
static void wake_n(dlock__sub *s, const redisReply *arg)
{
	const dlock__listener *li;
	long long n = arg->type == REDIS_REPLY_STRING ? strtoll(arg->str, NULL, 10) : 1;
	long long m = 0;

	for (li = s->listeners; li != NULL; li = li->next)
		m++;
	for (n = n < m ? n : m; n > 0; n--)
		wake_one(s);
}

void dlock__sub_free(dlock__sub *s)
{
	dlock__free(s->channel);
	dlock__free(s);
}

/* A push's kind, the sharded form ("smessage", ...) read as the plain one. */
static int kind_is(const redisReply *kind, const char *plain)
{
	const char *k = kind->str;

	return strcmp(k[0] == 's' && strcmp(k, "subscribe") != 0 ? k + 1 : k, plain) == 0;
}

/* Whether a message came on a "taken" channel (DLOCK__TAKEN_PREFIX). */
static int is_note(const redisReply *chan)
{
	return chan->len > sizeof(DLOCK__TAKEN_PREFIX) - 1 &&
	       memcmp(chan->str, DLOCK__TAKEN_PREFIX, sizeof(DLOCK__TAKEN_PREFIX) - 1) == 0;
}

/* dlock's own note that a waiter took the lock: news for all of this
 * process's waiters (none of Redisson's listen here). */
static void take_note(dlock__sub *s, const redisReply *arg)
{
	if (arg->type == REDIS_REPLY_STRING) {
		char *end;

		s->note_lease = strtoll(arg->str, &end, 10);
		s->note_n = *end == ':' ? strtoll(end + 1, NULL, 10) : 0;
		s->note_gen++;
		dlock__sub_wake_all(s);
	}
}

/* "0" wakes one waiter (Redisson's UNLOCK_MESSAGE); "1" wakes all. One
 * woken while its attempt is out looks again right after it; one that
 * stops listening passes it on. */
static void unlock_message(
		dlock__reactor *r, dlock__sub *s, const redisReply *chan, const redisReply *arg)
{
	if (arg->type == REDIS_REPLY_STRING && arg->len == 1 && arg->str[0] == '1')
		dlock__sub_wake_all(s);
	else if (chan->len > 12 && memcmp(chan->str, "redisson_sc:", 12) == 0)
		wake_n(s, arg); /* a semaphore's count: that many may take one */
	else
		wake_one_and_every_message(s);
	/* Anyone's unlock of the name, a force unlock included. */
	dlock__sub_want_check(r, s);
}

/* The server's answer to a (un)subscription, or an unsubscription of its own. */
static void subscription_reply(dlock__reactor *r, dlock__sub *s, const redisReply *kind)
{
	if (kind_is(kind, "subscribe") && s->state == SUB_SUBSCRIBING) {
		s->state = SUB_SUBSCRIBED;
		s->gen++;
		dlock__sub_wake_all(s);
		/* An unlock before now went unheard: the holds look once. */
		dlock__sub_want_check(r, s);
	} else if (kind_is(kind, "unsubscribe") && s->state == SUB_UNSUBSCRIBING) {
		s->state = SUB_NONE;
	} else if (kind_is(kind, "unsubscribe") && s->state == SUB_SUBSCRIBED) {
		/* The server dropped it (a cluster slot moved away): the
		 * waiters look at the lock again; the subscription is
		 * asked for again. */
		s->state = SUB_NONE;
		s->gen++;
		dlock__sub_wake_all(s);
		dlock__sub_want_check(r, s);
	}
}

void dlock__reactor_handle_reply(dlock__reactor *r, redisReply *reply)
{
	redisReply *kind, *chan, *arg;
	dlock__sub *s;

	if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3)
		return;
	kind = reply->element[0];
	chan = reply->element[1];
	arg = reply->element[2];
	if (kind->type != REDIS_REPLY_STRING || chan->type != REDIS_REPLY_STRING)
		return;
	dlock__mutex_lock(&r->mu);
	s = find_sub(r, chan->str, chan->len);
	if (s != NULL && kind_is(kind, "message"))
		s->last_seq = ++r->seq;
	if (s != NULL && kind_is(kind, "message") && s->state == SUB_SUBSCRIBED && is_note(chan))
		take_note(s, arg);
	else if (s != NULL && kind_is(kind, "message") && s->state == SUB_SUBSCRIBED)
		unlock_message(r, s, chan, arg);
	else if (s != NULL)
		subscription_reply(r, s, kind);
	dlock__mutex_unlock(&r->mu);
}

/* Tell the holds of every channel flagged for a check to look at their
 * lock (r->mu held; dropped around each notice). Only this thread unlinks
 * subs, so the list stays walkable meanwhile. */
void dlock__reactor_notify_watchers(dlock__reactor *r)
{
	dlock__sub *s;

	r->checks = 0;
	for (s = r->subs; s != NULL; s = s->next) {
		dlock__reactor_notice notice = r->notice;
		void *arg = r->notice_arg;

		if (!s->check)
			continue;
		s->check = 0;
		if (s->watchers == 0 || notice == NULL)
			continue;
		dlock__mutex_unlock(&r->mu);
		notice(arg, s);
		dlock__mutex_lock(&r->mu);
	}
}

/* The channel's sub, made if needed (r->mu held); NULL when out of memory. */
static dlock__sub *sub_get(dlock__reactor *r, const char *channel, size_t len)
{
	dlock__sub *s = find_sub(r, channel, len);

	if (s != NULL)
		return s;
	s = dlock__calloc(1, sizeof(*s));
	if (s == NULL || (s->channel = dlock__strndup(channel, len)) == NULL) {
		if (s != NULL)
			dlock__free(s->channel);
		dlock__free(s);
		return NULL;
	}
	s->len = len;
	s->next = r->subs;
	r->subs = s;
	return s;
}

dlock__sub *dlock__sub_watch(dlock__reactor *r, const char *channel, size_t len,
		dlock__reactor_notice notice, void *arg)
{
	dlock__sub *s;

	dlock__mutex_lock(&r->mu);
	s = sub_get(r, channel, len);
	if (s != NULL) {
		r->notice = notice;
		r->notice_arg = arg;
		s->watchers++;
		/* Already listening: an unlock between the acquisition and now
		 * went unheard, so the new hold looks once, as after a subscription. */
		if (s->state == SUB_SUBSCRIBED)
			dlock__sub_want_check(r, s);
	}
	dlock__mutex_unlock(&r->mu);
	if (s != NULL)
		dlock__reactor_wake(r);
	return s;
}

void dlock__sub_unwatch(dlock__reactor *r, dlock__sub *s)
{
	int last;

	dlock__mutex_lock(&r->mu);
	s->watchers--;
	last = !dlock__sub_wanted(s);
	dlock__mutex_unlock(&r->mu);
	if (last)
		dlock__reactor_wake(r);
}

dlock__sub *dlock__sub_listen(dlock__reactor *r, const char *channel, size_t len,
		dlock__listener *li)
{
	dlock__sub *s;

	dlock__mutex_lock(&r->mu);
	s = sub_get(r, channel, len);
	if (s != NULL) {
		li->next = s->listeners;
		s->listeners = li;
		/* Already listening: an unlock just before went unheard; look once. */
		if (s->state == SUB_SUBSCRIBED)
			dlock__loop_post(li->loop, li->task);
	}
	dlock__mutex_unlock(&r->mu);
	if (s != NULL)
		dlock__reactor_wake(r);
	return s;
}

void dlock__sub_unlisten(dlock__reactor *r, dlock__sub *s, dlock__listener *li)
{
	dlock__listener **p;
	int last;

	dlock__mutex_lock(&r->mu);
	for (p = &s->listeners; *p != NULL; p = &(*p)->next) {
		if (*p == li) {
			*p = li->next;
			break;
		}
	}
	/* Woken and gone before it looked: the next one looks instead. */
	if (dlock__loop_unpost(li->loop, li->task))
		wake_one(s);
	last = !dlock__sub_wanted(s);
	dlock__mutex_unlock(&r->mu);
	if (last)
		dlock__reactor_wake(r);
}

uint64_t dlock__sub_note(dlock__reactor *r, const dlock__sub *s, int64_t *lease, int64_t *n,
		const dlock__sub *other, int *other_since)
{
	uint64_t gen;

	dlock__mutex_lock(&r->mu);
	gen = s->note_gen;
	*lease = s->note_lease;
	*n = s->note_n;
	if (other_since != NULL)
		*other_since = other != NULL && other->last_seq > s->last_seq;
	dlock__mutex_unlock(&r->mu);
	return gen;
}

const char *dlock__sub_channel(const dlock__sub *s, size_t *len)
{
	*len = s->len;
	return s->channel;
}

void dlock__reactor_wake_waiters(dlock__reactor *r)
{
	dlock__sub *s;

	dlock__mutex_lock(&r->mu);
	for (s = r->subs; s != NULL; s = s->next)
		dlock__sub_wake_all(s);
	dlock__mutex_unlock(&r->mu);
}

int dlock__reactor_channel_count(dlock__reactor *r)
{
	dlock__sub *s;
	int n = 0;

	dlock__mutex_lock(&r->mu);
	for (s = r->subs; s != NULL; s = s->next)
		if (s->state != SUB_NONE)
			n++;
	dlock__mutex_unlock(&r->mu);
	return n;
}
