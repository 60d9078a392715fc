/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The command's password kept out of sight: --password-file, --password-env
 * and DLOCK_PASSWORD against a redis-server with --requirepass; the password
 * never in the output, in messages, in /proc/PID/cmdline, or in the
 * environment of the command `dlock run` starts.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#ifdef DLOCK_CLI_PATH

#define PASSWORD "s3cr3t p@ss:w%rd" /* every character the URI must encode */

static rh_server *srv;
static char dir[64], pwfile[128], uri[64];

static void setup(void)
{
	const char *args[] = { "--requirepass", PASSWORD, NULL };
	srv = rh_server_start(args);
	cr_assert_not_null(srv);
	snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", rh_server_port(srv));
	snprintf(dir, sizeof dir, "/tmp/dlock-secrets-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(pwfile, sizeof pwfile, "%s/pw", dir);
	FILE *f = fopen(pwfile, "w");
	cr_assert_not_null(f);
	fprintf(f, "%s\n", PASSWORD);
	fclose(f);
	chmod(pwfile, 0600);
}

static void teardown(void)
{
	rh_server_free(srv);
	unlink(pwfile);
	rmdir(dir);
}

TestSuite(cli_secrets, .init = setup, .fini = teardown, .timeout = 60);

typedef struct run {
	pid_t pid;
	int out; /* stdout and stderr, merged */
} run;

/* Start dlock with argv (NULL-terminated, after the program) and env. */
static run start(char *const *argv, char *const *env)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	run r = { fork(), p[0] };
	cr_assert(r.pid >= 0);
	if (r.pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		char *full[32] = { (char *)DLOCK_CLI_PATH };
		for (int i = 0; argv[i] && i < 30; i++)
			full[i + 1] = argv[i];
		execve(DLOCK_CLI_PATH, full, env);
		_exit(127);
	}
	close(p[1]);
	return r;
}

/* Wait for r; its output into out, its exit status returned. */
static int finish(run r, char *out, size_t len)
{
	size_t n = 0;
	ssize_t got;
	while (n + 1 < len && (got = read(r.out, out + n, len - 1 - n)) > 0)
		n += (size_t)got;
	out[n] = '\0';
	close(r.out);
	int status;
	cr_assert_eq(waitpid(r.pid, &status, 0), r.pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int dlock(char *out, size_t len, char *const *argv, char *const *env)
{
	return finish(start(argv, env), out, len);
}

static void assert_no_secret(const char *text, const char *where)
{
	cr_assert_null(strstr(text, PASSWORD), "the password shows in %s: %s", where, text);
	cr_assert_null(strstr(text, "s3cr3t"), "part of the password shows in %s: %s", where, text);
}

static char *const plain_env[] = { "PATH=/usr/bin:/bin", NULL };

Test(cli_secrets, a_password_file_authenticates_and_stays_hidden)
{
	char out[8192];
	char *argv[] = { "-n", uri, "--password-file", pwfile, "run", "sec", "--", "sh", "-c",
		"echo inside; env", NULL };
	cr_assert_eq(dlock(out, sizeof out, argv, plain_env), 0, "%s", out);
	cr_assert(strstr(out, "inside"), "%s", out);
	assert_no_secret(out, "the output and the command's environment");

	char *status[] = { "-n", uri, "--password-file", pwfile, "status", "sec", NULL };
	cr_assert_eq(dlock(out, sizeof out, status, plain_env), 0, "%s", out);
	assert_no_secret(out, "status");
}

Test(cli_secrets, the_environment_variables_do_not_reach_the_command)
{
	char out[8192];
	char *env[] = { "PATH=/usr/bin:/bin", "DLOCK_PASSWORD=" PASSWORD, NULL };
	char *with_default[] = { "-n", uri, "run", "sec", "--", "sh", "-c", "env", NULL };
	cr_assert_eq(dlock(out, sizeof out, with_default, env), 0, "%s", out);
	assert_no_secret(out, "the command's environment");
	cr_assert_null(strstr(out, "DLOCK_PASSWORD"), "%s", out);

	char *named[] = { "-n", uri, "--password-env", "MYPW", "run", "sec", "--", "sh", "-c",
		"env", NULL };
	char *only_mine[] = { "PATH=/usr/bin:/bin", "MYPW=" PASSWORD, NULL };
	cr_assert_eq(dlock(out, sizeof out, named, only_mine), 0, "%s", out);
	cr_assert_null(strstr(out, "MYPW"), "the variable reached the command: %s", out);
	assert_no_secret(out, "the command's environment");
}

Test(cli_secrets, nodes_with_a_password_are_not_passed_on)
{
	char out[8192], nodes[256];
	snprintf(nodes, sizeof nodes, "DLOCK_NODES=redis://:%s@127.0.0.1:%d",
			"s3cr3t%20p%40ss%3Aw%25rd", rh_server_port(srv));
	char *env[] = { "PATH=/usr/bin:/bin", nodes, NULL };
	char *argv[] = { "run", "sec", "--", "sh", "-c", "env", NULL };
	cr_assert_eq(dlock(out, sizeof out, argv, env), 0, "%s", out);
	cr_assert_null(strstr(out, "DLOCK_NODES"), "DLOCK_NODES reached the command: %s", out);
	cr_assert_null(strstr(out, "s3cr3t"), "%s", out);
}

Test(cli_secrets, the_command_line_shows_no_password)
{
	char *argv[] = { "-n", uri, "--password-file", pwfile, "run", "sec", "--", "sleep", "2",
		NULL };
	run r = start(argv, plain_env);
	char path[64], cmdline[4096] = "";
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)r.pid);
	dl_sleep_ms(500);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "dlock is not running: %s", strerror(errno));
	size_t n = fread(cmdline, 1, sizeof cmdline - 1, f);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		cmdline[i] = cmdline[i] ? cmdline[i] : ' ';
	cmdline[n] = '\0';
	cr_assert(strstr(cmdline, "--password-file"), "read the wrong process: %s", cmdline);
	assert_no_secret(cmdline, "/proc/PID/cmdline");
	char out[4096];
	cr_assert_eq(finish(r, out, sizeof out), 0, "%s", out);
}

