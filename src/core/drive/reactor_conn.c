/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reactor's pub/sub connection: opened without blocking, its pushes
 * read, the (un)subscriptions the channels want sent; dropped and opened
 * again after a pause, or at once where the Sentinel watch announces a new
 * primary.
 */
#include <poll.h>
#include <stddef.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/time.h"
#include "core/drive/reactor_internal.h"

/* How long to wait before connecting again after the pub/sub connection failed. */
#define RECONNECT_DELAY_MS 200

static void start_connect(dlock__reactor *r);

void dlock__reactor_drop(dlock__reactor *r)
{
	dlock__sub *s;

	dlock__io_stop(r->loop, &r->conn_io);
	dlock__conn_close(r->conn);
	r->conn = NULL;
	r->reconnect_at = dlock__now_ms() + RECONNECT_DELAY_MS;
	dlock__mutex_lock(&r->mu);
	for (s = r->subs; s != NULL; s = s->next) {
		/* Messages may be lost until it is back (or the server is
		 * replaced - a cluster's primary failed over): waiters look again. */
		if (s->state != SUB_NONE && s->listeners != NULL) {
			s->gen++;
			dlock__sub_wake_all(s);
		}
		if (s->state != SUB_NONE)
			dlock__sub_want_check(r, s);
		s->state = SUB_NONE;
	}
	dlock__mutex_unlock(&r->mu);
}

/* The sentinels announced a new primary: subscribe there at once (waiters
 * wake when their subscription is active again and look at the lock). */
static void read_watch(dlock__reactor *r)
{
	if (!dlock__watch_read(&r->watch) || r->conn == NULL)
		return;
	dlock__reactor_drop(r);
	r->reconnect_at = dlock__now_ms();
}

static int send_channels(
		dlock__reactor *r, const char *cmd, const char **names, size_t *lens, int n)
{
	names[0] = cmd;
	lens[0] = strlen(cmd);
	/* What the socket does not take now goes out on POLLOUT (conn_ready). */
	return dlock__conn_send(r->conn, n + 1, names, lens, cmd, DLOCK__NO_WAIT);
}

/* Bring the server's subscriptions in line with what local waiters want.
 * Called on the thread with r->mu held; drops it around network work. */
void dlock__reactor_sync_subs(dlock__reactor *r)
{
	dlock__sub **link = &r->subs, *s;
	const char *sub_names[65], *unsub_names[65];
	size_t sub_lens[65], unsub_lens[65];
	int nsub = 0, nunsub = 0, any_wanted = 0, more = 0;
	/* Connected (its handshake sent): (un)subscriptions can go out. */
	int ready = r->conn != NULL && !r->conn->connecting;

	while ((s = *link) != NULL) {
		if (!dlock__sub_wanted(s) && s->state == SUB_NONE) {
			*link = s->next;
			dlock__sub_free(s);
			continue;
		}
		if (dlock__sub_wanted(s))
			any_wanted = 1;
		if (ready && dlock__sub_wanted(s) && s->state == SUB_NONE) {
			if (nsub < 64) {
				s->state = SUB_SUBSCRIBING;
				sub_names[1 + nsub] = s->channel;
				sub_lens[1 + nsub++] = s->len;
			} else {
				more = 1;
			}
		} else if (ready && !dlock__sub_wanted(s) && s->state == SUB_SUBSCRIBED) {
			if (nunsub < 64) {
				s->state = SUB_UNSUBSCRIBING;
				unsub_names[1 + nunsub] = s->channel;
				unsub_lens[1 + nunsub++] = s->len;
			} else {
				more = 1;
			}
		}
		link = &s->next;
	}
	if (more)
		dlock__reactor_wake(r); /* the rest on the next turn */

	if (r->conn == NULL && any_wanted && dlock__now_ms() >= r->reconnect_at) {
		dlock__mutex_unlock(&r->mu);
		start_connect(r);
		dlock__mutex_lock(&r->mu);
		return;
	}
	if (nsub == 0 && nunsub == 0)
		return; /* also while not ready: nothing was marked */
	/* Only this thread frees subs, so the names stay valid while unlocked. */
	dlock__mutex_unlock(&r->mu);
	if ((nsub > 0 &&
			    send_channels(r, r->node->sharded_pubsub ? "SSUBSCRIBE" : "SUBSCRIBE",
					    sub_names, sub_lens, nsub) < 0) ||
			(nunsub > 0 &&
					send_channels(r,
							r->node->sharded_pubsub ? "SUNSUBSCRIBE"
										: "UNSUBSCRIBE",
							unsub_names, unsub_lens, nunsub) < 0))
		dlock__reactor_drop(r);
	dlock__mutex_lock(&r->mu);
}

