/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading CLUSTER SHARDS and CLUSTER SLOTS replies into a slot map (see
 * slotmap.h). A reply comes from a server we do not control (a proxy, a
 * fork, another version), so every element is checked for its type and
 * range before it is used; anything unexpected is DLOCK_EPROTO with the
 * place it was found, never a guess.
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/topology/slot.h"
#include "core/topology/slotmap.h"

#ifdef REDIS_REPLY_MAP
#define IS_MAP(r) ((r)->type == REDIS_REPLY_MAP) /* RESP3 with hiredis >= 1.0 */
#else
#define IS_MAP(r) 0
#endif

/* ---- reply shapes ------------------------------------------------------------ */

static int is_text(const redisReply *r)
{
	return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS;
}

static int text_is(const redisReply *r, const char *s)
{
	size_t n = strlen(s);
	return is_text(r) && r->len == n && memcmp(r->str, s, n) == 0;
}

/* An array (or map) whose elements are all there. */
static int list_ok(const redisReply *r)
{
	if (!r || (r->type != REDIS_REPLY_ARRAY && !IS_MAP(r)))
		return 0;
	for (size_t i = 0; i < r->elements; i++)
		if (!r->element || !r->element[i])
			return 0;
	return 1;
}

/* Alternating field names and values (RESP2), or a map (RESP3). */
static int fields_ok(const redisReply *r)
{
	if (!list_ok(r) || r->elements % 2 != 0)
		return 0;
	for (size_t i = 0; i < r->elements; i += 2)
		if (!is_text(r->element[i]))
			return 0;
	return 1;
}

/* The value of field `name` (the first if repeated), NULL when absent. */
static const redisReply *field(const redisReply *r, const char *name)
{
	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (text_is(r->element[i], name))
			return r->element[i + 1];
	return NULL;
}

static int bad(const char *where, const char *what)
{
	return dlock__seterr(DLOCK_EPROTO, "%s: %s", where, what);
}

/* Put `where` before the message a building block set (never for ENOMEM). */
static int at(int rc, const char *where)
{
	if (rc >= 0 || rc == DLOCK_ENOMEM)
		return rc;
	char msg[DLOCK__ERRMSG_MAX];
	snprintf(msg, sizeof msg, "%s", dlock__errmsg_thread());
	return dlock__seterr(rc, "%s: %s", where, msg);
}

/* A usable address text: not empty, not "?" (unknown). */
static int usable(const redisReply *r)
{
	return r && is_text(r) && r->len > 0 && !text_is(r, "?");
}

/* A slot range from two integer replies; 0 or DLOCK_EPROTO. */
static int read_range(
		const redisReply *a, const redisReply *b, int *start, int *end, const char *where)
{
	if (a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER)
		return bad(where, "a slot is not an integer");
	if (a->integer < 0 || b->integer >= DLOCK__SLOTS || a->integer > b->integer)
		return bad(where, "a slot range is out of order or out of 0-16383");
	*start = (int)a->integer;
	*end = (int)b->integer;
	return 0;
}

static int common_top(const redisReply *r, const char *cmd)
{
	if (r->type == REDIS_REPLY_ERROR)
		return dlock__seterr(DLOCK_ESERVER, "%s: %.*s", cmd, (int)r->len, r->str);
	if (!list_ok(r))
		return bad(cmd, "the reply is not an array");
	return 0;
}

/* ---- CLUSTER SHARDS -------------------------------------------------------- */

typedef struct shard_node {
	const char *host; /* NULL: no usable address */
	size_t host_len;
	int port; /* 0: none of the kind wanted */
	const char *id;
	size_t id_len;
	int primary, online;
} shard_node;

/* The node's address by the rules in slotmap.h. */
static void shard_node_host(shard_node *o, const redisReply *n, const char *asked_host)
{
	const redisReply *ip = field(n, "ip"), *endpoint = field(n, "endpoint");
	const redisReply *use = NULL;
	if (usable(endpoint))
		use = endpoint;
	else if (endpoint && !text_is(endpoint, "?") && asked_host && *asked_host)
		o->host = asked_host; /* NULL or empty: the host that was asked */
	else if (usable(ip))
		use = ip;
	else if (!endpoint && asked_host && *asked_host)
		o->host = asked_host;
	if (use) {
		o->host = use->str;
		o->host_len = use->len;
	} else if (o->host) {
		o->host_len = strlen(o->host);
	}
}

