/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Self-test of the redis-server harness: the other integration tests rely on
 * it to start, kill, pause and restart servers and to leave nothing behind.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_harness.h"

/* PING over a fresh connection: 1 when the server answers PONG. */
static int ping_fresh(int port, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
	if (!c)
		return 0;
	int ok = 0;
	if (!c->err && redisSetTimeout(c, tv) == REDIS_OK) {
		redisReply *r = redisCommand(c, "PING");
		ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
		if (r)
			freeReplyObject(r);
	}
	redisFree(c);
	return ok;
}

/* A socket listening on 127.0.0.1:port with this backlog, or -1 when the
 * port is taken. */
static int listen_on(int port, int backlog)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	int one = 1;
	/* As redis does: TIME_WAIT leftovers from closed connections do not count. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, backlog) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* 1 when nothing listens on 127.0.0.1:port (we can listen there ourselves). */
static int port_is_free(int port)
{
	int fd = listen_on(port, 1);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static void assert_pong(rh_server *s)
{
	redisReply *r = rh_command(s, "PING");
	cr_assert_not_null(r, "no reply from port %d", rh_server_port(s));
	cr_assert_eq(r->type, REDIS_REPLY_STATUS);
	cr_assert_str_eq(r->str, "PONG");
	freeReplyObject(r);
}

/* CONFIG GET name -> its value copied into buf. */
static void config_get(rh_server *s, const char *name, char *buf, size_t cap)
{
	redisReply *r = rh_command(s, "CONFIG GET %s", name);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->elements, 2);
	snprintf(buf, cap, "%s", r->element[1]->str);
	freeReplyObject(r);
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL)
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
}

Test(harness, three_servers_on_distinct_ports_answer_ping, .timeout = 30)
{
	rh_server *s[3];
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);

	for (int i = 0; i < 3; i++) {
		int port = rh_server_port(s[i]);
		cr_assert_gt(port, 0);
		cr_assert_gt(rh_server_pid(s[i]), 0);
		for (int j = 0; j < i; j++) {
			cr_assert_neq(port, rh_server_port(s[j]));
			cr_assert_neq(rh_server_pid(s[i]), rh_server_pid(s[j]));
		}
		char uri[64];
		snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", port);
		cr_assert_str_eq(rh_server_uri(s[i]), uri);
		assert_pong(s[i]);
		cr_assert(ping_fresh(port, 1000));

		/* No persistence, loopback only. */
		char v[256];
		config_get(s[i], "save", v, sizeof v);
		cr_assert_str_eq(v, "");
		config_get(s[i], "appendonly", v, sizeof v);
		cr_assert_str_eq(v, "no");
		config_get(s[i], "bind", v, sizeof v);
		cr_assert_str_eq(v, "127.0.0.1");
	}
	for (int i = 0; i < 3; i++)
		rh_server_free(s[i]);
}

Test(harness, kill_frees_port_and_restart_comes_back_empty, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	int port = rh_server_port(s);
	pid_t old_pid = rh_server_pid(s);

	redisReply *r = rh_command(s, "SET %s %s", "k", "v");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	cr_assert_eq(rh_command_int(s, "EXISTS %s", "k"), 1);

	cr_assert_eq(rh_server_kill(s), 0);
	cr_assert_eq(rh_server_pid(s), 0);
	cr_assert_eq(kill(old_pid, 0), -1);
	cr_assert_eq(errno, ESRCH);
	cr_assert_not(ping_fresh(port, 300));
	cr_assert_null(rh_command(s, "PING"));
	cr_assert(port_is_free(port), "port %d still in use after kill", port);

	cr_assert_eq(rh_server_restart(s), 0);
	cr_assert_eq(rh_server_port(s), port);
	cr_assert_gt(rh_server_pid(s), 0);
	cr_assert_neq(rh_server_pid(s), old_pid);
	assert_pong(s);
	cr_assert(ping_fresh(port, 1000));
	cr_assert_eq(rh_command_int(s, "EXISTS %s", "k"), 0);
	cr_assert_eq(rh_command_int(s, "DBSIZE"), 0);

	rh_server_free(s);
}

Test(harness, restart_on_a_taken_port_fails_in_bounded_time, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	int port = rh_server_port(s);
	cr_assert_eq(rh_server_kill(s), 0);

	int fd = listen_on(port, 4);
	cr_assert_geq(fd, 0, "could not take port %d back from the killed server", port);

	int64_t t0 = rh_now_ms();
	cr_assert_eq(rh_server_restart(s), -1);
	cr_assert_lt(rh_now_ms() - t0, 15000);
	cr_assert_eq(rh_server_pid(s), 0);

	/* Once the port is free again, restart works. */
	close(fd);
	cr_assert_eq(rh_server_restart(s), 0);
	assert_pong(s);
	rh_server_free(s);
}

