/* SPDX-License-Identifier: BSD-3-Clause */
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
#include <fcntl.h>

#include "dlock/errors.h"
#include "core/alloc.h"
#include "core/conn.h"
#include "core/owed.h"
#include "core/error.h"
#include "core/time.h"
#include "core/tls.h"

static int fail_transport(dlock__conn *c, int code, const char *what, const char *why)
{
	c->broken = 1;
	return dlock__seterr_node(code, c->node->label, "%s: %s", what, why);
}

/* recv()/send() through TLS when the node has it; EAGAIN sets c->want. */
static ssize_t io_read(dlock__conn *c, void *buf, size_t len)
{
	ssize_t n = c->tls ? dlock__tls_read(c, buf, len) : recv(c->fd, buf, len, 0);

	if (n < 0 && !c->tls && (errno == EAGAIN || errno == EWOULDBLOCK))
		c->want = POLLIN;
	return n;
}

static ssize_t io_write(dlock__conn *c, const void *buf, size_t len)
{
	ssize_t n = c->tls ? dlock__tls_write(c, buf, len)
			   : send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (n < 0 && !c->tls && (errno == EAGAIN || errno == EWOULDBLOCK))
		c->want = POLLOUT;
	return n;
}

/* Why the last io_read/io_write failed. */
static const char *io_strerror(const dlock__conn *c)
{
	return c->tls && errno == EPROTO ? dlock__tls_strerror() : strerror(errno);
}

/*
 * Why a read or write failed (n: its result, 0 = closed). A server that
 * drops a new connection before any reply may want TLS, or (over TLS) a
 * client certificate - which TLS 1.3 refuses only after the client's side
 * of the handshake: say so.
 */
static const char *io_failed_why(const dlock__conn *c, ssize_t n, char *buf, size_t len)
{
	const char *why = n == 0 ? "connection closed by the server" : io_strerror(c);
	const char *hint = "";

	if (!c->answered && c->tls)
		hint = " before any reply (does the server require a client certificate? "
		       "tls_cert_file, --tls-cert)";
	else if (!c->answered && (n == 0 || errno == ECONNRESET))
		hint = " before any reply (if it expects TLS, use rediss://)";
	snprintf(buf, len, "%s%s", why, hint);
	return buf;
}

short dlock__conn_events(const dlock__conn *c)
{
	return c->connecting || c->tls ? c->want : POLLIN;
}

int dlock__conn_buffered(const dlock__conn *c)
{
	return dlock__tls_pending(c);
}

static int wait_fd(dlock__conn *c, short events, const char *what, int64_t deadline)
{
	struct pollfd p;
	int rc;

	p.fd = c->fd;
	p.events = events;
	for (;;) {
		p.revents = 0;
		rc = poll(&p, 1, dlock__ms_until(deadline));
		if (rc > 0)
			return 0;
		if (rc == 0)
			return fail_transport(
					c, DLOCK_ETIMEDOUT, what, "no answer before the deadline");
		if (errno != EINTR)
			return fail_transport(c, DLOCK_ECONN, what, strerror(errno));
	}
}

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
		return fail_transport(c, DLOCK_EINVAL, "connect", "socket path too long");
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, c->node->path, n + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return fail_transport(c, DLOCK_ESYS, "socket", strerror(errno));
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
		c->tcp_up = 1;
		return 0;
	}
	/* A full listen backlog answers EAGAIN; wait for it like a TCP connect. */
	if (errno == EINPROGRESS || errno == EAGAIN) {
		c->connecting = 1;
		c->want = POLLOUT;
		return 0;
	}
	return fail_transport(c, DLOCK_ECONN, "connect", strerror(errno));
}

/* Resolve and start a non-blocking connect; c->connecting when it is under way. */
static int connect_start(dlock__conn *c)
{
	struct addrinfo hints, *res = NULL, *ai;
	char port[16];
	int rc, err = ECONNREFUSED;

	if (c->node->path != NULL)
		return connect_unix(c);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%d", c->node->port);
	rc = getaddrinfo(c->node->host, port, &hints, &res);
	if (rc != 0)
		return fail_transport(c, DLOCK_ECONN, "resolve", gai_strerror(rc));

	for (ai = res; ai != NULL; ai = ai->ai_next) {
		int one = 1;

		c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				ai->ai_protocol);
		if (c->fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			c->tcp_up = 1;
			break;
		}
		if (errno == EINPROGRESS) {
			c->connecting = 1;
			c->want = POLLOUT;
			break;
		}
		err = errno;
		close(c->fd);
		c->fd = -1;
	}
	freeaddrinfo(res);
	if (c->fd < 0)
		return fail_transport(c, DLOCK_ECONN, "connect", strerror(err));
	return c->tcp_up ? start_tls(c) : 0;
}

/* The socket's connect finished: did it succeed? Then a TLS node starts its handshake. */
static int tcp_connected(dlock__conn *c)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err != 0)
		return fail_transport(c, DLOCK_ECONN, "connect", strerror(err));
	c->tcp_up = 1;
	return start_tls(c);
}

