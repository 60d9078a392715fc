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

static int fail_transport(dlock__conn *c, int code, const char *what, const char *why)
{
	c->broken = 1;
	return dlock__seterr_node(code, c->node->label, "%s: %s", what, why);
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
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) == 0)
		return 0;
	/* A full listen backlog answers EAGAIN; wait for it like a TCP connect. */
	if (errno == EINPROGRESS || errno == EAGAIN) {
		c->connecting = 1;
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
		if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno == EINPROGRESS) {
			c->connecting = 1;
			break;
		}
		err = errno;
		close(c->fd);
		c->fd = -1;
	}
	freeaddrinfo(res);
	if (c->fd < 0)
		return fail_transport(c, DLOCK_ECONN, "connect", strerror(err));
	return 0;
}

int dlock__conn_connected(dlock__conn *c)
{
	socklen_t len;
	int err = 0;

	if (!c->connecting)
		return 0;
	len = sizeof(err);
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err != 0)
		return fail_transport(c, DLOCK_ECONN, "connect", strerror(err));
	c->connecting = 0;
	return 0;
}

/* Wait for a connect under way to finish, before the deadline. */
static int wait_connected(dlock__conn *c, int64_t deadline)
{
	struct pollfd p;
	int rc;

	if (!c->connecting)
		return 0;
	p.fd = c->fd;
	p.events = POLLOUT;
	do {
		p.revents = 0;
		rc = poll(&p, 1, dlock__ms_until(deadline));
	} while (rc < 0 && errno == EINTR);
	if (rc == 0)
		return fail_transport(c, DLOCK_ETIMEDOUT, "connect",
				"no answer before the connect timeout");
	if (rc < 0)
		return fail_transport(c, DLOCK_ECONN, "connect", strerror(errno));
	return dlock__conn_connected(c);
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
		ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int rc = wait_fd(c, POLLOUT, what, deadline);

			if (rc < 0)
				return rc;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			return fail_transport(c, DLOCK_ECONN, what,
					n == 0 ? "connection closed" : strerror(errno));
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
		n = recv(c->fd, buf, sizeof(buf), 0);
		if (n > 0) {
			if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
				return fail_transport(c, DLOCK_EPROTO, what, "unreadable reply");
			continue;
		}
		if (n == 0)
			return fail_transport(
					c, DLOCK_ECONN, what, "connection closed by the server");
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return fail_transport(c, DLOCK_ECONN, what, strerror(errno));
		if (deadline == 0)
			return DLOCK__AGAIN;
		{
			struct pollfd p = { c->fd, POLLIN, 0 };
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
		ssize_t n = send(c->fd, c->out + done, c->out_len - done,
				MSG_NOSIGNAL | MSG_DONTWAIT);

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
