/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client's connection pool: threads borrow a connection for one
 * command each; multiplexed runs take one without waiting. Connections that
 * failed are closed; idle ones that owe replies for too long are reset
 * (core/net/owed.h).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/forget.h"
#include "core/drive/identity.h"
#include "core/drive/pool.h"
#include "core/drive/resend.h"
#include "core/net/owed.h"
#include "core/base/error.h"
#include "core/topology/cluster.h"
#include "core/loop/loop.h"
#include "core/drive/reactor.h"
#include "core/topology/sentinel_ask.h"
#include "core/base/time.h"

static void wake_waiter(dlock_client *c);

/* A connection counted in the pool failed to open: uncount it, wake a waiter. */
static void open_failed(dlock_client *c)
{
	dlock__mutex_lock(&c->pool_mu);
	c->n_open--;
	pthread_cond_signal(&c->pool_cv);
	wake_waiter(c);
	dlock__mutex_unlock(&c->pool_mu);
}

static void follow_primary(dlock_client *c, int64_t deadline, int may_ask);

static int conn_get(dlock_client *c, dlock__conn **out, int64_t deadline);

/* A cluster's ASK redirect (dlock__asking_next): the connection lent sends
 * ASKING before its command, and before a retry of it. */
int dlock__client_conn_get(dlock_client *c, dlock__conn **out, int64_t deadline)
{
	int rc = conn_get(c, out, deadline);

	if (rc == 0) {
		(*out)->asking = dlock__asking_next;
		dlock__conn_ask(*out);
	}
	return rc;
}

static int conn_get(dlock_client *c, dlock__conn **out, int64_t deadline)
{
	struct timespec ts;
	int rc;

	*out = NULL;
	if ((rc = dlock__client_check_fork(c)) < 0)
		return rc;
	follow_primary(c, deadline, 1);
	dlock__deadline_timespec(deadline, &ts);
	dlock__mutex_lock(&c->pool_mu);
	for (;;) {
		if (c->n_idle > 0) {
			*out = c->idle[--c->n_idle];
			dlock__mutex_unlock(&c->pool_mu);
			return 0;
		}
		/* On the caller's loop every connection lent out is lent to this
		 * thread (a run in flight): none can come back while it waits.
		 * Open one more, as a multiplexed run does; it is closed when
		 * given back to a full pool. */
		if (c->n_open < c->opts.pool_size || c->opts.loop != NULL)
			break;
		if (pthread_cond_timedwait(&c->pool_cv, &c->pool_mu, &ts) == ETIMEDOUT) {
			dlock__mutex_unlock(&c->pool_mu);
			return dlock__seterr_node(DLOCK_ETIMEDOUT, c->node.label,
					"no free connection in the pool (%d in use)",
					c->opts.pool_size);
		}
	}
	c->n_open++;
	c->conn_gen++;
	dlock__mutex_unlock(&c->pool_mu);

	rc = dlock__conn_open(out, &c->node, dlock__deadline_in(c->opts.connect_timeout_ms));
	if (rc < 0)
		open_failed(c);
	return rc;
}

#define DROP_MAX 64

static int owes_nothing(const dlock__conn *conn)
{
	return conn->owed == 0;
}

static _Thread_local int64_t owed_cutoff; /* for owes_too_long (drop_idle's filter) */

static int owes_too_long(const dlock__conn *conn)
{
	return dlock__conn_owes_since_before(conn, owed_cutoff);
}

static _Thread_local uint64_t primary_epoch; /* for to_older_primary (drop_idle's filter) */

static int to_older_primary(const dlock__conn *conn)
{
	return conn->epoch != primary_epoch;
}

/* Take the idle connections `drop` picks (up to DROP_MAX) out of the pool,
 * into dead[], for closing once pool_mu is released. Returns how many. */
static int drop_idle(dlock_client *c, int (*drop)(const dlock__conn *), dlock__conn **dead)
{
	int i, n = 0, kept = 0;

	for (i = 0; i < c->n_idle; i++) {
		if (n < DROP_MAX && drop(c->idle[i])) {
			dead[n++] = c->idle[i];
			c->n_open--;
		} else {
			c->idle[kept++] = c->idle[i];
		}
	}
	c->n_idle = kept;
	return n;
}

