/* SPDX-License-Identifier: BSD-3-Clause */
/* A connection shared by the runs of a client on a loop (core/mux/mux_share.h). */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/mux/mux_source.h"
#include "core/mux/mux_share.h"
#include "core/net/script.h"

struct dlock__mux_share {
	dlock__io io; /* first: the loop hands back &io */
	dlock__source *src;
	dlock__loop *loop;
	dlock__conn *conn;
	dlock__task flush_task;
	dlock__mux_group **fifo; /* who reads the next replies; NULL: a skip */
	size_t head, len, cap;
	size_t live;  /* entries of fifo[head..len) that are not skips */
	size_t users; /* groups in the share */
	int busy;     /* inside its own callback: leaving is finished there */
	int failed;   /* its connection failed: no group joins it any more */
	struct dlock__mux_share *next;
};

#define OF(p, field) ((dlock__mux_share *)((char *)(p) - offsetof(dlock__mux_share, field)))

/* Every share, found by (client, loop); each is touched by its loop's thread only. */
static pthread_mutex_t shares_mu = PTHREAD_MUTEX_INITIALIZER;
static dlock__mux_share *shares;
static _Atomic size_t nshares; /* none: a look needs no lock (the blocking calls' case) */

static void share_ready(dlock__io *io, short revents);

/* The least loaded share of c on loop that a group may join, or NULL.
 * Loop NULL (another thread asks): any share of c, its state not read. */
static dlock__mux_share *least_loaded(dlock__source *c, dlock__loop *loop)
{
	dlock__mux_share *s, *best = NULL;

	if (atomic_load_explicit(&nshares, memory_order_relaxed) == 0)
		return NULL;
	pthread_mutex_lock(&shares_mu);
	for (s = shares; s != NULL && (loop != NULL || best == NULL); s = s->next) {
		if (s->src != c || (loop != NULL && s->loop != loop))
			continue;
		if (loop == NULL || (!s->failed && !s->conn->broken &&
						    (best == NULL || s->live < best->live)))
			best = s;
	}
	pthread_mutex_unlock(&shares_mu);
	return best;
}

dlock__mux_share *dlock__share_pick(dlock__source *c, dlock__loop *loop)
{
	dlock__mux_share *best = least_loaded(c, loop);
	int room;

	if (best == NULL)
		return NULL;
	room = c->hooks->room(c);
	if (room == 2)
		return NULL; /* an idle connection first */
	if (best->live < DLOCK__SHARE_BUSY || room == 0)
		return best;
	return NULL; /* busy: one more connection */
}

int dlock__share_available(dlock__source *c, dlock__loop *loop)
{
	return least_loaded(c, loop) != NULL;
}

/* An ordered op on key still due (mux.h). */
static int on_key(const dlock__mux_op *op, const char *key, size_t len)
{
	return op->call != NULL && op->call->nkeys > 0 && dlock__call_lens(op->call)[0] == len &&
			memcmp(dlock__call_argv(op->call)[0], key, len) == 0;
}

/* The ordered ops due through s: *all of them, those on key in d (the
 * count on key returned). Each group counted once (`look` marks the
 * groups this look saw already: a group is in the fifo once per reply). */
static size_t ordered_due(dlock__mux_share *s, const char *key, size_t len, unsigned look,
		long *all, dlock__due *d)
{
	size_t i, k, n = 0;

	for (i = s->head; i < s->len; i++) {
		dlock__mux_group *g = s->fifo[i];

		if (g == NULL || g->looked == look)
			continue;
		g->looked = look;
		for (k = g->head; k < g->tail; k++) {
			const dlock__mux_op *op = &g->ops[g->fifo[k]];

			if (!op->in_due)
				continue;
			(*all)++;
			if (on_key(op, key, len)) {
				n++;
				d->open += op->ordered == DLOCK__ORDERED_OPEN;
			}
		}
	}
	d->on_key += n;
	return n;
}

dlock__mux_share *dlock__share_behind(dlock__source *c, dlock__loop *loop, const char *key,
		size_t len, dlock__due *d)
{
	static _Atomic unsigned looks;
	unsigned look = atomic_fetch_add(&looks, 1) + 1;
	dlock__mux_share *s, *on = NULL;
	long all = 0;
	int split = 0;

	*d = (dlock__due){ 0, 0, 0 };
	if (look == 0) /* a new group's mark: never a look's */
		look = atomic_fetch_add(&looks, 1) + 1;
	if (atomic_load_explicit(&nshares, memory_order_relaxed) > 0 && loop != NULL) {
		pthread_mutex_lock(&shares_mu);
		for (s = shares; s != NULL; s = s->next) {
			if (s->src != c || s->loop != loop ||
					ordered_due(s, key, len, look, &all, d) == 0)
				continue;
			split |= on != NULL;
			on = s;
		}
		pthread_mutex_unlock(&shares_mu);
	}
	d->elsewhere = atomic_load(&c->ordered_due) != all;
	if (split || on == NULL || on->failed || on->conn->broken)
		return NULL;
	return on;
}

