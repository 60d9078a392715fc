/* SPDX-License-Identifier: BSD-3-Clause */
/* A Sentinel-managed primary: what the sentinels said, and when to ask again
 * (see sentinel.h; sentinel_ask.c asks them). */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/net/conn.h"
#include "core/base/error.h"
#include "core/topology/sentinel.h"
#include "core/base/time.h"

#define HOST_MAX 256

struct dlock__sentinel {
	char *master;
	size_t n;
	dlock__node *nodes; /* one per sentinel, as the URI lists them */
	char *user, *password;

	pthread_mutex_t mu; /* guards what follows */
	size_t *order;      /* indexes into nodes: the one that answered last first */
	char host[HOST_MAX];
	int port;
	int known;      /* host/port hold an answer */
	int stale;      /* ... that may be out of date: ask before the next connect */
	uint64_t epoch; /* bumped when the address changes */
};

static int copy_opt(char **dst, const char *src)
{
	if (src == NULL)
		return 0;
	*dst = dlock__strndup(src, strlen(src));
	return *dst == NULL ? DLOCK_ENOMEM : 0;
}

static void init_node(dlock__sentinel *s, size_t i, dlock__uri *u, const dlock__sentinel_opts *o)
{
	dlock__node *sn = &s->nodes[i];

	sn->host = u->hosts[i];
	u->hosts[i] = NULL;
	sn->port = u->ports[i];
	sn->user = s->password != NULL ? s->user : NULL;
	sn->password = s->password;
	sn->connect_timeout_ms = o->connect_timeout_ms;
	sn->command_timeout_ms = o->command_timeout_ms;
	snprintf(sn->label, sizeof(sn->label),
			strchr(sn->host, ':') ? "sentinel [%.255s]:%d" : "sentinel %.255s:%d",
			sn->host, sn->port);
	s->order[i] = i;
}

int dlock__sentinel_new(dlock__sentinel **out, dlock__uri *u, const dlock__sentinel_opts *o)
{
	dlock__sentinel *s = dlock__calloc(1, sizeof(*s));

	*out = NULL;
	if (s == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "client: out of memory");
	if (pthread_mutex_init(&s->mu, NULL) != 0)
		abort();
	s->nodes = dlock__calloc(u->n_hosts, sizeof(*s->nodes));
	s->order = dlock__calloc(u->n_hosts, sizeof(*s->order));
	if (s->nodes == NULL || s->order == NULL || copy_opt(&s->user, o->user) < 0 ||
			copy_opt(&s->password, o->password) < 0) {
		dlock__sentinel_free(s);
		return dlock__seterr(DLOCK_ENOMEM, "client: out of memory");
	}
	s->master = u->master;
	u->master = NULL;
	for (s->n = 0; s->n < u->n_hosts; s->n++)
		init_node(s, s->n, u, o);
	*out = s;
	return 0;
}

void dlock__sentinel_free(dlock__sentinel *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n; i++)
		dlock__free(s->nodes[i].host);
	dlock__free(s->nodes);
	dlock__free(s->order);
	dlock__free(s->master);
	dlock__free(s->user);
	dlock__free(s->password);
	pthread_mutex_destroy(&s->mu);
	dlock__free(s);
}

const char *dlock__sentinel_master(const dlock__sentinel *s)
{
	return s->master;
}

size_t dlock__sentinel_count(const dlock__sentinel *s)
{
	return s->n;
}

const dlock__node *dlock__sentinel_node(const dlock__sentinel *s, size_t i)
{
	return &s->nodes[i];
}

uint64_t dlock__sentinel_epoch(dlock__sentinel *s)
{
	uint64_t epoch;

	dlock__mutex_lock(&s->mu);
	epoch = s->epoch;
	dlock__mutex_unlock(&s->mu);
	return epoch;
}

void dlock__sentinel_suspect(dlock__sentinel *s)
{
	dlock__mutex_lock(&s->mu);
	s->stale = 1;
	dlock__mutex_unlock(&s->mu);
}