/*
 * A Sentinel-managed node: when something suggested that the primary moved,
 * ask the sentinels now (may_ask; within deadline), and close the idle
 * connections to an earlier primary - a demoted one still takes writes
 * until Sentinel reconfigures it, and they must not go there.
 */
static void follow_primary(dlock_client *c, int64_t deadline, int may_ask)
{
	dlock__conn *dead[DROP_MAX];
	char host[256];
	uint64_t epoch;
	int i, n, port;

	if (c->node.sentinel == NULL)
		return;
	epoch = dlock__sentinel_epoch(c->node.sentinel);
	/* Never named yet: no connection to an earlier primary exists, and
	 * the connect asks (asking here too would take two connect timeouts). */
	if (epoch == 0)
		return;
	if (may_ask && dlock__sentinel_primary(c->node.sentinel, deadline, host, sizeof(host),
				       &port, &epoch) < 0)
		return; /* no answer: the connection about to be used says what is wrong */
	dlock__mutex_lock(&c->pool_mu);
	primary_epoch = epoch;
	n = drop_idle(c, to_older_primary, dead);
	for (i = 0; i < n; i++)
		dlock__resend_take(c, dead[i]);
	if (n > 0)
		pthread_cond_broadcast(&c->pool_cv);
	dlock__mutex_unlock(&c->pool_mu);
	for (i = 0; i < n; i++)
		dlock__conn_close(dead[i]);
}

/* A connection is free (pool_mu held): the run that waited longest goes.
 * Posted under the lock, so a waiter that leaves (unwait) is never posted
 * to after it left. */
static void wake_waiter(dlock_client *c)
{
	dlock__pool_waiter *w = c->waiters;

	if (w == NULL)
		return;
	c->waiters = w->next;
	if (c->waiters == NULL)
		c->waiters_tail = NULL;
	w->queued = 0;
	dlock__loop_post(w->loop, w->task);
}

int dlock__client_pool_wait(dlock_client *c, dlock__pool_waiter *w, int first)
{
	int full;

	dlock__mutex_lock(&c->pool_mu);
	full = c->n_idle == 0 && c->n_open >= c->opts.pool_size;
	if (full) {
		w->queued = 1;
		w->next = first ? c->waiters : NULL;
		if (first || c->waiters == NULL)
			c->waiters = w;
		else
			c->waiters_tail->next = w;
		if (!first || c->waiters_tail == NULL)
			c->waiters_tail = w;
	}
	dlock__mutex_unlock(&c->pool_mu);
	return full;
}

void dlock__client_pool_unwait(dlock_client *c, dlock__pool_waiter *w)
{
	dlock__pool_waiter **at, *prev = NULL;

	dlock__mutex_lock(&c->pool_mu);
	for (at = &c->waiters; w->queued && *at != NULL; prev = *at, at = &(*at)->next) {
		if (*at != w)
			continue;
		*at = w->next;
		if (c->waiters_tail == w)
			c->waiters_tail = prev;
		w->queued = 0;
		break;
	}
	dlock__mutex_unlock(&c->pool_mu);
}

void dlock__client_pool_wake_on(dlock_client *c, dlock__loop *loop)
{
	dlock__pool_waiter **at = &c->waiters, *w, *prev = NULL;

	dlock__mutex_lock(&c->pool_mu);
	while ((w = *at) != NULL) {
		if (w->loop != loop) {
			prev = w;
			at = &w->next;
			continue;
		}
		*at = w->next;
		if (c->waiters_tail == w)
			c->waiters_tail = prev;
		w->queued = 0;
		dlock__loop_post(w->loop, w->task);
	}
	dlock__mutex_unlock(&c->pool_mu);
}

