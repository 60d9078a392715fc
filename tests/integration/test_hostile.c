/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hostile input against real redis-server processes: names that are NULL,
 * empty, odd (braces, spaces, newlines, UTF-8) or huge; malformed URIs; keys
 * of the wrong type (for every operation, the fair and fenced kinds' extra
 * keys, and a RedLock member); a read-only replica; a server out of memory;
 * a wrong password on a RedLock member; an ACL user without EVAL; client
 * connections killed while locking; script caches flushed under a RedLock; a
 * server asleep (DEBUG SLEEP) past the command timeout.
 *
 * Every case checks the three promises of SPEC §6: its own clear error (the
 * code, and a one-line message naming the node), Redis left as it was (every
 * key and value compared before and after), and the client still usable (a
 * lock/unlock on a fresh name afterwards).
 *
 * test_rlock_errors.c already covers: WRONGTYPE on a string key for
 * lock/try/unlock, wrong passwords and ACL users at dlock_client_new, a
 * SCRIPT FLUSH between plain lock/unlock/force-unlock calls, a paused server,
 * single CLIENT KILLs between calls, and a short list of bad URIs. This file
 * does not repeat those; it extends them.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

/* The library's name limit (DLOCK__NAME_MAX, "at most 64 KiB" in lock.h). */
#define NAME_MAX_BYTES 65536

/* ---- helpers ------------------------------------------------------------- */

static dlock_client *open_server(rh_server *s, int command_timeout_ms)
{
	dlock_client_options o;

	cr_assert_eq(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION), 0);
	if (command_timeout_ms > 0)
		o.command_timeout_ms = command_timeout_ms;
	return dl_client_opts(rh_server_uri(s), &o);
}

static void node_of(const rh_server *s, char *buf, size_t len)
{
	snprintf(buf, len, "127.0.0.1:%d", rh_server_port(s));
}

static void ok_reply(redisReply *r, const char *what)
{
	cr_assert_not_null(r, "%s: no reply", what);
	cr_assert_neq(r->type, REDIS_REPLY_ERROR, "%s: %s", what, r->str);
	freeReplyObject(r);
}

/* EXISTS on a binary-safe key. */
static int64_t exists_b(rh_server *s, const char *key, size_t len)
{
	return rh_command_int(s, "EXISTS %b", key, len);
}

/* HGET key field as a number; -1 when absent. */
static int64_t hget_b(rh_server *s, const char *key, size_t len, const char *field)
{
	redisReply *r = rh_command(s, "HGET %b %s", key, len, field);

	cr_assert_not_null(r);
	cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL, "HGET: type %d %s",
			r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
	int64_t v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
	freeReplyObject(r);
	return v;
}

/* A number from INFO <section>: "<field>:<value>". */
static int64_t info_int(rh_server *s, const char *section, const char *field)
{
	char pat[128];
	redisReply *r = rh_command(s, "INFO %s", section);

	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING);
	snprintf(pat, sizeof pat, "\n%s:", field);
	const char *p = strstr(r->str, pat);
	cr_assert_not_null(p, "INFO %s has no %s", section, field);
	int64_t v = strtoll(p + strlen(pat), NULL, 10);
	freeReplyObject(r);
	return v;
}

static int info_has(rh_server *s, const char *section, const char *text)
{
	redisReply *r = rh_command(s, "INFO %s", section);
	int has = r != NULL && r->type == REDIS_REPLY_STRING && strstr(r->str, text) != NULL;

	if (r != NULL)
		freeReplyObject(r);
	return has;
}

/* Every key with its DUMP and whether it has a TTL: "Redis as it was". */
typedef struct snap {
	size_t n;
	char **keys;
	size_t *klen;
	char **dumps;
	size_t *dlen;
	int *ttl;
} snap;

/* A snapshot of the server's keys (a release writes none of its own). */
static void snap_take(rh_server *s, snap *out)
{
	redisReply *keys = rh_command(s, "KEYS *");

	cr_assert_not_null(keys);
	cr_assert_eq(keys->type, REDIS_REPLY_ARRAY);
	memset(out, 0, sizeof *out);
	out->n = keys->elements;
	out->keys = calloc(out->n + 1, sizeof *out->keys);
	out->klen = calloc(out->n + 1, sizeof *out->klen);
	out->dumps = calloc(out->n + 1, sizeof *out->dumps);
	out->dlen = calloc(out->n + 1, sizeof *out->dlen);
	out->ttl = calloc(out->n + 1, sizeof *out->ttl);
	cr_assert(out->keys && out->klen && out->dumps && out->dlen && out->ttl);
	for (size_t i = 0; i < out->n; i++) {
		const redisReply *k = keys->element[i];
		out->keys[i] = malloc(k->len + 1);
		cr_assert_not_null(out->keys[i]);
		memcpy(out->keys[i], k->str, k->len);
		out->keys[i][k->len] = '\0';
		out->klen[i] = k->len;
		redisReply *d = rh_command(s, "DUMP %b", k->str, k->len);
		cr_assert_not_null(d);
		if (d->type == REDIS_REPLY_STRING) {
			out->dumps[i] = malloc(d->len + 1);
			cr_assert_not_null(out->dumps[i]);
			memcpy(out->dumps[i], d->str, d->len);
			out->dlen[i] = d->len;
		}
		freeReplyObject(d);
		out->ttl[i] = rh_command_int(s, "PTTL %b", k->str, k->len) >= 0;
	}
	freeReplyObject(keys);
}

static void snap_free(snap *sn)
{
	for (size_t i = 0; i < sn->n; i++) {
		free(sn->keys[i]);
		free(sn->dumps[i]);
	}
	free(sn->keys);
	free(sn->klen);
	free(sn->dumps);
	free(sn->dlen);
	free(sn->ttl);
	memset(sn, 0, sizeof *sn);
}

static void snap_assert_same(rh_server *s, const snap *before, const char *what)
{
	snap now;

	snap_take(s, &now);
	for (size_t i = 0; i < now.n; i++) {
		size_t j;
		for (j = 0; j < before->n; j++)
			if (before->klen[j] == now.klen[i] &&
					memcmp(before->keys[j], now.keys[i], now.klen[i]) == 0)
				break;
		cr_assert_lt(j, before->n, "%s: new key \"%.80s\" (%zu bytes) appeared", what,
				now.keys[i], now.klen[i]);
		cr_assert(before->dlen[j] == now.dlen[i] &&
						memcmp(before->dumps[j], now.dumps[i],
								now.dlen[i]) == 0,
				"%s: the value of \"%.80s\" changed", what, now.keys[i]);
		cr_assert_eq(before->ttl[j], now.ttl[i], "%s: the TTL of \"%.80s\" changed", what,
				now.keys[i]);
	}
	cr_assert_eq(now.n, before->n, "%s: %zu keys before, %zu after (a key disappeared)", what,
			before->n, now.n);
	snap_free(&now);
}

/* The message is one line, names the node and contains `want`. */
static void assert_msg(const char *msg, const char *node, const char *want, const char *what)
{
	cr_assert_not_null(msg);
	cr_assert_str_neq(msg, "", "%s: empty message", what);
	cr_assert_null(strchr(msg, '\n'), "%s: message is not one line: %s", what, msg);
	if (node != NULL)
		cr_assert_not_null(strstr(msg, node), "%s: message \"%s\" should name %s", what,
				msg, node);
	if (want != NULL)
		cr_assert_not_null(strstr(msg, want), "%s: message \"%s\" should contain \"%s\"",
				what, msg, want);
}

/* The client still works: lock and unlock a fresh name, with Redis checked. */
static void fresh_cycle(rh_server *s, dlock_client *c, const char *name)
{
	char owner[64];
	dlock_lock *l = dl_lock(c, name);

	dl_owner(c, owner, sizeof owner);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "fresh lock %s: %s", name,
			dlock_lock_errmsg(l));
	cr_assert_eq(hget_b(s, name, strlen(name), owner), 1);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "fresh unlock %s: %s", name, dlock_lock_errmsg(l));
	cr_assert_eq(exists_b(s, name, strlen(name)), 0);
	dlock_lock_free(l);
}

/*
 * The start of a case on s once its own keys are in place: the node as
 * messages name it, the keys as they are now, and a client.
 */
static dlock_client *begin_case(rh_server *s, char *node, size_t len, snap *before)
{
	node_of(s, node, len);
	snap_take(s, before);
	return open_server(s, 0);
}

/*
 * The end of one: Redis as it was (unless `what` is NULL: checked already),
 * the client still works on a fresh name; then let go.
 */
static void end_case(
		rh_server *s, dlock_client *c, snap *before, const char *what, const char *fresh)
{
	if (what != NULL)
		snap_assert_same(s, before, what);
	fresh_cycle(s, c, fresh);
	snap_free(before);
	dlock_client_free(c);
}

/*
 * A client on s whose scripts are loaded (one lock and unlock of `warm`),
 * so that a refusal met next is the script's, not SCRIPT LOAD's.
 */
static dlock_client *open_warm(rh_server *s, int command_timeout_ms, const char *warm)
{
	dlock_client *c = open_server(s, command_timeout_ms);

	fresh_cycle(s, c, warm);
	return c;
}

/*
 * The server refuses a try and a lock on l with ESERVER and `code` in a
 * message naming node (`where` says why, "at maxmemory"), and the lock fails
 * at once (under 1000 ms): a refusal is not retried.
 */
static void expect_acquire_refused(dlock_lock *l, int64_t lock_lease, const char *node,
		const char *code, const char *where)
{
	char what[96];
	int rc = dlock_lock_acquire(l, NULL, 0, 10000);

	snprintf(what, sizeof what, "try %s", where);
	cr_assert_eq(rc, DLOCK_ESERVER, "%s: rc %d (%s) %s", what, rc, dlock_strerror(rc),
			dlock_lock_errmsg(l));
	assert_msg(dlock_lock_errmsg(l), node, code, what);
	cr_log_info("%s: %s", what, dlock_lock_errmsg(l));
	dl_assert_lock(l, lock_lease, DLOCK_ESERVER, 0, 999);
	snprintf(what, sizeof what, "lock %s", where);
	assert_msg(dlock_lock_errmsg(l), node, code, what);
}

