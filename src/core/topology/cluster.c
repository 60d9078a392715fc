/* SPDX-License-Identifier: BSD-3-Clause */
/* A Redis Cluster behind one client: the slot map, the members, redirects (see cluster.h). */
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/topology/cluster.h"
#include "core/net/conn.h"
#include "core/base/error.h"
#include "core/topology/slot.h"
#include "core/topology/slotmap.h"
#include "core/base/time.h"
#include "core/net/tls.h"

#define REFRESH_MIN_MS 100 /* a suspect map is read again at most this often */
#define HOST_MAX DLOCK__CLUSTER_HOST_MAX

_Thread_local int dlock__asking_next;

#define OF(p, field) ((dlock__cluster *)((char *)(p) - offsetof(dlock__cluster, field)))

/* On the root's loop: begin reading the map. */
static void bg_start(dlock__task *t)
{
	dlock__cluster *cl = OF(t, bg_start);

	if (cl->bg == NULL &&
			dlock__cluster_read_start(cl, cl->bg_loop, &cl->bg_over,
					dlock__deadline_in(cl->host.root->connect_timeout_ms),
					&cl->bg) == 0)
		return;
	dlock__mutex_lock(&cl->mu);
	cl->bg_posted = cl->bg != NULL;
	dlock__mutex_unlock(&cl->mu);
}

/* Its end: the map is installed already; a failure leaves it suspect. */
static void bg_over(dlock__task *t)
{
	dlock__cluster *cl = OF(t, bg_over);

	if (cl->bg == NULL || !dlock__cluster_read_over(cl->bg))
		return;
	(void)dlock__cluster_read_take(cl->bg);
	cl->bg = NULL;
	dlock__mutex_lock(&cl->mu);
	cl->bg_posted = 0;
	dlock__mutex_unlock(&cl->mu);
}

void dlock__cluster_stop_reading(dlock__cluster *cl, int forked)
{
	if (cl == NULL || cl->bg_loop == NULL)
		return;
	if (forked) {
		dlock__cluster_read_forget(cl->bg);
	} else {
		dlock__loop_unpost(cl->bg_loop, &cl->bg_start);
		dlock__loop_unpost(cl->bg_loop, &cl->bg_over);
		dlock__cluster_read_drop(cl->bg);
	}
	cl->bg = NULL;
	cl->bg_loop = NULL;
}

/* Ask for a background reading (cl->mu held): 1 asked (or under way), 0
 * when there is no loop to read on. */
static int read_in_background(dlock__cluster *cl)
{
	dlock__loop *loop;

	if (cl->bg_posted)
		return 1;
	loop = cl->host.loop_of != NULL ? cl->host.loop_of(cl->host.self) : NULL;
	if (loop == NULL || (cl->bg_loop != NULL && cl->bg_loop != loop))
		return 0;
	cl->bg_loop = loop;
	cl->bg_posted = 1;
	cl->refreshed_at = dlock__now_ms();
	dlock__loop_post(loop, &cl->bg_start);
	return 1;
}

int dlock__cluster_new(dlock__cluster **out, dlock__uri *u, const dlock__cluster_host *host)
{
	dlock__cluster *cl = dlock__calloc(1, sizeof(*cl));

	*out = NULL;
	if (cl == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "cluster: out of memory");
	if (pthread_mutex_init(&cl->mu, NULL) != 0)
		abort();
	cl->host = *host;
	cl->sharded = -1;
	dlock__task_init(&cl->bg_start, bg_start);
	dlock__task_init(&cl->bg_over, bg_over);
	cl->n_seeds = u->n_hosts;
	cl->seed_hosts = u->hosts;
	cl->seed_ports = u->ports;
	u->hosts = NULL;
	u->ports = NULL;
	u->n_hosts = 0;
	*out = cl;
	return 0;
}

void dlock__cluster_free(dlock__cluster *cl)
{
	size_t i;

	if (cl == NULL)
		return;
	for (i = 0; i < cl->n_members; i++)
		cl->host.close_member(cl->members[i].client);
	for (i = 0; i < cl->n_seeds; i++)
		dlock__free(cl->seed_hosts[i]);
	dlock__free(cl->seed_hosts);
	dlock__free(cl->seed_ports);
	dlock__free(cl->members);
	dlock__slotmap_free(cl->map);
	pthread_mutex_destroy(&cl->mu);
	dlock__free(cl);
}


