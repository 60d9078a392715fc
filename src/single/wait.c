/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One waiter for every kind that waits (acquire_op.c's lock, semaphore_op.c's
 * permits, countdown_op.c's await): a state machine on the operation's loop. The
 * kind gives a table of steps (wait.h): send an attempt (its call and its
 * undo), judge its answer, end. The waiter owns the rest: the listening
 * (the reactor's subscription on the kind's channel, the listener, the
 * wake-up task), the timer and the backoff, the deadline and the last
 * attempt at it, a cancel while it listens or attempts, a message during
 * an attempt, and the conclusion.
 *
 *   [LISTEN, listen_first] -> ATTEMPT
 *   ATTEMPT --GOT / FINAL / wait 0 / deadline passed--> done (steps.end)
 *      ATTEMPT --AGAIN (redirect)--> ATTEMPT, at once
 *      ATTEMPT --NOT_YET--> WAITING until `next` (the holder's lease end, a poll)
 *      ATTEMPT --TRANSIENT--> WAITING until a backoff (50 ms doubling to
 *                             1 s, jittered); a server that never answered
 *                             within its first-contact period ends it
 *   WAITING --message, subscription made, timer--> ATTEMPT
 *   WAITING --deadline--> a LAST ATTEMPT, whose answer is the result: the
 *      permits may be back by now, the count zero, the server back from an
 *      outage - never the answer of an earlier attempt
 *   A message while an attempt is out: the next wait looks again at once
 *   (the attempt may have read the state before the change).
 *   cancel: WAITING stops listening and ends with DLOCK_ECANCELED; ATTEMPT
 *      abandons its run (the undo goes right behind it), or, when the kind
 *      cannot undo blindly (steps.on_cancel), stops listening and
 *      awaits the answer, which steps.canceled gets. A blocking wait also
 *      ends at its next wake-up once dlock_client_cancel_waits() was called.
 *
 * Where a kind differs it says so in its steps: a latch listens before its
 * first look and hears every message (li.every_message); a semaphore's
 * plain attempt is awaited when canceled and what it took given back; a
 * lock listens where its herd role says (steps.listen/unlisten: the
 * lock's, the "taken" and its own channel), a woken watcher asks in its
 * slot (steps.slot), a newcomer's look waits for its own channel
 * (steps.look, dlock__waiter_arm), an attempt waits for replies the
 * server owes (dlock__waiter_put_off: the timer then attempts) or fails
 * unsent (dlock__waiter_answer), and one that ends without the lock may
 * leave its queue first (in its steps.end).
 */
#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "single/wait.h"

#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 1000

#define WOP(p, field) ((dlock__waiter *)((char *)(p) - offsetof(dlock__waiter, field)))

static void attempt(dlock__waiter *w);

void dlock__waiter_stop(dlock__waiter *w)
{
	if (w->steps->unlisten != NULL)
		w->steps->unlisten(w);
	if (w->sub != NULL)
		dlock__sub_unlisten(w->rx, w->sub, &w->li);
	w->sub = NULL;
	dlock__timer_stop(w->op->loop, &w->timer);
	dlock__loop_unpost(w->op->loop, &w->wake_task);
	w->waiting = 0;
}

void dlock__waiter_conclude(dlock__waiter *w, int rc)
{
	dlock__waiter_stop(w);
	w->steps->end(w, rc);
}

static int out_of_memory(const dlock__waiter *w)
{
	return dlock__seterr(DLOCK_ENOMEM, "%s %s: out of memory", w->steps->noun, w->shown);
}

int dlock__waiter_follow(dlock__waiter *w, dlock__reactor **rx, dlock__sub **sub,
		dlock__listener *li, const char *channel, size_t len)
{
	dlock__reactor *now = dlock__client_reactor_for(w->client, channel, len);

	/* No node for the channel now (a cluster's map being read): the
	 * attempt finds out, and the next wait listens once there is one. */
	if (now == NULL || (now == *rx && *sub != NULL))
		return 0;
	if (*sub != NULL)
		dlock__sub_unlisten(*rx, *sub, li);
	*rx = now;
	*sub = dlock__sub_listen(now, channel, len, li);
	return *sub == NULL ? -1 : 0;
}

/* Listen where the kind says (the time to look again in *wake). 0, or an error. */
static int listen(dlock__waiter *w, int64_t *wake)
{
	int rc;

	/* The reactor's thread wakes it: a thread's loop gets its wake-up
	 * descriptor (kept until the blocking call ends). */
	if (!w->wakeable) {
		if ((rc = dlock__loop_wakeable(w->op->loop)) < 0)
			return rc;
		w->wakeable = 1;
	}
	if (w->steps->listen != NULL)
		return w->steps->listen(w, wake);
	if (dlock__waiter_follow(w, &w->rx, &w->sub, &w->li, w->channel, w->channel_len) < 0)
		return out_of_memory(w);
	return 0;
}

/* ms until a woken waiter looks; -1 when it does not hear the channel now. */
static int64_t slot_of(dlock__waiter *w)
{
	return w->steps->slot != NULL ? w->steps->slot(w) : 0;
}

int dlock__waiter_arm(dlock__waiter *w, int64_t when)
{
	if (dlock__timer_set(w->op->loop, &w->timer, when < w->deadline ? when : w->deadline) < 0)
		return out_of_memory(w);
	return 0;
}

int dlock__waiter_put_off(dlock__waiter *w, int64_t when)
{
	return dlock__timer_set(w->op->loop, &w->timer, when);
}

/* Sleep until a message, the subscription made, or `wake` (the deadline at the latest). */
static void wait_for(dlock__waiter *w, int64_t wake)
{
	int64_t slot;
	int rc;

	if ((rc = listen(w, &wake)) < 0) {
		dlock__waiter_conclude(w, rc);
		return;
	}
	w->waiting = 1;
	/* The change may have come after the attempt was answered. */
	if (w->woken_meanwhile && (slot = slot_of(w)) >= 0)
		wake = dlock__now_ms() + slot;
	w->woken_meanwhile = 0;
	if ((rc = dlock__waiter_arm(w, wake)) < 0)
		dlock__waiter_conclude(w, rc);
}

/* The backoff after a transient error: doubling, jittered so that waiters
 * do not come back in step. When to look again. */
static int64_t backoff(dlock__waiter *w, int64_t now)
{
	w->backoff = w->backoff == 0 ? RETRY_MIN_MS : w->backoff * 2;
	if (w->backoff > RETRY_MAX_MS)
		w->backoff = RETRY_MAX_MS;
	return now + w->backoff / 2 + (int64_t)(dlock__random() % (uint64_t)(w->backoff / 2 + 1));
}

/* What an answered attempt leads to. */
void dlock__waiter_answer(dlock__waiter *w, dlock__wait_verdict v, int rc, int64_t next)
{
	int64_t now = dlock__now_ms();

	if (v == DLOCK__WAIT_GOT || v == DLOCK__WAIT_FINAL || w->wait_ms == 0 ||
			now >= w->deadline) {
		dlock__waiter_conclude(w, v == DLOCK__WAIT_GOT ? 0 : rc);
		return;
	}
	if (v == DLOCK__WAIT_NOT_YET) {
		w->backoff = 0;
	} else {
		next = backoff(w, now);
		if (dlock__client_first_contact_over(w->client, rc, w->started, next)) {
			dlock__waiter_conclude(w, dlock__seterr_never_answered());
			return;
		}
	}
	wait_for(w, next);
}

static void answered(dlock__mux_loop *ml)
{
	dlock__waiter *w = WOP(ml, ml);
	int64_t next = DLOCK__NEVER;
	int rc = 0;
	dlock__wait_verdict v;

	w->in_flight = 0;
	v = w->steps->judge(w, &rc, &next);
	dlock__mux_loop_end(ml);
	dlock__mux_clear(w->mop, w->nmop);
	if (w->cancel_pending) {
		/* 0: it took what it asked for; a redirect took nothing. */
		w->steps->canceled(w, v == DLOCK__WAIT_GOT ? 0 : rc < 0 ? rc : DLOCK_ECANCELED);
		return;
	}
	if (v == DLOCK__WAIT_AGAIN)
		attempt(w);
	else
		dlock__waiter_answer(w, v, rc, next);
}

int dlock__waiter_send(dlock__waiter *w, dlock__mux_op *mop, size_t n)
{
	int rc;

	w->mop = mop;
	w->nmop = n;
	w->attempts++;
	if ((rc = dlock__mux_loop_begin(&w->ml, w->op->loop, mop, n, NULL, NULL, answered)) < 0)
		return rc;
	w->in_flight = 1;
	return 0;
}

static void attempt(dlock__waiter *w)
{
	int rc = w->steps->attempt(w);

	if (rc < 0)
		dlock__waiter_conclude(w, rc);
}

int dlock__waiter_cancel_counted(const dlock__waiter *w)
{
	return w->canceled_with && dlock__client_cancels(w->client) != w->cancels;
}

/* A message on the channel, the subscription made, or the timer. */
void dlock__waiter_look(dlock__waiter *w)
{
	if (!w->waiting || w->op->finished)
		return;
	if (dlock__waiter_cancel_counted(w)) {
		dlock__waiter_conclude(w, dlock__seterr(DLOCK_ECANCELED,
						  "%s %s: the wait was canceled", w->steps->noun,
						  w->shown));
		return;
	}
	if (w->steps->look != NULL && w->steps->look(w))
		return;
	/* At the deadline too: the wait ends with this last attempt's answer. */
	w->waiting = 0;
	w->woken_meanwhile = 0;
	w->redirects = 0;
	dlock__timer_stop(w->op->loop, &w->timer);
	attempt(w);
}

static void woken(dlock__task *t)
{
	dlock__waiter *w = WOP(t, wake_task);
	int64_t slot;
	int rc;

	if (!w->waiting) {
		w->woken_meanwhile = 1;
	} else if (!w->op->finished && !dlock__waiter_cancel_counted(w) &&
			(slot = slot_of(w)) > 0) {
		/* Others heard it too: this one's slot is later (a canceled
		 * wait ends at once, in dlock__waiter_look). */
		if ((rc = dlock__waiter_arm(w, dlock__now_ms() + slot)) < 0)
			dlock__waiter_conclude(w, rc);
		return;
	}
	dlock__waiter_look(w);
}

/* The sleep is over, or an attempt put off is due (dlock__waiter_put_off). */
static void timer_fired(dlock__timer *t)
{
	dlock__waiter *w = WOP(t, timer);

	if (w->waiting)
		dlock__waiter_look(w);
	else if (!w->in_flight && !w->cancel_pending && !w->op->finished)
		attempt(w);
}

void dlock__waiter_init(dlock__waiter *w, const dlock__waiter_steps *steps, dlock_op *op,
		dlock_client *client, const char *shown, const char *channel, size_t channel_len,
		int64_t wait_ms)
{
	w->steps = steps;
	w->op = op;
	w->client = client;
	w->shown = shown;
	w->channel = channel;
	w->channel_len = channel_len;
	w->wait_ms = wait_ms;
	w->li.task = &w->wake_task;
	dlock__task_init(&w->wake_task, woken);
	dlock__timer_init(&w->timer, timer_fired);
}

void dlock__waiter_start(dlock__waiter *w, int listen_first)
{
	int64_t wake = DLOCK__NEVER; /* unused: the first attempt is now */
	int rc;

	w->li.loop = w->op->loop; /* the loop it runs on, known now */
	w->started_us = dlock__now_us();
	w->started = w->started_us / 1000;
	w->deadline = dlock__deadline_in(w->wait_ms);
	/* One look (wait 0) listens to nothing. */
	if (listen_first && w->wait_ms != 0 && (rc = listen(w, &wake)) < 0) {
		dlock__waiter_conclude(w, rc);
		return;
	}
	attempt(w);
}

/* Every op of the attempt answered: the run is over, its end still to run. */
static int all_answered(const dlock__waiter *w)
{
	for (size_t i = 0; i < w->nmop; i++)
		if (w->mop[i].pending)
			return 0;
	return 1;
}

void dlock__waiter_cancel(dlock__waiter *w, const char *what)
{
	if (w->cancel_pending)
		return; /* it ends once the answer is in */
	/* Awaited: an attempt the kind cannot undo blindly, or one whose every
	 * answer is in (its end is posted): what it took goes back there. */
	int await = w->in_flight && w->steps->on_cancel != NULL && w->steps->on_cancel(w);

	if (await || (w->in_flight && w->steps->canceled != NULL && all_answered(w))) {
		w->cancel_pending = 1;
		dlock__waiter_stop(w);
		return;
	}
	if (w->in_flight) {
		/* Abandoned: its undo goes right behind it (dlock__mux_op.undo). */
		w->in_flight = 0;
		dlock__mux_loop_end(&w->ml);
		dlock__mux_clear(w->mop, w->nmop);
	}
	dlock__waiter_conclude(w, dlock__seterr(DLOCK_ECANCELED, "%s %s: %s was canceled",
					  w->steps->noun, w->shown, what));
}
