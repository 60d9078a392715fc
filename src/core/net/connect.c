/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connecting one connection: TCP or a Unix socket, non-blocking, then for a
 * TLS node the handshake (core/net/tls.c), then AUTH and SELECT pipelined -
 * all within the connect deadline, in steps the multiplexer can drive.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/sys.h"
#include "core/loop/loop.h"
#include "core/net/conn.h"
#include "core/base/error.h"
#include "core/net/resolve.h"
#include "core/base/time.h"
#include "core/net/tls.h"

/* On a connected socket of a TLS node: the handshake is the rest of connecting. */
static int start_tls(dlock__conn *c)
{
	int rc;

	if (c->node->tls == NULL)
		return 0;
	rc = dlock__tls_start(c, c->node->tls);
	if (rc == 0)
		c->connecting = 1;
	return rc;
}

/* A non-blocking connect to a Unix socket; c->connecting when under way. */
static int connect_unix(dlock__conn *c)
{
	struct sockaddr_un sa;
	size_t n = strlen(c->node->path);

	if (n >= sizeof sa.sun_path)
		return dlock__conn_fail(c, DLOCK_EINVAL, "connect", "socket path too long");
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, c->node->path, n + 1);
	c->fd = dlock__sys_get()->socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return dlock__conn_fail(c, DLOCK_ESYS, "socket", strerror(errno));
	if (dlock__sys_get()->connect(c->fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
		c->tcp_up = 1;
		return 0;
	}
	/* A full listen backlog answers EAGAIN; wait for it like a TCP connect. */
	if (errno == EINPROGRESS || errno == EAGAIN) {
		c->connecting = 1;
		c->want = POLLOUT;
		return 0;
	}
	return dlock__conn_fail(c, DLOCK_ECONN, "connect", strerror(errno));
}

/* A node that moves (Sentinel): messages name the primary it reached. */
static void name_target(dlock__conn *c, const char *host, int port)
{
	snprintf(c->addr_label, sizeof(c->addr_label),
			strchr(host, ':') ? "%.40s ([%.255s]:%d)" : "%.40s (%.255s:%d)",
			c->node->label, host, port);
	c->label = c->addr_label;
}

/* The sentinels are asked until a tenth of the connect timeout is left:
 * connecting to the primary they name needs the rest, and a hung one is
 * then reported by name, not as a connect timeout. */
static int64_t find_by(const dlock__conn *c, int64_t deadline)
{
	return deadline - c->node->connect_timeout_ms / 10;
}

/* A node that moves (Sentinel): the address its finder gives, before deadline. */
static int found_target(dlock__conn *c, int64_t deadline, char *host, size_t len, int *port)
{
	const dlock__finder *f = &c->node->finder;
	int rc = f->find(f->self, find_by(c, deadline), host, len, port, &c->epoch);

	if (rc == 0)
		name_target(c, host, *port);
	return rc;
}

/* Start a non-blocking connect to the first of res's addresses that takes
 * one (res is freed); c->connecting when it is under way. */
static int connect_addresses(dlock__conn *c, struct addrinfo *res)
{
	const dlock__sys *sys = dlock__sys_get();
	struct addrinfo *ai;
	int err = ECONNREFUSED;

	for (ai = res; ai != NULL; ai = ai->ai_next) {
		int one = 1;

		c->fd = sys->socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				ai->ai_protocol);
		if (c->fd < 0) {
			err = errno;
			continue;
		}
		sys->sockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (sys->connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			c->tcp_up = 1;
			break;
		}
		if (errno == EINPROGRESS) {
			c->connecting = 1;
			c->want = POLLOUT;
			break;
		}
		err = errno;
		sys->close(c->fd);
		c->fd = -1;
	}
	sys->resolve_free(res);
	if (c->fd < 0)
		return dlock__conn_fail(c, DLOCK_ECONN, "connect", strerror(err));
	return c->tcp_up ? start_tls(c) : 0;
}

static int lookup_failed(dlock__conn *c, int rc, const char *why)
{
	return dlock__conn_fail(
			c, rc, rc == DLOCK_ETIMEDOUT ? "name lookup" : "name does not resolve", why);
}

/* Look host up and start a non-blocking connect. On a loop (c->wake_loop
 * set) a host name is looked up without waiting: c->lookup, and no
 * descriptor yet, until the lookup's end posts c->wake there. */
