/* SPDX-License-Identifier: BSD-3-Clause */
/* Commands to one node as an operation on a loop (see exchange.h). */
#include <poll.h>
#include <stddef.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/net/exchange.h"

/* x->waiting: no reply, but the connect's end (a connect-only exchange). */
#define CONNECTED 2

static void step(dlock__exchange *x);

static void fail(dlock__exchange *x, int rc)
{
	dlock__exchange_stop(x);
	x->done(x, rc, NULL);
}

static void io_ready(dlock__io *io, short revents)
{
	(void)revents;
	step((dlock__exchange *)((char *)io - offsetof(dlock__exchange, io)));
}

static void lookup_over(dlock__task *t)
{
	dlock__exchange *x = (dlock__exchange *)((char *)t - offsetof(dlock__exchange, lookup_task));

	/* A socket connecting is stepped only once it is ready (the io). */
	if (x->c != NULL && (dlock__conn_looking_up(x->c) || !x->c->connecting))
		step(x);
}

static void deadline_passed(dlock__timer *t)
{
	dlock__exchange *x = (dlock__exchange *)((char *)t - offsetof(dlock__exchange, timer));

	if (x->c == NULL)
		return;
	if (!x->c->connecting)
		fail(x, dlock__seterr_node(DLOCK_ETIMEDOUT, x->c->label,
					"%s: no answer within the command timeout", x->what));
	else
		fail(x, dlock__conn_fail(x->c, DLOCK_ETIMEDOUT, "connect",
					x->c->tcp_up ? "the TLS handshake did not finish before the "
						       "connect timeout (is this the server's TLS "
						       "port? a plain port never answers it)"
						     : "no answer before the connect timeout"));
}

/* Watch the socket for what the connection waits for now. */
static int watch(dlock__exchange *x)
{
	short events = dlock__conn_events(x->c);

	if (x->c->out_len > 0)
		events |= POLLOUT;
	if (x->c->fd < 0)
		return 0; /* a name lookup: its end posts lookup_task */
	if (!dlock__io_active(&x->io))
		return dlock__io_start(x->loop, &x->io, x->c->fd, events, io_ready) < 0
				? dlock__seterr_node(DLOCK_ENOMEM, x->c->label, "out of memory")
				: 0;
	dlock__io_set(x->loop, &x->io, events);
	return 0;
}

/* Connected: the handshake, then the command, without waiting. */
static int greet(dlock__exchange *x)
{
	int rc = dlock__conn_send_handshake(x->c, DLOCK__NO_WAIT);

	if (rc == 0 && x->argc > 0)
		rc = dlock__conn_send(x->c, x->argc, x->argv, x->lens, x->what, DLOCK__NO_WAIT);
	x->argc = 0;
	return rc;
}

static void step(dlock__exchange *x)
{
	redisReply *r = NULL;
	int rc = 0;

	if (x->c->connecting && (rc = dlock__conn_connected(x->c)) == 0 && x->c->connecting)
		rc = watch(x);
	if (rc < 0 || x->c->connecting) {
		if (rc < 0)
			fail(x, rc);
		return;
	}
	if (!x->c->greeted)
		rc = greet(x);
	if (rc == 0 && x->waiting == CONNECTED) {
		x->waiting = 0;
		dlock__io_set(x->loop, &x->io, 0);
		x->done(x, 0, NULL);
		return;
	}
	if (rc == 0 && !x->waiting) {
		dlock__io_set(x->loop, &x->io, 0); /* nothing asked: nothing to read */
		return;
	}
	if (rc == 0 && x->c->out_len > 0)
		rc = dlock__conn_push(x->c, x->what);
	if (rc == 0 && x->waiting)
		rc = dlock__conn_read(x->c, &r, x->what, 0);
	if (rc == DLOCK__AGAIN)
		rc = watch(x);
	if (rc < 0) {
		fail(x, rc);
	} else if (r != NULL) {
		x->waiting = 0;
		x->done(x, 0, r);
	}
}

int dlock__exchange_start(dlock__exchange *x, dlock__loop *loop, const dlock__node *node,
		int64_t deadline, int argc, const char **argv, const size_t *lens,
		const char *what, dlock__exchange_done done)
{
	int rc;

	memset(x, 0, sizeof(*x));
	x->done = done;
	x->loop = loop;
	x->io.slot = (size_t)-1;
	dlock__timer_init(&x->timer, deadline_passed);
	dlock__task_init(&x->lookup_task, lookup_over);
	x->argc = argc;
	x->argv = argv;
	x->lens = lens;
	x->what = what;
	x->waiting = argc > 0 ? 1 : CONNECTED;
	rc = dlock__conn_start_on(&x->c, node, loop, &x->lookup_task);
	if (rc == 0 && dlock__timer_set(loop, &x->timer, deadline) < 0)
		rc = dlock__seterr_node(DLOCK_ENOMEM, node->label, "out of memory");
	if (rc == 0)
		rc = watch(x);
	if (rc < 0)
		dlock__exchange_stop(x);
	else
		dlock__loop_post(loop, &x->lookup_task); /* the first step, from the loop */
	return rc;
}

void dlock__exchange_send(dlock__exchange *x, int argc, const char **argv, const size_t *lens,
		const char *what)
{
	int rc;

	x->what = what;
	x->waiting = 1;
	rc = dlock__conn_send(x->c, argc, argv, lens, what, DLOCK__NO_WAIT);
	if (rc < 0)
		fail(x, rc);
	else
		step(x);
}

dlock__conn *dlock__exchange_keep(dlock__exchange *x)
{
	dlock__conn *c = x->c;

	dlock__io_stop(x->loop, &x->io);
	dlock__timer_stop(x->loop, &x->timer);
	dlock__loop_unpost(x->loop, &x->lookup_task);
	x->c = NULL;
	return c;
}

void dlock__exchange_stop(dlock__exchange *x)
{
	if (x->c == NULL)
		return;
	dlock__io_stop(x->loop, &x->io);
	dlock__timer_stop(x->loop, &x->timer);
	dlock__loop_unpost(x->loop, &x->lookup_task);
	dlock__conn_close(x->c); /* drops a lookup under way: nothing posted after */
	x->c = NULL;
}
