/* SPDX-License-Identifier: BSD-3-Clause */
/* One connection's commands: send, read one reply with a deadline, close
 * (connecting is core/net/connect.c). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fd_kept.h"
#include "core/base/sys.h"
#include "core/loop/loop.h"
#include "core/net/conn.h"
#include "core/net/resolve.h"
#include "core/base/error.h"
#include "core/base/time.h"

void dlock__node_suspect(const dlock__node *node)
{
	if (node->finder.suspect != NULL)
		node->finder.suspect(node->finder.self);
}

int dlock__conn_fail(dlock__conn *c, int code, const char *what, const char *why)
{
	c->broken = 1;
	dlock__node_suspect(c->node); /* the primary may have moved */
	return dlock__seterr_node(code, c->label, "%s: %s", what, why);
}

void dlock__conn_refused(dlock__conn *c)
{
	atomic_store((_Atomic int *)&c->node->refused, 1);
}

/* The first bytes on c: its server answers (a wait rides out its later failures). */
static void note_answer(dlock__conn *c)
{
	c->answered = 1;
	atomic_store((_Atomic int *)&c->node->answered, 1);
	atomic_store((_Atomic int *)&c->node->refused, 0);
}

/* recv()/send() through TLS when the node has it; EAGAIN sets c->want. */
static ssize_t io_read(dlock__conn *c, void *buf, size_t len)
{
	ssize_t n = c->tls ? c->tls_ops->read(c, buf, len)
			   : dlock__sys_get()->recv(c->fd, buf, len);

	if (n < 0 && !c->tls && (errno == EAGAIN || errno == EWOULDBLOCK))
		c->want = POLLIN;
	return n;
}

static ssize_t io_write(dlock__conn *c, const void *buf, size_t len)
{
	ssize_t n = c->tls ? c->tls_ops->write(c, buf, len)
			   : dlock__sys_get()->send(c->fd, buf, len);

	if (n < 0 && !c->tls && (errno == EAGAIN || errno == EWOULDBLOCK))
		c->want = POLLOUT;
	return n;
}

/* Why the last io_read/io_write failed. */
static const char *io_strerror(const dlock__conn *c)
{
	return c->tls && errno == EPROTO ? c->tls_ops->strerror() : strerror(errno);
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
	return c->tls != NULL && c->tls_ops->pending(c);
}

void dlock__conn_give_up(dlock__conn *c, int replies)
{
	dlock__node_suspect(c->node); /* a paused primary may be replaced */
	if (c->owed == 0)
		c->owed_since = dlock__now_ms();
	c->discard += replies;
	c->owed += replies;
	atomic_fetch_add((_Atomic int *)&c->node->owed, replies);
}

void dlock__conn_close(dlock__conn *c)
{
	if (c == NULL)
		return;
	dlock__resolve_drop(c->lookup); /* nothing posted after this */
	if (c->finding != NULL)
		c->node->finder.drop(c->finding); /* nor after this */
	if (c->owed > 0) /* a closed connection's debts die with it */
		atomic_fetch_sub((_Atomic int *)&c->node->owed, c->owed);
	if (c->tls != NULL)
		c->tls_ops->close(c);
	dlock__fd_close(c->fd); /* out of an epoll set that kept it first */
	if (c->reader != NULL)
		redisReaderFree(c->reader);
	dlock__free(c->out);
	dlock__free(c->kept);
	dlock__free(c);
}

/* Send of buf[*done..len) what the socket takes now (nothing waits: the
 * caller's loop says when it takes more). *done counts what went out, even
 * on failure. */
static int send_all(dlock__conn *c, const char *buf, size_t len, size_t *done,
		const char *what)
{
	while (*done < len) {
		ssize_t n = io_write(c, buf + *done, len - *done);

		if (n > 0) {
			*done += (size_t)n;
			atomic_fetch_add_explicit((_Atomic uint64_t *)&c->node->writes, 1, memory_order_relaxed);
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return 0; /* the rest goes out when the loop says the socket is writable */
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			char why[320];

			return dlock__conn_fail(
					c, DLOCK_ECONN, what, io_failed_why(c, n, why, sizeof why));
		}
	}
	return 0;
}