int dlock__client_pool_room(dlock_client *c)
{
	int room;

	dlock__mutex_lock(&c->pool_mu);
	room = c->n_idle > 0 ? 2 : c->n_open < c->opts.pool_size ? 1 : 0;
	dlock__mutex_unlock(&c->pool_mu);
	return room;
}

void dlock__client_conn_put(dlock_client *c, dlock__conn *conn)
{
	int older, carries = 0;

	if (conn == NULL)
		return;
	conn->asking = 0;
	dlock__client_note_run_id(c, conn);
	/* A connection to a primary the sentinels have since replaced is not kept. */
	older = c->node.sentinel != NULL && conn->epoch != dlock__sentinel_epoch(c->node.sentinel);
	dlock__mutex_lock(&c->pool_mu);
	if (conn->broken) {
		/* One dead connection usually means a restarted or unreachable
		 * server: the idle ones are likely dead too, so a retry must not
		 * pick one of them. Reconnecting is cheap; drop them all - but
		 * those still owed replies: their commands may yet run on a hung
		 * server, and while it owes them it gets no new acquire (see
		 * dlock__client_owes). Closing them would forget that; they are
		 * closed when they turn out dead. */
		dlock__conn *dead[DROP_MAX];
		int i, n;

		c->n_open--;
		dlock__resend_take(c, conn); /* what it kept goes again on another */
		n = drop_idle(c, owes_nothing, dead);
		pthread_cond_broadcast(&c->pool_cv);
		wake_waiter(c);
		dlock__mutex_unlock(&c->pool_mu);
		dlock__conn_close(conn);
		for (i = 0; i < n; i++) {
			dlock__conn_flush(dead[i]); /* deferred deletes: if it still works */
			dlock__conn_close(dead[i]);
		}
		return;
	}
	/* One that owes replies is kept even beyond the pool's size (while an
	 * idle slot is free): closed, its debts would be forgotten while the
	 * server may still run the commands (owed.h); kept, it is drained, or
	 * reset past the bound. */
	if (!older && c->n_idle < c->opts.pool_size &&
			(c->n_open <= c->opts.pool_size || conn->owed > 0)) {
		/* Deletes asked while every connection was lent out go with this one. */
		carries = dlock__forgets_hand_over(c, conn);
		carries |= dlock__resend_hand_over(c, conn);
		c->idle[c->n_idle++] = conn;
		conn = NULL;
	} else {
		c->n_open--; /* to an older primary, or an extra one a multiplexed operation opened */
		dlock__resend_take(c, conn);
	}
	pthread_cond_signal(&c->pool_cv);
	wake_waiter(c);
	dlock__mutex_unlock(&c->pool_mu);
	dlock__conn_close(conn);
	if (carries)
		dlock__reactor_flush_at(c->reactor, dlock__now_ms() + DLOCK__DEFER_DELAY_MS);
}

int dlock__client_conn_take(dlock_client *c, dlock__conn **out, dlock__loop *wake_loop,
		dlock__task *wake)
{
	int rc;

	*out = NULL;
	if ((rc = dlock__client_check_fork(c)) < 0)
		return rc;
	follow_primary(c, 0, 0); /* never waits: multiplexing */
	dlock__mutex_lock(&c->pool_mu);
	if (c->n_idle > 0) {
		*out = c->idle[--c->n_idle];
		dlock__mutex_unlock(&c->pool_mu);
		return 0;
	}
	c->n_open++;
	c->conn_gen++;
	dlock__mutex_unlock(&c->pool_mu);
	rc = wake_loop != NULL ? dlock__conn_start_on(out, &c->node, wake_loop, wake)
			       : dlock__conn_start(out, &c->node);
	if (rc < 0)
		open_failed(c);
	return rc;
}

/*
 * A connection may owe replies for this long: a hung server's late replies
 * come within moments of its waking up, but across a network partition
 * they wait on TCP's retransmission backoff (seconds, growing), and the
 * node would stay refused long after the partition healed. Past the bound
 * the connection is reset and the node is asked again on a fresh one.
 */
