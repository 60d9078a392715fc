/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/net/tls.h"
#include "core/drive/debts.h"
#include "core/drive/holder.h"
#include "core/drive/resend.h"
#include "core/mux/mux.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/topology/cluster.h"
#include "core/topology/sentinel_ask.h"
#include "core/net/uri.h"
#include "core/net/owed.h"
#include "core/loop/loop.h"
#include "core/drive/stats.h"

static void flush_idle(void *arg);

static void free_deferred(dlock__task *t);

static void free_client(dlock_client *c)
{
	dlock__loop *gone_from = c->reactor != NULL ? c->opts.loop : NULL;
	int i;

	/* The reactors first, the cluster members' too: their job (the
	 * watchdog) and notices (force unlocks) use the layer's state. In a
	 * forked child there is no thread to stop, and closing the copies of
	 * the parent's sockets sends nothing. */
	dlock__reactor_stop(c->reactor, c->pid != dlock__pid());
	c->reactor = NULL; /* freed: what is still sent below flushes no more */
	/* The registration's DEL, while a cluster's members are still there. */
	dlock__holder_free(c);
	dlock__cluster_free(c->node.cluster);
	if (c->ext != NULL && c->ext_free != NULL)
		c->ext_free(c->ext);
	/* Deletes still waiting for a ride go out now (not in a forked child:
	 * the sockets are the parent's). */
	if (c->pid == dlock__pid()) {
		dlock__mutex_lock(&c->pool_mu);
		if (c->n_idle > 0)
			dlock__resend_hand_over(c, c->idle[0]);
		dlock__mutex_unlock(&c->pool_mu);
		dlock__forgets_send(c);
	}
	dlock__forgets_free(c);
	dlock__resend_free(c);
	for (i = 0; i < c->n_idle; i++)
		dlock__conn_close(c->idle[i]);
	dlock__free(c->idle);
	dlock__free(c->node.host);
	dlock__free(c->node.path);
	dlock__sentinel_free(c->node.sentinel);
	dlock__tls_ctx_free(c->node.tls);
	dlock__free(c->node.user);
	dlock__free(c->node.password);
	dlock__errbuf_destroy(&c->err);
	pthread_cond_destroy(&c->pool_cv);
	pthread_mutex_destroy(&c->pool_mu);
	pthread_mutex_destroy(&c->ext_mu);
	dlock__free(c);
	if (gone_from != NULL) /* last: the loop may go with it */
		dlock__loop_client_gone(gone_from);
}

static void free_deferred(dlock__task *t)
{
	free_client((dlock_client *)((char *)t - offsetof(dlock_client, free_task)));
}

/* The node the parsed URI names: its strings move in (u keeps the rest). */
static int node_from_uri(dlock__node *n, dlock__uri *u, const dlock_client_options *opts)
{
	dlock__tls_opts to = { opts->tls_ca_file, opts->tls_ca_dir, opts->tls_cert_file,
		opts->tls_key_file, opts->tls_server_name, opts->tls_insecure };

	n->host = u->host;
	n->port = u->port;
	n->path = u->path;
	n->user = u->user;
	n->password = u->password;
	n->db = u->db;
	u->host = u->path = u->user = u->password = NULL;
	n->connect_timeout_ms = opts->connect_timeout_ms;
	n->command_timeout_ms = opts->command_timeout_ms;
	if (n->path != NULL)
		snprintf(n->label, sizeof(n->label), "unix:%s", n->path);
	else if (u->master != NULL)
		snprintf(n->label, sizeof(n->label), "sentinel:%.255s", u->master);
	else if (u->cluster)
		snprintf(n->label, sizeof(n->label), "cluster:%.255s:%d%s", u->hosts[0],
				u->ports[0], u->n_hosts > 1 ? ",..." : "");
	else
		snprintf(n->label, sizeof(n->label),
				strchr(n->host, ':') ? "[%.255s]:%d" : "%.255s:%d", n->host,
				n->port);
	if (u->master != NULL) {
		dlock__sentinel_opts so = { opts->sentinel_user, opts->sentinel_password,
			opts->connect_timeout_ms, opts->command_timeout_ms };
		int rc = dlock__sentinel_new(&n->sentinel, u, &so);

		if (rc == 0)
			n->finder = dlock__sentinel_finder(n->sentinel);
		return rc;
	}
	if (u->cluster && u->tls) /* the seeds' settings; each node gets its own name */
		return dlock__tls_ctx_new(&n->tls, &to, u->hosts[0]);
	/* The caller's TLS files are read now: their strings need not outlive the open. */
	if (u->tls)
		return dlock__tls_ctx_new(&n->tls, &to, n->host);
	return 0;
}

