/* SPDX-License-Identifier: BSD-3-Clause */
/* What the options and the command need and exclude: a combination that
 * could not work is refused with one line rather than left to fail later. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "duration.h"

/* The shortest -l that run and hold take. run kills its command a margin
 * (a tenth of the lease) before the keys can expire, SIGTERM a grace
 * before that; below a 100 ms margin a busy machine runs the stop late
 * and the command outlives the lock (and hold would print an owner whose
 * lease is as good as over). What an acquisition's round trip takes out of
 * the lease is checked once held (run.c, hold.c). */
#define LEASE_MIN_MS 1000

/* --fenced, --fair, -s/-x and -c each say what NAME is: one of them at most. */
int cli_check_kind(const cli_config *cfg)
{
	const char *given[4];
	size_t n = 0;

	if (cfg->fenced)
		given[n++] = "--fenced (a fenced lock)";
	if (cfg->fair)
		given[n++] = "--fair (a fair lock)";
	if (cfg->rw_half != 0)
		given[n++] = "-s/-x (a read-write lock)";
	if (cfg->permits > 0)
		given[n++] = "-c (a semaphore's permit)";
	if (n > 1)
		return cli_usage_error("%s and %s exclude each other: each says what NAME is",
				given[0], given[1]);
	return 0;
}

/* A default the user did not type follows the one they did: --timeout a
 * third of --watchdog (at most 1 s), --watchdog three --timeouts (at least
 * 30 s), so that only values typed together can conflict. */
void cli_default_times(cli_config *cfg, const cli_args *a)
{
	if (a->watchdog_given && !a->timeout_given && cfg->watchdog_ms / 3 < cfg->timeout_ms)
		cfg->timeout_ms = cfg->watchdog_ms / 3;
	if (a->timeout_given && !a->watchdog_given && cfg->timeout_ms * 3 > cfg->watchdog_ms)
		cfg->watchdog_ms = cfg->timeout_ms * 3 < CLIENT_TIME_MAX_MS ? cfg->timeout_ms * 3
									    : CLIENT_TIME_MAX_MS;
}

/* run and hold refuse a lease too short to stop (or end) before the keys
 * can expire (LEASE_MIN_MS). 0 or EXIT_USAGE. */
static int check_lease(const char *command, const cli_args *a)
{
	char given[32], min[32];

	if (!a->lease_given || a->lease_ms >= LEASE_MIN_MS ||
			(strcmp(command, "run") != 0 && strcmp(command, "hold") != 0))
		return 0;
	cli_duration_format(LEASE_MIN_MS, min, sizeof(min));
	return cli_usage_error("%s: -l %s is shorter than the smallest lease %s (%s); use -l %s or "
			       "more, or the watchdog (no -l)",
			command, cli_duration_format(a->lease_ms, given, sizeof(given)),
			strcmp(command, "run") == 0 ? "run can stop its command before"
						    : "hold can keep to its end",
			min, min);
}

/* Options that could not work together: refused rather than left to fail
 * at run time (or to do nothing). 0 or EXIT_USAGE. */
int cli_check_sanity(const char *command, const cli_config *cfg, const cli_args *a)
{
	int watchdog_hold = (strcmp(command, "run") == 0 || strcmp(command, "hold") == 0) &&
			!a->lease_given;
	int rc;

	/* A renewal goes out every third of the watchdog lease; one that takes
	 * its whole --timeout must still land before the lease ends, with room. */
	if (watchdog_hold && cfg->timeout_ms * 2 > cfg->watchdog_ms) {
		char t[32], w[32];

		return cli_usage_error("--timeout %s is more than half of %s %s: a renewal that "
				       "takes its whole timeout could land after the lease ends; "
				       "raise --watchdog or lower --timeout",
				cli_duration_format(cfg->timeout_ms, t, sizeof(t)),
				a->watchdog_given ? "--watchdog" : "the longest --watchdog",
				cli_duration_format(cfg->watchdog_ms, w, sizeof(w)));
	}
	if ((rc = check_lease(command, a)) != 0)
		return rc;
	if (a->guard_given && cfg->mode != MODE_REDLOCK)
		return cli_usage_error("%s", "--restart-guard is for RedLock (several nodes, -m "
					     "redlock): it would do nothing here");
	if (a->sync_timeout_given && cfg->sync_replicas == 0 && cfg->sync_aof == 0)
		return cli_usage_error("%s", "--sync-timeout does nothing without --sync-replicas "
					     "N or --sync-aof N");
	if (cfg->sync_aof > 0 && cfg->sync_replicas > cfg->sync_aof)
		return cli_usage_error("%s", "--sync-aof N replaces --sync-replicas (WAITAOF "
					     "counts replicas too): give --sync-aof the larger "
					     "count");
	return 0;
}

