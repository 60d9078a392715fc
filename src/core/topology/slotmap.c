/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The slot map itself (see slotmap.h): primaries appended, slots pointed at
 * them, the MOVED patch and the accessors. Reading replies is in
 * slotmap_parse.c.
 */
#include <string.h>
#include <strings.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/topology/slot.h"
#include "core/topology/slotmap.h"

#define HOST_MAX_LEN 255
#define ID_MAX_LEN 256

typedef struct slotmap_primary {
	dlock__slotnode node;
	size_t n_replicas, cap_replicas;
	dlock__slotnode *replicas;
} slotmap_primary;

struct dlock__slotmap {
	size_t n, cap;
	slotmap_primary *primaries;
	int16_t owner[DLOCK__SLOTS]; /* index into primaries, or -1 */
};

int dlock__slotmap_new(dlock__slotmap **out)
{
	dlock__slotmap *m = dlock__calloc(1, sizeof *m);
	if (!m)
		return dlock__seterr(DLOCK_ENOMEM, "out of memory for a slot map");
	for (size_t i = 0; i < DLOCK__SLOTS; i++)
		m->owner[i] = -1;
	*out = m;
	return 0;
}

static void node_clear(dlock__slotnode *n)
{
	dlock__free(n->host);
	dlock__free(n->id);
	n->host = n->id = NULL;
}

void dlock__slotmap_free(dlock__slotmap *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		slotmap_primary *p = &m->primaries[i];
		node_clear(&p->node);
		for (size_t r = 0; r < p->n_replicas; r++)
			node_clear(&p->replicas[r]);
		dlock__free(p->replicas);
	}
	dlock__free(m->primaries);
	dlock__free(m);
}

/* A host or id of a reply: not empty, not too long, no NUL inside. */
static int text_ok(const char *s, size_t len, size_t max)
{
	return s != NULL && len > 0 && len <= max && memchr(s, '\0', len) == NULL;
}

static int node_fill(dlock__slotnode *n, const char *host, size_t host_len, int port,
		const char *id, size_t id_len, int online)
{
	n->host = dlock__strndup(host, host_len);
	n->id = id ? dlock__strndup(id, id_len) : NULL;
	n->port = port;
	n->online = online;
	if (!n->host || (id && !n->id)) {
		node_clear(n);
		return dlock__seterr(DLOCK_ENOMEM, "out of memory for a slot map");
	}
	return 0;
}

static int same_address(const dlock__slotnode *n, const char *host, size_t host_len, int port)
{
	return n->port == port && strlen(n->host) == host_len &&
			strncasecmp(n->host, host, host_len) == 0;
}

static int same_id(const dlock__slotnode *n, const char *id, size_t id_len)
{
	return n->id && id && strlen(n->id) == id_len && memcmp(n->id, id, id_len) == 0;
}

static int check_node(const char *host, size_t host_len, int port, const char *id, size_t id_len)
{
	if (!text_ok(host, host_len, HOST_MAX_LEN))
		return dlock__seterr(DLOCK_EPROTO, "node address is empty, too long or not text");
	if (port < 1 || port > 65535)
		return dlock__seterr(DLOCK_EPROTO, "node %.*s: port %d out of range", (int)host_len,
				host, port);
	if (id && !text_ok(id, id_len, ID_MAX_LEN))
		return dlock__seterr(DLOCK_EPROTO,
				"node %.*s:%d: id is empty, too long or not text", (int)host_len,
				host, port);
	return 0;
}

/* The existing primary that is this one, -1 for none, or DLOCK_EPROTO. */
static int match_primary(const dlock__slotmap *m, const char *host, size_t host_len, int port,
		const char *id, size_t id_len)
{
	for (size_t i = 0; i < m->n; i++) {
		const dlock__slotnode *n = &m->primaries[i].node;
		int addr = same_address(n, host, host_len, port);
		int known = n->id != NULL && id != NULL;
		if (known && same_id(n, id, id_len) != addr)
			return dlock__seterr(DLOCK_EPROTO,
					"primary %.*s (%.*s:%d) is listed twice with another "
					"address or id",
					(int)id_len, id, (int)host_len, host, port);
		if (addr)
			return (int)i;
	}
	return -1;
}

int dlock__slotmap_add_primary(dlock__slotmap *m, const char *host, size_t host_len, int port,
		const char *id, size_t id_len)
{
	int rc = check_node(host, host_len, port, id, id_len);
	if (rc < 0)
		return rc;
	int found = match_primary(m, host, host_len, port, id, id_len);
	if (found != -1)
		return found;
	if (m->n >= DLOCK__SLOTMAP_MAX_PRIMARIES)
		return dlock__seterr(DLOCK_EPROTO, "more than %d primaries",
				DLOCK__SLOTMAP_MAX_PRIMARIES);
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 4;
		slotmap_primary *p = dlock__realloc(m->primaries, cap * sizeof *p);
		if (!p)
			return dlock__seterr(DLOCK_ENOMEM, "out of memory for a slot map");
		m->primaries = p;
		m->cap = cap;
	}
	slotmap_primary *p = &m->primaries[m->n];
	memset(p, 0, sizeof *p);
	rc = node_fill(&p->node, host, host_len, port, id, id_len, 1);
	if (rc < 0)
		return rc;
	return (int)m->n++;
}