/* The member for host:port, opened on first use (cl->mu held). */
static int member_at(dlock__cluster *cl, const char *host, int port, dlock_client **out)
{
	size_t i;
	int rc;

	for (i = 0; i < cl->n_members; i++) {
		if (cl->members[i].port == port && strcmp(cl->members[i].host, host) == 0) {
			*out = cl->members[i].client;
			return 0;
		}
	}
	if (cl->n_members == cl->cap_members) {
		size_t cap = cl->cap_members ? 2 * cl->cap_members : 8;
		dlock__member *grown = dlock__realloc(cl->members, cap * sizeof(*grown));

		if (grown == NULL)
			return dlock__seterr(DLOCK_ENOMEM, "cluster: out of memory");
		cl->members = grown;
		cl->cap_members = cap;
	}
	rc = cl->host.open_member(cl->host.self, out, host, port, cl->sharded == 1);
	if (rc < 0)
		return rc;
	snprintf(cl->members[cl->n_members].host, HOST_MAX, "%s", host);
	cl->members[cl->n_members].port = port;
	cl->members[cl->n_members++].client = *out;
	return 0;
}

/* Whether the map must be read before routing slot (cl->mu held). */
static int must_refresh(const dlock__cluster *cl, uint16_t slot)
{
	int due = dlock__now_ms() - cl->refreshed_at >= REFRESH_MIN_MS;

	if (cl->map == NULL)
		return 1;
	return due && (cl->stale || dlock__slotmap_primary(cl->map, slot) < 0);
}

int dlock__cluster_route(dlock__cluster *cl, const char *key, size_t len, dlock_client **out)
{
	uint16_t slot = dlock__key_slot(key, len);
	int rc = 0, idx;

	*out = NULL;
	dlock__mutex_lock(&cl->mu);
	if (must_refresh(cl, slot) && (cl->map == NULL || !read_in_background(cl))) {
		dlock__mutex_unlock(&cl->mu);
		rc = dlock__cluster_refresh(
				cl, dlock__deadline_in(cl->host.root->connect_timeout_ms));
		dlock__mutex_lock(&cl->mu);
	}
	idx = cl->map != NULL ? dlock__slotmap_primary(cl->map, slot) : -1;
	if (idx >= 0)
		rc = member_at(cl, dlock__slotmap_host(cl->map, idx),
				dlock__slotmap_port(cl->map, idx), out);
	else if (rc == 0)
		rc = dlock__seterr(DLOCK_ESERVER,
				"%s: no node serves slot %u (the cluster is down or resharding); "
				"retried until the wait ends",
				cl->host.root->label, slot);
	dlock__mutex_unlock(&cl->mu);
	return rc;
}

/* "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>": 1 MOVED, 2 ASK, 0 neither. */
static int parse_redirect(const redisReply *r, unsigned *slot, char *host, int *port)
{
	char kind[8];
	const char *colon;

	if (r == NULL || r->type != REDIS_REPLY_ERROR || r->str == NULL ||
			sscanf(r->str, "%7s %u %255s", kind, slot, host) != 3 ||
			*slot >= DLOCK__SLOTS)
		return 0;
	if (strcmp(kind, "MOVED") != 0 && strcmp(kind, "ASK") != 0)
		return 0;
	colon = strrchr(host, ':');
	if (colon == NULL || colon == host)
		return 0;
	*port = atoi(colon + 1);
	host[colon - host] = '\0';
	return kind[0] == 'M' ? 1 : 2;
}

/* Follow a redirect: *m becomes the node it names. 1 MOVED, 2 ASK, 0 none, < 0 error. */
int dlock__cluster_follow(dlock__cluster *cl, const redisReply *r, dlock_client **m)
{
	char host[HOST_MAX];
	unsigned slot;
	int port, kind = parse_redirect(r, &slot, host, &port), rc;

	if (kind == 0)
		return 0;
	dlock__mutex_lock(&cl->mu);
	if (kind == 1 && cl->map != NULL &&
			dlock__slotmap_moved(cl->map, (uint16_t)slot, host, port) >= 0)
		cl->stale = 1; /* one slot moved: others may have; read the map when due */
	rc = member_at(cl, host, port, m);
	dlock__mutex_unlock(&cl->mu);
	return rc < 0 ? rc : kind;
}

