/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock - the command-line tool: run a command under a distributed lock,
 * take and release locks from scripts, look at and break locks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "help.h"
#include "hold.h"
#include "latch.h"
#include "metrics.h"
#include "nodes.h"
#include "options.h"
#include "run.h"
#include "secrets.h"
#include "status.h"
#include "target.h"

static void free_config(cli_config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->n; i++)
		free(cfg->nodes[i]);
	free(cfg->nodes);
	cfg->nodes = NULL;
	cfg->n = 0;
	free(cfg->sentinel_user);
	free(cfg->sentinel_password);
	cfg->sentinel_user = cfg->sentinel_password = NULL;
}

static int configure(cli_config *cfg, cli_args *a)
{
	const char *nodes = a->nodes;
	int rc;

	cfg->nodes_from = a->nodes_from;
	if (nodes == NULL && (nodes = getenv("DLOCK_NODES")) != NULL)
		cfg->nodes_from = "DLOCK_NODES";
	if (nodes == NULL) {
		nodes = CLI_DEFAULT_NODES;
		cfg->nodes_from = "the default node";
	}
	if ((rc = cli_nodes_parse(cfg, nodes, cfg->nodes_from)) != 0)
		return rc;
	if ((rc = cli_secret_apply(cfg->nodes, cfg->n, &a->secret)) != 0)
		return rc;
	cli_sentinel_secrets(&cfg->sentinel_user, &cfg->sentinel_password);
	if (!cfg->mode_given)
		cfg->mode = cfg->n == 1 ? MODE_RLOCK : MODE_REDLOCK;
	if (cfg->mode == MODE_RLOCK && cfg->n != 1)
		return cli_usage_error("mode rlock takes exactly one node, not %zu", cfg->n);
	if ((rc = cli_check_kind(cfg)) != 0)
		return rc;
	if (cfg->permits > 0 && cfg->n != 1)
		return cli_usage_error("-c takes a semaphore on one node, not %zu "
				       "(an expirable semaphore has no RedLock or MultiLock form)",
				cfg->n);
	if (cfg->permits > 0 && cfg->mode != MODE_RLOCK)
		return cli_usage_error("%s", "-c takes a semaphore on one node: drop -m");
	if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL))
		return cli_usage_error("--tls-cert and --tls-key go together");
	if (cfg->tls_insecure)
		fprintf(stderr,
				"dlock: WARNING: --tls-insecure: the servers' TLS certificates are "
				"NOT verified; anyone on the network path can pose as a server\n");
	return 0;
}

static int is_command(const char *command)
{
	static const char *const known[] = { "run", "acquire", "release", "status", "unlock",
		"latch", "hold", "wait" };
	size_t i;

	for (i = 0; i < sizeof(known) / sizeof(*known); i++)
		if (strcmp(command, known[i]) == 0)
			return 1;
	return 0;
}

/* `dlock help [COMMAND]`: 1 (printed) or EXIT_USAGE. */
static int help_command(const char *command, int left)
{
	if (left > 1)
		return cli_usage_error("%s", "help takes one COMMAND at most");
	if (command == NULL) {
		cli_print_help(stdout);
		return 1;
	}
	if (cli_print_command_help(stdout, command) < 0)
		return cli_usage_error("help: unknown command \"%s\" (commands: run, acquire, "
				       "release, status, unlock, latch, hold, wait)",
				command);
	return 1;
}

/*
 * The command line: global options, the command, its options, the name.
 * Returns 0 with *command and *name set, 1 when it only asked for help or
 * the version (printed), or an exit status.
 */
static int parse_command_line(int argc, char **argv, cli_config *cfg, cli_args *a,
		const char **command, const char **name)
{
	int rc;

	if ((rc = cli_parse_options(argc, argv, cfg, a)) != 0)
		return rc;
	if (a->help || a->version) {
		if (a->help)
			cli_print_help(stdout);
		else
			printf("dlock %s\n", dlock_version());
		return 1;
	}
	if (optind >= argc)
		return cli_usage_error("%s", "no command given");
	*command = argv[optind++];
	if (strcmp(*command, "help") == 0) /* help [COMMAND] */
		return help_command(optind < argc ? argv[optind] : NULL, argc - optind);
	if (!is_command(*command))
		return cli_usage_error("unknown command \"%s\"", *command);
	if ((rc = cli_parse_options(argc, argv, cfg, a)) != 0)
		return rc;
	if (a->help) {
		cli_print_command_help(stdout, *command);
		return 1;
	}
	if (a->nodes_given > 1)
		return cli_usage_error("-n given %d times: give one comma-separated list "
				       "(-n URI,URI,...)",
				a->nodes_given);
	if ((optind >= argc || argv[optind][0] == '\0') && strcmp(*command, "latch") == 0)
		return cli_usage_error("%s", "latch: set, down, count or wait is missing "
					     "(latch set|down|count|wait NAME ...)");
	if (optind >= argc || argv[optind][0] == '\0')
		return cli_usage_error("%s: the lock NAME is missing or empty", *command);
	*name = argv[optind++];
	return cli_check_command(*command, a, argc, argv);
}

