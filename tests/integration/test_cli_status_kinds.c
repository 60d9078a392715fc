/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock status [--json] NAME` for every kind Redisson keeps under a name:
 * a lock (the output scripts parse, unchanged), a read-write lock (its mode
 * and readers or writer), an expirable semaphore (permits used and free,
 * their ids and remaining leases), and a count that is a semaphore's free
 * permits or a latch's count (said as such). Anything else is exit 65.
 * Each holder's TTL (a reader's per read hold) and the waiters: a fair
 * lock's queue in order, and the clients listening on the lock's channel.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"

TestSuite(cli_status_kinds, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

static proc *status(const char *json, const char *name)
{
	return json ? DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "status", "--json", name)
		    : DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "status", name);
}

static void acquire(const char *half, const char *owner, const char *name)
{
	proc *p = half ? DLOCK("-n", rh_server_uri(dl_srv), "acquire", half, "-l", "20000",
				       "--owner", owner, name)
		       : DLOCK("-n", rh_server_uri(dl_srv), "acquire", "-l", "20000", "--owner",
				       owner, name);

	ASSERT_STATUS(p, 0);
	proc_free(p);
}

/* The first line of s. */
static const char *first_line(const char *s, char *buf, size_t len)
{
	size_t n = strcspn(s, "\n");

	snprintf(buf, len, "%.*s", (int)n, s);
	return buf;
}

Test(cli_status_kinds, a_plain_locks_output_is_unchanged)
{
	char want[512], line[512];
	proc *p;

	acquire(NULL, "job:1", "plain");
	p = status(NULL, "plain");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(first_line(p->out, line, sizeof line),
			"lock \"plain\" (rlock, 1 node, quorum 1): held on 1, reachable 1");
	cr_expect(strstr(p->out, "\nNODE                     STATE        TTL_MS   COUNT  OWNER\n") !=
					NULL,
			"%s", p->out);
	snprintf(want, sizeof want, "\n%-24s held         ", rh_server_uri(dl_srv) + 8);
	cr_expect(strstr(p->out, want) != NULL && strstr(p->out, " 1      job:1\n") != NULL, "%s",
			p->out);
	proc_free(p);
	p = status("json", "plain");
	EXPECT_STATUS(p, 0);
	snprintf(want, sizeof want,
			"{\"name\":\"plain\",\"mode\":\"rlock\",\"quorum\":1,\"held_on\":1,\"nodes\":"
			"[{\"node\":\"%s\",\"reachable\":true,\"ttl_ms\":",
			rh_server_uri(dl_srv) + 8);
	cr_expect(strncmp(p->out, want, strlen(want)) == 0, "%s", p->out);
	cr_expect(strstr(p->out, ",\"holders\":[{\"owner\":\"job:1\",\"count\":1,\"ttl_ms\":") !=
					NULL,
			"%s", p->out);
	cr_expect(strstr(p->out, "}],\"subscribers\":0,\"queued\":0,\"queue\":[]}]}\n") != NULL,
			"%s", p->out);
	cr_expect(strstr(p->out, "kind") == NULL, "a plain lock's JSON grew a kind: %s", p->out);
	proc_free(p);
	/* Nothing there: a free lock, as always. */
	p = status(NULL, "nothing");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(first_line(p->out, line, sizeof line),
			"lock \"nothing\" (rlock, 1 node, quorum 1): held on 0, reachable 1");
	proc_free(p);
}

Test(cli_status_kinds, a_read_write_lock_shows_its_mode_and_holders)
{
	char line[512];
	proc *p;

	acquire("-s", "reader:1", "catalog");
	acquire("-s", "reader:2", "catalog");
	p = status(NULL, "catalog");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(first_line(p->out, line, sizeof line),
			"read-write lock \"catalog\" (rlock, 1 node, quorum 1): read mode, held on 1, "
			"reachable 1");
	cr_expect(strstr(p->out, " read ") != NULL && strstr(p->out, "reader:1\n") != NULL &&
					strstr(p->out, "reader:2\n") != NULL,
			"%s", p->out);
	proc_free(p);
	p = status("json", "catalog");
	EXPECT_STATUS(p, 0);
	cr_expect(strstr(p->out, "\"kind\":\"rwlock\",\"rw_mode\":\"read\"") != NULL &&
					strstr(p->out, "{\"owner\":\"reader:2\",\"count\":1,\"ttl_ms\":") != NULL,
			"%s", p->out);
	proc_free(p);

	acquire("-x", "writer:1", "schema");
	p = status(NULL, "schema");
	EXPECT_STATUS(p, 0);
	cr_expect(strstr(p->out, "): write mode, held on 1") != NULL &&
					strstr(p->out, " write ") != NULL &&
					strstr(p->out, "writer:1:write\n") != NULL,
			"%s", p->out);
	proc_free(p);
	p = status("json", "schema");
	cr_expect(strstr(p->out, "\"owner\":\"writer:1:write\"") != NULL &&
					strstr(p->out, "\"rw_mode\":\"write\"") != NULL,
			"%s", p->out);
	proc_free(p);
}

static dlock_semaphore *semaphore(dlock_client *c, const char *name, dlock_semaphore_kind kind)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;

	o.kind = kind;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	return s;
}

Test(cli_status_kinds, an_expirable_semaphore_shows_its_permits_and_leases)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = semaphore(c, "pool", DLOCK_SEMAPHORE_EXPIRABLE);
	char a[DLOCK_PERMIT_ID_SIZE], b[DLOCK_PERMIT_ID_SIZE], line[512], want[128];
	proc *p;

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 3));
	dl_pass(dlock_semaphore_acquire_permit(a, s, 0, 20000));
	dl_pass(dlock_semaphore_acquire_permit(b, s, 0, 20000));
	p = status(NULL, "pool");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(first_line(p->out, line, sizeof line),
			"expirable semaphore \"pool\" (rlock, 1 node, quorum 1): 2 permits used, "
			"1 free, 0 waiting, reachable 1");
	cr_expect(strstr(p->out, "LEASE_MS") != NULL && strstr(p->out, a) != NULL &&
					strstr(p->out, b) != NULL && strstr(p->out, " free ") != NULL,
			"%s", p->out);
	proc_free(p);
	p = status("json", "pool");
	EXPECT_STATUS(p, 0);
	cr_expect(strstr(p->out, "\"kind\":\"semaphore\",\"expirable\":true,\"used\":2,\"free\":1") !=
					NULL,
			"%s", p->out);
	snprintf(want, sizeof want, "{\"id\":\"%s\",\"lease_ms\":", a);
	const char *at = strstr(p->out, want);
	cr_assert_not_null(at, "%s", p->out);
	long long lease = strtoll(at + strlen(want), NULL, 10);
	cr_expect(lease > 15000 && lease <= 20000, "permit %s: lease %lld ms of 20000", a, lease);
	cr_expect(strstr(p->out, "\"held_on\":1") != NULL, "%s", p->out);
	proc_free(p);
	/* Looking changes nothing. */
	cr_expect_eq(rh_command_int(dl_srv, "ZCARD {pool}:timeout"), 2);
	dl_pass(dlock_semaphore_release_permit(s, a));
	dl_pass(dlock_semaphore_release_permit(s, b));
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

Test(cli_status_kinds, a_count_says_what_it_may_be)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = semaphore(c, "plain-sem", DLOCK_SEMAPHORE_PLAIN);
	char line[512];
	proc *p;

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 3));
	p = status(NULL, "plain-sem");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(first_line(p->out, line, sizeof line),
			"count \"plain-sem\" (rlock, 1 node, quorum 1): 3 (a semaphore's free permits "
			"or a latch's count), reachable 1");
	proc_free(p);

	p = DLOCK("-n", rh_server_uri(dl_srv), "latch", "set", "gate", "4");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	p = status("json", "gate");
	EXPECT_STATUS(p, 0);
	cr_expect(strstr(p->out, "\"kind\":\"count\",\"count\":4,\"could_be\":[\"semaphore\","
				 "\"latch\"]") != NULL,
			"%s", p->out);
	proc_free(p);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

static void ignore(dlock_op *op, const dlock_result *r, void *ud)
{
	(void)op, (void)r, (void)ud;
}

/* Who waits tells them apart: a latch's waiters listen on its channel, a
 * semaphore's on the semaphore's. */
Test(cli_status_kinds, waiters_tell_a_latch_from_a_semaphore)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_semaphore *s = semaphore(c, "empty-sem", DLOCK_SEMAPHORE_PLAIN);
	char line[512];
	dlock_op *op = NULL;
	proc *p, *waiter;

	p = DLOCK("-n", rh_server_uri(dl_srv), "latch", "set", "gate", "2");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	waiter = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "latch", "wait", "gate"));
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000;) {
		redisReply *r = rh_command(dl_srv, "PUBSUB NUMSUB redisson_countdownlatch__channel__{gate}");
		long long n = r != NULL && r->type == REDIS_REPLY_ARRAY ? r->element[1]->integer : 0;

		freeReplyObject(r);
		if (n > 0)
			break;
		dl_sleep_ms(20);
	}
	p = status(NULL, "gate");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(first_line(p->out, line, sizeof line),
			"latch \"gate\" (rlock, 1 node, quorum 1): count 2, 1 waiting, reachable 1");
	proc_free(p);
	p = status("json", "gate");
	cr_expect(strstr(p->out, "\"kind\":\"latch\",\"count\":2,\"waiters\":1") != NULL, "%s",
			p->out);
	proc_free(p);
	kill(waiter->pid, SIGTERM);
	proc_wait(waiter, HARD_TIMEOUT_S);
	proc_free(waiter);

	/* No permit free, one waiting: a semaphore. */
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 0));
	dl_pass(dlock_semaphore_acquire_async(&op, s, 1, 20000, ignore, NULL));
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000;) {
		redisReply *r = rh_command(dl_srv, "PUBSUB NUMSUB redisson_sc:{empty-sem}");
		long long n = r != NULL && r->type == REDIS_REPLY_ARRAY ? r->element[1]->integer : 0;

		freeReplyObject(r);
		if (n > 0)
			break;
		dl_sleep_ms(20);
	}
	p = status(NULL, "empty-sem");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(first_line(p->out, line, sizeof line),
			"semaphore \"empty-sem\" (rlock, 1 node, quorum 1): 0 free, 1 waiting, "
			"reachable 1");
	proc_free(p);
	dlock_op_cancel(op);
	dlock_op_free(op);
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

Test(cli_status_kinds, anything_else_is_exit_65)
{
	proc *p;

	freeReplyObject(rh_command(dl_srv, "RPUSH a-list x"));
	freeReplyObject(rh_command(dl_srv, "SET a-word hello"));
	p = status(NULL, "a-list");
	EXPECT_STATUS(p, 65);
	cr_expect(strstr(p->err, "not a Redisson/dlock lock (another lock library?), semaphore or "
				 "latch") != NULL,
			"%s", p->err);
	proc_free(p);
	p = status("json", "a-word");
	EXPECT_STATUS(p, 65);
	proc_free(p);
}

/* A number after `key` in s (the first one after `from`), or -999. */
static long long number_after(const char *s, const char *key)
{
	const char *at = strstr(s, key);

	return at != NULL ? strtoll(at + strlen(key), NULL, 10) : -999;
}

/* Until `n` clients listen on `channel` (5 s at most). */
static void wait_subscribers(const char *channel, long long n)
{
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000;) {
		redisReply *r = rh_command(dl_srv, "PUBSUB NUMSUB %s", channel);
		long long got = r != NULL && r->type == REDIS_REPLY_ARRAY ? r->element[1]->integer : 0;

		freeReplyObject(r);
		if (got >= n)
			return;
		dl_sleep_ms(20);
	}
	cr_assert_fail("%lld clients never listened on %s", n, channel);
}

Test(cli_status_kinds, a_fair_locks_queue_shows_in_order_with_each_place)
{
	const char *uri = rh_server_uri(dl_srv);
	char line[512], first[128], second[128], want[256];
	proc *p, *w[2];

	p = DLOCK("-n", uri, "--fair", "acquire", "-l", "20000", "--owner", "boss:1", "fq");
	ASSERT_STATUS(p, 0);
	proc_free(p);
	for (int i = 0; i < 2; i++) {
		w[i] = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "--fair", "run", "-w", "15000", "fq",
				"--", "true"));
		for (int64_t t0 = rh_now_ms(); rh_command_int(dl_srv, "LLEN redisson_lock_queue:{fq}") <
						 i + 1 && rh_now_ms() - t0 < 5000;)
			dl_sleep_ms(10);
	}
	cr_assert_eq(rh_command_int(dl_srv, "LLEN redisson_lock_queue:{fq}"), 2, "two queued");
	redisReply *q = rh_command(dl_srv, "LRANGE redisson_lock_queue:{fq} 0 -1");
	cr_assert(q != NULL && q->type == REDIS_REPLY_ARRAY && q->elements == 2);
	snprintf(first, sizeof first, "%s", q->element[0]->str);
	snprintf(second, sizeof second, "%s", q->element[1]->str);
	freeReplyObject(q);

	p = status(NULL, "fq");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(first_line(p->out, line, sizeof line),
			"lock \"fq\" (rlock, 1 node, quorum 1): held on 1, reachable 1, 2 waiting");
	const char *a = strstr(p->out, first), *b = strstr(p->out, second);
	cr_expect(a != NULL && b != NULL && a < b && strstr(p->out, " waiting ") != NULL,
			"the queue in order (%s, then %s): %s", first, second, p->out);
	proc_free(p);

	p = status("json", "fq");
	EXPECT_STATUS(p, 0);
	long long held = number_after(p->out, "\"owner\":\"boss:1\",\"count\":1,\"ttl_ms\":");
	cr_expect(held > 15000 && held <= 20000, "the holder's TTL: %lld ms of 20000", held);
	cr_expect(strstr(p->out, "\"queued\":2,\"queue\":[{\"owner\":\"") != NULL, "%s", p->out);
	snprintf(want, sizeof want, "{\"owner\":\"%s\",\"timeout_ms\":", first);
	long long place = number_after(p->out, want);
	/* Redisson's place: the holder's TTL plus the 5 min fair wait. */
	cr_expect(place > held, "the first waiter's place lasts %lld ms, the hold %lld", place, held);
	snprintf(want, sizeof want, "{\"owner\":\"%s\",\"timeout_ms\":", second);
	cr_expect(number_after(p->out, want) > place, "the second waits longer: %s", p->out);
	cr_expect(number_after(p->out, "\"subscribers\":") >= 2, "%s", p->out);
	proc_free(p);

	p = DLOCK("-n", uri, "--fair", "release", "--owner", "boss:1", "fq");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(proc_wait(w[i], HARD_TIMEOUT_S), 0);
		EXPECT_STATUS(w[i], 0);
		proc_free(w[i]);
	}
}

Test(cli_status_kinds, a_readers_holds_each_show_their_own_ttl)
{
	proc *p;

	p = DLOCK("-n", rh_server_uri(dl_srv), "acquire", "-s", "-l", "20000", "--owner", "r:1",
			"shelf");
	ASSERT_STATUS(p, 0);
	proc_free(p);
	p = DLOCK("-n", rh_server_uri(dl_srv), "acquire", "-s", "-l", "5000", "--owner", "r:1",
			"shelf");
	ASSERT_STATUS(p, 0);
	proc_free(p);
	p = status("json", "shelf");
	EXPECT_STATUS(p, 0);
	long long ttl = number_after(p->out, "\"owner\":\"r:1\",\"count\":2,\"ttl_ms\":");
	long long one = number_after(p->out, "\"holds_ttl_ms\":[");
	const char *comma = strstr(p->out, "\"holds_ttl_ms\":[");
	long long two = comma != NULL ? number_after(comma, ",") : -999;
	cr_expect(one > 15000 && one <= 20000 && two > 0 && two <= 5000,
			"the two read holds last %lld and %lld ms (20000 and 5000 asked): %s", one, two,
			p->out);
	cr_expect_eq(ttl, one, "the reader's TTL is its longest hold's: %s", p->out);
	proc_free(p);
}

/* A plain lock's waiters are seen only as clients listening on its channel. */
Test(cli_status_kinds, a_plain_locks_waiters_are_counted)
{
	const char *uri = rh_server_uri(dl_srv);
	char line[512];
	proc *p, *w;

	p = DLOCK("-n", uri, "acquire", "-l", "20000", "--owner", "boss:1", "busy");
	ASSERT_STATUS(p, 0);
	proc_free(p);
	w = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "-w", "15000", "busy", "--", "true"));
	wait_subscribers("redisson_lock__channel:{busy}", 1);
	p = status(NULL, "busy");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(first_line(p->out, line, sizeof line),
			"lock \"busy\" (rlock, 1 node, quorum 1): held on 1, reachable 1, 1 waiting or "
			"watching");
	proc_free(p);
	p = status("json", "busy");
	cr_expect(strstr(p->out, "\"subscribers\":1,\"queued\":0,\"queue\":[]") != NULL, "%s",
			p->out);
	proc_free(p);
	p = DLOCK("-n", uri, "release", "--owner", "boss:1", "busy");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_assert_eq(proc_wait(w, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(w, 0);
	proc_free(w);
}
