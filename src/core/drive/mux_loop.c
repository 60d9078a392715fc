/* SPDX-License-Identifier: BSD-3-Clause */
/* A multiplexed run on a loop (core/mux_loop.h). */
#include <poll.h>
#include <stddef.h>
#include <string.h>

#include "core/drive/mux_loop.h"
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

/* Watch what the run waits for now; once it is over, say so. */
static void rewatch(dlock__mux_loop *ml, int over)
{
	struct pollfd pfd[DLOCK__MUX_LOOP_IOS * 4];
	int64_t wake_at = DLOCK__NEVER;
	size_t n, i;

	unwatch(ml);
	if (over) {
		ml->running = 0;
		ml->done(ml);
		return;
	}
	n = dlock__mux_poll_set(&ml->mux, pfd, sizeof(pfd) / sizeof(*pfd), &wake_at);
	for (i = 0; i < n; i++) {
		if (i >= DLOCK__MUX_LOOP_IOS) {
			/* Beyond the table: looked at often instead of watched. */
			if (wake_at > dlock__now_ms() + 1)
				wake_at = dlock__now_ms() + 1;
			break;
		}
		if (dlock__io_start(ml->loop, &ml->w[ml->nio].io, pfd[i].fd, pfd[i].events, io_ready) ==
				0)
			ml->nio++;
		else if (wake_at > dlock__now_ms() + 1)
			wake_at = dlock__now_ms() + 1;
	}
	if (dlock__timer_set(ml->loop, &ml->timer, wake_at) < 0) {
		/* Out of memory for its deadline: it could wait forever; give up now. */
		unwatch(ml);
		dlock__mux_end(&ml->mux);
		ml->running = 0;
		ml->done(ml);
	}
}

static void io_ready(dlock__io *io, short revents)
{
	dlock__mux_loop *ml = ((dlock__mux_watch *)io)->ml;
	struct pollfd p;

	p.fd = io->fd;
	p.events = io->events;
	p.revents = revents;
	rewatch(ml, dlock__mux_advance(&ml->mux, &p, 1));
}

static void timer_fired(dlock__timer *t)
{
	dlock__mux_loop *ml = OF(t, timer);

	rewatch(ml, dlock__mux_advance(&ml->mux, NULL, 0));
}

int dlock__mux_loop_begin(dlock__mux_loop *ml, dlock__loop *loop, dlock__mux_op *ops, size_t n,
		dlock__mux_enough enough, void *arg, void (*done)(dlock__mux_loop *ml))
{
	int rc;

	ml->loop = loop;
	ml->done = done;
	ml->nio = 0;
	for (size_t i = 0; i < DLOCK__MUX_LOOP_IOS; i++) {
		ml->w[i].io.slot = (size_t)-1;
		ml->w[i].ml = ml;
	}
	dlock__timer_init(&ml->timer, timer_fired);
	rc = dlock__mux_begin(&ml->mux, ops, n, enough, arg);
	if (rc < 0)
		return rc;
	ml->running = 1;
	/* The first look comes from the loop: `done` never runs inside begin. */
	rc = dlock__timer_set(loop, &ml->timer, 0);
	if (rc < 0)
		dlock__mux_loop_end(ml);
	return rc;
}

void dlock__mux_loop_end(dlock__mux_loop *ml)
{
	unwatch(ml);
	ml->running = 0;
	dlock__mux_end(&ml->mux);
}