int dlock__mux_may_follow(dlock_client *c, dlock__loop *loop, const char *key, size_t len)
{
	dlock__source *src = dlock__source_of(c);
	dlock__mux_share *s;
	dlock__due d;

	if (src->node->cluster != NULL)
		return 0; /* its ops go to members: not looked for */
	s = dlock__share_behind(src, loop, key, len, &d);
	return !d.elsewhere && d.open == 0 && (d.on_key == 0 || s != NULL);
}

/* Append who reads the next reply. 0, or DLOCK_ENOMEM. */
static int push_reader(dlock__mux_share *s, dlock__mux_group *g)
{
	if (s->head > 0 && s->len == s->cap) {
		memmove(s->fifo, s->fifo + s->head, (s->len - s->head) * sizeof(*s->fifo));
		s->len -= s->head;
		s->head = 0;
	}
	if (s->len == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		dlock__mux_group **grown = dlock__realloc(s->fifo, cap * sizeof(*grown));

		if (grown == NULL)
			return DLOCK_ENOMEM;
		s->fifo = grown;
		s->cap = cap;
	}
	s->fifo[s->len++] = g;
	s->live += g != NULL;
	return 0;
}

/* Watch the descriptor for what the share waits on now (nothing due: silent). */
static void arm(dlock__mux_share *s)
{
	short ev = 0;

	if (s->head < s->len || s->conn->discard > 0)
		ev = (short)(POLLIN | dlock__conn_events(s->conn));
	if (s->conn->out_len > 0)
		ev |= POLLOUT;
	if (dlock__io_active(&s->io))
		dlock__io_set(s->loop, &s->io, ev);
	else if (ev != 0 && dlock__io_start_kept(s->loop, &s->io, s->conn->fd, ev, share_ready) < 0)
		s->failed = 1; /* cannot be watched: joined no more; its groups meet their deadlines */
}

static void flush_now(dlock__mux_share *s);

static void flushed(dlock__task *t)
{
	flush_now(OF(t, flush_task));
}

int dlock__share_adopt(dlock__mux_group *g)
{
	dlock__mux_share *s = dlock__calloc(1, sizeof(*s));

	if (s == NULL)
		return DLOCK_ENOMEM;
	s->src = g->src;
	s->loop = g->wake_loop;
	s->conn = g->conn;
	s->io.slot = (size_t)-1;
	dlock__task_init(&s->flush_task, flushed);
	pthread_mutex_lock(&shares_mu);
	s->next = shares;
	shares = s;
	atomic_fetch_add(&nshares, 1);
	pthread_mutex_unlock(&shares_mu);
	s->users = 1;
	g->share = s;
	/* The commands g sends next (or the handshake still queued) go with
	 * the turn's write; the runs waiting for the pool may join now. */
	dlock__loop_post(s->loop, &s->flush_task);
	s->src->hooks->wake_on(s->src, s->loop);
	return 0;
}

void dlock__share_join(dlock__mux_share *s, dlock__mux_group *g)
{
	s->users++;
	g->share = s;
	g->conn = s->conn;
}

int dlock__share_queue(dlock__mux_group *g, int argc, const char **argv, const size_t *lens,
		const char *what)
{
	dlock__mux_share *s = g->share;

	if (s->conn->broken)
		return dlock__conn_fail(s->conn, DLOCK_ECONN, what, "connection already failed");
	if (push_reader(s, g) < 0 || dlock__conn_queue(s->conn, argc, argv, lens) < 0) {
		if (s->len > s->head && s->fifo[s->len - 1] == g) {
			s->len--;
			s->live--;
		}
		return dlock__seterr_node(DLOCK_ENOMEM, s->conn->label, "%s: out of memory", what);
	}
	if (s->conn->out_len > DLOCK__SHARE_OUT_MAX)
		flush_now(s);
	else
		dlock__loop_post(s->loop, &s->flush_task);
	return 0;
}

void dlock__share_skips(dlock__mux_group *g, int before)
{
	dlock__mux_share *s = g->share;

	while (s->conn->discard > before) {
		if (push_reader(s, NULL) < 0) {
			/* Out of memory: its reply would be read for the wrong op. */
			dlock__conn_fail(s->conn, DLOCK_ENOMEM, "pipelined commands", "out of memory");
			return;
		}
		s->conn->discard--;
	}
}

