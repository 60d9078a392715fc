/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The global options' values: a default the user did not type follows the
 * option they did (--watchdog alone brings --timeout down with it); an
 * empty node list, or an empty element in one, is refused naming where it
 * came from; a bad URI is named with the option it came in; and every
 * number or duration out of range is refused in one phrase that names the
 * option as typed, the range --help states and the value - the range the
 * library accepts too, never its field names.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

TestSuite(cli_options, .init = dl_server_start, .fini = dl_server_stop, .timeout = 120);

/* args exit 64 with one line on stderr saying `words`, and no password. */
static void expect_64_saying(const char *const *env, const char *const *args, const char *words)
{
	proc *p = dlock_env(env, args);

	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, words) != NULL, "`%s`: stderr should say \"%s\": %s", p->desc,
			words, p->err);
	cr_expect(strstr(p->err, "sekret") == NULL, "`%s` shows the password: %s", p->desc,
			p->err);
	/* The library's own words for its options ("options: watchdog_timeout_ms") */
	cr_expect(strstr(p->err, "options:") == NULL && strstr(p->err, "_ms") == NULL,
			"`%s`: the library's field names leak: %s", p->desc, p->err);
	proc_free(p);
}

/* ---- defaults that follow ---------------------------------------------------------- */

Test(cli_options, a_watchdog_alone_brings_the_default_timeout_down_with_it)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p;

	/* The default --timeout (1s) is more than half of 1.5s: it follows. */
	p = DLOCK("-n", uri, "--watchdog", "1500", "run", "wd", "--", "echo", "ran");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(p->out, "ran\n");
	proc_free(p);
	p = DLOCK("-n", uri, "--watchdog", "300ms", "run", "wd", "--", "true");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	/* And the default --watchdog (30s) follows a long --timeout. */
	p = DLOCK("-n", uri, "--timeout", "20s", "run", "wd", "--", "true");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	/* Two values the user typed that conflict are still refused. */
	expect_64_saying(NULL,
			ARGS("-n", uri, "--watchdog", "1500", "--timeout", "1s", "run", "wd", "--",
					"true"),
			"--timeout 1s is more than half of --watchdog 1500ms");
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS wd"), 0, "released");
}

/* ---- node lists --------------------------------------------------------------------- */

Test(cli_options, an_empty_node_list_is_refused_naming_where_it_came_from)
{
	expect_64_saying(NULL, ARGS("-n", "", "status", "x"), "dlock: -n is empty");
	expect_64_saying(NULL, ARGS("--nodes=", "status", "x"), "dlock: --nodes is empty");
	expect_64_saying(NULL, ARGS("status", "--nodes", "", "x"), "dlock: --nodes is empty");
	expect_64_saying(ARGS("DLOCK_NODES="), ARGS("status", "x"),
			"dlock: DLOCK_NODES is set but empty");
	expect_64_saying(ARGS("DLOCK_NODES="), ARGS("run", "x", "--", "true"),
			"DLOCK_NODES is set but empty");
}

Test(cli_options, an_empty_node_in_the_list_is_named_with_the_list)
{
	const char *uri = rh_server_uri(dl_srv);
	char list[256], want[512], env[300];

	snprintf(list, sizeof list, "%s,", uri);
	snprintf(want, sizeof want, "dlock: -n \"%s,\": empty node after \",\"", uri);
	expect_64_saying(NULL, ARGS("-n", list, "status", "x"), want);
	snprintf(list, sizeof list, ",%s", uri);
	snprintf(want, sizeof want, "dlock: --nodes \",%s\": empty node before \",\"", uri);
	expect_64_saying(NULL, ARGS("--nodes", list, "run", "x", "--", "true"), want);
	snprintf(env, sizeof env, "DLOCK_NODES=%s,,%s", uri, uri);
	snprintf(want, sizeof want, "dlock: DLOCK_NODES \"%s,,%s\": empty node between \",,\"",
			uri, uri);
	expect_64_saying(ARGS(env), ARGS("status", "x"), want);
	/* A password in the list is not shown. */
	snprintf(list, sizeof list, "redis://:sekret@127.0.0.1:%d,", rh_server_port(dl_srv));
	snprintf(want, sizeof want, "-n \"redis://:***@127.0.0.1:%d,\": empty node after",
			rh_server_port(dl_srv));
	expect_64_saying(NULL, ARGS("-n", list, "status", "x"), want);
}

Test(cli_options, a_bad_uri_is_named_with_the_option_it_came_in)
{
	const char *uri = rh_server_uri(dl_srv);
	char list[256], env[300];

	snprintf(list, sizeof list, "%s,redis://127.0.0.1:notaport", uri);
	expect_64_saying(NULL, ARGS("-n", list, "-m", "multilock", "status", "x"),
			"dlock: -n \"redis://127.0.0.1:notaport\": port is not a decimal number");
	snprintf(env, sizeof env, "DLOCK_NODES=redis://:sekret@127.0.0.1:%d/x",
			rh_server_port(dl_srv));
	expect_64_saying(ARGS(env), ARGS("run", "x", "--", "true"),
			"dlock: DLOCK_NODES \"redis://:***@127.0.0.1:");
	/* The password a file gives is not shown either. */
	expect_64_saying(ARGS("DLOCK_PASSWORD=sekret"),
			ARGS("--nodes", "redis://127.0.0.1:99999", "latch", "count", "l"),
			"dlock: latch count: --nodes \"redis://:***@127.0.0.1:99999\": ");
}

