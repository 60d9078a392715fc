/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A node URI that points at something other than Redis (a web server, an
 * ssh daemon, a port that accepts and never answers): every command ends
 * quickly with one line naming the node and the cause, and status counts
 * the node as not usable. The servers are tiny ones of the test's own, on
 * loopback.
 */
#include <criterion/criterion.h>

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

typedef enum fake_kind { FAKE_HTTP, FAKE_SSH, FAKE_SILENT } fake_kind;

typedef struct fake_server {
	int fd, port;
	fake_kind kind;
	pthread_t thread;
	int kept[64]; /* FAKE_SILENT: connections held open, never answered */
	size_t nkept;
} fake_server;

static fake_server fake;

/* Answer each connection as the kind of server it plays. */
static void *serve(void *arg)
{
	fake_server *f = arg;
	int c;

	while ((c = accept(f->fd, NULL, NULL)) >= 0) {
		if (f->kind == FAKE_SILENT) {
			if (f->nkept < sizeof(f->kept) / sizeof(f->kept[0]))
				f->kept[f->nkept++] = c;
			else
				close(c);
			continue;
		}
		if (f->kind == FAKE_HTTP) {
			/* a web server answers the request it could not parse */
			char buf[512];
			struct timeval tv = { 1, 0 };

			setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
			(void)!read(c, buf, sizeof buf);
			(void)!write(c, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
		} else {
			(void)!write(c, "SSH-2.0-OpenSSH_9.2\r\n", 21); /* speaks first */
		}
		close(c);
	}
	return NULL;
}

static void fake_start(fake_kind kind)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;

	fake.kind = kind;
	fake.nkept = 0;
	fake.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fake.fd, 0);
	cr_assert_eq(bind(fake.fd, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(listen(fake.fd, 64), 0);
	cr_assert_eq(getsockname(fake.fd, (struct sockaddr *)&a, &len), 0);
	fake.port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&fake.thread, NULL, serve, &fake), 0);
}

static void fake_stop(void)
{
	size_t i;

	shutdown(fake.fd, SHUT_RDWR); /* ends the accept() */
	pthread_join(fake.thread, NULL);
	close(fake.fd);
	for (i = 0; i < fake.nkept; i++)
		close(fake.kept[i]);
}

TestSuite(cli_not_redis, .fini = fake_stop, .timeout = 120);

static const char *const commands[][8] = {
	{ "run", "x", "--", "true" },
	{ "run", "-w", "0", "x", "--", "true" },
	{ "acquire", "-l", "5s", "--owner", "me:1", "x" },
	{ "hold", "x" },
	{ "wait", "x" },
	{ "release", "--owner", "me:1", "x" },
	{ "unlock", "--force", "x" },
	{ "latch", "count", "x" },
};

/* Every command against the fake server: 69, one line saying `cause`
 * about the node, within limit_ms; then status counts it out. */
static void every_command_says(const char *cause, int64_t limit_ms)
{
	char uri[64], node[64], want[256];
	size_t i, j;
	proc *p;

	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", fake.port);
	snprintf(node, sizeof node, "127.0.0.1:%d", fake.port);
	snprintf(want, sizeof want, "%s: %s", node, cause);
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const char *args[12] = { "-n", uri };

		for (j = 0; commands[i][j] != NULL; j++)
			args[j + 2] = commands[i][j];
		p = dlock_env(NULL, args);
		EXPECT_STATUS(p, 69);
		EXPECT_ONE_LINE_ERR(p);
		cr_expect(strstr(p->err, want) != NULL, "`%s` should say \"%s\": %s", p->desc, want,
				p->err);
		cr_expect_lt(proc_elapsed(p), limit_ms, "`%s` took %lld ms", p->desc,
				(long long)proc_elapsed(p));
		proc_free(p);
	}
	p = DLOCK("-n", uri, "status", "x");
	EXPECT_STATUS(p, 69);
	cr_expect(strstr(p->out, "reachable 0\n") && strstr(p->out, want), "%s", p->out);
	proc_free(p);
}

Test(cli_not_redis, a_web_server_is_named_with_what_it_answered)
{
	fake_start(FAKE_HTTP);
	every_command_says("does not speak the Redis protocol (it answered \"HTTP/1.1 400 Bad "
			   "Request\")",
			5000);
}

Test(cli_not_redis, a_server_that_speaks_first_is_named_with_its_greeting)
{
	fake_start(FAKE_SSH);
	every_command_says(
			"does not speak the Redis protocol (it answered \"SSH-2.0-OpenSSH_9.2\")", 5000);
}

/* A port that takes connections and never answers: each command gives up
 * after its --timeout (run without -w after the first-contact period),
 * saying so. (Not new: the guard of the two tests above.) */
Test(cli_not_redis, a_silent_server_ends_every_command_at_its_timeout)
{
	char uri[64], node[64];
	size_t i, j;
	proc *p;

	fake_start(FAKE_SILENT);
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", fake.port);
	snprintf(node, sizeof node, "127.0.0.1:%d: ", fake.port);
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const char *args[14] = { "-n", uri, "--timeout", "500" };
		int said;

		for (j = 0; commands[i][j] != NULL; j++)
			args[j + 4] = commands[i][j];
		p = dlock_env(NULL, args);
		EXPECT_STATUS(p, 69);
		EXPECT_ONE_LINE_ERR(p);
		said = strstr(p->err, "no answer") || strstr(p->err, "never answered");
		cr_expect(strstr(p->err, node) && said,
				"`%s` should name %s and say it had no answer: %s", p->desc, node,
				p->err);
		/* The longest, run without -w: 4 s of first contact and a try */
		cr_expect_lt(proc_elapsed(p), 10000, "`%s` took %lld ms", p->desc,
				(long long)proc_elapsed(p));
		proc_free(p);
	}
}