static int open_member(void *self, dlock_client **out, const char *host, int port, int sharded);

/* A cluster root's loop: its reactor's (NULL before it starts, after it stops). */
static dlock__loop *root_loop(void *self)
{
	dlock_client *c = self;

	return c->reactor != NULL ? dlock__reactor_loop(c->reactor) : NULL;
}

/* The reactor stops (its loop still there): what ran on that loop ends. */
static void stop_on_loop(void *arg, int forked)
{
	dlock_client *c = arg;

	dlock__holder_stop(c, forked);
	dlock__cluster_stop_reading(c->node.cluster, forked);
}

/* A redis+cluster:// root: its cluster opens and closes members through it. */
static int open_cluster(dlock_client *c, dlock__uri *u)
{
	dlock__cluster_host host = { &c->node, open_member, free_client, root_loop, c };

	return dlock__cluster_new(&c->node.cluster, u, &host);
}

/* A client for the parsed URI (its strings move into the client). */
static int client_new(dlock_client **out, dlock__uri *u, const dlock_client_options *opts)
{
	dlock_client *c = dlock__calloc(1, sizeof(*c));
	int rc;

	*out = NULL;
	if (c == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "client: out of memory");
	/* Mutexes and condition variables that fail to initialise are a broken system. */
	if (dlock__errbuf_init(&c->err) != 0 || pthread_mutex_init(&c->pool_mu, NULL) != 0 ||
			dlock__cond_init(&c->pool_cv) != 0 ||
			pthread_mutex_init(&c->ext_mu, NULL) != 0)
		abort();
	c->pid = dlock__pid();
	c->opts = *opts;
	dlock__client_source_init(c);
	atomic_init(&c->handles, 1); /* the caller's */
	dlock__task_init(&c->free_task, free_deferred);
	dlock__uuid(c->id);
	c->idle = dlock__calloc((size_t)opts->pool_size, sizeof(*c->idle));
	rc = c->idle == NULL ? dlock__seterr(DLOCK_ENOMEM, "client: out of memory")
			     : node_from_uri(&c->node, u, opts);
	if (rc == 0 && u->cluster)
		rc = open_cluster(c, u);
	if (rc < 0) {
		free_client(c);
		return rc;
	}
	*out = c;
	return 0;
}

/*
 * Connect and PING now: a server that wants a password we did not give
 * says so only when asked something, and new should fail, not first use.
 */
static int connect_now(dlock_client *c)
{
	const char *ping = "PING";
	size_t len = 4;
	dlock__conn *conn = NULL;
	redisReply *r = NULL;
	int rc;

	if (c->node.cluster != NULL) /* reading the slot map connects and authenticates */
		return dlock__cluster_refresh(
				c->node.cluster, dlock__deadline_in(c->opts.connect_timeout_ms));
	/* The connect (its failures told as a connect's: a TLS handshake that
	 * stalls on a plain port, ...), then the PING over it: both operations
	 * driven on the loop this call borrows. */
	rc = dlock__client_conn_get(c, &conn, dlock__deadline_in(c->opts.connect_timeout_ms));
	if (rc < 0)
		return rc;
	dlock__client_conn_put(c, conn);
	rc = dlock__client_ask(c, 1, &ping, &len, &r);
	if (rc == 0)
		rc = dlock__reply_check(&c->node, r, "PING");
	freeReplyObject(r);
	return rc;
}