Test(harness, paused_server_times_out_and_resumes, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	assert_pong(s); /* the cached connection exists before the pause */

	cr_assert_eq(rh_server_pause(s), 0);
	cr_assert_gt(rh_server_pid(s), 0);

	/* The kernel still accepts the connection; the server never answers. */
	struct timeval tv = { 0, 300 * 1000 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", rh_server_port(s), tv);
	cr_assert_not_null(c);
	cr_assert_eq(c->err, 0, "connect: %s", c->errstr);
	cr_assert_eq(redisSetTimeout(c, tv), REDIS_OK);
	int64_t t0 = rh_now_ms();
	redisReply *r = redisCommand(c, "PING");
	int64_t elapsed = rh_now_ms() - t0;
	cr_assert_null(r, "a paused server answered");
	cr_assert_neq(c->err, 0);
	cr_assert_geq(elapsed, 250);
	cr_assert_lt(elapsed, 3000);
	redisFree(c);

	cr_assert_eq(rh_server_resume(s), 0);
	assert_pong(s);
	cr_assert(ping_fresh(rh_server_port(s), 1000));
	rh_server_free(s);
}

Test(harness, free_leaves_no_process_and_no_directory, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	pid_t pid = rh_server_pid(s);
	char dir[PATH_MAX];
	config_get(s, "dir", dir, sizeof dir);
	struct stat st;
	cr_assert_eq(stat(dir, &st), 0);

	rh_server_free(s);
	cr_assert_eq(kill(pid, 0), -1);
	cr_assert_eq(errno, ESRCH);
	cr_assert_eq(stat(dir, &st), -1);
	cr_assert_eq(errno, ENOENT);
}

Test(harness, free_of_a_paused_server_leaves_no_process, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	pid_t pid = rh_server_pid(s);
	cr_assert_eq(rh_server_pause(s), 0);
	rh_server_free(s);
	cr_assert_eq(kill(pid, 0), -1);
	cr_assert_eq(errno, ESRCH);
	rh_server_free(NULL);
}

Test(harness, extra_args_password_and_debug_command, .timeout = 30)
{
	const char *const extra[] = { "--requirepass", "s3cret", NULL };
	rh_server *s = rh_server_start(extra);
	cr_assert_not_null(s);

	/* rh_command authenticates with the --requirepass value. */
	assert_pong(s);
	/* A connection without AUTH is refused. */
	cr_assert_not(ping_fresh(rh_server_port(s), 1000));

	/* DEBUG SLEEP is available (redis 7 needs --enable-debug-command). */
	redisReply *r = rh_command(s, "DEBUG SLEEP 0");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STATUS, "DEBUG SLEEP: %s",
			r->type == REDIS_REPLY_ERROR ? r->str : "?");
	freeReplyObject(r);
	rh_server_free(s);
}

/* What the child reports through the pipe: its server's pid and directory. */
typedef struct server_report {
	pid_t pid;
	char dir[PATH_MAX];
} server_report;

/*
 * A test process that dies without cleaning up (crash, Criterion timeout)
 * must leave no server: a forked child starts one and _exit()s. We become a
 * child subreaper so the orphaned server is reparented to us; then we can
 * observe (and reap) its death without depending on init.
 */
Test(harness, dying_parent_leaves_no_server, .timeout = 30)
{
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	int fds[2];
	cr_assert_eq(pipe(fds), 0);

	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		close(fds[0]);
		server_report msg;
		memset(&msg, 0, sizeof msg);
		rh_server *s = rh_server_start(NULL);
		if (s) {
			msg.pid = rh_server_pid(s);
			redisReply *r = rh_command(s, "CONFIG GET dir");
			if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
				snprintf(msg.dir, sizeof msg.dir, "%s", r->element[1]->str);
			if (r)
				freeReplyObject(r);
		}
		ssize_t w = write(fds[1], &msg, sizeof msg);
		_exit(w == (ssize_t)sizeof msg ? 0 : 1); /* no cleanup, no atexit */
	}
	close(fds[1]);
	server_report msg;
	memset(&msg, 0, sizeof msg);
	ssize_t n = read(fds[0], &msg, sizeof msg);
	close(fds[0]);
	int status;
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert_eq(n, (ssize_t)sizeof msg);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cr_assert_gt(msg.pid, 0, "the child could not start a server");

	/* The server was killed with its parent: it is (or becomes) our zombie. */
	int64_t deadline = rh_now_ms() + 5000;
	pid_t r;
	while ((r = waitpid(msg.pid, &status, WNOHANG)) == 0 && rh_now_ms() < deadline)
		usleep(10 * 1000);
	if (r == 0) {
		kill(msg.pid, SIGKILL); /* do not leave it behind when the assertion fails */
		waitpid(msg.pid, NULL, 0);
	}
	if (msg.dir[0])
		remove_dir(msg.dir);
	cr_assert_eq(r, msg.pid, "redis-server %d still running 5 s after its parent died",
			(int)msg.pid);
	cr_assert(WIFSIGNALED(status));
	cr_assert_eq(WTERMSIG(status), SIGKILL);
	cr_assert_eq(kill(msg.pid, 0), -1);
	cr_assert_eq(errno, ESRCH);
}