static int connect_to(dlock__conn *c, const char *host, int tcp_port, int64_t deadline)
{
	struct addrinfo *res = NULL;
	const char *why = NULL;
	int rc;

	if (c->wake_loop != NULL)
		rc = dlock__resolve_start(host, tcp_port, c->wake_loop, c->wake, &res, &c->lookup, &why);
	else
		rc = dlock__resolve(host, tcp_port, deadline, &res, &why);
	if (rc < 0)
		return lookup_failed(c, rc, why);
	if (c->lookup == NULL) {
		c->wake_loop = NULL;
		c->wake = NULL;
		return connect_addresses(c, res);
	}
	c->connecting = 1;
	c->want = 0; /* nothing to watch until the name is found */
	return 0;
}

/*
 * Find the address and start a non-blocking connect; c->connecting when it
 * is under way. On a loop a moving node's address is asked for without
 * waiting: c->finding, no descriptor yet, until its end posts c->wake.
 */
static int connect_start(dlock__conn *c, int64_t deadline)
{
	const dlock__finder *f = &c->node->finder;
	char found[256];
	int rc, tcp_port = c->node->port;

	if (c->node->path != NULL)
		return connect_unix(c);
	if (c->node->cluster != NULL) /* a bug: commands go to the cluster's members */
		return dlock__conn_fail(c, DLOCK_EINVAL, "connect",
				"a cluster client connects through its members only");
	if (f->find == NULL)
		return connect_to(c, c->node->host, tcp_port, deadline);
	if (c->wake_loop != NULL && f->start != NULL) {
		rc = f->start(f->self, c->wake_loop, c->wake, find_by(c, deadline), &c->finding);
		if (rc < 0 || c->finding != NULL) {
			c->connecting = c->finding != NULL;
			c->want = 0; /* nothing to watch until the sentinels answer */
			return rc;
		}
	}
	rc = found_target(c, deadline, found, sizeof(found), &tcp_port);
	return rc < 0 ? rc : connect_to(c, found, tcp_port, deadline);
}

/* The sentinels' answer under way: 1 not over yet; 0 the connect started
 * (or done); or the failure. */
static int finding_done(dlock__conn *c)
{
	const dlock__finder *f = &c->node->finder;
	char found[256];
	int port = 0, rc;

	if (!f->over(c->finding))
		return 1;
	rc = f->take(c->finding, found, sizeof(found), &port, &c->epoch);
	c->finding = NULL;
	c->connecting = 0;
	if (rc < 0) {
		c->broken = 1;
		c->wake_loop = NULL;
		c->wake = NULL;
		return rc;
	}
	name_target(c, found, port);
	return connect_to(c, found, port, 0);
}

/* The lookup under way: 1 not over yet; 0 the connect started (or done);
 * or the failure. */
static int lookup_done(dlock__conn *c)
{
	struct addrinfo *res = NULL;
	const char *why = NULL;
	int rc = dlock__resolve_take(c->lookup, &res, &why);

	if (rc == 1)
		return 1;
	c->lookup = NULL;
	c->wake_loop = NULL; /* told once: the connection may outlive the run */
	c->wake = NULL;
	if (rc < 0)
		return lookup_failed(c, rc, why);
	c->connecting = 0;
	return connect_addresses(c, res);
}

/* The socket's connect finished: did it succeed? Then a TLS node starts its handshake. */
static int tcp_connected(dlock__conn *c)
{
	int err = dlock__sys_get()->connect_error(c->fd);

	if (err < 0)
		err = errno;
	if (err != 0)
		return dlock__conn_fail(c, DLOCK_ECONN, "connect", strerror(err));
	c->tcp_up = 1;
	return start_tls(c);
}