int dlock__conn_connected(dlock__conn *c)
{
	int rc = 0;

	if (!c->connecting)
		return 0;
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

/* Finish a connect (and TLS handshake) under way, before the deadline. */
static int wait_connected(dlock__conn *c, int64_t deadline)
{
	struct pollfd p;
	int rc;

	while (c->connecting) {
		p.fd = c->fd;
		p.events = c->want;
		do {
			p.revents = 0;
			rc = poll(&p, 1, dlock__ms_until(deadline));
		} while (rc < 0 && errno == EINTR);
		if (rc == 0)
			return fail_transport(c, DLOCK_ETIMEDOUT, "connect",
					c->tcp_up ? "the TLS handshake did not finish before the connect "
						    "timeout (is this the server's TLS port? a plain "
						    "port never answers it)"
						  : "no answer before the connect timeout");
		if (rc < 0)
			return fail_transport(c, DLOCK_ECONN, "connect", strerror(errno));
		rc = dlock__conn_connected(c);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* AUTH and SELECT, pipelined with a PING whose reply says they are done
 * (their own replies are checked on the way by dlock__conn_read). */
static int handshake(dlock__conn *c, int64_t deadline)
{
	const char *ping = "PING";
	size_t len = 4;
	redisReply *r = NULL;
	int rc = dlock__conn_send_handshake(c, deadline);

	if (rc < 0 || c->nchecks == 0)
		return rc;
	rc = dlock__conn_command(c, &r, 1, &ping, &len, "PING", deadline);
	freeReplyObject(r);
	return rc;
}

int dlock__conn_start(dlock__conn **out, const dlock__node *node)
{
	dlock__conn *c;
	int rc;

	*out = NULL;
	c = dlock__calloc(1, sizeof(*c));
	if (c == NULL)
		return dlock__seterr_node(DLOCK_ENOMEM, node->label, "connect: out of memory");
	c->fd = -1;
	c->node = node;
	c->reader = redisReaderCreate();
	if (c->reader == NULL) {
		dlock__free(c);
		return dlock__seterr_node(DLOCK_ENOMEM, node->label, "connect: out of memory");
	}
	rc = connect_start(c);
	if (rc < 0) {
		dlock__conn_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

int dlock__conn_send_handshake(dlock__conn *c, int64_t deadline)
{
	int rc = 0;

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
	return rc;
}

int dlock__conn_open(dlock__conn **out, const dlock__node *node, int64_t deadline)
{
	dlock__conn *c;
	int rc = dlock__conn_start(&c, node);

	*out = NULL;
	if (rc < 0)
		return rc;
	rc = wait_connected(c, deadline);
	if (rc == 0)
		rc = handshake(c, deadline);
	if (rc < 0) {
		dlock__conn_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

void dlock__conn_close(dlock__conn *c)
{
	if (c == NULL)
		return;
	if (c->owed > 0) /* a closed connection's debts die with it */
		atomic_fetch_sub((_Atomic int *)&c->node->owed, c->owed);
	if (c->tls != NULL)
		dlock__tls_close(c);
	if (c->fd >= 0)
		close(c->fd);
	if (c->reader != NULL)
		redisReaderFree(c->reader);
	dlock__free(c->out);
	dlock__free(c);
}

static int send_all(dlock__conn *c, const char *buf, size_t len, const char *what, int64_t deadline)
{
	while (len > 0) {
		ssize_t n = io_write(c, buf, len);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int rc = wait_fd(c, c->want, what, deadline);

			if (rc < 0)
				return rc;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			char why[320];

			return fail_transport(
					c, DLOCK_ECONN, what, io_failed_why(c, n, why, sizeof why));
		}
	}
	return 0;
}

/* Decimal digits of v into p (no NUL); returns how many. */
static size_t put_uint(char *p, size_t v)
{
	char tmp[24];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		p[i] = tmp[n - 1 - i];
	return n;
}

/* Append one command in RESP ("*argc", then "$len" and the bytes of each
 * argument) to the connection's output buffer. */
static int format_command(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
	size_t need = 16, i;
	char *p;

	for (i = 0; i < (size_t)argc; i++)
		need += lens[i] + 32;
	if (c->out_len + need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 512;
		char *grown;

		while (cap < c->out_len + need)
			cap *= 2;
		grown = dlock__realloc(c->out, cap);
		if (grown == NULL)
			return DLOCK_ENOMEM;
		c->out = grown;
		c->out_cap = cap;
	}
	p = c->out + c->out_len;
	*p++ = '*';
	p += put_uint(p, (size_t)argc);
	*p++ = '\r';
	*p++ = '\n';
	for (i = 0; i < (size_t)argc; i++) {
		*p++ = '$';
		p += put_uint(p, lens[i]);
		*p++ = '\r';
		*p++ = '\n';
		memcpy(p, argv[i], lens[i]);
		p += lens[i];
		*p++ = '\r';
		*p++ = '\n';
	}
	c->out_len = (size_t)(p - c->out);
	return 0;
}

int dlock__conn_send(dlock__conn *c, int argc, const char **argv, const size_t *lens,
		const char *what, int64_t deadline)
{
	int rc;

	if (c->broken)
		return fail_transport(c, DLOCK_ECONN, what, "connection already failed");
	if (format_command(c, argc, argv, lens) < 0)
		return dlock__seterr_node(DLOCK_ENOMEM, c->node->label, "%s: out of memory", what);
	rc = send_all(c, c->out, c->out_len, what, deadline);
	c->out_len = 0;
	return rc;
}

int dlock__conn_queue(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
	return c->broken || format_command(c, argc, argv, lens) < 0 ? DLOCK_ENOMEM : 0;
}

int dlock__conn_defer(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
	if (dlock__conn_queue(c, argc, argv, lens) < 0)
		return DLOCK_ENOMEM;
	c->discard++;
	return 0;
}

int dlock__conn_read(dlock__conn *c, redisReply **out, const char *what, int64_t deadline)
{
	char buf[16384];
	void *reply = NULL;

	*out = NULL;
	for (;;) {
		ssize_t n;

		if (redisReaderGetReply(c->reader, &reply) != REDIS_OK)
			return fail_transport(c, DLOCK_EPROTO, what,
					c->reader->errstr[0] ? c->reader->errstr
							     : "unreadable reply");
		if (reply != NULL && c->nchecks > 0) {
			/* A pipelined AUTH or SELECT: any refusal fails the connection. */
			redisReply *r = reply;
			int code = c->checks[0];

			reply = NULL;
			c->checks[0] = c->checks[1];
			c->nchecks--;
			if (r->type == REDIS_REPLY_ERROR) {
				int rc = dlock__seterr_node(code, c->node->label, "%s: %s",
						code == DLOCK_EAUTH ? "AUTH" : "SELECT", r->str);

				freeReplyObject(r);
				c->broken = 1;
				return rc;
			}
			freeReplyObject(r);
			continue;
		}
		if (reply != NULL && c->discard > 0) {
			freeReplyObject(reply);
			reply = NULL;
			c->discard--;
			/* Given-up replies come first: they were asked for first. */
			if (c->owed > 0) {
				c->owed--;
				atomic_fetch_sub((_Atomic int *)&c->node->owed, 1);
			}
			continue;
		}
		if (reply != NULL) {
			*out = reply;
			return 0;
		}
		n = io_read(c, buf, sizeof(buf));
		if (n > 0) {
			c->answered = 1;
			if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
				return fail_transport(c, DLOCK_EPROTO, what, "unreadable reply");
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			char why[320];

			return fail_transport(
					c, DLOCK_ECONN, what, io_failed_why(c, n, why, sizeof why));
		}
		if (deadline == 0)
			return DLOCK__AGAIN;
		{
			struct pollfd p = { c->fd, c->want, 0 };
			int rc;

			do {
				p.revents = 0;
				rc = poll(&p, 1, dlock__ms_until(deadline));
			} while (rc < 0 && errno == EINTR);
			if (rc < 0)
				return fail_transport(c, DLOCK_ECONN, what, strerror(errno));
			if (rc == 0) {
				/* Given up, not broken: the late reply is skipped when it comes. */
				dlock__conn_give_up(c, 1);
				return dlock__seterr_node(DLOCK_ETIMEDOUT, c->node->label,
						"%s: no answer within the command timeout", what);
			}
		}
	}
}

void dlock__conn_flush(dlock__conn *c)
{
	size_t done = 0;

	while (!c->broken && done < c->out_len) {
		ssize_t n = io_write(c, c->out + done, c->out_len - done);

		if (n > 0)
			done += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		else
			c->broken = 1; /* the next user finds out and reconnects */
	}
	memmove(c->out, c->out + done, c->out_len - done);
	c->out_len -= done;
}

int dlock__conn_command(dlock__conn *c, redisReply **out, int argc, const char **argv,
		const size_t *lens, const char *what, int64_t deadline)
{
	int rc = dlock__conn_send(c, argc, argv, lens, what, deadline);

	*out = NULL;
	if (rc < 0)
		return rc;
	return dlock__conn_read(c, out, what, deadline ? deadline : 1);
}

int dlock__reply_is_error(const redisReply *r, const char *prefix)
{
	size_t n = strlen(prefix);

	return r != NULL && r->type == REDIS_REPLY_ERROR && r->str != NULL &&
			strncmp(r->str, prefix, n) == 0;
}

int dlock__reply_check(const dlock__node *node, const redisReply *r, const char *what)
{
	int code = DLOCK_ESERVER;

	if (r == NULL)
		return dlock__seterr_node(DLOCK_EPROTO, node->label, "%s: no reply", what);
	if (r->type != REDIS_REPLY_ERROR)
		return 0;
	if (dlock__reply_is_error(r, "WRONGTYPE"))
		code = DLOCK_EWRONGTYPE;
	else if (dlock__reply_is_error(r, "NOAUTH") || dlock__reply_is_error(r, "WRONGPASS"))
		code = DLOCK_EAUTH;
	return dlock__seterr_node(code, node->label, "%s: %s", what, r->str ? r->str : "error");
}