/* The same for the release and the force release of holder's hold on l. */
static void expect_release_refused(dlock_lock *l, const char *holder, const char *node,
		const char *code, const char *where)
{
	char what[96];
	int deleted = -1;
	int rc = dlock_lock_release(l, holder);

	snprintf(what, sizeof what, "unlock %s", where);
	cr_assert_eq(rc, DLOCK_ESERVER, "%s: rc %d %s", what, rc, dlock_lock_errmsg(l));
	assert_msg(dlock_lock_errmsg(l), node, code, what);
	rc = dlock_lock_force_release(&deleted, l);
	snprintf(what, sizeof what, "force unlock %s", where);
	cr_assert_eq(rc, DLOCK_ESERVER, "%s: rc %d %s", what, rc, dlock_lock_errmsg(l));
	assert_msg(dlock_lock_errmsg(l), node, code, what);
}

/* A few of the server's keys with their PTTL, for failure messages. */
static void describe_keys(rh_server *s, char *buf, size_t size)
{
	redisReply *r = rh_command(s, "KEYS *");
	size_t n = 0;

	buf[0] = '\0';
	if (r == NULL || r->type != REDIS_REPLY_ARRAY)
		goto out;
	for (size_t i = 0; i < r->elements && i < 4 && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s\"%.80s\" (PTTL %" PRId64 ")",
				i ? ", " : "", r->element[i]->str,
				rh_command_int(s, "PTTL %b", r->element[i]->str,
						r->element[i]->len));
out:
	if (r != NULL)
		freeReplyObject(r);
}

/* Wait (bounded) until DBSIZE is `want`. */
static void await_dbsize(rh_server *s, int64_t want, int timeout_ms)
{
	int64_t deadline = rh_now_ms() + timeout_ms, n;
	char keys[512];

	while ((n = rh_command_int(s, "DBSIZE")) != want && rh_now_ms() < deadline)
		usleep(2 * 1000);
	if (n != want)
		describe_keys(s, keys, sizeof keys);
	cr_assert_eq(n, want, "DBSIZE %" PRId64 ", want %" PRId64 "; keys: %s", n, want, keys);
}

static char *filled_name(size_t len, char ch)
{
	char *s = malloc(len + 1);

	cr_assert_not_null(s);
	memset(s, ch, len);
	s[len] = '\0';
	return s;
}

/* redisson_<what>:{name}, or :name when the name has a brace already. */
static char *aux_key(const char *prefix, const char *name, size_t len, size_t *out_len)
{
	int braced = memchr(name, '{', len) != NULL;
	size_t plen = strlen(prefix);
	size_t n = plen + 1 + len + (braced ? 0 : 2);
	char *k = malloc(n + 1), *p = k;

	cr_assert_not_null(k);
	memcpy(p, prefix, plen);
	p += plen;
	*p++ = ':';
	if (!braced)
		*p++ = '{';
	memcpy(p, name, len);
	p += len;
	if (!braced)
		*p++ = '}';
	*p = '\0';
	*out_len = n;
	return k;
}

/* ---- 1. NULL, empty and over-long names ------------------------------------ */

typedef int (*make_fn)(dlock_lock **out, dlock_client *c, const char *name);

static int make_plain(dlock_lock **out, dlock_client *c, const char *name)
{
	return dlock_lock_new(out, c, name, NULL);
}

static int make_fenced(dlock_lock **out, dlock_client *c, const char *name)
{
	return dlock_lock_new(out, c, name, dl_kind(DLOCK_LOCK_FENCED));
}

static int make_fair(dlock_lock **out, dlock_client *c, const char *name)
{
	return dlock_lock_new(out, c, name, dl_kind(DLOCK_LOCK_FAIR));
}

static const struct kind {
	const char *label;
	make_fn make;
} kinds[] = { { "rlock", make_plain }, { "fenced", make_fenced }, { "fair", make_fair } };

#define NKINDS (sizeof kinds / sizeof kinds[0])

static void expect_bad_name(dlock_client *c, const struct kind *k, const char *name,
		const char *want, const char *what)
{
	dlock_lock *l = (dlock_lock *)0x1;
	int rc = k->make(&l, c, name);

	cr_assert_eq(rc, DLOCK_EINVAL, "%s %s: rc %d (%s)", k->label, what, rc, dlock_strerror(rc));
	cr_assert_null(l, "%s %s: *out must be NULL on failure", k->label, what);
	assert_msg(dlock_errmsg_last(), NULL, want, what);
}

/* Each test gets a fresh server (Criterion runs init/fini in its process). */
TestSuite(hostile, .init = dl_server_start, .fini = dl_server_stop);

Test(hostile, null_and_empty_names_are_einval_and_send_nothing, .timeout = 30)
{
	rh_server *s = dl_srv;
	dlock_client_options o;
	cr_assert_eq(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION), 0);
	o.lazy_connect = 1; /* anything sent would have to connect first */
	dlock_client *c = dl_client_opts(rh_server_uri(s), &o);
	int64_t conns = info_int(s, "stats", "total_connections_received");
	snap before;
	snap_take(s, &before);

	for (size_t k = 0; k < NKINDS; k++) {
		expect_bad_name(c, &kinds[k], NULL, "NULL", "NULL name");
		expect_bad_name(c, &kinds[k], "", "empty", "empty name");
		dlock_lock *l = (dlock_lock *)0x1;
		cr_assert_eq(kinds[k].make(&l, NULL, "fine"), DLOCK_EINVAL, "%s: NULL client",
				kinds[k].label);
		cr_assert_null(l);
		cr_assert_eq(kinds[k].make(NULL, c, "fine"), DLOCK_EINVAL, "%s: NULL out",
				kinds[k].label);
	}
	/* The same names through the RedLock constructor, with a valid server list. */
	const char *uris[1] = { rh_server_uri(s) };
	dlock_redlock *r = (dlock_redlock *)0x1;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, uris, 1, NULL, &o, NULL), DLOCK_EINVAL);
	cr_assert_null(r);
	r = (dlock_redlock *)0x1;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, uris, 1, "", &o, NULL), DLOCK_EINVAL);
	cr_assert_null(r);
	assert_msg(dlock_errmsg_last(), NULL, "empty", "redlock empty name");

	cr_assert_eq(info_int(s, "stats", "total_connections_received"), conns,
			"a bad name made the client connect");
	end_case(s, c, &before, "bad names", "after-bad-names");
}

Test(hostile, names_over_64k_are_einval_and_send_nothing, .timeout = 30)
{
	rh_server *s = dl_srv;
	dlock_client_options o;
	cr_assert_eq(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION), 0);
	o.lazy_connect = 1;
	dlock_client *c = dl_client_opts(rh_server_uri(s), &o);
	int64_t conns = info_int(s, "stats", "total_connections_received");
	char *just_over = filled_name(NAME_MAX_BYTES + 1, 'x');
	char *mib = filled_name(1 << 20, 'm');

	for (size_t k = 0; k < NKINDS; k++) {
		expect_bad_name(c, &kinds[k], just_over, "long", "64 KiB + 1 name");
		expect_bad_name(c, &kinds[k], mib, "long", "1 MiB name");
	}
	/* The message must not quote the whole name (it is one short line). */
	cr_assert_lt(strlen(dlock_errmsg_last()), 512);

	const char *uris[1] = { rh_server_uri(s) };
	dlock_redlock *r = (dlock_redlock *)0x1;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, uris, 1, mib, &o, NULL), DLOCK_EINVAL);
	cr_assert_null(r);
	assert_msg(dlock_errmsg_last(), NULL, "long", "redlock 1 MiB name");

	cr_assert_eq(info_int(s, "stats", "total_connections_received"), conns,
			"an over-long name made the client connect");
	cr_assert_eq(rh_command_int(s, "DBSIZE"), 0);

	fresh_cycle(s, c, "after-long-names");
	free(just_over);
	free(mib);
	dlock_client_free(c);
}

/* ---- 2. odd names round-trip ----------------------------------------------- */

/* Lock, re-enter and release `name` with every kind; check the wire and leave nothing. */
static void odd_name_round_trip(rh_server *s, dlock_client *c, const char *name)
{
	size_t len = strlen(name);
	char owner[64], what[64];
	dl_owner(c, owner, sizeof owner);
	snprintf(what, sizeof what, "name of %zu bytes \"%.20s\"", len, name);

	/* Plain RLock: the key is the name verbatim, the unlock message goes to
	 * redisson_lock__channel:{name} (or :name when it has a brace). */
	size_t chlen;
	char *channel = aux_key("redisson_lock__channel", name, len, &chlen);
	redisContext *sub = dl_raw_connect(rh_server_port(s), 3000);
	const char *sargv[2] = { "SUBSCRIBE", channel };
	size_t slens[2] = { 9, chlen };
	redisReply *r = redisCommandArgv(sub, 2, sargv, slens);
	cr_assert_not_null(r, "SUBSCRIBE: %s", sub->errstr);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	freeReplyObject(r);

	dlock_lock *l = dl_lock(c, name);
	cr_assert_eq(strcmp(dlock_lock_name(l), name), 0, "%s: dlock_lock_name differs", what);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "%s: %s", what, dlock_lock_errmsg(l));
	cr_assert_eq(hget_b(s, name, len, owner), 1, "%s: not in Redis under its exact name", what);
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0, "%s: re-enter: %s", what, dlock_lock_errmsg(l));
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(n, 2, "%s: hold count %" PRId64, what, n);
	int held = 0;
	cr_assert_eq(dlock_lock_is_held(&held, l, NULL), 0);
	cr_assert_eq(held, 1);
	cr_assert_eq(rh_command_int(s, "DBSIZE"), 1, "%s: other keys were written", what);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s: %s", what, dlock_lock_errmsg(l));
	cr_assert_eq(hget_b(s, name, len, owner), 1);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s: %s", what, dlock_lock_errmsg(l));
	cr_assert_eq(exists_b(s, name, len), 0, "%s: key left after the last unlock", what);
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ENOTOWNER);

	r = NULL;
	cr_assert_eq(redisGetReply(sub, (void **)&r), REDIS_OK,
			"%s: no unlock message on the channel", what);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->elements, 3);
	cr_assert_str_eq(r->element[0]->str, "message");
	cr_assert(r->element[1]->len == chlen && memcmp(r->element[1]->str, channel, chlen) == 0,
			"%s: message on the wrong channel", what);
	cr_assert_str_eq(r->element[2]->str, "0");
	freeReplyObject(r);
	redisFree(sub);
	free(channel);
	dlock_lock_free(l);

	/* Fenced: its counter is redisson_lock_token:{name}. */
	size_t tklen;
	char *token_key = aux_key("redisson_lock_token", name, len, &tklen);
	cr_assert_eq(dlock_lock_new(&l, c, name, dl_kind(DLOCK_LOCK_FENCED)), 0);
	int64_t token = 0;
	cr_assert_eq(dlock_lock_acquire_fenced(&token, l, NULL, 0, 10000), 0, "%s: fenced: %s", what,
			dlock_lock_errmsg(l));
	cr_assert_eq(token, 1);
	redisReply *g = rh_command(s, "GET %b", token_key, tklen);
	cr_assert_not_null(g);
	cr_assert_eq(g->type, REDIS_REPLY_STRING, "%s: no token counter under its name", what);
	cr_assert_str_eq(g->str, "1");
	freeReplyObject(g);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s: fenced: %s", what, dlock_lock_errmsg(l));
	cr_assert_eq(exists_b(s, name, len), 0);
	cr_assert_eq(rh_command_int(s, "DEL %b", token_key, tklen), 1);
	free(token_key);
	dlock_lock_free(l);

	/* Fair: the queue and deadlines are empty again afterwards. */
	cr_assert_eq(dlock_lock_new(&l, c, name, dl_kind(DLOCK_LOCK_FAIR)), 0);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "%s: fair: %s", what, dlock_lock_errmsg(l));
	cr_assert_eq(hget_b(s, name, len, owner), 1);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s: fair: %s", what, dlock_lock_errmsg(l));
	cr_assert_eq(exists_b(s, name, len), 0);
	dlock_lock_free(l);

	/* Nothing else stays (a release writes no key of its own). */
	await_dbsize(s, 0, 2000);
}