static int shard_node_read(shard_node *o, const redisReply *n, const char *asked_host, int tls,
		const char *where)
{
	memset(o, 0, sizeof *o);
	if (!fields_ok(n))
		return bad(where, "a node is not a list of fields");
	const redisReply *id = field(n, "id"), *role = field(n, "role");
	const redisReply *health = field(n, "health"), *ip = field(n, "ip");
	const redisReply *endpoint = field(n, "endpoint");
	const redisReply *port = field(n, tls ? "tls-port" : "port");
	const redisReply *other = field(n, tls ? "port" : "tls-port");
	if ((id && !is_text(id)) || (health && !is_text(health)) ||
			(ip && !is_text(ip) && ip->type != REDIS_REPLY_NIL) ||
			(endpoint && !is_text(endpoint) && endpoint->type != REDIS_REPLY_NIL))
		return bad(where, "id, health, ip or endpoint is not a string");
	if ((port && port->type != REDIS_REPLY_INTEGER) ||
			(other && other->type != REDIS_REPLY_INTEGER))
		return bad(where, "a port is not an integer");
	if ((port && (port->integer < 0 || port->integer > 65535)) ||
			(other && (other->integer < 0 || other->integer > 65535)))
		return bad(where, "a port is out of range");
	if (!role || !is_text(role))
		return bad(where, "the node's role is missing or not a string");
	if (text_is(role, "master") || text_is(role, "primary"))
		o->primary = 1;
	else if (!text_is(role, "replica") && !text_is(role, "slave"))
		return bad(where, "the node's role is neither master nor replica");
	o->online = !health || text_is(health, "online");
	o->port = port ? (int)port->integer : 0;
	if (id) {
		o->id = id->str;
		o->id_len = id->len;
	}
	shard_node_host(o, n, asked_host);
	return 0;
}

/* Check the shard's slot list; *n_ranges is how many start/end pairs it has. */
static int shard_slots(const redisReply *slots, size_t *n_ranges, const char *where)
{
	if (!slots || !list_ok(slots) || slots->elements % 2 != 0)
		return bad(where, "\"slots\" is not a list of start/end pairs");
	for (size_t i = 0; i < slots->elements; i += 2) {
		int start, end;
		int rc = read_range(slots->element[i], slots->element[i + 1], &start, &end, where);
		if (rc < 0)
			return rc;
	}
	*n_ranges = slots->elements / 2;
	return 0;
}

/* Validate every node; *primary is the node serving the shard, or -1. */
static int shard_pick(const redisReply *nodes, const char *asked_host, int tls, int *primary,
		const char *where)
{
	if (!nodes || !list_ok(nodes))
		return bad(where, "\"nodes\" is not a list");
	int online = -1, any = -1;
	for (size_t j = 0; j < nodes->elements; j++) {
		char here[128];
		snprintf(here, sizeof here, "%s node %zu", where, j);
		shard_node n;
		int rc = shard_node_read(&n, nodes->element[j], asked_host, tls, here);
		if (rc < 0)
			return rc;
		if (n.primary && online < 0 && n.online)
			online = (int)j;
		if (n.primary && any < 0)
			any = (int)j;
	}
	*primary = online >= 0 ? online : any;
	return 0;
}

