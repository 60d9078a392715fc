/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock status [--json] NAME` for every kind Redisson keeps under a name:
 * a lock (the output scripts parse, unchanged), a read-write lock (its mode
 * and readers or writer), an expirable semaphore (permits used and free,
 * their ids and remaining leases), and a count that is a semaphore's free
 * permits or a latch's count (said as such). Anything else is exit 65.
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
	cr_expect(strstr(p->out, ",\"holders\":[{\"owner\":\"job:1\",\"count\":1}]}]}\n") != NULL,
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
					strstr(p->out, "{\"owner\":\"reader:2\",\"count\":1}") != NULL,
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
	dl_pass(dlock_semaphore_acquire_async(&op, s, 1, 20000, 0, ignore, NULL));
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