int dlock__conn_connected(dlock__conn *c)
{
	int rc = 0;

	if (!c->connecting)
		return 0;
	if (c->finding != NULL) {
		rc = finding_done(c);
		if (rc != 0)
			return rc > 0 ? 0 : rc;
		if (c->lookup != NULL || !c->connecting || !c->tcp_up)
			return 0; /* a name to look up, connected at once, or poll */
	} else if (c->lookup != NULL) {
		rc = lookup_done(c);
		if (rc != 0)
			return rc > 0 ? 0 : rc;
		if (!c->connecting || !c->tcp_up)
			return 0; /* connected at once, or poll for the connect */
	}
	if (!c->tcp_up)
		rc = tcp_connected(c);
	if (rc == 0 && c->tls != NULL)
		rc = dlock__tls_handshake(c);
	if (rc == DLOCK__AGAIN)
		return 0; /* still connecting: poll for c->want */
	if (rc == 0)
		c->connecting = 0;
	return rc;
}

/* Start connecting; a Sentinel-managed node's address is found before deadline. */
static int conn_start(dlock__conn **out, const dlock__node *node, int64_t deadline,
		dlock__loop *loop, dlock__task *wake)
{
	dlock__conn *c;
	int rc;

	*out = NULL;
	c = dlock__calloc(1, sizeof(*c));
	if (c == NULL)
		return dlock__seterr_node(DLOCK_ENOMEM, node->label, "connect: out of memory");
	c->fd = -1;
	c->node = node;
	c->label = node->label;
	c->wake_loop = loop;
	c->wake = wake;
	c->reader = redisReaderCreate();
	if (c->reader == NULL) {
		dlock__free(c);
		return dlock__seterr_node(DLOCK_ENOMEM, node->label, "connect: out of memory");
	}
	rc = connect_start(c, deadline);
	if (rc < 0) {
		dlock__conn_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

int dlock__conn_start(dlock__conn **out, const dlock__node *node)
{
	return conn_start(out, node, dlock__deadline_in(node->connect_timeout_ms), NULL, NULL);
}

int dlock__conn_start_on(dlock__conn **out, const dlock__node *node, dlock__loop *loop,
		dlock__task *wake)
{
	return conn_start(out, node, dlock__deadline_in(node->connect_timeout_ms), loop, wake);
}

int dlock__conn_lookup_over(const dlock__conn *c)
{
	if (c->finding != NULL)
		return c->node->finder.over(c->finding);
	return c->lookup != NULL && dlock__resolve_over(c->lookup);
}

int dlock__conn_looking_up(const dlock__conn *c)
{
	return c->lookup != NULL || c->finding != NULL;
}

int dlock__conn_send_handshake(dlock__conn *c, int64_t deadline)
{
	int rc = 0;

	c->greeted = 1;

	if (c->node->password != NULL) {
		const char *argv[3] = { "AUTH", c->node->user, c->node->password };
		size_t lens[3] = { 4, 0, strlen(c->node->password) };
		int argc = 3;

		if (c->node->user != NULL) {
			lens[1] = strlen(c->node->user);
		} else {
			argv[1] = c->node->password;
			lens[1] = lens[2];
			argc = 2;
		}
		rc = dlock__conn_send(c, argc, argv, lens, "AUTH", deadline);
		if (rc == 0)
			c->checks[c->nchecks++] = DLOCK_EAUTH;
	}
	if (rc == 0 && c->node->db != 0) {
		char db[16];
		const char *argv[2] = { "SELECT", db };
		size_t lens[2] = { 6, 0 };

		lens[1] = (size_t)snprintf(db, sizeof(db), "%d", c->node->db);
		rc = dlock__conn_send(c, 2, argv, lens, "SELECT", deadline);
		if (rc == 0)
			c->checks[c->nchecks++] = DLOCK_ESERVER;
	}
	if (rc == 0 && c->node->finder.find != NULL) {
		/* A sentinel's answer may be stale: confirm that this is the primary. */
		const char *role = "ROLE";
		size_t len = 4;

		rc = dlock__conn_send(c, 1, &role, &len, "ROLE", deadline);
		if (rc == 0)
			c->checks[c->nchecks++] = DLOCK__CHECK_ROLE;
	}
	if (rc == 0) {
		/* Which server this is, whatever name reached it: a MultiLock or
		 * RedLock refuses two members on one server (multilock/servers.c).
		 * Queued, not sent: it rides with the first command. */
		const char *argv[2] = { "INFO", "server" };
		size_t lens[2] = { 4, 6 };

		rc = dlock__conn_queue(c, 2, argv, lens);
		if (rc == 0)
			c->checks[c->nchecks++] = DLOCK__CHECK_RUN_ID;
	}
	return rc;
}