static int cmd_acquire(cli_target *t, const cli_config *cfg, const cli_args *a, const char *name)
{
	int64_t validity = 0, token = 0;
	int rc = cli_target_acquire(t, a->owner, a->wait_given ? a->wait_ms : 0, a->lease_ms,
			&validity, &token);

	if (rc < 0)
		cli_report_failure("acquire", t, rc);
	else if (cfg->fenced)
		printf("%lld\n",
				(long long)token); /* for scripts: TOKEN=$(dlock acquire --fenced ...) */
	else
		printf("acquired \"%s\" as %s for %lld ms\n", name, a->owner, (long long)validity);
	return cli_exit_for(rc, cfg);
}

static int cmd_release(cli_target *t, const cli_config *cfg, const cli_args *a)
{
	int rc = cli_target_release(t, a->owner);

	if (rc < 0)
		fprintf(stderr, "dlock: release: %s\n", cli_target_errmsg(t));
	return rc == DLOCK_ELOST ? EXIT_NOT_OWNER : cli_exit_for(rc, cfg);
}

static int cmd_run(cli_target *t, const cli_config *cfg, const cli_args *a, char **argv)
{
	cli_run_args ra;

	ra.wait_ms = a->wait_given ? a->wait_ms : DLOCK_WAIT_FOREVER;
	ra.lease_ms = a->lease_given ? a->lease_ms : DLOCK_LEASE_WATCHDOG;
	ra.grace_ms = a->grace_ms;
	ra.argv = argv;
	return cli_run(t, cfg, &ra);
}

static int cmd_hold(cli_target *t, const cli_config *cfg, const cli_args *a)
{
	cli_run_args ra = { 0 };

	ra.wait_ms = a->wait_given ? a->wait_ms : DLOCK_WAIT_FOREVER;
	ra.lease_ms = a->lease_given ? a->lease_ms : DLOCK_LEASE_WATCHDOG;
	return cli_hold(t, cfg, &ra);
}

int main(int argc, char **argv)
{
	cli_config cfg = { 0 };
	cli_args a = { 0 };
	cli_target t;
	const char *command = NULL, *name = NULL;
	int rc, status;

	cfg.timeout_ms = 1000;
	cfg.watchdog_ms = 30000;
	cfg.sync_timeout_ms = 1000;
	cfg.restart_guard_ms = -1;
	cfg.conflict_exit = EXIT_CONFLICT;
	a.grace_ms = 10000;
	if ((rc = parse_command_line(argc, argv, &cfg, &a, &command, &name)) != 0)
		return rc == 1 ? 0 : rc;
	cfg.watch_force_unlock = strcmp(command, "run") == 0 || strcmp(command, "hold") == 0;
	cli_holder_configure(&cfg, command, a.label, argv + optind);
	cli_default_times(&cfg, &a);
	if ((rc = configure(&cfg, &a)) != 0 || (rc = cli_check_sanity(command, &cfg, &a)) != 0) {
		free_config(&cfg);
		return rc;
	}
	if (strcmp(command, "latch") == 0) { /* `latch VERB ...`: the verb stands where NAME goes */
		status = cli_latch(&cfg, name, a.wait_given ? a.wait_ms : DLOCK_WAIT_FOREVER,
				argc - optind, argv + optind);
		free_config(&cfg);
		return status;
	}
	rc = cli_target_open(&t, &cfg, name);
	if (rc < 0) {
		char why[1024];

		fprintf(stderr, "dlock: %s\n", cli_target_open_errmsg(&t, &cfg, why, sizeof(why)));
		cli_target_close(&t);
		free_config(&cfg);
		return rc == DLOCK_EINVAL || rc == DLOCK_EDUPLICATE ? EXIT_USAGE : EXIT_UNAVAILABLE;
	}
	if (strcmp(command, "run") == 0)
		status = cmd_run(&t, &cfg, &a, argv + optind);
	else if (strcmp(command, "acquire") == 0)
		status = cmd_acquire(&t, &cfg, &a, name);
	else if (strcmp(command, "release") == 0)
		status = cmd_release(&t, &cfg, &a);
	else if (strcmp(command, "status") == 0 && a.watch)
		status = cli_status_watch(&t, a.interval_given ? a.interval_ms : 1000, stdout);
	else if (strcmp(command, "status") == 0)
		status = cli_target_status(&t, a.json, stdout);
	else if (strcmp(command, "hold") == 0)
		status = cmd_hold(&t, &cfg, &a);
	else if (strcmp(command, "wait") == 0)
		status = cli_wait_free(&t, &cfg, a.wait_given ? a.wait_ms : DLOCK_WAIT_FOREVER);
	else
		status = cli_target_force(&t, stdout);
	cli_metrics_write(&t, cfg.metrics_path); /* set for run, acquire and hold only */
	cli_target_close(&t);
	free_config(&cfg);
	return status;
}