/* g's entries still due become skips; returns how many. */
static int unread(dlock__mux_share *s, const dlock__mux_group *g)
{
	size_t i;
	int n = 0;

	for (i = s->head; i < s->len; i++)
		if (s->fifo[i] == g) {
			s->fifo[i] = NULL;
			s->live--;
			n++;
		}
	return n;
}

void dlock__share_give_up(dlock__mux_group *g)
{
	dlock__conn *c = g->share->conn;
	int n = unread(g->share, g);

	/* Owed as a give-up says, but read where they stand in the fifo. */
	if (n == 0)
		return;
	dlock__conn_give_up(c, n);
	c->discard -= n;
}

/* Nobody is in the share: the connection goes back to the pool, its
 * remaining skips counted where a pooled connection keeps them. */
static void release(dlock__mux_share *s)
{
	dlock__mux_share **at;

	pthread_mutex_lock(&shares_mu);
	for (at = &shares; *at != s; at = &(*at)->next)
		;
	*at = s->next;
	atomic_fetch_sub(&nshares, 1);
	pthread_mutex_unlock(&shares_mu);
	dlock__io_stop(s->loop, &s->io);
	dlock__loop_unpost(s->loop, &s->flush_task);
	s->conn->discard += (int)(s->len - s->head);
	dlock__conn_flush(s->conn);
	s->src->hooks->put(s->src, s->conn);
	dlock__free(s->fifo);
	dlock__free(s);
}

void dlock__share_leave(dlock__mux_group *g)
{
	dlock__mux_share *s = g->share;

	unread(s, g);
	g->share = NULL;
	g->conn = NULL;
	if (--s->users == 0 && !s->busy)
		release(s);
}

/* The run g is in has news: it advances from the loop (never from here). */
static void kick(dlock__mux_group *g)
{
	dlock__loop_post(g->wake_loop, g->wake);
}

/* The connection failed: every group due on it is told, in fifo order
 * (each retries on a connection of its own, or fails). */
static void fail_all(dlock__mux_share *s, int rc)
{
	char msg[DLOCK__ERRMSG_MAX];

	snprintf(msg, sizeof(msg), "%s", dlock__errmsg_thread());
	s->failed = 1;
	s->conn->broken = 1;
	while (s->live > 0) {
		dlock__mux_group *g = NULL;
		size_t i;

		for (i = s->head; g == NULL && i < s->len; i++)
			g = s->fifo[i];
		dlock__seterr(rc, "%s", msg);
		g->calls->failed(g, rc); /* leaves the share */
		kick(g);
	}
}

static void flush_now(dlock__mux_share *s)
{
	s->busy++;
	if (s->conn->out_len > 0 && !s->failed &&
			dlock__conn_push(s->conn, "pipelined commands") < 0)
		fail_all(s, DLOCK_ECONN);
	s->busy--;
	if (s->users == 0)
		release(s);
	else if (!s->failed)
		arm(s);
}

/* Hand what came to the head of the fifo, reply by reply. */
static void read_replies(dlock__mux_share *s)
{
	for (;;) {
		dlock__mux_group *g;
		redisReply *reply = NULL;
		int r;

		while (s->head < s->len && s->fifo[s->head] == NULL) {
			s->head++;
			s->conn->discard++; /* skipped by the read, where it stands */
		}
		if (s->head == s->len && s->conn->discard == 0)
			break;
		g = s->head < s->len ? s->fifo[s->head] : NULL;
		r = dlock__conn_read(s->conn, &reply, g != NULL ? g->calls->what(g) : "skip", 0);
		if (r == DLOCK__AGAIN)
			break;
		if (r < 0) {
			fail_all(s, r);
			return;
		}
		if (g == NULL) { /* nobody asked: cannot happen with a sane server */
			freeReplyObject(reply);
			continue;
		}
		s->head++;
		s->live--;
		g->calls->reply(g, reply);
		kick(g);
	}
	if (s->head == s->len)
		s->head = s->len = 0;
}

static void share_ready(dlock__io *io, short revents)
{
	dlock__mux_share *s = (dlock__mux_share *)io;

	s->busy++;
	if ((revents & POLLOUT) && s->conn->out_len > 0 &&
			dlock__conn_push(s->conn, "pipelined commands") < 0)
		fail_all(s, DLOCK_ECONN);
	if (!s->failed)
		read_replies(s);
	s->busy--;
	if (s->users == 0)
		release(s);
	else if (!s->failed)
		arm(s);
	else
		dlock__io_set(s->loop, &s->io, 0); /* broken: its groups leave */
}
