/* SPDX-License-Identifier: BSD-3-Clause */
/* A Sentinel-managed primary: asking the sentinels where it is (see sentinel.h). */
#include <pthread.h>
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

static void init_node(dlock__sentinel *s, size_t i, dlock__uri *u, const dlock_client_options *o)
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

int dlock__sentinel_new(dlock__sentinel **out, dlock__uri *u, const dlock_client_options *o)
{
	dlock__sentinel *s = dlock__calloc(1, sizeof(*s));

	*out = NULL;
	if (s == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "client: out of memory");
	if (pthread_mutex_init(&s->mu, NULL) != 0)
		abort();
	s->nodes = dlock__calloc(u->n_hosts, sizeof(*s->nodes));
	s->order = dlock__calloc(u->n_hosts, sizeof(*s->order));
	if (s->nodes == NULL || s->order == NULL || copy_opt(&s->user, o->sentinel_user) < 0 ||
			copy_opt(&s->password, o->sentinel_password) < 0) {
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

/* The reply to GET-MASTER-ADDR-BY-NAME: [ip, port], or nil for a name it does not monitor. */
static int read_address(const dlock__sentinel *s, const dlock__node *sn, const redisReply *r,
		char *host, size_t hostlen, int *port)
{
	int rc = dlock__reply_check(sn, r, "SENTINEL GET-MASTER-ADDR-BY-NAME");
	long p;

	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_NIL)
		return dlock__seterr_node(DLOCK_ESERVER, sn->label,
				"monitors no primary named \"%s\" (check the name after the sentinels "
				"in the URI)",
				s->master);
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
			r->element[0]->type != REDIS_REPLY_STRING ||
			r->element[1]->type != REDIS_REPLY_STRING || r->element[0]->len >= hostlen)
		return dlock__seterr_node(DLOCK_EPROTO, sn->label,
				"SENTINEL GET-MASTER-ADDR-BY-NAME: not an [ip, port] reply");
	p = strtol(r->element[1]->str, NULL, 10);
	if (p < 1 || p > 65535)
		return dlock__seterr_node(DLOCK_EPROTO, sn->label,
				"SENTINEL GET-MASTER-ADDR-BY-NAME: bad port in the reply");
	memcpy(host, r->element[0]->str, r->element[0]->len + 1);
	*port = (int)p;
	return 0;
}

/* Ask one sentinel where the primary is, before deadline. */
static int ask(const dlock__sentinel *s, const dlock__node *sn, int64_t deadline, char *host,
		size_t hostlen, int *port)
{
	const char *argv[3] = { "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s->master };
	size_t lens[3] = { 8, 23, strlen(s->master) };
	dlock__conn *c = NULL;
	redisReply *r = NULL;
	int rc = dlock__conn_open(&c, sn, deadline);

	if (rc < 0)
		return rc;
	rc = dlock__conn_command(
			c, &r, 3, argv, lens, "SENTINEL GET-MASTER-ADDR-BY-NAME", deadline);
	if (rc == 0)
		rc = read_address(s, sn, r, host, hostlen, port);
	freeReplyObject(r);
	dlock__conn_close(c);
	return rc;
}

/*
 * Ask the sentinels in order until one names the primary; each gets an even
 * share of what is left of the deadline, so a hung one cannot use it all.
 */
static int resolve(dlock__sentinel *s, int64_t deadline, char *host, int *port)
{
	char why[DLOCK__ERRMSG_MAX] = "no time left to ask";
	size_t order[16], n = s->n < 16 ? s->n : 16, tried;
	int rc = DLOCK_ETIMEDOUT;

	dlock__mutex_lock(&s->mu);
	memcpy(order, s->order, n * sizeof(*order));
	dlock__mutex_unlock(&s->mu);
	for (tried = 0; tried < n; tried++) {
		int64_t now = dlock__now_ms();

		if (now >= deadline)
			break;
		rc = ask(s, &s->nodes[order[tried]], now + (deadline - now) / (int64_t)(n - tried),
				host, HOST_MAX, port);
		if (rc == 0) {
			dlock__mutex_lock(&s->mu);
			adopt(s, host, *port);
			move_to_front(s, order[tried]);
			dlock__mutex_unlock(&s->mu);
			return 0;
		}
		snprintf(why, sizeof(why), "%s", dlock__errmsg_thread());
	}
	return dlock__seterr(rc,
			"sentinel:%s: no sentinel named the primary (%zu of %zu asked): %s",
			s->master, tried, s->n, why);
}

int dlock__sentinel_primary(dlock__sentinel *s, int64_t deadline, char *host, size_t hostlen,
		int *port, uint64_t *epoch)
{
	char found[HOST_MAX];
	int rc = 0;

	dlock__mutex_lock(&s->mu);
	if (!s->known || s->stale) {
		dlock__mutex_unlock(&s->mu);
		rc = resolve(s, deadline, found, port);
		dlock__mutex_lock(&s->mu);
	}
	if (rc == 0) {
		snprintf(host, hostlen, "%s", s->host);
		*port = s->port;
		*epoch = s->epoch;
	}
	dlock__mutex_unlock(&s->mu);
	return rc;
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

static int find_primary(void *self, int64_t deadline, char *host, size_t hostlen, int *port,
		uint64_t *epoch)
{
	return dlock__sentinel_primary(self, deadline, host, hostlen, port, epoch);
}

static void suspect_primary(void *self)
{
	dlock__sentinel_suspect(self);
}

dlock__finder dlock__sentinel_finder(dlock__sentinel *s)
{
	dlock__finder f = { find_primary, suspect_primary, s };

	return f;
}
