/* SPDX-License-Identifier: BSD-3-Clause */
/* A multiplexed run on a loop (core/mux_loop.h). */
#include <poll.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/mux/mux_source.h"
#include "core/mux/mux_loop.h"
#include "core/mux/mux_share.h"
#include "core/base/time.h"

#define OF(p, field) ((dlock__mux_loop *)((char *)(p) - offsetof(dlock__mux_loop, field)))

static void io_ready(dlock__io *io, short revents);

static void unwatch(dlock__mux_loop *ml)
{
	size_t i;

	for (i = 0; i < ml->nio; i++)
		dlock__io_stop(ml->loop, &ml->w[i].io);
	ml->nio = 0;
	dlock__timer_stop(ml->loop, &ml->timer);
}

/* Watch what the run waits for now. 0, or DLOCK_ENOMEM (its deadline could
 * not be armed: it could wait forever; nothing is watched then). */
static int watch(dlock__mux_loop *ml)
{
	struct pollfd pfd[DLOCK__MUX_LOOP_IOS * 4];
	int64_t wake_at = DLOCK__NEVER, soon = dlock__now_ms() + 1;
	size_t n, i;

	n = dlock__mux_poll_set(&ml->mux, pfd, sizeof(pfd) / sizeof(*pfd), &wake_at);
	for (i = 0; i < n; i++) {
		/* Beyond the table (or no room in the loop): looked at often instead. */
		if (i >= DLOCK__MUX_LOOP_IOS || dlock__io_start_kept(ml->loop, &ml->w[ml->nio].io, pfd[i].fd,
							pfd[i].events, io_ready) < 0) {
			wake_at = wake_at < soon ? wake_at : soon;
			continue;
		}
		ml->nio++;
	}
	if (dlock__timer_set(ml->loop, &ml->timer, wake_at) < 0) {
		unwatch(ml);
		return DLOCK_ENOMEM;
	}
	return 0;
}

/* After a step: watch the run again, or (over, or it cannot be watched) end it. */
static void step(dlock__mux_loop *ml, int over)
{
	unwatch(ml);
	if (!over && watch(ml) == 0)
		return;
	if (!over)
		dlock__mux_end(&ml->mux); /* in flight: abandoned, as at a deadline */
	ml->running = 0;
	ml->done(ml);
}

static void io_ready(dlock__io *io, short revents)
{
	dlock__mux_loop *ml = ((dlock__mux_watch *)io)->ml;
	struct pollfd p;

	p.fd = io->fd;
	p.events = io->events;
	p.revents = revents;
	step(ml, dlock__mux_advance(&ml->mux, &p, 1));
}

static void timer_fired(dlock__timer *t)
{
	dlock__mux_loop *ml = OF(t, timer);

	step(ml, dlock__mux_advance(&ml->mux, NULL, 0));
}

/* A new connection's host name was found (posted by the lookup's thread). */
static void lookup_over(dlock__task *t)
{
	dlock__mux_loop *ml = OF(t, lookup_task);

	if (ml->running && ml->waits_on == NULL)
		step(ml, dlock__mux_advance(&ml->mux, NULL, 0));
}

/* Queue the run behind a client whose pool is all lent out: 1 queued. */
static int wait_for_pool(dlock__mux_loop *ml)
{
	size_t i;

	if (dlock__loop_wakeable(ml->loop) < 0)
		return 0; /* a descriptor to be woken by is needed: else open one more */
	for (i = 0; i < ml->n; i++) {
		dlock__source *c = ml->ops[i].client != NULL ? dlock__source_of(ml->ops[i].client) : NULL;

		/* A cluster's members are known once routed: not waited for. */
		if (ml->ops[i].skip || c == NULL || c->node->cluster != NULL)
			continue;
		/* A connection of c on this loop takes more commands: no wait.
		 * A blocking run does not wait for connections shares hold
		 * either: they come back once their loop runs, which may be the
		 * one this call blocks. It opens one more (closed when given back). */
		if (dlock__share_available(c, ml->share ? ml->loop : NULL))
			continue;
		if (c->hooks->wait(c, &ml->waiter, ml->urgent)) {
			ml->waits_on = c;
			return 1;
		}
	}
	return 0;
}

static int begin_now(dlock__mux_loop *ml);