Test(hostile, odd_names_round_trip_and_leave_no_key, .timeout = 60)
{
	rh_server *s = dl_srv;
	dlock_client *c = open_server(s, 0);
	char *k1 = filled_name(1000, 'k');
	char *max = filled_name(NAME_MAX_BYTES, 'M');
	/* A maximal name that also has a brace and UTF-8 in it. */
	char *max_mixed = filled_name(NAME_MAX_BYTES, 'z');
	memcpy(max_mixed + 100, "{x}", 3);
	memcpy(max_mixed + NAME_MAX_BYTES - 6, "\xe5\x90\x8d\xe5\x89\x8d", 6);
	const char *names[] = { "a{b}c", "with space", "line\nbreak", "ünïcödé-名前", "{", "}",
		"\t\r\x01\x7f", "*", k1, max, max_mixed };

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		odd_name_round_trip(s, c, names[i]);

	fresh_cycle(s, c, "after-odd-names");
	free(k1);
	free(max);
	free(max_mixed);
	dlock_client_free(c);
}

/* ---- 3. malformed URIs at dlock_client_new ---------------------------------- */

/* `fmt` with its "PORT" replaced by the number. */
static void with_port(char *out, size_t size, const char *fmt, int port)
{
	const char *at = strstr(fmt, "PORT");

	cr_assert_not_null(at);
	int n = snprintf(out, size, "%.*s%d%s", (int)(at - fmt), fmt, port, at + 4);
	cr_assert(n > 0 && (size_t)n < size);
}

Test(hostile, malformed_uris_are_einval_and_contact_no_server, .timeout = 30)
{
	rh_server *s = dl_srv;
	int p = rh_server_port(s);
	int64_t conns = info_int(s, "stats", "total_connections_received");
	const char *secret = "Sekr1t-Pw";
	/* Every one of them has the live server's address in it somewhere. */
	const char *fmts[] = {
		"redis://127.0.0.1:PORT/abc",
		"redis://127.0.0.1:PORT/-1",
		"redis://127.0.0.1:PORT/2147483648",
		"redis://127.0.0.1:PORT/0/",
		"redis://127.0.0.1:PORT/0?timeout=1",
		"redis://127.0.0.1:PORT#frag",
		"redis://127.0.0.1:PORTx",
		"redis://127.0.0.1:PORT:1",
		"redis://127.0.0.1:+PORT",
		"redis://127.0.0.1:0PORT00000",
		"redis:/127.0.0.1:PORT",
		"redis:127.0.0.1:PORT",
		"127.0.0.1:PORT",
		"//127.0.0.1:PORT",
		"http://127.0.0.1:PORT",
		"rediss://127.0.0.1:PORT?tls=1",
		"REDISS://:Sekr1t-Pw@127.0.0.1:PORTx",
		"unix://127.0.0.1:PORT",
		"redis+sentinel://127.0.0.1:PORT",
		" redis://127.0.0.1:PORT",
		"redis://127.0.0.1:PORT ",
		"redis://127.0.0.1:PORT\n",
		"redis://127.0.0.1:PORT\r\n",
		"redis://127.0.0.1:PORT\t",
		"redis://127.0.0.1 :PORT",
		"redis://127.0.0.1:PORT/0\x7f",
		"redis://127.0.0.1,127.0.0.2:PORT",
		"redis://127.0.0.%31:PORT",
		"redis://[127.0.0.1]:PORT",
		"redis://[::1:PORT",
		"redis://[::1]]:PORT",
		"redis://:Sekr1t-Pw x@127.0.0.1:PORT",
		"redis://:Sekr1t-Pw\x01@127.0.0.1:PORT",
		"redis://:PORT",
		"redis://@:PORT",
		"redis://:Sekr1t-Pw@:PORT",
		"redis://user:Sekr1t-Pw@/PORT",
		"redis://127.0.0.1:PORT/0#",
		"redis://127.0.0.1:PORT/ 1",
		"redis://127.0.0.1:PORT/1x",
		"redis://h\xc3\xa9:PORT",
	};
	dlock_client_options o;
	cr_assert_eq(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION), 0);

	for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
		char uri[256];
		with_port(uri, sizeof uri, fmts[i], p);
		for (int lazy = 0; lazy <= 1; lazy++) {
			o.lazy_connect = lazy;
			dlock_client *c = (dlock_client *)0x1;
			int rc = dlock_client_new(&c, uri, &o);
			if (rc == 0)
				dlock_client_free(c);
			cr_assert_eq(rc, DLOCK_EINVAL, "\"%s\" (lazy %d): rc %d (%s)", uri, lazy,
					rc, dlock_strerror(rc));
			cr_assert_null(c, "\"%s\": *out must be NULL", uri);
			const char *msg = dlock_errmsg_last();
			cr_assert_str_neq(msg, "", "\"%s\": no message", uri);
			cr_assert_null(strchr(msg, '\n'), "\"%s\": message not one line: %s", uri,
					msg);
			cr_assert_null(strstr(msg, secret),
					"\"%s\": message leaks the password: %s", uri, msg);
		}
	}
	/* One malformed member in a RedLock's list: the open fails, naming its position. */
	char good[64], bad[64];
	snprintf(good, sizeof good, "redis://127.0.0.1:%d", p);
	snprintf(bad, sizeof bad, "redis://:%s@127.0.0.1:%d/x", secret, p);
	const char *list[3] = { good, good, bad };
	dlock_redlock *r = (dlock_redlock *)0x1;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, list, 3, "uri-lock", NULL, NULL),
			DLOCK_EINVAL);
	cr_assert_null(r);
	assert_msg(dlock_errmsg_last(), NULL, "server 3 of 3", "redlock bad URI");
	cr_assert_null(strstr(dlock_errmsg_last(), secret), "leaks: %s", dlock_errmsg_last());

	cr_assert_eq(info_int(s, "stats", "total_connections_received"), conns,
			"a malformed URI made a connection to the server");
	cr_assert_eq(rh_command_int(s, "DBSIZE"), 0);

	/* The check above can see a connection: a good URI makes one. */
	o.lazy_connect = 0;
	dlock_client *c = dl_client_opts(good, &o);
	cr_assert_gt(info_int(s, "stats", "total_connections_received"), conns);
	fresh_cycle(s, c, "after-bad-uris");
	dlock_client_free(c);
}

/* ---- 4. WRONGTYPE ------------------------------------------------------------ */

/* Keys of every non-hash type, without TTLs, to compare afterwards. */
static const char *const wrongtype_keys[] = { "wt:string", "wt:list", "wt:set", "wt:zset",
	"wt:stream" };
static const char *const wrongtype_make[] = { "SET wt:string x", "RPUSH wt:list a b",
	"SADD wt:set a b", "ZADD wt:zset 1 a 2 b", "XADD wt:stream 1-1 f v" };
#define NWRONG (sizeof wrongtype_keys / sizeof wrongtype_keys[0])

static void make_wrongtype_key(rh_server *s, size_t i)
{
	rh_command_int(s, "DEL %s", wrongtype_keys[i]);
	ok_reply(rh_command(s, wrongtype_make[i]), wrongtype_make[i]);
}

static void make_wrongtype_keys(rh_server *s)
{
	for (size_t i = 0; i < NWRONG; i++)
		make_wrongtype_key(s, i);
	ok_reply(rh_command(s, "SET sentinel keep"), "SET");
}

static void expect_wrongtype(int rc, dlock_lock *l, const char *node, const char *what)
{
	cr_assert_eq(rc, DLOCK_EWRONGTYPE, "%s: rc %d (%s) %s", what, rc, dlock_strerror(rc),
			dlock_lock_errmsg(l));
	assert_msg(dlock_lock_errmsg(l), node, "WRONGTYPE", what);
}