/* A client for the parsed URI with its background thread; connects now unless opts are lazy. */
static int open_parsed(dlock_client **out, dlock__uri *u, const dlock_client_options *opts,
		int sharded, dlock__tls_ctx *tls, const dlock_client *root)
{
	dlock_client *c = NULL;
	int rc = client_new(&c, u, opts);

	if (rc < 0) {
		dlock__tls_ctx_free(tls);
		return rc;
	}
	/* Before the background thread starts: it reads it. */
	if (root != NULL)
		dlock__holder_share(c, root);
	else if ((rc = dlock__holder_new(c)) < 0) {
		dlock__tls_ctx_free(tls);
		free_client(c);
		return rc;
	}
	c->node.sharded_pubsub = sharded;
	if (tls != NULL)
		c->node.tls = tls; /* before anything connects */
	rc = dlock__reactor_start(&c->reactor, &c->node, c->opts.loop);
	if (rc == 0 && c->opts.loop != NULL)
		c->opts.loop->clients++;
	if (rc == 0)
		dlock__reactor_set_flush(c->reactor, flush_idle, stop_on_loop, c);
	if (rc == 0 && !opts->lazy_connect)
		rc = connect_now(c);
	if (rc < 0) {
		free_client(c);
		return rc;
	}
	*out = c;
	return 0;
}

int dlock_client_new(dlock_client **out, const char *uri, const dlock_client_options *user)
{
	dlock_client_options opts;
	dlock__uri u;
	char reason[256] = "";
	int rc;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "client: out is NULL");
	*out = NULL;
	if ((rc = dlock__client_options_copy(&opts, user)) < 0 ||
			(rc = dlock__client_options_check(&opts)) < 0)
		return rc;
	rc = dlock__uri_parse(&u, uri, reason, sizeof(reason));
	if (rc < 0)
		return dlock__seterr(rc, "%s", rc == DLOCK_ENOMEM ? "URI: out of memory" : reason);
	rc = open_parsed(out, &u, &opts, 0, NULL, NULL);
	dlock__uri_clear(&u); /* what the client did not take */
	return rc;
}

/* A cluster's member client for host:port: the root's options (connected
 * lazily) and credentials; `sharded`: its pub/sub is sharded. */
static int open_member(void *self, dlock_client **out, const char *host, int port, int sharded)
{
	dlock_client *root = self;
	dlock_client_options opts = root->opts;
	dlock__tls_ctx *tls = NULL;
	dlock__uri u;
	int rc = 0;

	memset(&u, 0, sizeof(u));
	opts.lazy_connect = 1;
	u.port = port;
	u.host = dlock__strndup(host, strlen(host));
	u.user = root->node.user ? dlock__strndup(root->node.user, strlen(root->node.user)) : NULL;
	u.password = root->node.password
			? dlock__strndup(root->node.password, strlen(root->node.password))
			: NULL;
	if (u.host == NULL || (root->node.user && !u.user) || (root->node.password && !u.password))
		rc = dlock__seterr(DLOCK_ENOMEM, "cluster: out of memory");
	if (rc == 0 && root->node.tls != NULL) /* the node's own name, the root's certificates */
		rc = dlock__tls_ctx_for_host(&tls, root->node.tls, host);
	if (rc == 0)
		rc = open_parsed(out, &u, &opts, sharded, tls, root);
	dlock__uri_clear(&u);
	return rc;
}

void dlock_client_free(dlock_client *c)
{
	if (c != NULL)
		dlock__client_handle_added(c, -1);
}

