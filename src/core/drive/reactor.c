/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/drive/reactor.h"
#include "core/topology/sentinel_watch.h"
#include "core/base/time.h"
#include "core/loop/loop.h"

/* How long to wait before connecting again after the pub/sub connection failed. */
#define RECONNECT_DELAY_MS 200

enum sub_state { SUB_NONE, SUB_SUBSCRIBING, SUB_SUBSCRIBED, SUB_UNSUBSCRIBING };

struct dlock__sub {
	char *channel;
	size_t len;
	int watchers; /* local holds listening for a force unlock */
	int check;    /* their holds should look at the lock (dlock__reactor_notice) */
	enum sub_state state;
	uint64_t gen; /* bumped each time the subscription becomes active */
	/* A "taken" channel's last note (DLOCK__TAKEN_PREFIX): its count, the
	 * new holder's lease and how many listened when it took the lock. */
	uint64_t note_gen;
	int64_t note_lease, note_n;
	/* The reactor's message count at this channel's last message: which of
	 * two channels' messages came first (a note, then an unlock). */
	uint64_t last_seq;
	dlock__listener *listeners; /* local waiters: told by a task posted to their loop */
	struct dlock__sub *next;
};

struct dlock__reactor {
	const dlock__node *node;
	dlock__loop *loop;   /* what drives it: own_loop on the thread, or the caller's */
	dlock__loop own_loop;
	int own_thread;
	pthread_t thread;
	pthread_mutex_t mu;
	_Atomic int stopping;
	dlock__task tend_task; /* look at what is due (posted by any thread) */
	dlock__timer timer;    /* the next due time of any of it */
	dlock__io conn_io;     /* the pub/sub connection's descriptor */
	dlock__io watch_io;    /* the Sentinel watch's */
	int64_t connect_deadline;
	dlock__sub *subs;
	dlock__conn *conn;  /* pub/sub connection; only the loop touches it */
	dlock__watch watch; /* a Sentinel-managed node's +switch-master watch (the loop's) */
	int64_t reconnect_at;
	dlock__reactor_job job;
	void (*job_stop)(void *arg, int forked);
	void *job_arg;
	int64_t job_due;
	void (*flush)(void *arg);
	void (*flush_stop)(void *arg, int forked);
	void *flush_arg;
	int64_t flush_due;
	dlock__reactor_notice notice; /* tells the holds of a watched channel to look */
	void *notice_arg;
	int checks; /* some sub has its check flag set */
	uint64_t seq; /* messages read (r->mu held) */
};

static void start_connect(dlock__reactor *r);

/* Ask the loop to look at what is due (from any thread). */
static void wake(dlock__reactor *r)
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
static int wanted(const dlock__sub *s)
{
	return s->watchers > 0 || s->listeners != NULL;
}

/* The holds listening on s should look at their lock now (r->mu held). */
static void want_check(dlock__reactor *r, dlock__sub *s)
{
	if (s->watchers > 0) {
		s->check = 1;
		r->checks = 1;
	}
}

/* Wake every waiter of s (r->mu held). */
static void wake_sub(dlock__sub *s)
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

static void free_sub(dlock__sub *s)
{
	dlock__free(s->channel);
	dlock__free(s);
}

static void drop_connection(dlock__reactor *r)
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
			wake_sub(s);
		}
		if (s->state != SUB_NONE)
			want_check(r, s);
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
	drop_connection(r);
	r->reconnect_at = dlock__now_ms();
}

/* A push's kind, the sharded form ("smessage", ...) read as the plain one. */
static int kind_is(const redisReply *kind, const char *plain)
{
	const char *k = kind->str;

	return strcmp(k[0] == 's' && strcmp(k, "subscribe") != 0 ? k + 1 : k, plain) == 0;
}