Test(hostile, wrongtype_every_operation_and_type, .timeout = 30)
{
	rh_server *s = dl_srv;
	make_wrongtype_keys(s);
	char node[64], what[96], owner[64];
	snap before;
	dlock_client *c = begin_case(s, node, sizeof node, &before);
	dl_owner(c, owner, sizeof owner);

	for (size_t i = 0; i < NWRONG; i++) {
		const char *key = wrongtype_keys[i];
		dlock_lock *l = dl_lock(c, key);
		int held = -1;
		int64_t n = -1;

		snprintf(what, sizeof what, "try on %s", key);
		expect_wrongtype(dlock_lock_acquire(l, NULL, 0, 10000), l, node, what);
		snprintf(what, sizeof what, "try(wait) on %s", key);
		expect_wrongtype(dlock_lock_acquire(l, NULL, 300, DLOCK_LEASE_WATCHDOG), l, node, what);
		snprintf(what, sizeof what, "lock on %s", key);
		expect_wrongtype(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), l, node, what);
		snprintf(what, sizeof what, "try_as on %s", key);
		expect_wrongtype(dlock_lock_acquire(l, "someone:1", 0, 10000), l, node, what);
		snprintf(what, sizeof what, "unlock on %s", key);
		expect_wrongtype(dlock_lock_release(l, NULL), l, node, what);
		snprintf(what, sizeof what, "unlock_as on %s", key);
		expect_wrongtype(dlock_lock_release(l, "someone:1"), l, node, what);
		snprintf(what, sizeof what, "is_held on %s", key);
		expect_wrongtype(dlock_lock_is_held(&held, l, NULL), l, node, what);
		cr_assert_eq(held, 0, "%s: *out must not claim a hold", what);
		snprintf(what, sizeof what, "is_held_as on %s", key);
		expect_wrongtype(dlock_lock_is_held(&held, l, owner), l, node, what);
		snprintf(what, sizeof what, "hold_count on %s", key);
		expect_wrongtype(dlock_lock_hold_count(&n, l, NULL), l, node, what);
		cr_assert_eq(n, 0, "%s: *out must not claim a hold", what);
		snprintf(what, sizeof what, "hold_count_as on %s", key);
		expect_wrongtype(dlock_lock_hold_count(&n, l, owner), l, node, what);
		/* Nothing local believes it is held. */
		cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER, "%s", key);
		dlock_lock_free(l);
	}
	end_case(s, c, &before, "WRONGTYPE operations", "after-wrongtype");
}

/*
 * dlock_lock_force_release() on a key that is not a lock: SPEC §6 says a key
 * of the wrong type gets a clear error and changes nothing, so it must not
 * DEL somebody's string, list or stream.
 */
Test(hostile, wrongtype_force_unlock_leaves_the_key, .timeout = 30)
{
	rh_server *s = dl_srv;
	make_wrongtype_keys(s);
	char node[64];
	snap before;
	dlock_client *c = begin_case(s, node, sizeof node, &before);

	/* Every key, with every kind (the fair kind has its own script). Each
	 * case is checked, and reported, on its own. */
	for (size_t k = 0; k < NKINDS; k++) {
		for (size_t i = 0; i < NWRONG; i++) {
			const char *key = wrongtype_keys[i];
			dlock_lock *l = NULL;
			int deleted = -1;

			cr_assert_eq(kinds[k].make(&l, c, key), 0);
			int rc = dlock_lock_force_release(&deleted, l);
			int64_t exists = exists_b(s, key, strlen(key));
			cr_expect_eq(exists, 1,
					"%s force_unlock on %s deleted the key (rc %d, deleted %d)",
					kinds[k].label, key, rc, deleted);
			cr_expect_eq(rc, DLOCK_EWRONGTYPE,
					"%s force_unlock on %s: rc %d (%s), deleted %d: %s",
					kinds[k].label, key, rc, dlock_strerror(rc), deleted,
					dlock_lock_errmsg(l));
			if (rc == DLOCK_EWRONGTYPE)
				assert_msg(dlock_lock_errmsg(l), node, "WRONGTYPE", key);
			dlock_lock_free(l);
			if (exists != 1) /* put it back for the next case */
				make_wrongtype_key(s, i);
		}
	}
	end_case(s, c, &before, "force_unlock on WRONGTYPE keys", "after-wrongtype-force");
}

/*
 * A fenced lock whose counter redisson_lock_token:{name} is not a counter:
 * the acquire must fail and leave no hold behind (a hold nobody believes
 * it has would block everyone until its lease runs out).
 */
Test(hostile, fenced_token_key_of_wrong_type_takes_nothing, .timeout = 30)
{
	rh_server *s = dl_srv;
	ok_reply(rh_command(s, "RPUSH redisson_lock_token:{fenced-list} a"), "RPUSH");
	ok_reply(rh_command(s, "SET redisson_lock_token:{fenced-text} abc"), "SET");
	char node[64];
	snap before;
	dlock_client *c = begin_case(s, node, sizeof node, &before);
	dlock_lock *l = NULL;
	int64_t token = -1;

	cr_assert_eq(dlock_lock_new(&l, c, "fenced-list", dl_kind(DLOCK_LOCK_FENCED)), 0);
	int rc = dlock_lock_acquire_fenced(&token, l, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_EWRONGTYPE, "rc %d (%s) %s", rc, dlock_strerror(rc),
			dlock_lock_errmsg(l));
	assert_msg(dlock_lock_errmsg(l), node, "WRONGTYPE", "fenced acquire, list counter");
	cr_expect_eq(rh_command_int(s, "EXISTS fenced-list"), 0,
			"the failed fenced acquire left a hold on fenced-list (PTTL %" PRId64 ")",
			rh_command_int(s, "PTTL fenced-list"));
	ok_reply(rh_command(s, "DEL fenced-list"), "DEL"); /* report the next case on its own */
	cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER);
	dlock_lock_free(l);

	cr_assert_eq(dlock_lock_new(&l, c, "fenced-text", dl_kind(DLOCK_LOCK_FENCED)), 0);
	rc = dlock_lock_acquire_fenced(&token, l, NULL, 0, 10000);
	cr_assert(rc == DLOCK_ESERVER || rc == DLOCK_EWRONGTYPE, "rc %d (%s) %s", rc,
			dlock_strerror(rc), dlock_lock_errmsg(l));
	assert_msg(dlock_lock_errmsg(l), node, NULL, "fenced acquire, text counter");
	cr_expect_eq(rh_command_int(s, "EXISTS fenced-text"), 0,
			"the failed fenced acquire left a hold on fenced-text (PTTL %" PRId64 ")",
			rh_command_int(s, "PTTL fenced-text"));
	cr_log_info("fenced acquire with a text counter: %s", dlock_lock_errmsg(l));
	ok_reply(rh_command(s, "DEL fenced-text"), "DEL");
	dlock_lock_free(l);

	snap_assert_same(s, &before, "fenced acquire with a bad counter");

	/* A re-entry while the counter is broken must not count a hold either. */
	char owner[64];
	dl_owner(c, owner, sizeof owner);
	cr_assert_eq(dlock_lock_new(&l, c, "fenced-reenter", dl_kind(DLOCK_LOCK_FENCED)), 0);
	cr_assert_eq(dlock_lock_acquire_fenced(&token, l, NULL, 0, 10000), 0, "%s",
			dlock_lock_errmsg(l));
	cr_assert_eq(token, 1);
	ok_reply(rh_command(s, "DEL redisson_lock_token:{fenced-reenter}"), "DEL");
	ok_reply(rh_command(s, "RPUSH redisson_lock_token:{fenced-reenter} a"), "RPUSH");
	rc = dlock_lock_acquire_fenced(&token, l, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_EWRONGTYPE, "re-entry: rc %d (%s) %s", rc, dlock_strerror(rc),
			dlock_lock_errmsg(l));
	cr_expect_eq(hget_b(s, "fenced-reenter", 14, owner), 1,
			"a refused re-entry changed the hold count to %" PRId64,
			hget_b(s, "fenced-reenter", 14, owner));
	ok_reply(rh_command(s, "DEL redisson_lock_token:{fenced-reenter}"), "DEL");
	while (dlock_lock_release(l, NULL) == 0)
		;
	cr_assert_eq(rh_command_int(s, "EXISTS fenced-reenter"), 0);
	dlock_lock_free(l);
	end_case(s, c, &before, NULL, "after-fenced-wrongtype");
}

/* A fair lock whose name, queue or deadline key has the wrong type. */
Test(hostile, fair_lock_keys_of_wrong_type, .timeout = 30)
{
	rh_server *s = dl_srv;
	ok_reply(rh_command(s, "SET fair-a x"), "SET");
	ok_reply(rh_command(s, "SET redisson_lock_queue:{fair-b} x"), "SET");
	ok_reply(rh_command(s, "SET redisson_lock_timeout:{fair-c} x"), "SET");
	char node[64];
	snap before;
	dlock_client *c = begin_case(s, node, sizeof node, &before);
	const char *names[] = { "fair-a", "fair-b", "fair-c" };

	for (size_t i = 0; i < 3; i++) {
		dlock_lock *l = NULL;
		char what[64];
		cr_assert_eq(dlock_lock_new(&l, c, names[i], dl_kind(DLOCK_LOCK_FAIR)), 0);
		snprintf(what, sizeof what, "fair try on %s", names[i]);
		expect_wrongtype(dlock_lock_acquire(l, NULL, 0, 10000), l, node, what);
		snprintf(what, sizeof what, "fair try(wait) on %s", names[i]);
		expect_wrongtype(dlock_lock_acquire(l, NULL, 200, 10000), l, node, what);
		/* Releasing a fair lock that does not exist succeeds (as in
		 * Redisson), so only the first two have something to refuse. */
		if (i < 2) {
			snprintf(what, sizeof what, "fair unlock on %s", names[i]);
			expect_wrongtype(dlock_lock_release(l, NULL), l, node, what);
		}
		snap_assert_same(s, &before, what);
		dlock_lock_free(l);
	}
	end_case(s, c, &before, NULL, "after-fair-wrongtype");
}

static dlock_redlock *open_redlock(rh_server **srv, int n, const char *const *uris,
		const char *name, int watchdog_ms, int fenced)
{
	dlock_client_options co;
	dlock_redlock_options ro;
	dlock_redlock *r = NULL;
	const char *u[5];

	cr_assert_leq(n, 5);
	cr_assert_eq(dlock_client_options_init(&co, DLOCK_CLIENT_OPTIONS_VERSION), 0);
	cr_assert_eq(dlock_redlock_options_init(&ro, DLOCK_REDLOCK_OPTIONS_VERSION), 0);
	co.command_timeout_ms = 500;
	co.connect_timeout_ms = 500;
	if (watchdog_ms > 0)
		co.watchdog_timeout_ms = watchdog_ms;
	ro.restart_guard_ms = 0;
	ro.fenced = fenced;
	for (int i = 0; i < n; i++)
		u[i] = uris != NULL ? uris[i] : rh_server_uri(srv[i]);
	int rc = dlock_redlock_new_from_uris(&r, u, (size_t)n, name, &co, &ro);
	cr_assert_eq(rc, 0, "redlock_open: %s %s", dlock_strerror(rc), dlock_errmsg_last());
	return r;
}