int dlock_client_connect(dlock_client *c)
{
	if (c == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_client_connect: NULL client");
	if (c->pid != dlock__pid())
		return dlock__errbuf_record(&c->err, dlock__seterr(DLOCK_EFORKED,
				"dlock_client_connect: the client was made in another process;"
				" make a new one in this one"));
	return dlock__errbuf_record(&c->err, connect_now(c));
}

/* The last reference gone. From a callback on the client's loop, the free
 * waits for the end of that turn: what called back still uses the client
 * (and on the client's own thread, the thread ends itself then). */
static void client_release(dlock_client *c)
{
	if (c->reactor != NULL && c->pid == dlock__pid())
		dlock__loop_defer(dlock__reactor_loop(c->reactor), &c->free_task);
	else
		free_client(c);
}

void dlock__client_handle_added(dlock_client *c, int delta)
{
	if (atomic_fetch_add(&c->handles, delta) + delta == 0)
		client_release(c);
}

size_t dlock_client_errmsg_r(char *buf, size_t len, const dlock_client *c)
{
	return c ? dlock__errbuf_read_r(buf, len, &c->err) : dlock__copy_msg(buf, len, "");
}

const char *dlock_client_id(const dlock_client *c)
{
	return c ? c->id : "";
}

const char *dlock_client_node(const dlock_client *c)
{
	return c ? c->node.label : "";
}

const char *dlock_client_errmsg(const dlock_client *c)
{
	return c ? dlock__errbuf_read(&c->err) : "";
}

int dlock_client_owner(char owner[DLOCK_OWNER_SIZE], const dlock_client *c, uint64_t thread_id)
{
	char digits[24];
	size_t n = 0, i;

	if (c == NULL || owner == NULL)
		return dlock__seterr(
				DLOCK_EINVAL, "owner: NULL %s", c == NULL ? "client" : "buffer");
	/* By hand: this runs on every call of every lock operation. 36 + 1 +
	 * 20 digits + 1 always fit DLOCK_OWNER_SIZE. */
	do {
		digits[n++] = (char)('0' + thread_id % 10);
		thread_id /= 10;
	} while (thread_id != 0);
	memcpy(owner, c->id, 36);
	owner[36] = ':';
	for (i = 0; i < n; i++)
		owner[37 + i] = digits[n - 1 - i];
	owner[37 + n] = '\0';
	return 0;
}

void dlock__client_note_reply(dlock_client *c, int rc, const redisReply *r)
{
	if (c->node.cluster != NULL)
		dlock__cluster_note(c->node.cluster, rc, r);
}

dlock__reactor *dlock__client_reactor_for(dlock_client *c, const char *channel, size_t len)
{
	dlock_client *m = dlock__client_for_key(c, channel, len);

	return m != NULL ? m->reactor : NULL;
}

/* The background thread's flush: deferred commands of idle connections go
 * out without waiting (their replies are skipped by the next reader). */
static void flush_idle(void *arg)
{
	dlock_client *c = arg;

	dlock__client_drain(c);
	dlock__holder_tick(c); /* the registration, when due */
	/* Replies still owed (a server paused or hung): look again soon. */
	if (atomic_load(&c->node.owed) > 0)
		dlock__reactor_flush_at(c->reactor, dlock__now_ms() + DLOCK__OWED_POLL_MS);
}

static void wake_member_waiters(dlock_client *member, void *arg)
{
	(void)arg;
	dlock__reactor_wake_waiters(member->reactor);
}

int dlock_client_cancel_waits(dlock_client *c)
{
	if (c == NULL)
		return dlock__seterr(DLOCK_EINVAL, "cancel: NULL client");
	atomic_fetch_add(&c->cancels, 1);
	dlock__reactor_wake_waiters(c->reactor);
	/* A cluster's waiters listen at the members serving their channels. */
	if (c->node.cluster != NULL)
		dlock__cluster_each_member(c->node.cluster, wake_member_waiters, NULL);
	return 0;
}

uint64_t dlock__client_cancels(dlock_client *c)
{
	return atomic_load(&c->cancels);
}

int64_t dlock__client_timed_out_at(const dlock_client *c)
{
	return atomic_load(&c->src.timed_out_at);
}