/* TRYAGAIN (a multi-key command while its slot moves) and CLUSTERDOWN: not
 * run, and worth another go in a moment. */
static int busy(const redisReply *r)
{
	return dlock__reply_is_error(r, "TRYAGAIN") || dlock__reply_is_error(r, "CLUSTERDOWN");
}

/* Wait 10..40 ms (jittered, so clients that met the same moving slot spread
 * out) when that ends before deadline; 0 when there is no time for it. */
static int pause_before(int64_t deadline)
{
	static _Atomic unsigned seq;
	int64_t until = dlock__now_ms() + 10 +
			(int64_t)((atomic_fetch_add(&seq, 1) * 2654435761u) >> 27);

	if (until >= deadline)
		return 0;
	dlock__sleep_until(until);
	return 1;
}

int dlock__cluster_exec(dlock__cluster *cl, const char *key, size_t len, dlock__member_run run,
		void *arg, redisReply **out)
{
	int64_t deadline = dlock__deadline_in(cl->host.root->command_timeout_ms);
	dlock_client *m = NULL;
	int rc = dlock__cluster_route(cl, key, len, &m), redirects = 0, kind = 0;

	*out = NULL;
	while (rc == 0) {
		dlock__asking_next = kind == 2;
		rc = run(m, arg, out);
		dlock__asking_next = 0;
		dlock__cluster_note(cl, rc, NULL);
		if (rc < 0)
			return rc;
		if (busy(*out) && pause_before(deadline)) {
			freeReplyObject(*out);
			*out = NULL;
			kind = 0;
			rc = dlock__cluster_route(cl, key, len, &m); /* the map may have moved on */
			continue;
		}
		kind = dlock__cluster_follow(cl, *out, &m);
		if (kind == 0)
			return 0; /* a reply (maybe TRYAGAIN past the deadline: the caller's wait retries) */
		freeReplyObject(*out);
		*out = NULL;
		if (kind < 0)
			return kind;
		if (++redirects > DLOCK__MAX_REDIRECTS)
			return dlock__seterr(DLOCK_ESERVER,
					"%s: more than %d MOVED/ASK redirects for slot %u "
					"(resharding under way?)",
					cl->host.root->label, DLOCK__MAX_REDIRECTS,
					dlock__key_slot(key, len));
	}
	return rc;
}

void dlock__cluster_note(dlock__cluster *cl, int rc, const redisReply *r)
{
	dlock_client *ignored = NULL;

	if (rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT) {
		dlock__mutex_lock(&cl->mu);
		cl->stale = 1; /* a primary may have failed over */
		dlock__mutex_unlock(&cl->mu);
	}
	if (r != NULL)
		(void)dlock__cluster_follow(cl, r, &ignored);
}

void dlock__cluster_each_member(
		dlock__cluster *cl, void (*fn)(dlock_client *member, void *arg), void *arg)
{
	size_t i;

	dlock__mutex_lock(&cl->mu);
	for (i = 0; i < cl->n_members; i++)
		fn(cl->members[i].client, arg);
	dlock__mutex_unlock(&cl->mu);
}

int dlock__cluster_answered(dlock__cluster *cl)
{
	int known;

	dlock__mutex_lock(&cl->mu);
	known = cl->map != NULL;
	dlock__mutex_unlock(&cl->mu);
	return known;
}

int dlock__cluster_same(const dlock__cluster *a, const dlock__cluster *b)
{
	size_t i, j;

	for (i = 0; i < a->n_seeds; i++)
		for (j = 0; j < b->n_seeds; j++)
			if (a->seed_ports[i] == b->seed_ports[j] &&
					strcmp(a->seed_hosts[i], b->seed_hosts[j]) == 0)
				return 1;
	return 0;
}