int64_t dlock__owed_bound_ms(const dlock_client *c)
{
	int64_t b = 2 * (int64_t)c->opts.command_timeout_ms;

	return b > DLOCK__OWED_MAX_MIN_MS ? b : DLOCK__OWED_MAX_MIN_MS;
}


void dlock__client_drain(dlock_client *c)
{
	dlock__conn *dead[DROP_MAX];
	int i, n;

	dlock__mutex_lock(&c->pool_mu);
	if (c->n_idle > 0)
		dlock__forgets_hand_over(c, c->idle[0]);
	for (i = 0; i < c->n_idle; i++) {
		dlock__conn_flush(c->idle[i]);
		dlock__conn_drain(c->idle[i]);
	}
	/* Closed or reset by the server: whatever it had not run is gone with
	 * it, and so are the replies it owed. Owing for too long: reset. */
	owed_cutoff = dlock__now_ms() - dlock__owed_bound_ms(c);
	n = drop_idle(c, owes_too_long, dead);
	for (i = 0; i < n; i++)
		dlock__resend_take(c, dead[i]); /* the leaves it kept go again (owed.h, rule 6) */
	if (n > 0)
		pthread_cond_broadcast(&c->pool_cv);
	dlock__mutex_unlock(&c->pool_mu);
	for (i = 0; i < n; i++)
		dlock__conn_reset(dead[i]);
	dlock__resend_drive(c); /* kept commands waiting: on a healthy connection */
}

/* Kept commands waiting (resend.h) with no idle connection: one opened for
 * them, looked at again by each drain until it is connected. */
/* Advance a connection being opened, without waiting (a look through the
 * library's one descriptor wait, for no time). 0, or DLOCK_E*. */
static int advance(dlock__conn *conn)
{
	struct pollfd p = { conn->fd, dlock__conn_events(conn), 0 };

	if (conn->fd >= 0 && dlock__loop_wait(&p, 1, 0) == 0)
		return 0; /* not yet */
	return dlock__conn_connected(conn);
}

/* Under pool_mu: the connection to work on now (taken out of the client:
 * another drain does not touch it meanwhile), or NULL. */
static dlock__conn *to_drive(dlock_client *c, int64_t now, int *open, int64_t *started)
{
	dlock__conn *conn = c->resend_conn;

	*open = 0;
	*started = c->resend_conn_at;
	if (c->resend_n > 0 && now - c->resend_since >= DLOCK__RESEND_MAX_MS)
		dlock__resend_drop(c);
	if (c->resend_n > 0 && c->n_idle > 0)
		dlock__resend_hand_over(c, c->idle[c->n_idle - 1]);
	if (conn != NULL) {
		c->resend_conn = NULL;
		return conn;
	}
	/* One connection at a time, one attempt per connect timeout. */
	if (c->resend_n > 0 && now - c->resend_conn_at >= c->opts.connect_timeout_ms) {
		c->resend_conn_at = *started = now;
		*open = 1;
	}
	return NULL;
}

void dlock__resend_drive(dlock_client *c)
{
	int64_t now = dlock__now_ms(), started;
	dlock__conn *conn;
	int open, rc = 0;

	dlock__mutex_lock(&c->pool_mu);
	conn = to_drive(c, now, &open, &started);
	dlock__mutex_unlock(&c->pool_mu);
	if (conn == NULL && (!open || dlock__client_conn_take(c, &conn, NULL, NULL) < 0))
		return;
	if (conn->connecting)
		rc = advance(conn);
	if (rc == 0 && conn->connecting) {
		if (now - started < c->opts.connect_timeout_ms) {
			dlock__mutex_lock(&c->pool_mu);
			c->resend_conn = conn; /* looked at again by the next drain */
			dlock__mutex_unlock(&c->pool_mu);
			return;
		}
		conn->broken = 1; /* no connection within the timeout: the next try opens another */
	}
	if (rc == 0 && !conn->broken && !conn->greeted)
		rc = dlock__conn_send_handshake(conn, DLOCK__NO_WAIT);
	if (rc < 0)
		conn->broken = 1;
	dlock__client_conn_put(c, conn); /* pooled, it takes what waits */
}