/* Take host:port as the primary's address (s->mu held). */
static void adopt(dlock__sentinel *s, const char *host, int port)
{
	if (!s->known || s->port != port || strcmp(s->host, host) != 0)
		s->epoch++;
	snprintf(s->host, sizeof(s->host), "%s", host);
	s->port = port;
	s->known = 1;
	s->stale = 0;
}

/* Sentinel k answered: ask it first from now on (s->mu held). */
static void move_to_front(dlock__sentinel *s, size_t k)
{
	size_t i;

	for (i = 0; i < s->n && s->order[i] != k; i++)
		;
	for (; i > 0; i--)
		s->order[i] = s->order[i - 1];
	s->order[0] = k;
}

void dlock__sentinel_order(dlock__sentinel *s, size_t *order, size_t *n)
{
	dlock__mutex_lock(&s->mu);
	*n = s->n < DLOCK__SENTINELS_MAX ? s->n : DLOCK__SENTINELS_MAX;
	memcpy(order, s->order, *n * sizeof(*order));
	dlock__mutex_unlock(&s->mu);
}

void dlock__sentinel_named(dlock__sentinel *s, size_t k, const char *host, int port)
{
	dlock__mutex_lock(&s->mu);
	adopt(s, host, port);
	move_to_front(s, k);
	dlock__mutex_unlock(&s->mu);
}

int dlock__sentinel_cached(dlock__sentinel *s, char *host, size_t hostlen, int *port,
		uint64_t *epoch)
{
	int fresh;

	dlock__mutex_lock(&s->mu);
	fresh = s->known && !s->stale;
	if (fresh) {
		snprintf(host, hostlen, "%s", s->host);
		*port = s->port;
		*epoch = s->epoch;
	}
	dlock__mutex_unlock(&s->mu);
	return fresh;
}

/* Copy an announcement's text as a C string; 0 when it is too long to be one. */
static int announcement(char *buf, size_t size, const char *text, size_t len)
{
	if (len >= size)
		return 0;
	memcpy(buf, text, len);
	buf[len] = '\0';
	return 1;
}

/* The primary named `name` is now at ip:port: adopt it when it is ours. */
static int moved(dlock__sentinel *s, const char *name, const char *ip, int port)
{
	if (strcmp(name, s->master) != 0 || port < 1 || port > 65535)
		return 0;
	dlock__mutex_lock(&s->mu);
	adopt(s, ip, port);
	dlock__mutex_unlock(&s->mu);
	return 1;
}

/* "<name> <old-ip> <old-port> <new-ip> <new-port>" */
int dlock__sentinel_switched(dlock__sentinel *s, const char *text, size_t len)
{
	char buf[1024], name[HOST_MAX], old_ip[HOST_MAX], new_ip[HOST_MAX];
	int old_port, new_port;

	return announcement(buf, sizeof(buf), text, len) &&
			sscanf(buf, "%255s %255s %d %255s %d", name, old_ip, &old_port, new_ip,
					&new_port) == 5 &&
			moved(s, name, new_ip, new_port);
}

/* "slave <ip>:<port> <ip> <port> @ <name> <old-ip> <old-port>" */
int dlock__sentinel_promoted(dlock__sentinel *s, const char *text, size_t len)
{
	char buf[1024], name[HOST_MAX], new_ip[HOST_MAX];
	int new_port;

	return announcement(buf, sizeof(buf), text, len) &&
			sscanf(buf, "slave %*s %255s %d @ %255s", new_ip, &new_port, name) == 3 &&
			moved(s, name, new_ip, new_port);
}

int dlock__sentinel_same(const dlock__sentinel *a, const dlock__sentinel *b)
{
	size_t i, j;

	if (strcmp(a->master, b->master) != 0)
		return 0;
	for (i = 0; i < a->n; i++)
		for (j = 0; j < b->n; j++)
			if (a->nodes[i].port == b->nodes[j].port &&
					strcmp(a->nodes[i].host, b->nodes[j].host) == 0)
				return 1;
	return 0;
}
