/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One server listed twice under two spellings must not be counted twice
 * (issue 21 item 3): refused when the MultiLock/RedLock is made when the
 * addresses resolve alike (127.0.0.1:P and localhost:P), and at the first
 * acquisition when only the server's run_id shows it (a server's Unix
 * socket and its TCP port), with nothing left held. The server here
 * listens on both.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_harness.h"
#include "support.h"

static char dir[64];
static char sock[128];
static char unix_uri[256], localhost_uri[64];
static rh_server *srv, *other;

static void start(void)
{
	snprintf(dir, sizeof dir, "/tmp/dlock-dup-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock, sizeof sock, "%s/redis.sock", dir);
	snprintf(unix_uri, sizeof unix_uri, "unix://%s", sock);
	const char *args[] = { "--unixsocket", sock, "--unixsocketperm", "700", NULL };
	srv = rh_server_start(args);
	cr_assert_not_null(srv, "could not start redis-server on %s", sock);
	other = rh_server_start(NULL);
	cr_assert_not_null(other);
	snprintf(localhost_uri, sizeof localhost_uri, "redis://localhost:%d", rh_server_port(srv));
}

static void stop(void)
{
	rh_server_free(other);
	rh_server_free(srv);
	unlink(sock);
	rmdir(dir);
}

TestSuite(duplicates, .init = start, .fini = stop, .timeout = 60);

/* The message names both spellings, as written. */
static void assert_names_both(const char *msg, const char *a, const char *b)
{
	cr_assert(strstr(msg, a) != NULL && strstr(msg, b) != NULL && strstr(msg, "twice") != NULL,
			"the message should name %s and %s: %s", a, b, msg);
}

Test(duplicates, localhost_and_its_address_are_refused_when_made)
{
	char tcp_label[64], localhost_label[64];
	snprintf(tcp_label, sizeof tcp_label, "127.0.0.1:%d", rh_server_port(srv));
	snprintf(localhost_label, sizeof localhost_label, "localhost:%d", rh_server_port(srv));
	const char *uris[3] = { rh_server_uri(srv), localhost_uri, rh_server_uri(other) };
	dlock_redlock *rl = NULL;

	int64_t t0 = rh_now_ms();
	int rc = dlock_redlock_new_from_uris(&rl, uris, 3, "dup:new", NULL, NULL);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_EDUPLICATE, "rc %d (%s): %s", rc, dlock_strerror(rc),
			dlock_errmsg_last());
	cr_assert_null(rl);
	assert_names_both(dlock_errmsg_last(), tcp_label, localhost_label);
	cr_assert_lt(took, 2000, "refusing took %lld ms (a name lookup, no connection)",
			(long long)took);
	cr_assert_eq(rh_command_int(srv, "EXISTS dup:new"), 0);

	/* A MultiLock of one name on both spellings too; two names are fine. */
	dlock_client *a = dl_client(rh_server_uri(srv), 2000, 30000);
	dlock_client *b = dl_client(localhost_uri, 2000, 30000);
	dlock_lock *la = dl_lock(a, "dup:m"), *lb = dl_lock(b, "dup:m"), *lc = dl_lock(b, "dup:m2");
	dlock_lock *same[2] = { la, lb }, *two_names[2] = { la, lc };
	dlock_multilock *m = NULL;
	rc = dlock_multilock_new(&m, same, 2, NULL);
	cr_assert_eq(rc, DLOCK_EDUPLICATE, "rc %d: %s", rc, dlock_errmsg_last());
	assert_names_both(dlock_errmsg_last(), tcp_label, localhost_label);
	dl_pass(dlock_multilock_new(&m, two_names, 2, NULL));
	dlock_multilock_free(m);
	dl_free_locks(la, lb, lc);
	dl_close_clients(a, b);
}

/* Held on srv or other under `name`, by anyone. */
static int64_t held_anywhere(const char *name)
{
	return rh_command_int(srv, "EXISTS %s", name) + rh_command_int(other, "EXISTS %s", name);
}

/*
 * The socket and the TCP port of one server: no address tells, its run_id
 * does once connected. Without the check the RedLock took a "quorum" of 2
 * of 3 on one server (hold count 2 there).
 */
Test(duplicates, a_socket_and_its_port_are_refused_at_the_first_acquisition)
{
	char tcp_label[64], unix_label[160];
	snprintf(tcp_label, sizeof tcp_label, "127.0.0.1:%d", rh_server_port(srv));
	snprintf(unix_label, sizeof unix_label, "unix:%s", sock);
	const char *uris[3] = { unix_uri, rh_server_uri(srv), rh_server_uri(other) };
	dlock_redlock *rl = NULL;
	dl_pass(dlock_redlock_new_from_uris(&rl, uris, 3, "dup:runid", NULL, NULL));

	int64_t validity = 0;
	int rc = dl_redlock_acquire_v(&validity, rl, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_EDUPLICATE, "first try: rc %d (%s): %s", rc, dlock_strerror(rc),
			dlock_redlock_errmsg(rl));
	assert_names_both(dlock_redlock_errmsg(rl), unix_label, tcp_label);
	cr_assert_eq(held_anywhere("dup:runid"), 0, "the refused acquisition left a hold");
	cr_assert_eq(dlock_redlock_check_servers(rl), DLOCK_EDUPLICATE);

	/* Known now: the next try is refused before anything is sent. */
	freeReplyObject(rh_command(srv, "CONFIG RESETSTAT"));
	rc = dl_redlock_acquire_v(&validity, rl, NULL, 1000, 10000);
	cr_assert_eq(rc, DLOCK_EDUPLICATE, "second try: rc %d: %s", rc, dlock_redlock_errmsg(rl));
	redisReply *r = rh_command(srv, "INFO commandstats");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
	cr_assert_null(strstr(r->str, "cmdstat_eval"), "a script ran:\n%s", r->str);
	freeReplyObject(r);
	int locked = -1;
	cr_assert_eq(dlock_redlock_is_locked(&locked, rl), DLOCK_EDUPLICATE);
	dlock_redlock_free(rl);
}