static void handle_reply(dlock__reactor *r, redisReply *reply)
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
	if (s != NULL) {
		if (kind_is(kind, "message") && s->state == SUB_SUBSCRIBED &&
				chan->len > sizeof(DLOCK__TAKEN_PREFIX) - 1 &&
				memcmp(chan->str, DLOCK__TAKEN_PREFIX, sizeof(DLOCK__TAKEN_PREFIX) - 1) == 0) {
			/* dlock's own note that a waiter took the lock: news for all
			 * of this process's waiters (none of Redisson's listen here). */
			if (arg->type == REDIS_REPLY_STRING) {
				char *end;

				s->note_lease = strtoll(arg->str, &end, 10);
				s->note_n = *end == ':' ? strtoll(end + 1, NULL, 10) : 0;
				s->note_gen++;
				wake_sub(s);
			}
		} else if (kind_is(kind, "message") && s->state == SUB_SUBSCRIBED) {
			/* "0" wakes one waiter (Redisson's UNLOCK_MESSAGE); "1" wakes
			 * all. One woken while its attempt is out looks again right
			 * after it; one that stops listening passes it on. */
			if (arg->type == REDIS_REPLY_STRING && arg->len == 1 && arg->str[0] == '1')
				wake_sub(s);
			else if (chan->len > 12 && memcmp(chan->str, "redisson_sc:", 12) == 0)
				wake_n(s, arg); /* a semaphore's count: that many may take one */
			else
				wake_one_and_every_message(s);
			/* Anyone's unlock of the name, a force unlock included. */
			want_check(r, s);
		} else if (kind_is(kind, "subscribe") && s->state == SUB_SUBSCRIBING) {
			s->state = SUB_SUBSCRIBED;
			s->gen++;
			wake_sub(s);
			/* An unlock before now went unheard: the holds look once. */
			want_check(r, s);
		} else if (kind_is(kind, "unsubscribe") && s->state == SUB_UNSUBSCRIBING) {
			s->state = SUB_NONE;
		} else if (kind_is(kind, "unsubscribe") && s->state == SUB_SUBSCRIBED) {
			/* The server dropped it (a cluster slot moved away): the
			 * waiters look at the lock again; the subscription is
			 * asked for again. */
			s->state = SUB_NONE;
			s->gen++;
			wake_sub(s);
			want_check(r, s);
		}
	}
	dlock__mutex_unlock(&r->mu);
}

static int send_channels(
		dlock__reactor *r, const char *cmd, const char **names, size_t *lens, int n)
{
	names[0] = cmd;
	lens[0] = strlen(cmd);
	return dlock__conn_send(r->conn, n + 1, names, lens, cmd,
			dlock__deadline_in(r->node->command_timeout_ms));
}

/* Bring the server's subscriptions in line with what local waiters want.
 * Called on the thread with r->mu held; drops it around network work. */