Test(cli_secrets, failures_say_why_without_the_password)
{
	char out[4096], wrong[128], empty[128];
	snprintf(wrong, sizeof wrong, "%s/wrong", dir);
	snprintf(empty, sizeof empty, "%s/empty", dir);
	FILE *f = fopen(wrong, "w");
	fprintf(f, "s3cr3t-but-wrong\n");
	fclose(f);
	f = fopen(empty, "w");
	fclose(f);

	char *bad[] = { "-n", uri, "--password-file", wrong, "status", "sec", NULL };
	cr_assert_eq(dlock(out, sizeof out, bad, plain_env), 69, "%s", out);
	cr_assert(strstr(out, "WRONGPASS") && strstr(out, "127.0.0.1:"), "%s", out);
	assert_no_secret(out, "the auth failure");

	char *missing[] = { "-n", uri, "--password-file", "/nonexistent/pw", "status", "sec",
		NULL };
	cr_assert_eq(dlock(out, sizeof out, missing, plain_env), 64, "%s", out);
	cr_assert(strstr(out, "/nonexistent/pw") && strstr(out, "No such file"), "%s", out);

	char *blank[] = { "-n", uri, "--password-file", empty, "status", "sec", NULL };
	cr_assert_eq(dlock(out, sizeof out, blank, plain_env), 64, "%s", out);
	cr_assert(strstr(out, "empty"), "%s", out);

	char *unset[] = { "-n", uri, "--password-env", "NOPE", "status", "sec", NULL };
	cr_assert_eq(dlock(out, sizeof out, unset, plain_env), 64, "%s", out);
	cr_assert(strstr(out, "NOPE") && strstr(out, "not set"), "%s", out);
	unlink(wrong);
	unlink(empty);
}

/*
 * Asked without a password, a server that wants one refuses every command:
 * each says so in one line that names the server, says NOAUTH and how to
 * give the password, and ends at once (69). status counts the server as
 * not usable (Redis answers its long first command with "Protocol error:
 * unauthenticated multibulk length", which is the same refusal).
 */
Test(cli_secrets, without_a_password_every_command_says_noauth_and_how)
{
	static const char *const commands[][8] = {
		{ "run", "nopw", "--", "true" },
		{ "run", "-w", "0", "nopw", "--", "true" },
		{ "acquire", "-l", "5s", "--owner", "me:1", "nopw" },
		{ "hold", "nopw" },
		{ "release", "--owner", "me:1", "nopw" },
		{ "wait", "nopw" },
		{ "unlock", "--force", "nopw" },
		{ "latch", "count", "nopw" },
	};
	char node[64];
	size_t i, j;
	proc *p;

	snprintf(node, sizeof node, "127.0.0.1:%d", rh_server_port(srv));
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const char *args[12] = { "-n", uri };

		for (j = 0; commands[i][j] != NULL; j++)
			args[j + 2] = commands[i][j];
		p = dlock_env(NULL, args);
		EXPECT_STATUS(p, 69);
		EXPECT_ONE_LINE_ERR(p);
		cr_expect(strstr(p->err, node) && strstr(p->err, "NOAUTH") &&
						strstr(p->err, "--password-file"),
				"`%s` should name %s, say NOAUTH and --password-file: %s", p->desc,
				node, p->err);
		cr_expect_lt(proc_elapsed(p), 5000, "`%s` took %lld ms", p->desc,
				(long long)proc_elapsed(p));
		proc_free(p);
	}
	p = DLOCK("-n", uri, "status", "nopw");
	EXPECT_STATUS(p, 69);
	cr_expect(strstr(p->out, "reachable 0\n") && strstr(p->out, " unusable ") &&
					strstr(p->out, "NOAUTH") && strstr(p->out, "--password-file"),
			"status should count the server out and say why: %s", p->out);
	proc_free(p);
	p = DLOCK("-n", uri, "status", "--json", "nopw");
	EXPECT_STATUS(p, 69);
	cr_expect(strstr(p->out, "\"reachable\":false") && strstr(p->out, "--password-file"),
			"%s", p->out);
	proc_free(p);
}

/* A wrong password: said so, with where the password came from. */
Test(cli_secrets, a_wrong_password_says_where_to_look)
{
	char bad[128];
	proc *p;

	snprintf(bad, sizeof bad, "redis://:wrong@127.0.0.1:%d", rh_server_port(srv));
	p = DLOCK("-n", bad, "run", "nopw", "--", "true");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "WRONGPASS") && strstr(p->err, "--password-file"), "%s", p->err);
	cr_expect_null(strstr(p->err, ":wrong@"), "the password shows: %s", p->err);
	proc_free(p);
}

#endif
