/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The same steps done by the real Redisson on one name and by dlock on
 * another leave the same data and send the same messages: after every step
 * the keys of each name (type, value, TTL to the second) and the pub/sub
 * messages on channels naming it are compared, with the names, the owners
 * and the unlock request ids written as NAME, OWNER and REQ.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "interop.h"
#include "redis_harness.h"
#include "support.h"

#define JAVA_NAME "wire-j"
#define C_NAME "wire-c"

static java_peer *peer;
static dlock_client *cli;
static redisContext *messages; /* PSUBSCRIBE *wire-* */
static char java_owner[256], c_owner[128];

static void setup(void)
{
	dl_server_start();
	peer = jp_start(rh_server_uri(dl_srv), 30000);
	cli = dl_client(rh_server_uri(dl_srv), 5000, 30000);
	jp_reply r;
	snprintf(java_owner, sizeof java_owner, "%s", jp_ok(peer, &r, "w1", "owner"));
	dl_owner(cli, c_owner, sizeof c_owner);

	messages = dl_raw_connect(rh_server_port(dl_srv), 2000);
	redisReply *ok = redisCommand(messages, "PSUBSCRIBE *wire-*");
	cr_assert(ok && ok->type == REDIS_REPLY_ARRAY, "PSUBSCRIBE failed");
	freeReplyObject(ok);
}

static void teardown(void)
{
	redisFree(messages);
	jp_stop(peer);
	dlock_client_free(cli);
	dl_server_stop();
}

TestSuite(redisson_wire, .init = setup, .fini = teardown, .timeout = 180);

/* ---- normalized snapshots ---------------------------------------------------- */

typedef struct text {
	char s[8192];
	size_t len;
} text;

static void put(text *t, const char *s)
{
	size_t n = strlen(s);
	cr_assert(t->len + n < sizeof t->s, "snapshot too long");
	memcpy(t->s + t->len, s, n + 1);
	t->len += n;
}

/* Replace every occurrence of from in t by to. */
static void replace_all(text *t, const char *from, const char *to)
{
	text out = { .len = 0 };
	const char *p = t->s, *hit;
	size_t fl = strlen(from);
	while ((hit = strstr(p, from)) != NULL) {
		char chunk[8192];
		snprintf(chunk, sizeof chunk, "%.*s", (int)(hit - p), p);
		put(&out, chunk);
		put(&out, to);
		p = hit + fl;
	}
	put(&out, p);
	*t = out;
}

/* The request id after "redisson_unlock_latch:{NAME}:" is per call. */
static void mask_request_ids(text *t)
{
	static const char latch[] = "redisson_unlock_latch:{NAME}:";
	char *p = t->s;
	while ((p = strstr(p, latch)) != NULL) {
		p += sizeof latch - 1;
		size_t id = strcspn(p, " \n");
		memmove(p + 3, p + id, strlen(p + id) + 1);
		memcpy(p, "REQ", 3);
		t->len = strlen(t->s);
	}
}

static void normalize(text *t, const char *name, const char *owner)
{
	replace_all(t, owner, "OWNER");
	replace_all(t, name, "NAME");
	mask_request_ids(t);
}

static void put_value(text *t, const char *key, const char *type)
{
	redisReply *v = NULL;
	if (strcmp(type, "hash") == 0)
		v = rh_command(dl_srv, "HGETALL %s", key);
	else if (strcmp(type, "string") == 0)
		v = rh_command(dl_srv, "GET %s", key);
	else if (strcmp(type, "list") == 0)
		v = rh_command(dl_srv, "LRANGE %s 0 -1", key);
	else if (strcmp(type, "zset") == 0)
		v = rh_command(dl_srv, "ZRANGE %s 0 -1", key);
	cr_assert_not_null(v, "%s: a %s, which this test does not read", key, type);
	if (v->type == REDIS_REPLY_STRING) {
		put(t, v->str);
	} else {
		for (size_t i = 0; i < v->elements; i++) {
			put(t, i ? "," : "");
			put(t, v->element[i]->str);
		}
	}
	freeReplyObject(v);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "key type value ttl" lines for every key naming name but the unlock
 * latches, sorted, then normalized; the TTL in whole seconds, rounded up
 * ("-" without one). */
static void snapshot(text *t, const char *name, const char *owner)
{
	*t = (text){ .len = 0 };
	redisReply *keys = rh_command(dl_srv, "KEYS *%s*", name);
	cr_assert(keys && keys->type == REDIS_REPLY_ARRAY);
	char **sorted = calloc(keys->elements + 1, sizeof *sorted);
	for (size_t i = 0; i < keys->elements; i++)
		sorted[i] = keys->element[i]->str;
	qsort(sorted, keys->elements, sizeof *sorted, cmp_str);
	for (size_t i = 0; i < keys->elements; i++) {
		if (strncmp(sorted[i], "redisson_unlock_latch:", 22) == 0)
			continue; /* see dlock_wrote_no_latch() */
		redisReply *type = rh_command(dl_srv, "TYPE %s", sorted[i]);
		int64_t pttl = rh_command_int(dl_srv, "PTTL %s", sorted[i]);
		char ttl[32] = "-";
		if (pttl >= 0)
			snprintf(ttl, sizeof ttl, "%" PRId64 "s", (pttl + 999) / 1000);
		put(t, sorted[i]);
		put(t, " ");
		put(t, type->str);
		put(t, " ");
		put_value(t, sorted[i], type->str);
		put(t, " ");
		put(t, ttl);
		put(t, "\n");
		freeReplyObject(type);
	}
	free(sorted);
	freeReplyObject(keys);
	normalize(t, name, owner);
}

/* Every message published since the last call on channels naming name. */
static void drain_messages(text *t, text *other, const char *name, const char *owner,
		const char *other_name, const char *other_owner)
{
	redisReply *m;
	while ((m = dl_next_reply(messages, 300)) != NULL) {
		cr_assert(m->type == REDIS_REPLY_ARRAY && m->elements == 4, "not a pmessage");
		text *to = strstr(m->element[2]->str, name) ? t : other;
		put(to, m->element[2]->str);
		put(to, " <- ");
		put(to, m->element[3]->str);
		put(to, "\n");
		freeReplyObject(m);
	}
	normalize(t, name, owner);
	normalize(other, other_name, other_owner);
}

/* ---- the steps ------------------------------------------------------------ */

typedef struct step {
	const char *what;
	const char *java; /* a peer command; KIND and NAME are filled in */
	int (*c)(dlock_lock *l);
} step;

static int c_lock_leased(dlock_lock *l)
{
	return dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 20000);
}