int dlock__slotmap_add_replica(dlock__slotmap *m, int idx, const char *host, size_t host_len,
		int port, const char *id, size_t id_len, int online)
{
	if (idx < 0 || (size_t)idx >= m->n)
		return dlock__seterr(DLOCK_EINVAL, "no primary %d in the slot map", idx);
	int rc = check_node(host, host_len, port, id, id_len);
	if (rc < 0)
		return rc;
	slotmap_primary *p = &m->primaries[idx];
	for (size_t i = 0; i < p->n_replicas; i++)
		if (same_address(&p->replicas[i], host, host_len, port))
			return 0;
	if (p->n_replicas == p->cap_replicas) {
		size_t cap = p->cap_replicas ? p->cap_replicas * 2 : 2;
		dlock__slotnode *r = dlock__realloc(p->replicas, cap * sizeof *r);
		if (!r)
			return dlock__seterr(DLOCK_ENOMEM, "out of memory for a slot map");
		p->replicas = r;
		p->cap_replicas = cap;
	}
	rc = node_fill(&p->replicas[p->n_replicas], host, host_len, port, id, id_len, online);
	if (rc < 0)
		return rc;
	p->n_replicas++;
	return 0;
}

int dlock__slotmap_assign(dlock__slotmap *m, int start, int end, int idx)
{
	if (start < 0 || end >= DLOCK__SLOTS || start > end || idx < 0 || (size_t)idx >= m->n)
		return dlock__seterr(DLOCK_EINVAL, "slots %d-%d of primary %d out of range", start,
				end, idx);
	for (int s = start; s <= end; s++)
		if (m->owner[s] != -1 && m->owner[s] != idx)
			return dlock__seterr(DLOCK_EPROTO, "slot %d is served by two primaries", s);
	for (int s = start; s <= end; s++)
		m->owner[s] = (int16_t)idx;
	return 0;
}

int dlock__slotmap_moved(dlock__slotmap *m, uint16_t slot, const char *host, int port)
{
	if (!m || !host || !*host || port < 1 || port > 65535 || slot >= DLOCK__SLOTS)
		return dlock__seterr(DLOCK_EINVAL, "MOVED: no map, host, port or slot");
	int idx = dlock__slotmap_find(m, host, port);
	if (idx < 0)
		idx = dlock__slotmap_add_primary(m, host, strlen(host), port, NULL, 0);
	if (idx < 0)
		return idx; /* out of memory, or the map is full; the map is unchanged */
	m->owner[slot] = (int16_t)idx;
	return idx;
}

/* ---- accessors ------------------------------------------------------------ */

int dlock__slotmap_primary(const dlock__slotmap *m, uint16_t slot)
{
	return m && slot < DLOCK__SLOTS ? m->owner[slot] : -1;
}

size_t dlock__slotmap_count(const dlock__slotmap *m)
{
	return m ? m->n : 0;
}

const dlock__slotnode *dlock__slotmap_node(const dlock__slotmap *m, int idx)
{
	return m && idx >= 0 && (size_t)idx < m->n ? &m->primaries[idx].node : NULL;
}

const char *dlock__slotmap_host(const dlock__slotmap *m, int idx)
{
	const dlock__slotnode *n = dlock__slotmap_node(m, idx);
	return n ? n->host : NULL;
}

int dlock__slotmap_port(const dlock__slotmap *m, int idx)
{
	const dlock__slotnode *n = dlock__slotmap_node(m, idx);
	return n ? n->port : -1;
}

size_t dlock__slotmap_replica_count(const dlock__slotmap *m, int idx)
{
	return dlock__slotmap_node(m, idx) ? m->primaries[idx].n_replicas : 0;
}

const dlock__slotnode *dlock__slotmap_replica(const dlock__slotmap *m, int idx, size_t i)
{
	if (i >= dlock__slotmap_replica_count(m, idx))
		return NULL;
	return &m->primaries[idx].replicas[i];
}

size_t dlock__slotmap_served(const dlock__slotmap *m, int idx)
{
	size_t n = 0;
	if (!dlock__slotmap_node(m, idx))
		return 0;
	for (size_t s = 0; s < DLOCK__SLOTS; s++)
		n += m->owner[s] == idx;
	return n;
}

size_t dlock__slotmap_covered(const dlock__slotmap *m)
{
	size_t n = 0;
	for (size_t s = 0; m && s < DLOCK__SLOTS; s++)
		n += m->owner[s] >= 0;
	return n;
}

int dlock__slotmap_find(const dlock__slotmap *m, const char *host, int port)
{
	if (!m || !host)
		return -1;
	size_t len = strlen(host);
	for (size_t i = 0; i < m->n; i++)
		if (same_address(&m->primaries[i].node, host, len, port))
			return (int)i;
	return -1;
}