Test(hostile, wrongtype_redlock_member, .timeout = 30)
{
	rh_server *srv[3];
	cr_assert_eq(rh_servers_start(srv, 3, NULL), 0);
	char node0[64], node1[64];
	node_of(srv[0], node0, sizeof node0);
	node_of(srv[1], node1, sizeof node1);
	ok_reply(rh_command(srv[0], "SET rl-wt not-a-lock"), "SET");
	snap before0, before1;
	snap_take(srv[0], &before0);
	dlock_redlock *r = open_redlock(srv, 3, NULL, "rl-wt", 0, 0);
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	int64_t validity = -1;

	/* One member of three: a quorum still holds; the member says why it did not. */
	int rc = dl_redlock_acquire_v(&validity, r, NULL, 0, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, 0, "rc %d (%s) %s", rc, dlock_strerror(rc), dlock_redlock_errmsg(r));
	cr_assert_eq(dlock_redlock_member_status(&st, r, 0), 0);
	cr_assert_eq(st.vote, DLOCK_VOTE_ERROR, "member 0 vote %d", st.vote);
	cr_assert_eq(st.error, DLOCK_EWRONGTYPE, "member 0 error %d (%s)", st.error,
			dlock_strerror(st.error));
	assert_msg(st.message, node0, "WRONGTYPE", "member 0 status");
	cr_assert_str_eq(st.node, node0);
	for (size_t i = 1; i < 3; i++) {
		cr_assert_eq(dlock_redlock_member_status(&st, r, i), 0);
		cr_assert_eq(st.vote, DLOCK_VOTE_ACQUIRED, "member %zu vote %d", i, st.vote);
		cr_assert_eq(rh_command_int(srv[i], "EXISTS rl-wt"), 1);
	}
	cr_assert_eq(dlock_redlock_check(r, NULL), 0);
	cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	for (size_t i = 1; i < 3; i++)
		cr_assert_eq(rh_command_int(srv[i], "EXISTS rl-wt"), 0);
	snap_assert_same(srv[0], &before0, "RedLock with a WRONGTYPE member");

	/* Two of three: no quorum; the error says why, and names both nodes. */
	ok_reply(rh_command(srv[1], "RPUSH rl-wt a"), "RPUSH");
	snap_take(srv[1], &before1);
	rc = dl_redlock_acquire_v(&validity, r, NULL, 0, 10000);
	cr_assert(rc == DLOCK_ENOQUORUM || rc == DLOCK_EWRONGTYPE, "rc %d (%s) %s", rc,
			dlock_strerror(rc), dlock_redlock_errmsg(r));
	assert_msg(dlock_redlock_errmsg(r), node0, "WRONGTYPE", "RedLock, 2 WRONGTYPE members");
	cr_log_info("RedLock, 2 WRONGTYPE members: %d %s", rc, dlock_redlock_errmsg(r));
	assert_msg(dlock_redlock_errmsg(r), node1, NULL, "RedLock, 2 WRONGTYPE members");
	cr_assert_eq(rh_command_int(srv[2], "EXISTS rl-wt"), 0, "member 2 kept its hold");
	cr_assert_eq(dlock_redlock_check(r, NULL), DLOCK_ENOTOWNER);
	/* The waiting path says the same (bounded). */
	int64_t t0 = rh_now_ms();
	rc = dl_redlock_acquire_v(&validity, r, NULL, 300, 10000);
	cr_assert(rc == DLOCK_ENOQUORUM || rc == DLOCK_EWRONGTYPE, "wait: rc %d (%s) %s", rc,
			dlock_strerror(rc), dlock_redlock_errmsg(r));
	cr_assert_lt(rh_now_ms() - t0, 2000);
	cr_assert_eq(rh_command_int(srv[2], "EXISTS rl-wt"), 0, "member 2 kept its hold");
	snap_assert_same(srv[0], &before0, "RedLock with 2 WRONGTYPE members (0)");
	snap_assert_same(srv[1], &before1, "RedLock with 2 WRONGTYPE members (1)");

	/* The same handle works once the keys are gone. */
	cr_assert_eq(rh_command_int(srv[0], "DEL rl-wt"), 1);
	cr_assert_eq(rh_command_int(srv[1], "DEL rl-wt"), 1);
	cr_assert_eq(dl_redlock_acquire_v(&validity, r, NULL, 0, 10000), 0, "%s", dlock_redlock_errmsg(r));
	cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	for (size_t i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(srv[i], "EXISTS rl-wt"), 0);

	snap_free(&before0);
	snap_free(&before1);
	dlock_redlock_free(r);
	for (int i = 0; i < 3; i++)
		rh_server_free(srv[i]);
}

/* ---- 5. read-only replica ------------------------------------------------------ */

static void await_link_up(rh_server *replica)
{
	int64_t deadline = rh_now_ms() + 10000;

	while (!info_has(replica, "replication", "master_link_status:up") && rh_now_ms() < deadline)
		usleep(10 * 1000);
	cr_assert(info_has(replica, "replication", "master_link_status:up"),
			"the replica never synced with its master");
}

Test(hostile, read_only_replica_refuses_with_readonly, .timeout = 60)
{
	rh_server *master = rh_server_start(NULL);
	cr_assert_not_null(master);
	char port[16], rnode[64];
	snprintf(port, sizeof port, "%d", rh_server_port(master));
	const char *const extra[] = { "--replicaof", "127.0.0.1", port, NULL };
	rh_server *replica = rh_server_start(extra);
	cr_assert_not_null(replica);
	node_of(replica, rnode, sizeof rnode);
	await_link_up(replica);

	dlock_client *cm = open_server(master, 0);
	dlock_client *cr = open_server(replica, 0);
	/* A lock someone holds on the master, replicated. */
	dlock_lock *lm = dl_lock(cm, "ro-held");
	cr_assert_eq(dlock_lock_acquire(lm, "holder:1", 0, 30000), 0, "%s", dlock_lock_errmsg(lm));
	ok_reply(rh_command(master, "SET sentinel keep"), "SET");
	cr_assert_eq(rh_command_int(master, "WAIT 1 2000"), 1, "not replicated");
	snap before_m, before_r;
	snap_take(master, &before_m);
	snap_take(replica, &before_r);

	dlock_lock *l = dl_lock(cr, "ro-lock");
	expect_acquire_refused(l, DLOCK_LEASE_WATCHDOG, rnode, "READONLY", "on a replica");
	cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER);

	/* Release and force-release of the replicated hold are refused too. */
	dlock_lock *lh = dl_lock(cr, "ro-held");
	expect_release_refused(lh, "holder:1", rnode, "READONLY", "on a replica");
	/* Reads work there. */
	int locked = 0;
	cr_assert_eq(dlock_lock_is_locked(&locked, lh), 0, "%s", dlock_lock_errmsg(lh));
	cr_assert_eq(locked, 1);
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, lh, "holder:1"), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(dlock_client_ping(cr), 0, "%s", dlock_client_errmsg(cr));

	snap_assert_same(master, &before_m, "lock on a replica (master)");
	snap_assert_same(replica, &before_r, "lock on a replica (replica)");

	/* The master client is unaffected. */
	fresh_cycle(master, cm, "ro-fresh");
	cr_assert_eq(dlock_lock_release(lm, "holder:1"), 0, "%s", dlock_lock_errmsg(lm));

	/* Promoted, the same replica client locks there: no stale state. */
	ok_reply(rh_command(replica, "REPLICAOF NO ONE"), "REPLICAOF NO ONE");
	int64_t deadline = rh_now_ms() + 5000;
	while (!info_has(replica, "replication", "role:master") && rh_now_ms() < deadline)
		usleep(10 * 1000);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "after promotion: %s", dlock_lock_errmsg(l));
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0);
	cr_assert_eq(n, 1, "hold count %" PRId64 " after promotion", n);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(replica, "EXISTS ro-lock"), 0);
	fresh_cycle(replica, cr, "ro-fresh-promoted");

	snap_free(&before_m);
	snap_free(&before_r);
	dl_free_locks(l, lh, lm);
	dl_close_clients(cr, cm);
	rh_server_free(replica);
	rh_server_free(master);
}

/* ---- 6. out of memory ------------------------------------------------------------ */

Test(hostile, maxmemory_noeviction_refuses_with_oom, .timeout = 60)
{
	rh_server *s = dl_srv;
	char node[64], owner[64];
	node_of(s, node, sizeof node);
	dlock_client *c = open_warm(s, 0, "oom-warm");
	dl_owner(c, owner, sizeof owner);
	dlock_lock *held = dl_lock(c, "oom-held");
	cr_assert_eq(dlock_lock_acquire(held, NULL, 0, 30000), 0);

	ok_reply(rh_command(s, "CONFIG SET maxmemory-policy noeviction"), "policy");
	int64_t used = info_int(s, "memory", "used_memory");
	ok_reply(rh_command(s, "CONFIG SET maxmemory %lld", (long long)(used + 256 * 1024)),
			"maxmemory");
	size_t vlen = 32 * 1024;
	char *value = filled_name(vlen, 'v');
	int filled = 0, oom = 0;
	for (int i = 0; i < 4096 && !oom; i++) {
		redisReply *r = rh_command(s, "SET fill:%d %b", i, value, vlen);
		cr_assert_not_null(r);
		if (r->type == REDIS_REPLY_ERROR) {
			cr_assert(strncmp(r->str, "OOM", 3) == 0, "fill: %s", r->str);
			oom = 1;
		} else {
			filled++;
		}
		freeReplyObject(r);
	}
	cr_assert(oom, "never reached maxmemory");
	cr_assert_gt(filled, 0);
	/* Well over it, not at its edge: once the refused SET's 32 KiB are freed,
	 * Redis 6.2 can be just under, and lets a small script write through. */
	used = info_int(s, "memory", "used_memory");
	ok_reply(rh_command(s, "CONFIG SET maxmemory %lld", (long long)(used - 128 * 1024)),
			"maxmemory below use");
	snap before;
	snap_take(s, &before);

	dlock_lock *l = dl_lock(c, "oom-lock");
	expect_acquire_refused(l, DLOCK_LEASE_WATCHDOG, node, "OOM", "at maxmemory");
	dlock_lock *f = NULL;
	cr_assert_eq(dlock_lock_new(&f, c, "oom-fenced", dl_kind(DLOCK_LOCK_FENCED)), 0);
	int64_t token = -1;
	int rc = dlock_lock_acquire_fenced(&token, f, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_ESERVER, "fenced at maxmemory: rc %d %s", rc, dlock_lock_errmsg(f));
	assert_msg(dlock_lock_errmsg(f), node, "OOM", "fenced at maxmemory");
	/* A re-entry of a lock already held adds a count: refused as well. */
	rc = dlock_lock_acquire(held, NULL, 0, 30000);
	cr_assert_eq(rc, DLOCK_ESERVER, "re-entry at maxmemory: rc %d %s", rc,
			dlock_lock_errmsg(held));
	assert_msg(dlock_lock_errmsg(held), node, "OOM", "re-entry at maxmemory");
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, held, NULL), 0, "%s", dlock_lock_errmsg(held));
	cr_assert_eq(n, 1, "hold count %" PRId64 " after a refused re-entry", n);
	cr_assert_eq(dlock_client_ping(c), 0);
	snap_assert_same(s, &before, "locks at maxmemory");

	/* With room again the same client and handles work, counts exact. */
	ok_reply(rh_command(s, "CONFIG SET maxmemory 0"), "maxmemory 0");
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "after maxmemory 0: %s", dlock_lock_errmsg(l));
	cr_assert_eq(hget_b(s, "oom-lock", 8, owner), 1);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS oom-lock"), 0);
	cr_assert_eq(dlock_lock_acquire(held, NULL, 0, 30000), 0, "%s", dlock_lock_errmsg(held));
	cr_assert_eq(hget_b(s, "oom-held", 8, owner), 2);
	cr_assert_eq(dlock_lock_release(held, NULL), 0);
	cr_assert_eq(dlock_lock_release(held, NULL), 0);
	cr_assert_eq(rh_command_int(s, "EXISTS oom-held"), 0);
	fresh_cycle(s, c, "oom-fresh");

	free(value);
	snap_free(&before);
	dl_free_locks(f, l, held);
	dlock_client_free(c);
}