/* A command option given to a command it does not apply to. */
typedef struct option_use {
	const char *option;
	int given;
	const char *commands[5]; /* the commands that take it */
	const char *hint;
} option_use;

static int takes(const option_use *u, const char *command)
{
	size_t i;

	for (i = 0; i < 5 && u->commands[i] != NULL; i++)
		if (strcmp(u->commands[i], command) == 0)
			return 1;
	return 0;
}

/* An option that does nothing for this command is refused: the user meant
 * something by it (run --owner would silently use another owner). */
static int check_options_apply(const char *command, const cli_args *a)
{
	const option_use uses[] = {
		{ "-w/--wait", a->wait_given, { "run", "acquire", "hold", "wait", "latch" }, "" },
		{ "-l/--lease", a->lease_given, { "run", "acquire", "hold" }, "" },
		{ "--grace", a->grace_given, { "run" }, "" },
		{ "--owner", a->owner != NULL, { "acquire", "release" },
			strcmp(command, "run") == 0 ? "; run's owner is its own, "
						      "given to the command as DLOCK_OWNER"
						    : "" },
		{ "--json", a->json, { "status" }, "" },
		{ "--watch", a->watch, { "status" }, "" },
		{ "--interval", a->interval_given, { "status" }, "" },
		{ "--label", a->label != NULL, { "run", "acquire", "hold" }, "" },
		{ "--metrics-textfile", a->metrics_given, { "run", "acquire", "hold" }, "" },
		{ "--force", a->force, { "unlock" }, "" },
		{ "-s/-x", a->rw_given, { "run", "acquire", "release", "hold" }, "" },
		{ "-c/--permits", a->permits_given, { "run" }, "" },
	};
	size_t i, j;

	for (i = 0; i < sizeof(uses) / sizeof(uses[0]); i++) {
		const option_use *u = &uses[i];
		char list[128] = "";

		if (!u->given || takes(u, command))
			continue;
		for (j = 0; j < 5 && u->commands[j] != NULL; j++) {
			if (j > 0)
				strcat(list, j + 1 < 5 && u->commands[j + 1] != NULL ? ", " : " and ");
			strcat(list, u->commands[j]);
		}
		return cli_usage_error("%s does not take %s (it is for %s)%s", command, u->option,
				list, u->hint);
	}
	return 0;
}

/* What each command needs beyond the name; returns 0 or an exit status. */
int cli_check_command(const char *command, const cli_args *a, int argc, char **argv)
{
	int rc;

	if (strcmp(command, "run") == 0) {
		/* `run NAME -w 5 -- CMD` would run "-w" under the lock. */
		if (optind < argc && argv[optind][0] == '-' && strcmp(argv[optind], "--") != 0)
			return cli_usage_error("run: option %s after NAME: options go before it "
					       "(run [OPTIONS] NAME -- CMD ...)",
					argv[optind]);
		if (optind < argc && strcmp(argv[optind], "--") == 0)
			optind++;
		if (optind >= argc)
			return cli_usage_error("%s",
					"run: the command to run is missing (NAME -- CMD ...)");
	} else if (optind < argc && strcmp(command, "latch") != 0) { /* latch.c reads the rest */
		return cli_usage_error("unexpected argument \"%s\"", argv[optind]);
	}
	if ((rc = check_options_apply(command, a)) != 0)
		return rc;
	if (a->watch && a->json)
		return cli_usage_error("%s", "status: --watch and --json exclude each other");
	if (a->interval_given && !a->watch)
		return cli_usage_error("%s", "status: --interval is for --watch");
	if (strcmp(command, "acquire") == 0 && !a->lease_given)
		return cli_usage_error("%s",
				"acquire needs -l LEASE (a lock taken from a shell "
				"must expire by itself)");
	if ((strcmp(command, "acquire") == 0 || strcmp(command, "release") == 0) &&
			(a->owner == NULL || a->owner[0] == '\0'))
		return cli_usage_error("%s needs --owner OWNER", command);
	if (strcmp(command, "unlock") == 0 && !a->force)
		return cli_usage_error("%s",
				"unlock needs --force (to release your own hold, use "
				"release --owner)");
	return 0;
}