static void sync_subscriptions(dlock__reactor *r)
{
	dlock__sub **link = &r->subs, *s;
	const char *sub_names[65], *unsub_names[65];
	size_t sub_lens[65], unsub_lens[65];
	int nsub = 0, nunsub = 0, any_wanted = 0, more = 0;
	/* Connected (its handshake sent): (un)subscriptions can go out. */
	int ready = r->conn != NULL && !r->conn->connecting;

	while ((s = *link) != NULL) {
		if (!wanted(s) && s->state == SUB_NONE) {
			*link = s->next;
			free_sub(s);
			continue;
		}
		if (wanted(s))
			any_wanted = 1;
		if (ready && wanted(s) && s->state == SUB_NONE) {
			if (nsub < 64) {
				s->state = SUB_SUBSCRIBING;
				sub_names[1 + nsub] = s->channel;
				sub_lens[1 + nsub++] = s->len;
			} else {
				more = 1;
			}
		} else if (ready && !wanted(s) && s->state == SUB_SUBSCRIBED) {
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
		wake(r); /* the rest on the next turn */

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
		drop_connection(r);
	dlock__mutex_lock(&r->mu);
}

static void read_messages(dlock__reactor *r)
{
	for (;;) {
		redisReply *reply = NULL;
		int rc = dlock__conn_read(r->conn, &reply, "pub/sub", 0);

		if (rc == DLOCK__AGAIN)
			return;
		if (rc < 0) {
			drop_connection(r);
			return;
		}
		handle_reply(r, reply);
		freeReplyObject(reply);
	}
}

/* The pub/sub connection's descriptor is ready: finish its connect, or
 * read what came. */
static void conn_ready(dlock__io *io, short revents)
{
	dlock__reactor *r = (dlock__reactor *)((char *)io - offsetof(dlock__reactor, conn_io));

	(void)revents;
	if (r->conn == NULL)
		return;
	if (r->conn->connecting) {
		if (dlock__conn_connected(r->conn) < 0 ||
				(!r->conn->connecting &&
						dlock__conn_send_handshake(r->conn,
								dlock__deadline_in(r->node->command_timeout_ms)) < 0))
			drop_connection(r);
	} else {
		read_messages(r);
	}
	wake(r); /* subscribe, or hand out what the messages asked for */
}

static void watch_ready(dlock__io *io, short revents)
{
	dlock__reactor *r = (dlock__reactor *)((char *)io - offsetof(dlock__reactor, watch_io));

	(void)revents;
	read_watch(r);
	wake(r);
}

/* Open the pub/sub connection without blocking: the loop watches it until
 * it is connected (or its connect timeout passes). */
static void start_connect(dlock__reactor *r)
{
	dlock__conn *c = NULL;

	if (dlock__conn_start(&c, r->node) < 0 ||
			dlock__io_start(r->loop, &r->conn_io, c->fd, dlock__conn_events(c), conn_ready) < 0) {
		dlock__conn_close(c);
		r->reconnect_at = dlock__now_ms() + RECONNECT_DELAY_MS;
		return;
	}
	r->conn = c;
	r->connect_deadline = dlock__deadline_in(r->node->connect_timeout_ms);
	if (!c->connecting && dlock__conn_send_handshake(c, r->connect_deadline) < 0)
		drop_connection(r);
	else
		wake(r);
}

/* Keep the loop watching the connection and the Sentinel watch for what they wait for now. */
static void watch_descriptors(dlock__reactor *r)
{
	short events = 0;
	int fd;

	if (r->conn != NULL)
		dlock__io_set(r->loop, &r->conn_io, dlock__conn_events(r->conn));
	fd = dlock__watch_fd(&r->watch, &events);
	if (dlock__io_active(&r->watch_io) && r->watch_io.fd != fd)
		dlock__io_stop(r->loop, &r->watch_io);
	if (fd >= 0 && !dlock__io_active(&r->watch_io))
		dlock__io_start(r->loop, &r->watch_io, fd, events, watch_ready);
	else if (fd >= 0)
		dlock__io_set(r->loop, &r->watch_io, events);
}

/* Tell the holds of every channel flagged for a check to look at their
 * lock (r->mu held; dropped around each notice). Only this thread unlinks
 * subs, so the list stays walkable meanwhile. */
static void notify_watchers(dlock__reactor *r)
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

/*
 * Run what is due, then arm the timer for what comes next. The job runs
 * once per call at most: one that falls behind (a watchdog round that
 * failed slowly and is due again already) goes again on the loop's next
 * turn, after what else is ready there - on the caller's loop everything
 * else, the replies that give back the connections it waits for among it.
 */
static void tend(dlock__reactor *r)
{
	int64_t until, watch_due;
	int job_ran = 0;

	dlock__mutex_lock(&r->mu);
	while (!r->stopping) {
		int64_t now = dlock__now_ms();

		if (r->flush != NULL && now >= r->flush_due) {
			r->flush_due = DLOCK__NEVER;
			dlock__mutex_unlock(&r->mu);
			r->flush(r->flush_arg);
			dlock__mutex_lock(&r->mu);
			continue;
		}
		/* Once per pass: a job due again already (a round that took longer
		 * than its retry interval) runs on the loop's next turn, after
		 * what else is ready - not over and over in here. */
		if (r->job != NULL && !job_ran && now >= r->job_due) {
			int64_t next;

			job_ran = 1;
			r->job_due = DLOCK__NEVER;
			dlock__mutex_unlock(&r->mu);
			next = r->job(r->job_arg, now);
			dlock__mutex_lock(&r->mu);
			if (next < r->job_due)
				r->job_due = next;
			continue;
		}
		if (r->conn != NULL && r->conn->connecting && now >= r->connect_deadline) {
			dlock__mutex_unlock(&r->mu);
			drop_connection(r);
			dlock__mutex_lock(&r->mu);
			continue;
		}
		break;
	}
	if (r->checks)
		notify_watchers(r);
	sync_subscriptions(r);
	until = r->job != NULL ? r->job_due : DLOCK__NEVER;
	if (r->flush_due < until)
		until = r->flush_due;
	if (r->conn == NULL && r->subs != NULL && r->reconnect_at < until)
		until = r->reconnect_at;
	if (r->conn != NULL && r->conn->connecting && r->connect_deadline < until)
		until = r->connect_deadline;
	dlock__mutex_unlock(&r->mu);
	if (r->stopping)
		return;
	watch_due = dlock__watch_tend(&r->watch);
	if (watch_due < until)
		until = watch_due;
	if (r->conn != NULL && dlock__conn_buffered(r->conn))
		until = 0; /* TLS has messages the socket no longer shows */
	watch_descriptors(r);
	dlock__timer_set(r->loop, &r->timer, until);
}

static void tend_task(dlock__task *t)
{
	tend((dlock__reactor *)((char *)t - offsetof(dlock__reactor, tend_task)));
}

static void tend_timer(dlock__timer *t)
{
	dlock__reactor *r = (dlock__reactor *)((char *)t - offsetof(dlock__reactor, timer));

	if (r->conn != NULL && dlock__conn_buffered(r->conn))
		read_messages(r);
	tend(r);
}

/* The client's own thread, when no loop of the caller's drives it. */
static void *reactor_main(void *arg)
{
	dlock__reactor *r = arg;

	while (!r->stopping)
		dlock__loop_run_once(r->loop, DLOCK__NEVER);
	return NULL;
}

int dlock__reactor_start(dlock__reactor **out, const dlock__node *node, dlock__loop *loop)
{
	dlock__reactor *r;
	int rc;

	*out = NULL;
	r = dlock__calloc(1, sizeof(*r));
	if (r == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "%s: out of memory", node->label);
	r->node = node;
	dlock__watch_init(&r->watch, node->sentinel);
	r->job_due = DLOCK__NEVER;
	r->flush_due = DLOCK__NEVER;
	r->conn_io.slot = r->watch_io.slot = (size_t)-1;
	dlock__task_init(&r->tend_task, tend_task);
	dlock__timer_init(&r->timer, tend_timer);
	if (pthread_mutex_init(&r->mu, NULL) != 0) {
		dlock__free(r);
		return dlock__seterr(DLOCK_ESYS, "pthread_mutex_init failed");
	}
	r->loop = loop;
	if (loop == NULL) {
		r->loop = &r->own_loop;
		rc = dlock__loop_init(&r->own_loop);
		if (rc == 0) {
			rc = pthread_create(&r->thread, NULL, reactor_main, r);
			if (rc != 0) {
				dlock__loop_destroy(&r->own_loop);
				rc = dlock__seterr(DLOCK_ESYS, "pthread_create: %s", strerror(rc));
			}
		}
		if (rc < 0) {
			pthread_mutex_destroy(&r->mu);
			dlock__free(r);
			return rc;
		}
		r->own_thread = 1;
	}
	*out = r;
	return 0;
}

void dlock__reactor_stop(dlock__reactor *r, int forked)
{
	dlock__sub *s;

	if (r == NULL)
		return;
	r->stopping = 1;
	if (!forked && r->own_thread) {
		wake(r);
		pthread_join(r->thread, NULL);
	}
	if (r->job_stop != NULL)
		r->job_stop(r->job_arg, forked);
	if (r->flush_stop != NULL)
		r->flush_stop(r->flush_arg, forked);
	while ((s = r->subs) != NULL) {
		r->subs = s->next;
		free_sub(s);
	}
	if (!forked) {
		dlock__io_stop(r->loop, &r->conn_io);
		dlock__io_stop(r->loop, &r->watch_io);
		dlock__timer_stop(r->loop, &r->timer);
		dlock__loop_unpost(r->loop, &r->tend_task);
	}
	dlock__conn_close(r->conn);
	dlock__watch_close(&r->watch);
	pthread_mutex_destroy(&r->mu);
	if (r->own_thread)
		dlock__loop_destroy(&r->own_loop);
	dlock__free(r);
}

void dlock__reactor_set_job(dlock__reactor *r, dlock__reactor_job job,
		void (*stop)(void *arg, int forked), void *arg)
{
	dlock__mutex_lock(&r->mu);
	r->job = job;
	r->job_stop = stop;
	r->job_arg = arg;
	dlock__mutex_unlock(&r->mu);
}

void dlock__reactor_schedule(dlock__reactor *r, int64_t due)
{
	int sooner;

	dlock__mutex_lock(&r->mu);
	sooner = due < r->job_due;
	if (sooner)
		r->job_due = due;
	dlock__mutex_unlock(&r->mu);
	if (sooner)
		wake(r);
}

void dlock__reactor_set_flush(dlock__reactor *r, void (*flush)(void *arg),
		void (*stop)(void *arg, int forked), void *arg)
{
	dlock__mutex_lock(&r->mu);
	r->flush = flush;
	r->flush_stop = stop;
	r->flush_arg = arg;
	dlock__mutex_unlock(&r->mu);
}

void dlock__reactor_flush_at(dlock__reactor *r, int64_t due)
{
	int sooner;

	if (r == NULL)
		return; /* stopped: the client is being freed */
	dlock__mutex_lock(&r->mu);
	sooner = due < r->flush_due;
	if (sooner)
		r->flush_due = due;
	dlock__mutex_unlock(&r->mu);
	if (sooner)
		wake(r);
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
			want_check(r, s);
	}
	dlock__mutex_unlock(&r->mu);
	if (s != NULL)
		wake(r);
	return s;
}

void dlock__sub_unwatch(dlock__reactor *r, dlock__sub *s)
{
	int last;

	dlock__mutex_lock(&r->mu);
	s->watchers--;
	last = !wanted(s);
	dlock__mutex_unlock(&r->mu);
	if (last)
		wake(r);
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
		wake(r);
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
	last = !wanted(s);
	dlock__mutex_unlock(&r->mu);
	if (last)
		wake(r);
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

int dlock__reactor_own_thread(const dlock__reactor *r)
{
	return r->own_thread;
}

struct dlock_loop *dlock__reactor_loop(const dlock__reactor *r)
{
	return r->loop;
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
		wake_sub(s);
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