static int c_lock_watchdog(dlock_lock *l)
{
	return dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, -1);
}

static int c_unlock(dlock_lock *l)
{
	return dlock_lock_release(l, NULL);
}

static int c_force(dlock_lock *l)
{
	return dlock_lock_force_release(NULL, l);
}

/* Run a step's peer command with KIND and NAME filled in. */
static void run_java(const char *cmd, const char *kind)
{
	text t = { .len = 0 };
	put(&t, cmd);
	replace_all(&t, "KIND", kind);
	replace_all(&t, "NAME", JAVA_NAME);
	jp_reply r;
	jp_ok(peer, &r, "w1", "%s", t.s);
}

/* dlock writes no unlock latch (its release is safe to repeat by the
 * believed count): none is there, right after its release. The snapshots
 * leave latches out for Redisson's sake: 4.x deletes its own a moment
 * after the reply, 3.x leaves it to expire (PX about 16-20 s). */
static void dlock_wrote_no_latch(void)
{
	redisReply *keys = rh_command(dl_srv, "KEYS redisson_unlock_latch:{" C_NAME "}:*");

	cr_assert(keys && keys->type == REDIS_REPLY_ARRAY);
	cr_assert_eq(keys->elements, 0, "dlock wrote an unlock latch: %s",
			keys->elements > 0 ? keys->element[0]->str : "");
	freeReplyObject(keys);
}

/* Both sides do each step; the data and the messages must then agree. */
static void same_steps(const char *kind, dlock_lock *l, const step *steps, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		run_java(steps[i].java, kind);
		int rc = steps[i].c(l);
		cr_assert_eq(rc, 0, "%s: dlock: %s", steps[i].what, dlock_lock_errmsg(l));

		dlock_wrote_no_latch();
		text jdata, cdata, jmsg = { .len = 0 }, cmsg = { .len = 0 };
		snapshot(&jdata, JAVA_NAME, java_owner);
		snapshot(&cdata, C_NAME, c_owner);
		drain_messages(&jmsg, &cmsg, JAVA_NAME, java_owner, C_NAME, c_owner);
		/* The one message dlock adds: its force unlock of a fair lock also
		 * publishes on the lock's own channel, where a holder that watches
		 * for force unlocks (watch_force_unlock) hears it; Redisson's wakes
		 * only the head waiter, on that waiter's channel. */
		if (strcmp(kind, "fair") == 0 && steps[i].c == c_force)
			put(&jmsg, "redisson_lock__channel:{NAME} <- 0\n");
		fprintf(stderr, "interop wire %s, after %s:\n%s%s", kind, steps[i].what, jdata.s,
				jmsg.s);
		cr_assert_str_eq(cdata.s, jdata.s,
				"%s %s: the data differ\nRedisson:\n%s\ndlock:\n%s", kind,
				steps[i].what, jdata.s, cdata.s);
		cr_assert_str_eq(cmsg.s, jmsg.s,
				"%s %s: the messages differ\nRedisson:\n%s\ndlock:\n%s", kind,
				steps[i].what, jmsg.s, cmsg.s);
	}
}

/* Redisson's side takes a lease with tryLock(0, lease): RFencedLock's
 * lockAndGetToken(lease) ignores the lease (4.7.0, 3.52.0: it calls the
 * watchdog variant), see docs/redisson.md. */
static const step reentry[] = {
	{ "lock (20 s lease)", "try KIND NAME 0 20000", c_lock_leased },
	{ "lock again", "try KIND NAME 0 20000", c_lock_leased },
	{ "a partial unlock", "unlock KIND NAME", c_unlock },
	{ "the last unlock", "unlock KIND NAME", c_unlock },
	{ "lock (watchdog)", "lock KIND NAME -1", c_lock_watchdog },
	{ "force unlock", "force KIND NAME", c_force },
};

Test(redisson_wire, rlock_data_and_messages_match)
{
	dlock_lock *l = dl_lock(cli, C_NAME);
	same_steps("rlock", l, reentry, sizeof reentry / sizeof reentry[0]);
	dlock_lock_free(l);
}

Test(redisson_wire, fair_lock_data_and_messages_match)
{
	dlock_lock *l = NULL;
	dl_pass(dlock_lock_new(&l, cli, C_NAME, dl_kind(DLOCK_LOCK_FAIR)));
	same_steps("fair", l, reentry, sizeof reentry / sizeof reentry[0]);
	dlock_lock_free(l);
}

Test(redisson_wire, fenced_lock_data_and_messages_match)
{
	dlock_lock *l = NULL;
	dl_pass(dlock_lock_new(&l, cli, C_NAME, dl_kind(DLOCK_LOCK_FENCED)));
	same_steps("fenced", l, reentry, sizeof reentry / sizeof reentry[0]);
	dlock_lock_free(l);
}