void dlock__reactor_read_messages(dlock__reactor *r)
{
	for (;;) {
		redisReply *reply = NULL;
		int rc = dlock__conn_read(r->conn, &reply, "pub/sub", 0);

		if (rc == DLOCK__AGAIN)
			return;
		if (rc < 0) {
			dlock__reactor_drop(r);
			return;
		}
		dlock__reactor_handle_reply(r, reply);
		freeReplyObject(reply);
	}
}

static void conn_ready(dlock__io *io, short revents);

/* The pub/sub connection goes on connecting: its name found (a socket to
 * watch from now on), its connect or TLS handshake done (the handshake sent). */
static void connect_step(dlock__reactor *r)
{
	dlock__conn *c = r->conn;

	if (dlock__conn_connected(c) < 0 ||
			(c->fd >= 0 && !dlock__io_active(&r->conn_io) &&
					dlock__io_start(r->loop, &r->conn_io, c->fd,
							dlock__conn_events(c), conn_ready) < 0) ||
			(!c->connecting &&
					dlock__conn_send_handshake(c, DLOCK__NO_WAIT) < 0))
		dlock__reactor_drop(r);
}

/* The pub/sub connection's descriptor is ready: finish its connect, or
 * read what came. */
static void conn_ready(dlock__io *io, short revents)
{
	dlock__reactor *r = (dlock__reactor *)((char *)io - offsetof(dlock__reactor, conn_io));

	(void)revents;
	if (r->conn == NULL)
		return;
	if (r->conn->connecting)
		connect_step(r);
	else if (r->conn->out_len > 0 && dlock__conn_push(r->conn, "pub/sub") < 0)
		dlock__reactor_drop(r);
	else
		dlock__reactor_read_messages(r);
	dlock__reactor_wake(r); /* subscribe, or hand out what the messages asked for */
}

void dlock__reactor_lookup_over(dlock__task *t)
{
	dlock__reactor *r = (dlock__reactor *)((char *)t - offsetof(dlock__reactor, lookup_task));

	if (r->conn == NULL || !dlock__conn_looking_up(r->conn))
		return; /* dropped meanwhile */
	connect_step(r);
	dlock__reactor_wake(r);
}

static void watch_ready(dlock__io *io, short revents)
{
	dlock__reactor *r = (dlock__reactor *)((char *)io - offsetof(dlock__reactor, watch_io));

	(void)revents;
	read_watch(r);
	dlock__reactor_wake(r);
}

/* Open the pub/sub connection without blocking: the loop watches it until
 * it is connected (or its connect timeout passes); a host name is looked up
 * first, its end posted as lookup_task. */
static void start_connect(dlock__reactor *r)
{
	dlock__conn *c = NULL;

	if (dlock__conn_start_on(&c, r->node, r->loop, &r->lookup_task) < 0 ||
			(c->fd >= 0 && dlock__io_start(r->loop, &r->conn_io, c->fd,
					       dlock__conn_events(c), conn_ready) < 0)) {
		dlock__conn_close(c);
		r->reconnect_at = dlock__now_ms() + RECONNECT_DELAY_MS;
		return;
	}
	r->conn = c;
	r->connect_deadline = dlock__deadline_in(r->node->connect_timeout_ms);
	if (!c->connecting && dlock__conn_send_handshake(c, DLOCK__NO_WAIT) < 0)
		dlock__reactor_drop(r);
	else
		dlock__reactor_wake(r);
}

/* Keep the loop watching the connection and the Sentinel watch for what they wait for now. */
void dlock__reactor_watch_fds(dlock__reactor *r)
{
	short events = 0;
	int fd;

	if (r->conn != NULL && dlock__io_active(&r->conn_io))
		dlock__io_set(r->loop, &r->conn_io,
				dlock__conn_events(r->conn) |
						(r->conn->out_len > 0 && !r->conn->connecting ? POLLOUT : 0));
	fd = dlock__watch_fd(&r->watch, &events);
	if (dlock__io_active(&r->watch_io) && r->watch_io.fd != fd)
		dlock__io_stop(r->loop, &r->watch_io);
	if (fd >= 0 && !dlock__io_active(&r->watch_io))
		dlock__io_start(r->loop, &r->watch_io, fd, events, watch_ready);
	else if (fd >= 0)
		dlock__io_set(r->loop, &r->watch_io, events);
}
