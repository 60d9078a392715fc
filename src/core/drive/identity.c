/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which server a node is, whatever it was called: two spellings of one
 * server (127.0.0.1:P and localhost:P, a socket path and a link to it) must
 * not count twice in a quorum. Before connecting, by address (a resolved
 * host and port, a socket's real path); once connected, by the run_id the
 * server gave (the handshake's INFO), which also sees through a Sentinel's
 * answer, a NAT, or a server's TCP port and socket.
 */
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/base/sys.h"
#include "core/drive/client.h"
#include "core/topology/cluster.h"
#include "core/base/error.h"
#include "core/topology/sentinel.h"

/* One resolved address, as text: the same server's two spellings meet here. */
static void addr_text(const struct addrinfo *ai, char *buf, size_t len)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host), port, sizeof(port),
			    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(buf, len, "?");
	else
		snprintf(buf, len, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
}

static int same_sockaddr(const struct addrinfo *a, const struct addrinfo *b)
{
	if (a->ai_family != b->ai_family)
		return 0;
	if (a->ai_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a->ai_addr, *y = (const void *)b->ai_addr;

		return x->sin_port == y->sin_port &&
				memcmp(&x->sin_addr, &y->sin_addr, sizeof(x->sin_addr)) == 0;
	}
	if (a->ai_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a->ai_addr, *y = (const void *)b->ai_addr;

		return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
				memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
	}
	return 0;
}

static struct addrinfo *resolve(const dlock__node *n)
{
	struct addrinfo hints, *res = NULL;
	char port[16];

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%d", n->port);
	return dlock__sys_get()->resolve(n->host, port, &hints, &res) == 0 ? res : NULL;
}

/* Two TCP nodes share an address once resolved (a name that does not
 * resolve shares none: its connections fail anyway). */
static int same_tcp(const dlock__node *x, const dlock__node *y, char *where, size_t len)
{
	struct addrinfo *rx, *ry, *a, *b;
	int same = 0;

	if (x->port != y->port)
		return 0;
	if (strcmp(x->host, y->host) == 0) {
		snprintf(where, len, "%s", x->label);
		return 1;
	}
	rx = resolve(x);
	ry = rx != NULL ? resolve(y) : NULL;
	for (a = rx; a != NULL && !same; a = a->ai_next)
		for (b = ry; b != NULL && !same; b = b->ai_next)
			if ((same = same_sockaddr(a, b)) != 0)
				addr_text(a, where, len);
	if (rx != NULL)
		dlock__sys_get()->resolve_free(rx);
	if (ry != NULL)
		dlock__sys_get()->resolve_free(ry);
	return same;
}

/* Two socket paths name one file (a link, "..", a double slash). */
static int same_unix(const dlock__node *x, const dlock__node *y, char *where, size_t len)
{
	char rx[PATH_MAX], ry[PATH_MAX];
	const char *px = realpath(x->path, rx) != NULL ? rx : x->path;
	const char *py = realpath(y->path, ry) != NULL ? ry : y->path;

	if (strcmp(px, py) != 0)
		return 0;
	snprintf(where, len, "unix:%s", px);
	return 1;
}

int dlock__node_same_server(const dlock__node *x, const dlock__node *y, char *where, size_t len)
{
	if (x->cluster != NULL || y->cluster != NULL) {
		snprintf(where, len, "one cluster");
		return x->cluster != NULL && y->cluster != NULL &&
				dlock__cluster_same(x->cluster, y->cluster);
	}
	if (x->sentinel != NULL || y->sentinel != NULL) {
		snprintf(where, len, "one Sentinel-managed primary");
		return x->sentinel != NULL && y->sentinel != NULL &&
				dlock__sentinel_same(x->sentinel, y->sentinel);
	}
	if (x->path != NULL || y->path != NULL)
		return x->path != NULL && y->path != NULL && same_unix(x, y, where, len);
	return same_tcp(x, y, where, len);
}

void dlock__client_note_run_id(dlock_client *c, const dlock__conn *conn)
{
	if (conn->run_id[0] == '\0')
		return;
	dlock__mutex_lock(&c->pool_mu);
	memcpy(c->run_id, conn->run_id, sizeof(c->run_id));
	dlock__mutex_unlock(&c->pool_mu);
}

int dlock__client_run_id(dlock_client *c, char out[41])
{
	out[0] = '\0';
	if (c->node.cluster != NULL) /* connects nowhere: its members know theirs */
		return 0;
	dlock__mutex_lock(&c->pool_mu);
	memcpy(out, c->run_id, 41);
	dlock__mutex_unlock(&c->pool_mu);
	return out[0] != '\0';
}