static int shard_add(dlock__slotmap *m, const redisReply *shard, const char *asked_host, int tls,
		const char *where)
{
	const redisReply *slots = field(shard, "slots"), *nodes = field(shard, "nodes");
	size_t n_ranges = 0;
	int pick = -1, rc = shard_slots(slots, &n_ranges, where);
	if (rc == 0)
		rc = shard_pick(nodes, asked_host, tls, &pick, where);
	if (rc < 0 || n_ranges == 0)
		return rc; /* a shard without slots is left out */
	if (pick < 0)
		return bad(where, "the shard has slots and no primary");
	shard_node p;
	rc = shard_node_read(&p, nodes->element[pick], asked_host, tls, where);
	if (rc < 0)
		return rc;
	if (!p.host || p.port == 0)
		return bad(where,
				tls ? "the primary has no address or no tls-port"
				    : "the primary has no address or no port");
	int idx = at(dlock__slotmap_add_primary(m, p.host, p.host_len, p.port, p.id, p.id_len),
			where);
	if (idx < 0)
		return idx;
	for (size_t i = 0; i < slots->elements; i += 2) {
		int start = (int)slots->element[i]->integer,
		    end = (int)slots->element[i + 1]->integer;
		rc = at(dlock__slotmap_assign(m, start, end, idx), where);
		if (rc < 0)
			return rc;
	}
	for (size_t j = 0; j < nodes->elements; j++) {
		shard_node r;
		rc = shard_node_read(&r, nodes->element[j], asked_host, tls, where);
		if (rc < 0)
			return rc;
		if (r.primary || !r.host || r.port == 0)
			continue; /* the other primaries of a shard, and replicas we cannot reach */
		rc = at(dlock__slotmap_add_replica(m, idx, r.host, r.host_len, r.port, r.id,
					r.id_len, r.online),
				where);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int dlock__slotmap_from_shards(
		dlock__slotmap **out, const redisReply *r, const char *asked_host, int tls)
{
	if (out)
		*out = NULL;
	if (!out || !r)
		return dlock__seterr(DLOCK_EINVAL, "CLUSTER SHARDS: no reply");
	int rc = common_top(r, "CLUSTER SHARDS");
	dlock__slotmap *m = NULL;
	if (rc == 0)
		rc = dlock__slotmap_new(&m);
	for (size_t i = 0; rc == 0 && i < r->elements; i++) {
		char where[64];
		snprintf(where, sizeof where, "CLUSTER SHARDS: shard %zu", i);
		if (!fields_ok(r->element[i]))
			rc = bad(where, "the shard is not a list of fields");
		else
			rc = shard_add(m, r->element[i], asked_host, tls, where);
	}
	if (rc < 0) {
		dlock__slotmap_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

/* ---- CLUSTER SLOTS ------------------------------------------------------------ */

/* One node [endpoint, port, id?, metadata?]; *host NULL when unknown ("?"). */
static int slots_node(const redisReply *n, const char *asked_host, shard_node *o, const char *where)
{
	memset(o, 0, sizeof *o);
	o->online = 1;
	if (!list_ok(n) || n->elements < 2)
		return bad(where, "a node is not [endpoint, port, ...]");
	const redisReply *host = n->element[0], *port = n->element[1];
	const redisReply *id = n->elements > 2 ? n->element[2] : NULL;
	if ((!is_text(host) && host->type != REDIS_REPLY_NIL) || (id && !is_text(id)))
		return bad(where, "a node's endpoint or id is not a string");
	if (port->type != REDIS_REPLY_INTEGER || port->integer < 1 || port->integer > 65535)
		return bad(where, "a node's port is not an integer in 1-65535");
	o->port = (int)port->integer;
	if (id) {
		o->id = id->str;
		o->id_len = id->len;
	}
	if (usable(host)) {
		o->host = host->str;
		o->host_len = host->len;
	} else if (!text_is(host, "?") && asked_host && *asked_host) {
		o->host = asked_host; /* NULL or empty: the host that was asked */
		o->host_len = strlen(asked_host);
	}
	return 0;
}

static int slots_entry(
		dlock__slotmap *m, const redisReply *e, const char *asked_host, const char *where)
{
	if (!list_ok(e) || e->elements < 3)
		return bad(where, "the entry is not [start, end, primary, replica...]");
	int start = 0, end = -1, rc = read_range(e->element[0], e->element[1], &start, &end, where);
	shard_node n;
	if (rc == 0)
		rc = slots_node(e->element[2], asked_host, &n, where);
	if (rc < 0)
		return rc;
	if (!n.host)
		return bad(where, "the primary's endpoint is unknown");
	int idx = at(dlock__slotmap_add_primary(m, n.host, n.host_len, n.port, n.id, n.id_len),
			where);
	if (idx < 0)
		return idx;
	rc = at(dlock__slotmap_assign(m, start, end, idx), where);
	for (size_t k = 3; rc == 0 && k < e->elements; k++) {
		rc = slots_node(e->element[k], asked_host, &n, where);
		if (rc == 0 && n.host)
			rc = at(dlock__slotmap_add_replica(m, idx, n.host, n.host_len, n.port, n.id,
						n.id_len, 1),
					where);
	}
	return rc;
}

int dlock__slotmap_from_slots(dlock__slotmap **out, const redisReply *r, const char *asked_host)
{
	if (out)
		*out = NULL;
	if (!out || !r)
		return dlock__seterr(DLOCK_EINVAL, "CLUSTER SLOTS: no reply");
	int rc = common_top(r, "CLUSTER SLOTS");
	dlock__slotmap *m = NULL;
	if (rc == 0)
		rc = dlock__slotmap_new(&m);
	for (size_t i = 0; rc == 0 && i < r->elements; i++) {
		char where[64];
		snprintf(where, sizeof where, "CLUSTER SLOTS: entry %zu", i);
		rc = slots_entry(m, r->element[i], asked_host, where);
	}
	if (rc < 0) {
		dlock__slotmap_free(m);
		return rc;
	}
	*out = m;
	return 0;
}