/* ---- numbers and durations ---------------------------------------------------------- */

/* --help (or `dlock help run`) as one line, runs of blanks as one space. */
static void help_text(const char *command, char *buf, size_t len)
{
	proc *p = command ? DLOCK("help", command) : DLOCK("--help");
	size_t n = 0;
	const char *s;

	EXPECT_STATUS(p, 0);
	for (s = p->out; *s != '\0' && n + 1 < len; s++) {
		int blank = *s == ' ' || *s == '\n';

		if (!blank || (n > 0 && buf[n - 1] != ' '))
			buf[n++] = blank ? ' ' : *s;
	}
	buf[n] = '\0';
	proc_free(p);
}

typedef struct range_case {
	const char *args[8];  /* the options and command, before -n */
	const char *says;     /* the message, after "dlock: " */
	const char *help_cmd; /* whose help states the range: NULL for --help */
	const char *stated;   /* how that help states it */
} range_case;

static const range_case cases[] = {
	{ { "--watchdog", "2147483647", "run", "x", "--", "true" },
		"--watchdog takes a duration from 300ms to 24h, not \"2147483647\"", NULL,
		"300ms to 24h" },
	{ { "--watchdog", "299", "run", "x", "--", "true" },
		"--watchdog takes a duration from 300ms to 24h, not \"299\"", NULL, "300ms to 24h" },
	{ { "-E", "256", "status", "x" }, "-E takes a whole number from 0 to 255, not \"256\"",
		NULL, "0 to 255" },
	{ { "-E", "-1", "status", "x" }, "-E takes a whole number from 0 to 255, not \"-1\"",
		NULL, "0 to 255" },
	{ { "--conflict-exit-code=300", "status", "x" },
		"--conflict-exit-code takes a whole number from 0 to 255, not \"300\"", NULL,
		"0 to 255" },
	{ { "--timeout", "25h", "status", "x" },
		"--timeout takes a duration from 1ms to 24h, not \"25h\"", NULL, "1ms to 24h" },
	{ { "--timeout", "0", "status", "x" },
		"--timeout takes a duration from 1ms to 24h, not \"0\"", NULL, "1ms to 24h" },
	{ { "--sync-replicas", "1", "--sync-timeout", "86400001", "status", "x" },
		"--sync-timeout takes a duration from 1ms to 24h, not \"86400001\"", NULL,
		"1ms to 24h" },
	{ { "--sync-replicas", "1025", "status", "x" },
		"--sync-replicas takes a whole number from 0 to 1024, not \"1025\"", NULL,
		"0 to 1024" },
	{ { "--sync-aof", "-1", "status", "x" },
		"--sync-aof takes a whole number from 0 to 1024, not \"-1\"", NULL, "0 to 1024" },
	{ { "run", "-c", "0", "x", "--", "true" },
		"-c takes a whole number from 1 to 2147483647, not \"0\"", "run",
		"1 to 2147483647" },
	{ { "acquire", "--owner", "o", "-l", "2147483648", "x" },
		"-l takes a duration from 1ms to 2147483647ms, not \"2147483648\"", NULL,
		"at most 2147483647ms" },
	{ { "run", "-w", "-1", "x", "--", "true" },
		"-w takes a duration from 0 to 2147483647ms: ", NULL, "at most 2147483647ms" },
	{ { "run", "--grace", "3000000000", "x", "--", "true" },
		"--grace takes a duration from 0 to 2147483647ms, not \"3000000000\"", NULL,
		"at most 2147483647ms" },
};

Test(cli_options, every_number_out_of_range_names_the_option_its_range_and_the_value)
{
	const char *uri = rh_server_uri(dl_srv);
	static char global[32768], run[32768];
	size_t i, j;

	help_text(NULL, global, sizeof global);
	help_text("run", run, sizeof run);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const range_case *c = &cases[i];
		const char *args[12] = { "-n", uri };
		char want[256];

		for (j = 0; c->args[j] != NULL; j++)
			args[j + 2] = c->args[j];
		snprintf(want, sizeof want, "dlock: %s", c->says);
		expect_64_saying(NULL, args, want);
		cr_expect(strstr(c->help_cmd ? run : global, c->stated) != NULL,
				"%s does not state \"%s\"", c->help_cmd ? "dlock help run" : "--help",
				c->stated);
	}
	cr_expect_eq(rh_command_int(dl_srv, "DBSIZE"), 0, "nothing was taken");
}

/* The ends of the ranges the command states are values the library takes. */
Test(cli_options, the_ends_of_the_stated_ranges_are_accepted)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p;

	p = DLOCK("-n", uri, "--watchdog", "24h", "--timeout", "24h", "status", "ends");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	p = DLOCK("-n", uri, "--sync-aof", "1024", "--sync-timeout", "24h", "status", "ends");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	p = DLOCK("-n", uri, "-E", "255", "acquire", "-l", "2147483647", "-w", "2147483647",
			"--owner", "me:1", "ends");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_expect_gt(rh_command_int(dl_srv, "PTTL ends"), 2147000000LL, "the longest lease");
	p = DLOCK("-n", uri, "-E", "255", "run", "-w", "0", "ends", "--", "true");
	EXPECT_STATUS(p, 255);
	proc_free(p);
}