/* ---- 7. wrong password on a RedLock member -------------------------------------- */

Test(hostile, wrong_password_on_redlock_members, .timeout = 30)
{
	const char *const extra[] = { "--requirepass", "s3cret", NULL };
	rh_server *srv[3];
	cr_assert_eq(rh_servers_start(srv, 3, extra), 0);
	const char *bad_pw = "Wr0ng-Pw-93x";
	char uris[3][128], bad[3][128], node[3][64];
	for (int i = 0; i < 3; i++) {
		snprintf(uris[i], sizeof uris[i], "redis://:s3cret@127.0.0.1:%d",
				rh_server_port(srv[i]));
		snprintf(bad[i], sizeof bad[i], "redis://:%s@127.0.0.1:%d", bad_pw,
				rh_server_port(srv[i]));
		node_of(srv[i], node[i], sizeof node[i]);
	}

	/* One member with a wrong password: a quorum, and that member's status says why. */
	const char *one_bad[3] = { uris[0], bad[1], uris[2] };
	dlock_redlock *r = open_redlock(NULL, 3, one_bad, "rl-auth", 0, 0);
	int rc = dlock_redlock_acquire(r, NULL, 0, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, 0, "rc %d (%s) %s", rc, dlock_strerror(rc), dlock_redlock_errmsg(r));
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	cr_assert_eq(dlock_redlock_member_status(&st, r, 1), 0);
	cr_assert_eq(st.vote, DLOCK_VOTE_ERROR, "vote %d", st.vote);
	cr_assert_eq(st.error, DLOCK_EAUTH, "error %d (%s) %s", st.error, dlock_strerror(st.error),
			st.message);
	assert_msg(st.message, node[1], NULL, "member with a wrong password");
	cr_assert_null(strstr(st.message, bad_pw), "the status leaks the password: %s", st.message);
	cr_assert_null(strstr(st.message, "s3cret"), "the status leaks a password: %s", st.message);
	cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	for (int i = 0; i < 3; i++)
		await_dbsize(srv[i], 0, 2000);
	dlock_redlock_free(r);

	/* Two: no quorum; the message names both nodes and no password. */
	const char *two_bad[3] = { bad[0], uris[1], bad[2] };
	r = open_redlock(NULL, 3, two_bad, "rl-auth", 0, 0);
	rc = dlock_redlock_acquire(r, NULL, 0, 10000);
	cr_assert(rc == DLOCK_ENOQUORUM || rc == DLOCK_EAUTH, "rc %d (%s) %s", rc,
			dlock_strerror(rc), dlock_redlock_errmsg(r));
	const char *msg = dlock_redlock_errmsg(r);
	cr_log_info("two wrong passwords: %s", msg);
	assert_msg(msg, node[0], NULL, "two wrong passwords");
	assert_msg(msg, node[2], NULL, "two wrong passwords");
	cr_assert_null(strstr(msg, bad_pw), "the message leaks the password: %s", msg);
	cr_assert_null(strstr(msg, "s3cret"), "the message leaks a password: %s", msg);
	for (size_t i = 0; i < 3; i += 2) {
		cr_assert_eq(dlock_redlock_member_status(&st, r, i), 0);
		cr_assert_eq(st.error, DLOCK_EAUTH, "member %zu: error %d %s", i, st.error,
				st.message);
		cr_assert_null(strstr(st.message, bad_pw));
	}
	/* And on the member lock handles. */
	dlock_lock *m0 = dlock_redlock_member(r, 0);
	int held = 0;
	rc = dlock_lock_is_held(&held, m0, NULL);
	cr_assert_eq(rc, DLOCK_EAUTH, "member query: rc %d %s", rc, dlock_lock_errmsg(m0));
	assert_msg(dlock_lock_errmsg(m0), node[0], NULL, "member query");
	cr_assert_null(strstr(dlock_lock_errmsg(m0), bad_pw));
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(srv[i], "DBSIZE"), 0, "node %d not clean", i);
	dlock_redlock_free(r);

	/* The servers are fine for correct credentials. */
	r = open_redlock(NULL, 3, (const char *[]){ uris[0], uris[1], uris[2] }, "rl-auth", 0, 0);
	cr_assert_eq(dlock_redlock_acquire(r, NULL, 0, 10000), 0, "%s", dlock_redlock_errmsg(r));
	cr_assert_eq(dlock_redlock_release(r, NULL), 0);
	dlock_redlock_free(r);
	for (int i = 0; i < 3; i++)
		rh_server_free(srv[i]);
}

/* ---- 8. ACL user without EVAL ------------------------------------------------------ */

Test(hostile, acl_user_without_eval_gets_noperm, .timeout = 30)
{
	rh_server *s = dl_srv;
	char node[64], uri[128];
	node_of(s, node, sizeof node);
	ok_reply(rh_command(s, "ACL SETUSER limited on >pw ~* &* +@all -eval -evalsha"), "ACL");
	dlock_client *admin = open_server(s, 0);
	dlock_lock *la = dl_lock(admin, "acl-held");
	cr_assert_eq(dlock_lock_acquire(la, "holder:1", 0, 30000), 0);
	ok_reply(rh_command(s, "SET sentinel keep"), "SET");
	snap before;
	snap_take(s, &before);

	snprintf(uri, sizeof uri, "redis://limited:pw@127.0.0.1:%d", rh_server_port(s));
	dlock_client *c = dl_client_opts(uri, NULL);
	dlock_lock *l = dl_lock(c, "acl-lock");
	expect_acquire_refused(l, 10000, node, "NOPERM", "without EVAL");

	dlock_lock *lh = dl_lock(c, "acl-held");
	expect_release_refused(lh, "holder:1", node, "NOPERM", "without EVAL");
	/* Queries are plain commands the user may run. */
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, lh, "holder:1"), 0, "%s", dlock_lock_errmsg(lh));
	cr_assert_eq(n, 1);
	cr_assert_eq(dlock_client_ping(c), 0);
	snap_assert_same(s, &before, "locks without EVAL permission");

	/* Once allowed, the same client and handle work. */
	ok_reply(rh_command(s, "ACL SETUSER limited +eval +evalsha"), "ACL grant");
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "after the grant: %s", dlock_lock_errmsg(l));
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS acl-lock"), 0);
	fresh_cycle(s, c, "acl-fresh");
	cr_assert_eq(dlock_lock_release(la, "holder:1"), 0);

	snap_free(&before);
	dl_free_locks(lh, l, la);
	dl_close_clients(c, admin);
}

/*
 * A hold whose unlock the server refuses (here: EVAL revoked while it is
 * held) is not renewed any more - the unlock was asked for, as Redisson
 * cancels renewal whatever the unlock answered. The key then expires by its
 * TTL; the caller may still retry the unlock.
 */
Test(hostile, refused_unlock_stops_the_watchdog, .timeout = 30)
{
	rh_server *s = dl_srv;
	char node[64], uri[128];
	node_of(s, node, sizeof node);
	ok_reply(rh_command(s, "ACL SETUSER revoked on >pw ~* &* +@all"), "ACL");
	snprintf(uri, sizeof uri, "redis://revoked:pw@127.0.0.1:%d", rh_server_port(s));
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.watchdog_timeout_ms = 1000;
	dlock_client *c = dl_client_opts(uri, &o);
	dlock_lock *l = dl_lock(c, "refused");

	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(l));
	ok_reply(rh_command(s, "ACL SETUSER revoked -eval -evalsha"), "ACL revoke");
	int rc = dlock_lock_release(l, NULL);
	cr_assert_eq(rc, DLOCK_ESERVER, "unlock: rc %d %s", rc, dlock_lock_errmsg(l));
	assert_msg(dlock_lock_errmsg(l), node, "NOPERM", "refused unlock");
	cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER,
			"the hold is still recorded (and renewed) after its unlock was refused");
	/* Redis as it was: the hold is there until its TTL runs out. */
	cr_assert_eq(rh_command_int(s, "EXISTS refused"), 1);
	int64_t t0 = rh_now_ms();
	while (rh_command_int(s, "EXISTS refused") == 1 && rh_now_ms() - t0 < 3000)
		usleep(20 * 1000);
	cr_assert_eq(rh_command_int(s, "EXISTS refused"), 0, "the hold outlived its TTL by 2 s");

	/* Allowed again: the same handle works. */
	ok_reply(rh_command(s, "ACL SETUSER revoked +eval +evalsha"), "ACL grant");
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS refused"), 0);

	dlock_lock_free(l);
	dlock_client_free(c);
}

/* ---- 9. CLIENT KILL while locking ----------------------------------------------------- */

typedef struct storm {
	rh_server *s;
	dlock_lock *lock;
	const char *name;
	atomic_int stop_kill, stop_lock;
	/* killer */
	int64_t kill_calls, killed;
	/* locker */
	int64_t iterations, ok_calls, transport_errors, count_checks;
	int violation;
	char why[512];
	int final_rc;
	int64_t final_count, final_exists;
} storm;