/* Send the output buffer (see send_all); what did not go out stays queued. */
static int send_out(dlock__conn *c, const char *what)
{
	size_t done = 0;
	int rc = send_all(c, c->out, c->out_len, &done, what);

	memmove(c->out, c->out + done, c->out_len - done);
	c->out_len -= done;
	return rc;
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

/* Make room for `need` more bytes in *buf (its length *len, capacity *cap). */
static int grow(char **buf, size_t len, size_t *cap, size_t need)
{
	size_t c = *cap ? *cap : 512;
	char *grown;

	if (len + need <= *cap)
		return 0;
	while (c < len + need)
		c *= 2;
	grown = dlock__realloc(*buf, c);
	if (grown == NULL)
		return DLOCK_ENOMEM;
	*buf = grown;
	*cap = c;
	return 0;
}

int dlock__resp_append(char **buf, size_t *len, size_t *cap, int argc, const char **argv,
		const size_t *lens)
{
	size_t need = 16, i;
	char *p;

	for (i = 0; i < (size_t)argc; i++)
		need += lens[i] + 32;
	if (grow(buf, *len, cap, need) < 0)
		return DLOCK_ENOMEM;
	p = *buf + *len;
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
	*len = (size_t)(p - *buf);
	return 0;
}

int dlock__bytes_append(char **buf, size_t *len, size_t *cap, const char *bytes, size_t n)
{
	if (grow(buf, *len, cap, n) < 0)
		return DLOCK_ENOMEM;
	memcpy(*buf + *len, bytes, n);
	*len += n;
	return 0;
}

/* Append one command to the connection's output buffer. */
static int format_command(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
	return dlock__resp_append(&c->out, &c->out_len, &c->out_cap, argc, argv, lens);
}

int dlock__conn_send(dlock__conn *c, int argc, const char **argv, const size_t *lens,
		const char *what, int64_t deadline)
{
	int rc;

	(void)deadline; /* never waits */
	if (c->broken)
		return dlock__conn_fail(c, DLOCK_ECONN, what, "connection already failed");
	if (format_command(c, argc, argv, lens) < 0)
		return dlock__seterr_node(DLOCK_ENOMEM, c->label, "%s: out of memory", what);
	rc = send_out(c, what);
	if (rc < 0)
		c->out_len = 0; /* broken: never sent */
	return rc;
}

int dlock__conn_push(dlock__conn *c, const char *what)
{
	if (c->broken)
		return dlock__conn_fail(c, DLOCK_ECONN, what, "connection already failed");
	return send_out(c, what);
}

int dlock__conn_queue(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
	if (c->broken)
		return DLOCK_ECONN;
	return format_command(c, argc, argv, lens) < 0 ? DLOCK_ENOMEM : 0;
}

int dlock__conn_defer(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
	int rc = dlock__conn_queue(c, argc, argv, lens);

	if (rc < 0)
		return rc;
	c->discard++;
	return 0;
}

/* The reply to a pipelined AUTH or SELECT: any refusal fails the connection. */
/* ROLE's reply starts with "master" on a primary. */
static int is_primary(const redisReply *r)
{
	return r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
			r->element[0]->type == REDIS_REPLY_STRING &&
			strcmp(r->element[0]->str, "master") == 0;
}

static const char *check_name(int code)
{
	return code == DLOCK_EAUTH ? "AUTH" : code == DLOCK__CHECK_ROLE ? "ROLE" : "SELECT";
}

/* INFO server's "run_id:<40 hex>" line, kept in c->run_id. */
static void note_run_id(dlock__conn *c, const redisReply *r)
{
	const char *p;
	size_t n = 0;

	if (r->type != REDIS_REPLY_STRING)
		return;
	if ((p = strstr(r->str, "\nrun_id:")) == NULL)
		return;
	p += strlen("\nrun_id:");
	while (n < sizeof(c->run_id) - 1 && p[n] != '\r' && p[n] != '\n' && p[n] != '\0')
		n++;
	memcpy(c->run_id, p, n);
	c->run_id[n] = '\0';
}

/* The reply to a pipelined AUTH, SELECT, ROLE or INFO of the handshake. */
static int take_check(dlock__conn *c, redisReply *r)
{
	int code = c->checks[0], rc = 0;

	memmove(c->checks, c->checks + 1, sizeof(c->checks) - sizeof(c->checks[0]));
	c->nchecks--;
	if (code == DLOCK__CHECK_RUN_ID)
		note_run_id(c, r);
	else if (r->type == REDIS_REPLY_ERROR)
		rc = dlock__conn_fail(c, code == DLOCK__CHECK_ROLE ? DLOCK_ESERVER : code,
				check_name(code), r->str);
	else if (code == DLOCK__CHECK_ROLE && !is_primary(r))
		rc = dlock__conn_fail(c, DLOCK_ECONN, "ROLE",
				"not the primary (the sentinels' answer was out of date: a failover "
				"is under way); asking the sentinels again");
	freeReplyObject(r);
	return rc;
}

/* A reply nobody waits for any more; given-up replies come first (they
 * were asked for first), so it settles the oldest debt. */
static void skip_discarded(dlock__conn *c, redisReply *r)
{
	freeReplyObject(r);
	c->discard--;
	if (c->owed > 0) {
		c->owed--;
		atomic_fetch_sub((_Atomic int *)&c->node->owed, 1);
		if (c->owed == 0) /* every command given up has answered: the kept ones ran */
			c->kept_len = 0, c->kept_n = 0;
	}
}

/* Bytes that are not RESP as the first a server sent: it is no Redis
 * server (a web server, ssh, ... on that port). Its first line, shown. */
static int not_redis(dlock__conn *c, const char *first, size_t n)
{
	char shown[64];
	size_t i, len = 0;

	for (i = 0; i < n && first[i] != '\r' && first[i] != '\n' && len + 5 < sizeof(shown);
			i++) {
		unsigned char ch = (unsigned char)first[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
			shown[len++] = (char)ch;
		else
			len += (size_t)snprintf(shown + len, sizeof(shown) - len, "\\x%02x", ch);
	}
	shown[len] = '\0';
	c->broken = 1;
	dlock__node_suspect(c->node); /* a Sentinel's or Cluster's answer may be out of date */
	return dlock__seterr_node(DLOCK_EPROTO, c->label,
			"does not speak the Redis protocol (it answered \"%s%s\"): is this "
			"the Redis server's port?",
			shown, i < n && first[i] != '\r' && first[i] != '\n' ? "..." : "");
}

int dlock__conn_read(dlock__conn *c, redisReply **out, const char *what, int64_t deadline)
{
	(void)deadline; /* never waits */
	char buf[16384];
	void *reply = NULL;
	ssize_t first = 0; /* bytes in buf when they are the first the server sent */

	*out = NULL;
	for (;;) {
		ssize_t n;

		if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
			if (first > 0)
				return not_redis(c, buf, (size_t)first);
			return dlock__conn_fail(c, DLOCK_EPROTO, what,
					c->reader->errstr[0] ? c->reader->errstr : "unreadable reply");
		}
		if (reply != NULL && c->nchecks > 0) {
			int rc = take_check(c, reply);

			reply = NULL;
			if (rc < 0)
				return rc;
			continue;
		}
		if (reply != NULL && c->discard > 0) {
			skip_discarded(c, reply);
			reply = NULL;
			continue;
		}
		if (reply != NULL && c->node->finder.find != NULL &&
				dlock__reply_is_error(reply, "READONLY")) {
			freeReplyObject(reply);
			return dlock__conn_fail(c, DLOCK_ECONN, what,
					"READONLY: this server is a replica now (failover); asking the "
					"sentinels for the new primary");
		}
		if (reply != NULL) {
			*out = reply;
			return 0;
		}
		n = io_read(c, buf, sizeof(buf));
		first = 0;
		if (n > 0) {
			if (!c->answered) {
				note_answer(c);
				first = n;
			}
			if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
				return dlock__conn_fail(c, DLOCK_EPROTO, what, "unreadable reply");
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			char why[320];

			return dlock__conn_fail(
					c, DLOCK_ECONN, what, io_failed_why(c, n, why, sizeof why));
		}
		return DLOCK__AGAIN; /* the loop calls back when more comes */
	}
}

void dlock__conn_ask(dlock__conn *c)
{
	const char *argv[1] = { "ASKING" };
	size_t lens[1] = { 6 };

	if (c->asking)
		(void)dlock__conn_defer(c, 1, argv, lens); /* out of memory: ASK again, bounded */
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

/*
 * The error a script's redis.call raised, out of Redis 6's wrapping of it:
 * "ERR Error running script (call to f_...): @user_script:1: WRONGTYPE ..."
 * (and for a write on a replica "...: @user_script: 1: -READONLY ...").
 * Redis 7 replies with the inner error itself. NULL when not wrapped.
 */
static const char *script_error(const char *s)
{
	static const char wrapped[] = "ERR Error running script";
	const char *p;

	if (strncmp(s, wrapped, sizeof(wrapped) - 1) != 0)
		return NULL;
	p = s + sizeof(wrapped) - 1;
	while ((p = strstr(p, "@user_script")) != NULL) {
		p += sizeof("@user_script") - 1;
		p += strspn(p, ": 0123456789");
		if (*p == '-')
			p++;
		if (strncmp(p, "@user_script", sizeof("@user_script") - 1) != 0)
			return p;
	}
	return NULL;
}

int dlock__reply_is_error(const redisReply *r, const char *prefix)
{
	size_t n = strlen(prefix);
	const char *inner;

	if (r == NULL || r->type != REDIS_REPLY_ERROR || r->str == NULL)
		return 0;
	if (strncmp(r->str, prefix, n) == 0)
		return 1;
	inner = script_error(r->str);
	return inner != NULL && strncmp(inner, prefix, n) == 0;
}

/* How the single/ scripts refuse a key of another kind (scripts.h: refuse). */
static const char kind_refusal[] = "WRONGTYPE dlock: ";

int dlock__reply_check(const dlock__node *node, const redisReply *r, const char *what)
{
	int code = DLOCK_ESERVER;

	if (r == NULL)
		return dlock__seterr_node(DLOCK_EPROTO, node->label, "%s: no reply", what);
	if (r->type != REDIS_REPLY_ERROR)
		return 0;
	/* A script's own refusal of another kind's key says it all:
	 * "WRONGTYPE "k" is a ..., not a ...". */
	if (r->str != NULL && strncmp(r->str, kind_refusal, sizeof(kind_refusal) - 1) == 0)
		return dlock__seterr_node(DLOCK_EWRONGTYPE, node->label, "WRONGTYPE %s",
				r->str + sizeof(kind_refusal) - 1);
	if (dlock__reply_is_error(r, "WRONGTYPE"))
		code = DLOCK_EWRONGTYPE;
	else if (dlock__reply_is_error(r, "NOAUTH") || dlock__reply_is_error(r, "WRONGPASS"))
		code = DLOCK_EAUTH;
	else if (dlock__reply_is_error(r, "ERR Protocol error: unauthenticated"))
		/* A long command before AUTH: Redis answers this, not NOAUTH, and
		 * hangs up. The cause is the same: no password was given. */
		return dlock__seterr_node(DLOCK_EAUTH, node->label,
				"%s: NOAUTH Authentication required (Redis said \"%s\")", what,
				r->str);
	return dlock__seterr_node(code, node->label, "%s: %s", what, r->str ? r->str : "error");
}