/* A MultiLock's one attempt (wait 0: members in order) and its wait
 * (parallel first) re-entered the same hold; both are refused, nothing held. */
Test(duplicates, a_multilock_over_a_socket_and_its_port_holds_nothing)
{
	dlock_client *ux = dl_client(unix_uri, 2000, 30000);
	dlock_client *tcp = dl_client(rh_server_uri(srv), 2000, 30000);
	dlock_lock *a = dl_lock(ux, "dup:multi"), *b = dl_lock(tcp, "dup:multi");
	dlock_lock *members[2] = { a, b };
	dlock_multilock *m = NULL;
	dl_pass(dlock_multilock_new(&m, members, 2, NULL));

	int rc = dlock_multilock_acquire(m, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_EDUPLICATE, "wait 0: rc %d: %s", rc, dlock_multilock_errmsg(m));
	cr_assert_eq(held_anywhere("dup:multi"), 0, "the refused acquisition left a hold");
	dlock_multilock_free(m);

	/* Fresh clients again, now with a wait: the parallel attempt. */
	dlock_client *ux2 = dl_client(unix_uri, 2000, 30000);
	dlock_client *tcp2 = dl_client(rh_server_uri(srv), 2000, 30000);
	dlock_lock *c = dl_lock(ux2, "dup:multi"), *d = dl_lock(tcp2, "dup:multi");
	dlock_lock *members2[2] = { c, d };
	dl_pass(dlock_multilock_new(&m, members2, 2, NULL));
	int64_t t0 = rh_now_ms();
	rc = dlock_multilock_acquire(m, NULL, 3000, DLOCK_LEASE_WATCHDOG);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_EDUPLICATE, "wait 3000: rc %d: %s", rc, dlock_multilock_errmsg(m));
	cr_assert_lt(took, 2500, "refused after %lld ms: it should not wait out the 3000 ms",
			(long long)took);
	cr_assert_eq(held_anywhere("dup:multi"), 0, "the refused acquisition left a hold");
	dlock_multilock_free(m);
	dl_free_locks(a, b, c, d);
	dl_close_clients(ux, tcp, ux2, tcp2);
}

/*
 * Wait 0 with a dead third member: the ordered round takes the socket
 * (count 1) and the port (count 2, one hold re-entered), fails on the dead
 * member and gives both back, before the run_id shows them one server.
 * The two rollbacks ran at once, each only on the count it expected: when
 * the socket's (1) reached the server before the port's (2), a count of 1
 * stayed held. Fresh clients each time (the run_id is learnt once), an
 * explicit owner and the thread's own.
 */
Test(duplicates, a_failed_round_over_a_socket_and_its_port_gives_both_holds_back)
{
	char dead[64], tcp_label[64], unix_label[160];
	snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", rh_free_port());
	snprintf(tcp_label, sizeof tcp_label, "127.0.0.1:%d", rh_server_port(srv));
	snprintf(unix_label, sizeof unix_label, "unix:%s", sock);

	/* Connected on first use, as the command does: nothing is known before the round. */
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.connect_timeout_ms = o.command_timeout_ms = 2000;
	o.lazy_connect = 1;

	for (int i = 0; i < 10; i++) {
		const char *owner = i % 2 == 0 ? "me:1" : NULL;
		dlock_client *ux = dl_client_opts(unix_uri, &o);
		dlock_client *tcp = dl_client_opts(rh_server_uri(srv), &o);
		dlock_client *gone = dl_client_opts(dead, &o);
		dlock_lock *a = dl_lock(ux, "dup:round"), *b = dl_lock(tcp, "dup:round");
		dlock_lock *c = dl_lock(gone, "dup:round");
		dlock_lock *members[3] = { a, b, c };
		dlock_multilock *m = NULL;
		dl_pass(dlock_multilock_new(&m, members, 3, NULL));

		int rc = owner != NULL ? dlock_multilock_acquire(m, owner, 0, 5000)
				       : dlock_multilock_acquire(m, NULL, 0, 5000);
		cr_assert_eq(rc, DLOCK_EDUPLICATE, "try %d (owner %s): rc %d (%s): %s", i,
				owner != NULL ? owner : "the thread's", rc, dlock_strerror(rc),
				dlock_multilock_errmsg(m));
		assert_names_both(dlock_multilock_errmsg(m), unix_label, tcp_label);
		cr_assert_eq(held_anywhere("dup:round"), 0,
				"try %d (owner %s): the refused acquisition left a hold (%lld fields)", i,
				owner != NULL ? owner : "the thread's",
				(long long)rh_command_int(srv, "HLEN dup:round"));
		dlock_multilock_free(m);
		dl_free_locks(a, b, c);
		dl_close_clients(ux, tcp, gone);
	}
}
