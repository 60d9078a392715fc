/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * unix:// URIs against a real redis-server listening on a Unix socket
 * (--unixsocket): locks, the db, AUTH, pub/sub wake-ups, a missing socket,
 * and RedLock members of mixed kinds.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

static char dir[64];
static char sock[128];
static char uri[256];
static rh_server *srv;

/* A server on a socket in a fresh directory; extra_arg/extra_val may add one option. */
static void start(const char *extra_arg, const char *extra_val)
{
	snprintf(dir, sizeof dir, "/tmp/dlock-unix-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock, sizeof sock, "%s/redis.sock", dir);
	snprintf(uri, sizeof uri, "unix://%s", sock);
	const char *args[] = { "--unixsocket", sock, "--unixsocketperm", "700", extra_arg,
		extra_val, NULL };
	srv = rh_server_start(args);
	cr_assert_not_null(srv, "could not start redis-server on %s", sock);
}

static void stop(void)
{
	rh_server_free(srv);
	unlink(sock);
	rmdir(dir);
}

static void start_plain(void)
{
	start(NULL, NULL);
}

TestSuite(unix_socket, .init = start_plain, .fini = stop, .timeout = 60);

Test(unix_socket, a_lock_over_a_unix_socket_is_the_same_lock)
{
	dlock_client *c = dl_client(uri, 2000, 30000);
	char label[160];
	snprintf(label, sizeof label, "unix:%s", sock);
	cr_assert_str_eq(dlock_client_node(c), label);

	dlock_lock *l = dl_lock(c, "over-unix");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
	char owner[128];
	dl_owner(c, owner, sizeof owner);
	cr_assert_eq(rh_command_int(srv, "HEXISTS over-unix %s", owner), 1,
			"the hold is not on the server the TCP port reaches");
	dl_pass(dlock_lock_release(l, NULL));
	/* A TCP client of the same server shares the lock. */
	dlock_client *tcp = dl_client(rh_server_uri(srv), 2000, 30000);
	dlock_lock *other = dl_lock(tcp, "over-unix");
	dl_assert_one_lock(l, other);
	dl_free_locks(other, l);
	dl_close_clients(tcp, c);
}

Test(unix_socket, the_db_query_selects_the_database)
{
	char with_db[300];
	snprintf(with_db, sizeof with_db, "%s?db=5", uri);
	dlock_client *c = dl_client(with_db, 2000, 30000);
	dlock_lock *l = dl_lock(c, "in-db-5");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
	cr_assert_eq(rh_command_int(srv, "EXISTS in-db-5"), 0, "the lock landed in db 0");
	redisReply *r = rh_command(srv, "SELECT 5");
	freeReplyObject(r);
	cr_assert_eq(rh_command_int(srv, "EXISTS in-db-5"), 1, "the lock is not in db 5");
	r = rh_command(srv, "SELECT 0");
	freeReplyObject(r);
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* A waiter on the socket wakes from a TCP client's unlock (pub/sub over both). */
Test(unix_socket, a_unix_waiter_wakes_on_a_tcp_unlock)
{
	dlock_client *tcp = dl_client(rh_server_uri(srv), 2000, 30000);
	dlock_client *ux = dl_client(uri, 2000, 30000);
	dlock_lock *holder = dl_lock(tcp, "wake"), *waiter = dl_lock(ux, "wake");
	dl_assert_unlock_wakes(holder, waiter);
	dl_free_locks(holder, waiter);
	dl_close_clients(ux, tcp);
}

Test(unix_socket, a_missing_socket_is_a_connection_error_naming_it)
{
	char missing[300];
	snprintf(missing, sizeof missing, "unix://%s/nobody.sock", dir);
	dlock_client *c = NULL;
	int rc = dlock_client_new(&c, missing, NULL);
	cr_assert_eq(rc, DLOCK_ECONN, "rc %d", rc);
	const char *msg = dlock_errmsg_last();
	cr_assert(strstr(msg, "nobody.sock") && strstr(msg, "No such file"),
			"the message should name the socket and the cause: %s", msg);
}

Test(unix_socket, one_socket_twice_is_refused_in_a_redlock)
{
	const char *uris[] = { uri, uri, "redis://127.0.0.1:1" };
	dlock_redlock *rl = NULL;
	int rc = dlock_redlock_new_from_uris(&rl, uris, 3, "twice", NULL, NULL);
	cr_assert_eq(rc, DLOCK_EDUPLICATE, "rc %d", rc);
	cr_assert_not_null(strstr(dlock_errmsg_last(), "listed twice"), "%s", dlock_errmsg_last());
}

/* A RedLock over a Unix socket and two TCP servers takes its quorum across both kinds. */
Test(unix_socket, a_redlock_mixes_unix_and_tcp_members)
{
	rh_server *tcp[2];
	cr_assert_eq(rh_servers_start(tcp, 2, NULL), 0);
	const char *uris[] = { uri, rh_server_uri(tcp[0]), rh_server_uri(tcp[1]) };
	dlock_redlock *rl = NULL;
	dl_pass(dlock_redlock_new_from_uris(&rl, uris, 3, "mixed", NULL, NULL));
	int64_t validity = 0;
	cr_assert_eq(dl_redlock_acquire_v(&validity, rl, NULL, 0, 10000), 0, "%s", dlock_redlock_errmsg(rl));
	cr_assert_eq(rh_command_int(srv, "EXISTS mixed"), 1, "not held over the socket");
	cr_assert_eq(rh_command_int(tcp[0], "EXISTS mixed") +
					rh_command_int(tcp[1], "EXISTS mixed"),
			2);
	dl_pass(dlock_redlock_release(rl, NULL));
	cr_assert_eq(rh_command_int(srv, "EXISTS mixed"), 0);
	dlock_redlock_free(rl);
	rh_server_free(tcp[0]);
	rh_server_free(tcp[1]);
}

/* AUTH over the socket; a wrong password is an auth error naming the socket. */
static void start_with_password(void)
{
	start("--requirepass", "s3cret");
}

Test(unix_socket, auth_over_the_socket, .init = start_with_password)
{
	char good[300], bad[300];
	snprintf(good, sizeof good, "unix://:s3cret@%s", sock);
	snprintf(bad, sizeof bad, "unix://:wrong@%s", sock);
	dlock_client *c = dl_client(good, 2000, 30000);
	dl_pass(dlock_client_ping(c));
	dlock_client_free(c);

	c = NULL;
	int rc = dlock_client_new(&c, bad, NULL);
	cr_assert_eq(rc, DLOCK_EAUTH, "rc %d", rc);
	cr_assert_not_null(strstr(dlock_errmsg_last(), sock), "%s", dlock_errmsg_last());
	cr_assert_null(strstr(dlock_errmsg_last(), "wrong"), "the password leaked: %s",
			dlock_errmsg_last());
}

/* Where `word` starts in the first line of `text` that holds it; -1 if none. */
static long column_of(const char *text, const char *word)
{
	const char *hit = strstr(text, word), *line = hit;

	if (hit == NULL)
		return -1;
	while (line > text && line[-1] != '\n')
		line--;
	return (long)(hit - line);
}

/* `dlock status` keeps its columns aligned with a node name longer than 24. */
Test(unix_socket, status_table_stays_aligned_with_a_long_socket_path)
{
	dlock_client *c = dl_client(uri, 2000, 30000);
	dlock_lock *l = dl_lock(c, "aligned");
	proc *p;

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
	p = DLOCK("-n", uri, "status", "aligned");
	EXPECT_STATUS(p, 0);
	cr_expect_gt(strlen(sock), 24, "the socket path is too short to test this: %s", sock);
	cr_expect_eq(column_of(p->out, "STATE"), column_of(p->out, "held  "), "%s", p->out);
	cr_expect_eq(column_of(p->out, "OWNER"), column_of(p->out, dlock_client_id(c)), "%s",
			p->out);
	proc_free(p);
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
	dlock_client_free(c);
}