static int is_transport(int rc)
{
	return rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT;
}

static void storm_fail(storm *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void storm_fail(storm *st, const char *fmt, ...)
{
	va_list ap;

	if (st->violation)
		return;
	st->violation = 1;
	va_start(ap, fmt);
	vsnprintf(st->why, sizeof st->why, fmt, ap);
	va_end(ap);
	atomic_store(&st->stop_lock, 1);
}

static void *killer_main(void *arg)
{
	storm *st = arg;
	unsigned seed = 12345;

	while (!atomic_load(&st->stop_kill)) {
		redisReply *r = rh_command(st->s, "CLIENT KILL TYPE normal");
		st->kill_calls++;
		if (r != NULL && r->type == REDIS_REPLY_INTEGER)
			st->killed += r->integer;
		if (r != NULL)
			freeReplyObject(r);
		usleep(200 + rand_r(&seed) % 1500); /* pacing, not synchronisation */
	}
	return NULL;
}

/*
 * Unlock until the server says "not owner". Returns the successes; *fails
 * gets the transport errors (each may or may not have applied).
 */
static int64_t storm_drain(storm *st, int64_t *fails, int *timed_out)
{
	int64_t ok = 0;

	*fails = 0;
	for (int k = 0; k < 64; k++) {
		int rc = dlock_lock_release(st->lock, NULL);
		if (rc == 0) {
			ok++;
			st->ok_calls++;
		} else if (rc == DLOCK_ENOTOWNER) {
			return ok;
		} else if (is_transport(rc)) {
			(*fails)++;
			st->transport_errors++;
			*timed_out |= rc == DLOCK_ETIMEDOUT;
		} else {
			storm_fail(st, "unlock returned %d (%s): %s", rc, dlock_strerror(rc),
					dlock_lock_errmsg(st->lock));
			return ok;
		}
	}
	storm_fail(st, "unlock never reached \"not owner\" in 64 calls");
	return ok;
}

static void storm_iteration(storm *st)
{
	size_t name_len = strlen(st->name);
	int depth = 1 + (int)(st->iterations % 3), taken = 0, last_ok = 0, timed_out = 0;

	st->iterations++;
	for (int d = 0; d < depth; d++) {
		int rc = dlock_lock_acquire(st->lock, NULL, 0, 10000);
		if (rc == 0) {
			taken++;
			last_ok = 1;
			st->ok_calls++;
		} else if (is_transport(rc)) {
			last_ok = 0;
			timed_out |= rc == DLOCK_ETIMEDOUT;
			st->transport_errors++;
		} else {
			storm_fail(st, "try returned %d (%s): %s", rc, dlock_strerror(rc),
					dlock_lock_errmsg(st->lock));
			return;
		}
	}
	/*
	 * After a successful acquire the count is exact: an earlier attempt
	 * whose reply was lost was adopted, not counted again. (After a failed
	 * last attempt it may be one more: that attempt may have run.)
	 */
	int64_t count = -1;
	if (last_ok) {
		int rc = dlock_lock_hold_count(&count, st->lock, NULL);
		if (rc == 0) {
			st->count_checks++;
			if (count != taken) {
				storm_fail(st,
						"hold count %" PRId64
						" after %d successful acquires "
						"(iteration %" PRId64 ")",
						count, taken, st->iterations);
				return;
			}
		} else if (is_transport(rc)) {
			count = -1;
		} else {
			storm_fail(st, "hold_count returned %d: %s", rc,
					dlock_lock_errmsg(st->lock));
			return;
		}
	}
	int64_t fails = 0, released = storm_drain(st, &fails, &timed_out);
	if (st->violation)
		return;
	if (count >= 0 && (released > count || released < count - fails)) {
		storm_fail(st,
				"%" PRId64 " successful unlocks (%" PRId64
				" failed) for a count of %" PRId64,
				released, fails, count);
		return;
	}
	/* "Not owner" must mean the key is gone (unless a timed-out command may
	 * still be in the server's buffer). */
	if (!timed_out) {
		int64_t e = exists_b(st->s, st->name, name_len);
		if (e != 0)
			storm_fail(st,
					"unlock said \"not owner\" but EXISTS is %" PRId64
					" (iteration %" PRId64 ")",
					e, st->iterations);
	}
}

static void *locker_main(void *arg)
{
	storm *st = arg;

	while (!atomic_load(&st->stop_lock))
		storm_iteration(st);
	if (st->violation)
		return NULL;
	/* The storm is over (the killer has stopped): a final unlock loop, then
	 * this thread's hold must be gone, on the server and in the count. */
	int64_t fails = 0;
	int timed_out = 0;
	storm_drain(st, &fails, &timed_out);
	st->final_rc = dlock_lock_hold_count(&st->final_count, st->lock, NULL);
	st->final_exists = exists_b(st->s, st->name, strlen(st->name));
	return NULL;
}

Test(hostile, client_kill_storm_keeps_counts_exact, .timeout = 60)
{
	rh_server *s = dl_srv;
	dlock_client *c = open_server(s, 0);
	storm st;
	memset(&st, 0, sizeof st);
	st.s = s;
	st.name = "storm";
	st.lock = dl_lock(c, st.name);
	st.final_count = -1;
	atomic_init(&st.stop_kill, 0);
	atomic_init(&st.stop_lock, 0);
	ok_reply(rh_command(s, "SET sentinel keep"), "SET");

	pthread_t killer, locker;
	cr_assert_eq(pthread_create(&locker, NULL, locker_main, &st), 0);
	cr_assert_eq(pthread_create(&killer, NULL, killer_main, &st), 0);
	int64_t until = rh_now_ms() + 2000;
	while (rh_now_ms() < until && !atomic_load(&st.stop_lock))
		usleep(10 * 1000);
	atomic_store(&st.stop_kill, 1);
	cr_assert_eq(pthread_join(killer, NULL), 0);
	atomic_store(&st.stop_lock, 1);
	cr_assert_eq(pthread_join(locker, NULL), 0);
	cr_log_info("client kill storm: %" PRId64 " iterations, %" PRId64 " ok calls, %" PRId64
		    " transport errors, %" PRId64 " count checks, %" PRId64 " connections killed",
			st.iterations, st.ok_calls, st.transport_errors, st.count_checks,
			st.killed);

	cr_assert_not(st.violation,
			"%s (after %" PRId64 " iterations, %" PRId64 " transport errors, %" PRId64
			" connections killed)",
			st.why, st.iterations, st.transport_errors, st.killed);
	cr_assert_gt(st.iterations, 20, "only %" PRId64 " iterations", st.iterations);
	cr_assert_gt(st.killed, 20, "only %" PRId64 " connections killed", st.killed);
	cr_assert_eq(st.final_rc, 0, "final hold_count: %d", st.final_rc);
	cr_assert_eq(st.final_count, 0, "final hold count %" PRId64, st.final_count);
	cr_assert_eq(st.final_exists, 0, "the lock key is left after the final unlock loop");
	/* Besides the sentinel, nothing is left: a release writes no key of its
	 * own, so a kill between its run and its reply leaves nothing either. */
	redisReply *keys = rh_command(s, "KEYS *");
	cr_assert_not_null(keys);
	for (size_t i = 0; i < keys->elements; i++)
		cr_assert(strcmp(keys->element[i]->str, "sentinel") == 0,
				"key \"%s\" left after the storm", keys->element[i]->str);
	cr_assert_eq(keys->elements, 1, "the sentinel is gone");
	freeReplyObject(keys);
	redisReply *r = rh_command(s, "GET sentinel");
	cr_assert_not_null(r);
	cr_assert_str_eq(r->str, "keep");
	freeReplyObject(r);
	fresh_cycle(s, c, "storm-fresh");

	dlock_lock_free(st.lock);
	dlock_client_free(c);
}

/* ---- 10. SCRIPT FLUSH under a RedLock and the other kinds ---------------------------- */

typedef struct flusher {
	rh_server **srv;
	int n;
	atomic_int stop;
	int64_t flushes;
} flusher;

static void *flusher_main(void *arg)
{
	flusher *f = arg;

	while (!atomic_load(&f->stop)) {
		for (int i = 0; i < f->n; i++) {
			redisReply *r = rh_command(f->srv[i], "SCRIPT FLUSH");
			if (r != NULL)
				freeReplyObject(r);
		}
		f->flushes++;
		usleep(300);
	}
	return NULL;
}

static void flush_all(rh_server **srv, int n)
{
	for (int i = 0; i < n; i++)
		ok_reply(rh_command(srv[i], "SCRIPT FLUSH"), "SCRIPT FLUSH");
}

Test(hostile, script_flush_while_a_redlock_is_used, .timeout = 60)
{
	rh_server *srv[3];
	cr_assert_eq(rh_servers_start(srv, 3, NULL), 0);
	dlock_redlock *r = open_redlock(srv, 3, NULL, "rl-flush", 600, 0);
	int64_t validity = 0;

	/* Flushes racing every call. */
	flusher f = { .srv = srv, .n = 3 };
	atomic_init(&f.stop, 0);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, flusher_main, &f), 0);
	int failures = 0, first_rc = 0;
	char first_msg[512] = "";
	for (int i = 0; i < 200; i++) {
		int rc = dl_redlock_acquire_v(&validity, r, NULL, 1000, 5000);
		if (rc == 0)
			rc = dlock_redlock_release(r, NULL);
		if (rc != 0 && failures++ == 0) {
			first_rc = rc;
			snprintf(first_msg, sizeof first_msg, "%s", dlock_redlock_errmsg(r));
		}
	}
	atomic_store(&f.stop, 1);
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(failures, 0,
			"%d of 200 lock/unlock cycles failed under SCRIPT FLUSH; first: %d "
			"(%s) %s",
			failures, first_rc, dlock_strerror(first_rc), first_msg);
	cr_assert_gt(f.flushes, 10);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(srv[i], "EXISTS rl-flush"), 0);

	/* Held with the watchdog (600 ms, renewed every 200 ms): flushed, the
	 * renewals still work on every node and the lock outlives its TTL. */
	cr_assert_eq(dl_redlock_acquire_v(&validity, r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s",
			dlock_redlock_errmsg(r));
	flush_all(srv, 3);
	int64_t start = rh_now_ms();
	for (int i = 0; i < 3; i++) {
		/* A renewal after the flush sets the TTL back up: await one per node. */
		int64_t low = rh_command_int(srv[i], "PTTL rl-flush"), now_ttl = low;
		int64_t deadline = rh_now_ms() + 2000;
		while (rh_now_ms() < deadline) {
			now_ttl = rh_command_int(srv[i], "PTTL rl-flush");
			if (now_ttl > low || now_ttl < 0)
				break;
			low = now_ttl;
			usleep(5 * 1000);
		}
		cr_assert_gt(now_ttl, low,
				"node %d: no renewal after SCRIPT FLUSH (PTTL %" PRId64 ")", i,
				now_ttl);
	}
	/* Past two full TTLs since the flush, still held everywhere. */
	while (rh_now_ms() - start < 1300)
		usleep(20 * 1000);
	cr_assert_eq(dlock_redlock_check(r, NULL), 0, "lost after SCRIPT FLUSH");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(srv[i], "EXISTS rl-flush"), 1, "node %d lost the key",
				i);
	flush_all(srv, 3);
	cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(srv[i], "EXISTS rl-flush"), 0);
	dlock_redlock_free(r);

	/* A fenced RedLock (its token script too) after a flush. */
	r = open_redlock(srv, 3, NULL, "rl-flush-fenced", 0, 1);
	int64_t t1 = 0, t2 = 0;
	cr_assert_eq(dlock_redlock_acquire_fenced(&t1, r, NULL, 0, 5000), 0, "%s",
			dlock_redlock_errmsg(r));
	flush_all(srv, 3);
	cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	flush_all(srv, 3);
	cr_assert_eq(dlock_redlock_acquire_fenced(&t2, r, NULL, 0, 5000), 0, "%s",
			dlock_redlock_errmsg(r));
	cr_assert_gt(t2, t1);
	flush_all(srv, 3);
	cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	dlock_redlock_free(r);

	for (int i = 0; i < 3; i++)
		rh_server_free(srv[i]);
}