/* A connection was given back: begin, or wait on (another took it). */
static void pool_ready(dlock__task *t)
{
	dlock__mux_loop *ml = OF(t, pool_task);
	size_t i;

	ml->waits_on = NULL;
	if (wait_for_pool(ml))
		return;
	if (begin_now(ml) == 0)
		return;
	/* Out of memory: every op fails; `done` still comes from the loop. */
	for (i = 0; i < ml->n; i++) {
		ml->ops[i].rc = DLOCK_ENOMEM;
		snprintf(ml->ops[i].errmsg, sizeof(ml->ops[i].errmsg), "out of memory");
	}
	ml->running = 0;
	ml->done(ml);
}

static int loop_begin(dlock__mux_loop *ml, dlock__loop *loop, dlock__mux_op *ops, size_t n,
		dlock__mux_enough enough, void *arg, void (*done)(dlock__mux_loop *ml), int share);

int dlock__mux_loop_begin(dlock__mux_loop *ml, dlock__loop *loop, dlock__mux_op *ops, size_t n,
		dlock__mux_enough enough, void *arg, void (*done)(dlock__mux_loop *ml))
{
	return loop_begin(ml, loop, ops, n, enough, arg, done, 1);
}

static int loop_begin(dlock__mux_loop *ml, dlock__loop *loop, dlock__mux_op *ops, size_t n,
		dlock__mux_enough enough, void *arg, void (*done)(dlock__mux_loop *ml), int share)
{
	ml->loop = loop;
	ml->share = share;
	ml->done = done;
	ml->nio = 0;
	ml->ops = ops;
	ml->n = n;
	ml->enough = enough;
	ml->arg = arg;
	ml->waits_on = NULL;
	ml->waiter.loop = loop;
	ml->waiter.task = &ml->pool_task;
	dlock__task_init(&ml->pool_task, pool_ready);
	dlock__task_init(&ml->lookup_task, lookup_over);
	for (size_t i = 0; i < DLOCK__MUX_LOOP_IOS; i++) {
		ml->w[i].io.slot = (size_t)-1;
		ml->w[i].ml = ml;
	}
	dlock__timer_init(&ml->timer, timer_fired);
	if (wait_for_pool(ml)) {
		ml->running = 1;
		return 0;
	}
	return begin_now(ml);
}

static int begin_now(dlock__mux_loop *ml)
{
	dlock__loop *loop = ml->loop;
	int rc = dlock__mux_begin_on(&ml->mux, ml->ops, ml->n, ml->enough, ml->arg, loop,
			&ml->lookup_task, ml->share);
	if (rc < 0)
		return rc;
	ml->running = 1;
	if (!dlock__mux_advance(&ml->mux, NULL, 0)) {
		rc = watch(ml);
		if (rc < 0)
			dlock__mux_loop_end(ml);
		return rc;
	}
	/* Over already (every op failed at once): `done` comes from the loop,
	 * never from inside begin. */
	rc = dlock__timer_set(loop, &ml->timer, 0);
	if (rc < 0)
		dlock__mux_loop_end(ml);
	return rc;
}

void dlock__mux_loop_end(dlock__mux_loop *ml)
{
	if (ml->waits_on != NULL) {
		/* Never begun: nothing was sent. */
		ml->waits_on->hooks->unwait(ml->waits_on, &ml->waiter);
		dlock__loop_unpost(ml->loop, &ml->pool_task);
		ml->waits_on = NULL;
		ml->running = 0;
		return;
	}
	dlock__loop_unpost(ml->loop, &ml->pool_task);
	unwatch(ml);
	ml->running = 0;
	dlock__mux_end(&ml->mux); /* closes connections still looking up: no post after */
	dlock__loop_unpost(ml->loop, &ml->lookup_task);
}

/* A blocking run: the run on the loop this call borrows, driven to its end. */
typedef struct blocking_run {
	dlock__mux_loop ml; /* first */
	int over;
} blocking_run;

static void blocking_done(dlock__mux_loop *ml)
{
	((blocking_run *)ml)->over = 1;
}

int dlock__mux_run(dlock__mux_op *ops, size_t n, dlock__mux_enough enough, void *arg)
{
	dlock__loop spare, *l = dlock__loop_borrow(&spare);
	blocking_run r = { .over = 0 };
	/* Its own connections: a blocking call's loop is borrowed, not the client's. */
	int rc = loop_begin(&r.ml, l, ops, n, enough, arg, blocking_done, 0);

	while (rc == 0 && !r.over)
		rc = dlock__loop_run_once(l, DLOCK__NEVER);
	if (rc == 0 || r.ml.running || r.over)
		dlock__mux_loop_end(&r.ml);
	dlock__loop_give_back(l, &spare);
	return rc;
}