Test(hostile, script_flush_between_fenced_and_fair_calls, .timeout = 30)
{
	rh_server *s = dl_srv;
	dlock_client *c = open_server(s, 0);
	char owner[64];
	dl_owner(c, owner, sizeof owner);
	rh_server *one[1] = { s };

	dlock_lock *f = NULL;
	cr_assert_eq(dlock_lock_new(&f, c, "flush-fenced", dl_kind(DLOCK_LOCK_FENCED)), 0);
	int64_t t1 = 0, t2 = 0;
	cr_assert_eq(dlock_lock_acquire_fenced(&t1, f, NULL, 0, 10000), 0, "%s", dlock_lock_errmsg(f));
	flush_all(one, 1);
	cr_assert_eq(dlock_lock_acquire_fenced(&t2, f, NULL, 0, 10000), 0, "%s", dlock_lock_errmsg(f));
	cr_assert_eq(t2, t1 + 1);
	cr_assert_eq(hget_b(s, "flush-fenced", 12, owner), 2);
	flush_all(one, 1);
	cr_assert_eq(dlock_lock_release(f, NULL), 0, "%s", dlock_lock_errmsg(f));
	flush_all(one, 1);
	cr_assert_eq(dlock_lock_release(f, NULL), 0, "%s", dlock_lock_errmsg(f));
	cr_assert_eq(rh_command_int(s, "EXISTS flush-fenced"), 0);

	dlock_lock *fair = NULL;
	cr_assert_eq(dlock_lock_new(&fair, c, "flush-fair", dl_kind(DLOCK_LOCK_FAIR)), 0);
	flush_all(one, 1);
	cr_assert_eq(dlock_lock_acquire(fair, NULL, 0, 10000), 0, "%s", dlock_lock_errmsg(fair));
	flush_all(one, 1);
	cr_assert_eq(dlock_lock_release(fair, NULL), 0, "%s", dlock_lock_errmsg(fair));
	cr_assert_eq(rh_command_int(s, "EXISTS flush-fair"), 0);
	flush_all(one, 1);
	int deleted = -1;
	cr_assert_eq(dlock_lock_acquire(fair, NULL, 0, 10000), 0);
	flush_all(one, 1);
	cr_assert_eq(dlock_lock_force_release(&deleted, fair), 0, "%s", dlock_lock_errmsg(fair));
	cr_assert_eq(deleted, 1);

	dl_free_locks(fair, f);
	dlock_client_free(c);
}

/* ---- 11. DEBUG SLEEP past the command timeout ------------------------------------------ */

/*
 * Put the server to sleep for 1 s from a raw connection, without waiting for
 * the answer, and return once it demonstrably sleeps: a PING on a second
 * connection gets no answer for 150 ms (on loopback an awake server answers
 * within a millisecond). *probe keeps that PING's answer pending: reading it
 * is the event "the server woke up".
 */
static void put_to_sleep(rh_server *s, redisContext **sleeper, redisContext **probe)
{
	*sleeper = dl_raw_connect(rh_server_port(s), 5000);
	*probe = dl_raw_connect(rh_server_port(s), 5000);
	cr_assert_eq(redisAppendCommand(*sleeper, "DEBUG SLEEP 1"), REDIS_OK);
	int done = 0;
	while (!done)
		cr_assert_eq(redisBufferWrite(*sleeper, &done), REDIS_OK);
	for (int k = 0; k < 50; k++) {
		cr_assert_eq(redisAppendCommand(*probe, "PING"), REDIS_OK);
		done = 0;
		while (!done)
			cr_assert_eq(redisBufferWrite(*probe, &done), REDIS_OK);
		struct pollfd p = { .fd = (*probe)->fd, .events = POLLIN };
		if (poll(&p, 1, 150) == 0)
			return; /* asleep */
		redisReply *r = NULL;
		cr_assert_eq(redisGetReply(*probe, (void **)&r), REDIS_OK);
		freeReplyObject(r);
	}
	cr_assert_fail("the server never went to sleep");
}

static void await_wake(redisContext *sleeper, redisContext *probe)
{
	redisReply *r = NULL;

	cr_assert_eq(redisGetReply(probe, (void **)&r), REDIS_OK, "no PONG after the sleep");
	freeReplyObject(r);
	r = NULL;
	cr_assert_eq(redisGetReply(sleeper, (void **)&r), REDIS_OK);
	cr_assert_eq(r->type, REDIS_REPLY_STATUS, "DEBUG SLEEP: %s", r->str);
	freeReplyObject(r);
	redisFree(probe);
	redisFree(sleeper);
}

/* Wait (bounded) for a timed-out command still in the server's buffer to run. */
static void await_field(rh_server *s, const char *key, const char *owner, int64_t want)
{
	int64_t deadline = rh_now_ms() + 1000;

	while (hget_b(s, key, strlen(key), owner) != want && rh_now_ms() < deadline)
		usleep(2 * 1000);
}

Test(hostile, debug_sleep_times_out_and_counts_stay_exact, .timeout = 60)
{
	rh_server *s = dl_srv;
	char node[64], owner[64];
	node_of(s, node, sizeof node);
	/* Warm: the acquire goes out as EVALSHA and runs on waking. */
	dlock_client *c = open_warm(s, 300, "sleep-warm");
	dlock_lock *l = dl_lock(c, "sleepy");
	dl_owner(c, owner, sizeof owner);
	redisContext *sleeper, *probe;

	/* A first acquire that times out. */
	put_to_sleep(s, &sleeper, &probe);
	int64_t elapsed = dl_assert_try(l, 0, 10000, DLOCK_ETIMEDOUT, 250, 900);
	assert_msg(dlock_lock_errmsg(l), node, NULL, "acquire against a sleeping server");
	cr_log_info("sleeping server: %s (%" PRId64 " ms)", dlock_lock_errmsg(l), elapsed);
	await_wake(sleeper, probe);
	await_field(s, "sleepy", owner, 1);
	int64_t ran = hget_b(s, "sleepy", 6, owner);
	cr_assert(ran == -1 || ran == 1, "after waking the server holds %" PRId64, ran);

	/* The same client works; one lock and one unlock leave nothing. */
	cr_assert_eq(dlock_client_ping(c), 0, "%s", dlock_client_errmsg(c));
	int rc = dlock_lock_acquire(l, NULL, 0, 10000);
	cr_assert_eq(rc, 0, "after waking: rc %d %s", rc, dlock_lock_errmsg(l));
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0);
	cr_assert_eq(n, 1,
			"hold count %" PRId64 " after a timed-out acquire (ran: %s) and one more",
			n, ran == 1 ? "yes" : "no");
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS sleepy"), 0,
			"key left: the timed-out acquire "
			"was counted twice");

	/* A re-entry that times out: held once, the lost one may run on waking. */
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "%s", dlock_lock_errmsg(l));
	put_to_sleep(s, &sleeper, &probe);
	dl_assert_try(l, 0, 10000, DLOCK_ETIMEDOUT, 250, 900);
	assert_msg(dlock_lock_errmsg(l), node, NULL, "re-entry against a sleeping server");
	await_wake(sleeper, probe);
	await_field(s, "sleepy", owner, 2);
	ran = hget_b(s, "sleepy", 6, owner);
	cr_assert(ran == 1 || ran == 2, "after waking the server holds %" PRId64, ran);
	rc = dlock_lock_acquire(l, NULL, 0, 10000);
	cr_assert_eq(rc, 0, "re-entry after waking: rc %d %s", rc, dlock_lock_errmsg(l));
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0);
	cr_assert_eq(n, 2, "hold count %" PRId64 " (want 2: one hold, one re-entry)", n);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(rh_command_int(s, "EXISTS sleepy"), 0, "key left after two unlocks");
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ENOTOWNER);

	/* A query against a sleeping server times out too, and changes nothing. */
	ok_reply(rh_command(s, "SET sentinel keep"), "SET");
	snap before;
	snap_take(s, &before);
	put_to_sleep(s, &sleeper, &probe);
	int held = -1;
	int64_t t0 = rh_now_ms();
	rc = dlock_lock_is_held(&held, l, NULL);
	elapsed = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ETIMEDOUT, "is_held: rc %d %s", rc, dlock_lock_errmsg(l));
	cr_assert(elapsed >= 250 && elapsed <= 900, "is_held timed out after %" PRId64 " ms",
			elapsed);
	await_wake(sleeper, probe);
	snap_assert_same(s, &before, "query against a sleeping server");
	dlock_lock_free(l);
	end_case(s, c, &before, NULL, "sleep-fresh");
}
