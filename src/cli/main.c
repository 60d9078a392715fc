/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock - the command-line tool: run a command under a distributed lock,
 * take and release locks from scripts, look at and break locks.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "help.h"
#include "hold.h"
#include "latch.h"
#include "metrics.h"
#include "nodes.h"
#include "run.h"
#include "secrets.h"
#include "status.h"
#include "target.h"

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "dlock: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see dlock --help)\n");
	return EXIT_USAGE;
}

enum {
	OPT_TIMEOUT = 256,
	OPT_WATCHDOG,
	OPT_GUARD,
	OPT_CONFLICT,
	OPT_OWNER,
	OPT_JSON,
	OPT_FORCE,
	OPT_GRACE,
	OPT_FENCED,
	OPT_FAIR,
	OPT_PASSWORD_FILE,
	OPT_PASSWORD_ENV,
	OPT_USER,
	OPT_TLS_CA,
	OPT_TLS_CA_DIR,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_TLS_SERVER_NAME,
	OPT_TLS_INSECURE,
	OPT_SYNC_REPLICAS,
	OPT_SYNC_TIMEOUT,
	OPT_WATCH,
	OPT_INTERVAL,
	OPT_LABEL,
	OPT_METRICS,
	OPT_SYNC_AOF
};

/* Below this a watchdog lease is renewed so often that a round trip's
 * jitter decides whether the lock survives. */
#define WATCHDOG_MIN_MS 300
/* The longest time the library takes in its client options (--timeout,
 * --watchdog, --sync-timeout); the others may be as long as TIME_MAX_MS.
 * --help states both. */
#define CLIENT_TIME_MAX_MS (24 * 3600 * 1000LL)
#define TIME_MAX_MS ((int64_t)INT_MAX)
/* The library's bound for --sync-replicas and --sync-aof. */
#define SYNC_MAX 1024

/* The shortest -l that run and hold take. run kills its command a margin
 * (a tenth of the lease) before the keys can expire, SIGTERM a grace
 * before that; below a 100 ms margin a busy machine runs the stop late
 * and the command outlives the lock (and hold would print an owner whose
 * lease is as good as over). What an acquisition's round trip takes out of
 * the lease is checked once held (run.c, hold.c). */
#define LEASE_MIN_MS 1000

static const struct option long_options[] = { { "nodes", required_argument, NULL, 'n' },
	{ "mode", required_argument, NULL, 'm' },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "watchdog", required_argument, NULL, OPT_WATCHDOG },
	{ "restart-guard", required_argument, NULL, OPT_GUARD },
	{ "conflict-exit-code", required_argument, NULL, OPT_CONFLICT },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'V' },
	/* command options */
	{ "wait", required_argument, NULL, 'w' }, { "lease", required_argument, NULL, 'l' },
	{ "owner", required_argument, NULL, OPT_OWNER }, { "json", no_argument, NULL, OPT_JSON },
	{ "force", no_argument, NULL, OPT_FORCE }, { "grace", required_argument, NULL, OPT_GRACE },
	{ "fenced", no_argument, NULL, OPT_FENCED }, { "fair", no_argument, NULL, OPT_FAIR },
	{ "shared", no_argument, NULL, 's' }, { "exclusive", no_argument, NULL, 'x' },
	{ "permits", required_argument, NULL, 'c' },
	{ "password-file", required_argument, NULL, OPT_PASSWORD_FILE },
	{ "password-env", required_argument, NULL, OPT_PASSWORD_ENV },
	{ "user", required_argument, NULL, OPT_USER },
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
	{ "tls-ca-dir", required_argument, NULL, OPT_TLS_CA_DIR },
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
	{ "tls-server-name", required_argument, NULL, OPT_TLS_SERVER_NAME },
	{ "tls-insecure", no_argument, NULL, OPT_TLS_INSECURE },
	{ "sync-replicas", required_argument, NULL, OPT_SYNC_REPLICAS },
	{ "sync-timeout", required_argument, NULL, OPT_SYNC_TIMEOUT },
	{ "watch", no_argument, NULL, OPT_WATCH },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "label", required_argument, NULL, OPT_LABEL },
	{ "metrics-textfile", required_argument, NULL, OPT_METRICS },
	{ "sync-aof", required_argument, NULL, OPT_SYNC_AOF }, { NULL, 0, NULL, 0 } };

typedef struct cli_args {
	int64_t wait_ms, lease_ms, grace_ms;
	int wait_given, lease_given, grace_given, json, force, help, version;
	int rw_given; /* -s or -x */
	int permits_given; /* -c */
	int nodes_given;   /* how many -n */
	int guard_given, sync_timeout_given;
	int timeout_given, watchdog_given; /* else their defaults follow each other */
	int watch, interval_given; /* status --watch [--interval] */
	int64_t interval_ms;
	const char *label; /* run/acquire/hold --label */
	int metrics_given; /* run/acquire/hold --metrics-textfile */
	const char *owner;
	const char *nodes;
	const char *nodes_from; /* "-n" or "--nodes", as typed */
	cli_secret_args secret;
} cli_args;

static int parse_mode(const char *text, cli_config *cfg)
{
	if (strcmp(text, "rlock") == 0)
		cfg->mode = MODE_RLOCK;
	else if (strcmp(text, "redlock") == 0)
		cfg->mode = MODE_REDLOCK;
	else if (strcmp(text, "multilock") == 0)
		cfg->mode = MODE_MULTILOCK;
	else
		return usage_error("unknown mode \"%s\": use rlock, redlock or multilock", text);
	cfg->mode_given = 1;
	return 0;
}

/* -s/--shared, -x/--exclusive: a half of Redisson's RReadWriteLock. */
static int parse_half(int c, cli_config *cfg)
{
	int half = c == 's' ? DLOCK_LOCK_READ : DLOCK_LOCK_WRITE;

	if (cfg->rw_half != 0 && cfg->rw_half != half)
		return usage_error("%s", "-s (shared) and -x (exclusive) exclude each other");
	cfg->rw_half = half;
	return 0;
}

/* --password-file, --password-env, --user. */
static void secret_option(int opt, const char *arg, cli_secret_args *s)
{
	if (opt == OPT_PASSWORD_FILE)
		s->file = arg;
	else if (opt == OPT_PASSWORD_ENV)
		s->env = arg;
	else
		s->user = arg;
}

/* The --tls-* options: the client options' TLS fields. */
static void tls_option(int opt, const char *arg, cli_config *cfg)
{
	switch (opt) {
	case OPT_TLS_CA:
		cfg->tls_ca = arg;
		break;
	case OPT_TLS_CA_DIR:
		cfg->tls_ca_dir = arg;
		break;
	case OPT_TLS_CERT:
		cfg->tls_cert = arg;
		break;
	case OPT_TLS_KEY:
		cfg->tls_key = arg;
		break;
	case OPT_TLS_SERVER_NAME:
		cfg->tls_server_name = arg;
		break;
	default:
		cfg->tls_insecure = 1;
		break;
	}
}

/* The password and TLS options; 0 when c is none of them, else 1. */
static int connection_option(int c, const char *arg, cli_config *cfg, cli_args *a)
{
	if (c >= OPT_TLS_CA && c <= OPT_TLS_INSECURE)
		tls_option(c, arg, cfg);
	else if (c >= OPT_PASSWORD_FILE && c <= OPT_USER)
		secret_option(c, arg, &a->secret);
	else
		return 0;
	return 1;
}

/* The options that take a number or a duration: 0 when c is none of them,
 * else 1, or EXIT_USAGE. `name` is the option as typed (-w or --wait). */
static int numeric_option(int c, const char *name, const char *arg, cli_config *cfg, cli_args *a)
{
	int64_t v = 0;
	int rc;

	switch (c) {
	case OPT_TIMEOUT:
		rc = cli_option_duration(arg, name, 1, CLIENT_TIME_MAX_MS, &cfg->timeout_ms);
		a->timeout_given = 1;
		break;
	case OPT_WATCHDOG:
		rc = cli_option_duration(
				arg, name, WATCHDOG_MIN_MS, CLIENT_TIME_MAX_MS, &cfg->watchdog_ms);
		a->watchdog_given = 1;
		break;
	case OPT_SYNC_TIMEOUT:
		rc = cli_option_duration(arg, name, 1, CLIENT_TIME_MAX_MS, &cfg->sync_timeout_ms);
		a->sync_timeout_given = 1;
		break;
	case OPT_GUARD:
		rc = cli_option_duration(arg, name, 0, TIME_MAX_MS, &cfg->restart_guard_ms);
		a->guard_given = 1;
		break;
	case 'w':
		rc = cli_option_duration(arg, name, 0, TIME_MAX_MS, &a->wait_ms);
		a->wait_given = 1;
		break;
	case 'l':
		rc = cli_option_duration(arg, name, 1, TIME_MAX_MS, &a->lease_ms);
		a->lease_given = 1;
		break;
	case OPT_GRACE:
		rc = cli_option_duration(arg, name, 0, TIME_MAX_MS, &a->grace_ms);
		a->grace_given = 1;
		break;
	case OPT_INTERVAL:
		rc = cli_option_duration(arg, name, 1, TIME_MAX_MS, &a->interval_ms);
		a->interval_given = 1;
		break;
	case 'c':
		rc = cli_option_count(arg, name, 1, INT_MAX, &cfg->permits);
		a->permits_given = 1;
		break;
	case OPT_CONFLICT:
	case 'E':
		if ((rc = cli_option_count(arg, name, 0, 255, &v)) == 0)
			cfg->conflict_exit = (int)v;
		break;
	case OPT_SYNC_REPLICAS:
	case OPT_SYNC_AOF:
		if ((rc = cli_option_count(arg, name, 0, SYNC_MAX, &v)) == 0)
			*(c == OPT_SYNC_AOF ? &cfg->sync_aof : &cfg->sync_replicas) = (int)v;
		break;
	default:
		return 0;
	}
	return rc == 0 ? 1 : EXIT_USAGE;
}

/* The option getopt_long just returned, as the user typed it: "-w" or
 * "--wait" (an abbreviated long option by its full name). */
static const char *typed_name(int c, int longindex, char *buf, size_t len)
{
	if (longindex >= 0)
		snprintf(buf, len, "--%s", long_options[longindex].name);
	else
		snprintf(buf, len, "-%c", c);
	return buf;
}

/* Parse options until the first operand; returns 0, or an exit status. */
static int parse_options(int argc, char **argv, cli_config *cfg, cli_args *a)
{
	int c, longindex = -1;
	char name[64];

	opterr = 0; /* our own one-line messages */
	while ((c = getopt_long(argc, argv, "+:n:m:hVw:l:sxc:qE:", long_options, &longindex)) !=
			-1) {
		int known = numeric_option(
				c, typed_name(c, longindex, name, sizeof(name)), optarg, cfg, a);

		longindex = -1;
		if (known == EXIT_USAGE)
			return EXIT_USAGE;
		if (known || connection_option(c, optarg, cfg, a))
			continue;
		switch (c) {
		case 'n':
			a->nodes = optarg;
			a->nodes_from = strcmp(name, "-n") == 0 ? "-n" : "--nodes";
			a->nodes_given++;
			break;
		case 'q':
			cfg->quiet = 1;
			break;
		case 'm':
			if (parse_mode(optarg, cfg) != 0)
				return EXIT_USAGE;
			break;
		case 'h':
			a->help = 1;
			break;
		case 'V':
			a->version = 1;
			break;
		case OPT_OWNER:
			a->owner = optarg;
			break;
		case OPT_JSON:
			a->json = 1;
			break;
		case OPT_FORCE:
			a->force = 1;
			break;
		case OPT_FENCED:
			cfg->fenced = 1;
			break;
		case OPT_FAIR:
			cfg->fair = 1;
			break;
		case 's':
		case 'x':
			if (parse_half(c, cfg) != 0)
				return EXIT_USAGE;
			a->rw_given = 1;
			break;
		case OPT_LABEL:
			a->label = optarg;
			break;
		case OPT_METRICS:
			cfg->metrics_path = optarg;
			a->metrics_given = 1;
			break;
		case OPT_WATCH:
			a->watch = 1;
			break;
		case ':':
			return usage_error("option %s needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option %s", argv[optind - 1]);
		}
	}
	return 0;
}

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

/* --fenced, --fair, -s/-x and -c each say what NAME is: one of them at most. */
static int check_kind(const cli_config *cfg)
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
		return usage_error("%s and %s exclude each other: each says what NAME is", given[0],
				given[1]);
	return 0;
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
		return usage_error("mode rlock takes exactly one node, not %zu", cfg->n);
	if ((rc = check_kind(cfg)) != 0)
		return rc;
	if (cfg->permits > 0 && cfg->n != 1)
		return usage_error("-c takes a semaphore on one node, not %zu "
				   "(an expirable semaphore has no RedLock or MultiLock form)",
				cfg->n);
	if (cfg->permits > 0 && cfg->mode != MODE_RLOCK)
		return usage_error("%s", "-c takes a semaphore on one node: drop -m");
	if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL))
		return usage_error("--tls-cert and --tls-key go together");
	if (cfg->tls_insecure)
		fprintf(stderr,
				"dlock: WARNING: --tls-insecure: the servers' TLS certificates are "
				"NOT verified; anyone on the network path can pose as a server\n");
	return 0;
}

/* A default the user did not type follows the one they did: --timeout a
 * third of --watchdog (at most 1 s), --watchdog three --timeouts (at least
 * 30 s), so that only values typed together can conflict. */
static void default_times(cli_config *cfg, const cli_args *a)
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
	return usage_error("%s: -l %s is shorter than the smallest lease %s (%s); use -l %s or "
			   "more, or the watchdog (no -l)",
			command, cli_duration_format(a->lease_ms, given, sizeof(given)),
			strcmp(command, "run") == 0 ? "run can stop its command before"
						    : "hold can keep to its end",
			min, min);
}

/* Options that could not work together: refused rather than left to fail
 * at run time (or to do nothing). 0 or EXIT_USAGE. */
static int check_sanity(const char *command, const cli_config *cfg, const cli_args *a)
{
	int watchdog_hold = (strcmp(command, "run") == 0 || strcmp(command, "hold") == 0) &&
			!a->lease_given;
	int rc;

	/* A renewal goes out every third of the watchdog lease; one that takes
	 * its whole --timeout must still land before the lease ends, with room. */
	if (watchdog_hold && cfg->timeout_ms * 2 > cfg->watchdog_ms) {
		char t[32], w[32];

		return usage_error("--timeout %s is more than half of %s %s: a renewal that "
				   "takes its whole timeout could land after the lease ends; "
				   "raise --watchdog or lower --timeout",
				cli_duration_format(cfg->timeout_ms, t, sizeof(t)),
				a->watchdog_given ? "--watchdog" : "the longest --watchdog",
				cli_duration_format(cfg->watchdog_ms, w, sizeof(w)));
	}
	if ((rc = check_lease(command, a)) != 0)
		return rc;
	if (a->guard_given && cfg->mode != MODE_REDLOCK)
		return usage_error("%s", "--restart-guard is for RedLock (several nodes, -m "
					 "redlock): it would do nothing here");
	if (a->sync_timeout_given && cfg->sync_replicas == 0 && cfg->sync_aof == 0)
		return usage_error("%s", "--sync-timeout does nothing without --sync-replicas N "
					 "or --sync-aof N");
	if (cfg->sync_aof > 0 && cfg->sync_replicas > cfg->sync_aof)
		return usage_error("%s", "--sync-aof N replaces --sync-replicas (WAITAOF counts "
					 "replicas too): give --sync-aof the larger count");
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
		return usage_error("%s does not take %s (it is for %s)%s", command, u->option, list,
				u->hint);
	}
	return 0;
}

/* What each command needs beyond the name; returns 0 or an exit status. */
static int check_command(const char *command, const cli_args *a, int argc, char **argv)
{
	int rc;

	if (strcmp(command, "run") == 0) {
		/* `run NAME -w 5 -- CMD` would run "-w" under the lock. */
		if (optind < argc && argv[optind][0] == '-' && strcmp(argv[optind], "--") != 0)
			return usage_error("run: option %s after NAME: options go before it "
					   "(run [OPTIONS] NAME -- CMD ...)",
					argv[optind]);
		if (optind < argc && strcmp(argv[optind], "--") == 0)
			optind++;
		if (optind >= argc)
			return usage_error("%s",
					"run: the command to run is missing (NAME -- CMD ...)");
	} else if (optind < argc && strcmp(command, "latch") != 0) { /* latch.c reads the rest */
		return usage_error("unexpected argument \"%s\"", argv[optind]);
	}
	if ((rc = check_options_apply(command, a)) != 0)
		return rc;
	if (a->watch && a->json)
		return usage_error("%s", "status: --watch and --json exclude each other");
	if (a->interval_given && !a->watch)
		return usage_error("%s", "status: --interval is for --watch");
	if (strcmp(command, "acquire") == 0 && !a->lease_given)
		return usage_error("%s",
				"acquire needs -l LEASE (a lock taken from a shell "
				"must expire by itself)");
	if ((strcmp(command, "acquire") == 0 || strcmp(command, "release") == 0) &&
			(a->owner == NULL || a->owner[0] == '\0'))
		return usage_error("%s needs --owner OWNER", command);
	if (strcmp(command, "unlock") == 0 && !a->force)
		return usage_error("%s",
				"unlock needs --force (to release your own hold, use "
				"release --owner)");
	return 0;
}

/* `dlock help [COMMAND]`: 1 (printed) or EXIT_USAGE. */
static int help_command(const char *command, int left)
{
	if (left > 1)
		return usage_error("%s", "help takes one COMMAND at most");
	if (command == NULL) {
		cli_print_help(stdout);
		return 1;
	}
	if (cli_print_command_help(stdout, command) < 0)
		return usage_error("help: unknown command \"%s\" (commands: run, acquire, "
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

	if ((rc = parse_options(argc, argv, cfg, a)) != 0)
		return rc;
	if (a->help || a->version) {
		if (a->help)
			cli_print_help(stdout);
		else
			printf("dlock %s\n", dlock_version());
		return 1;
	}
	if (optind >= argc)
		return usage_error("%s", "no command given");
	*command = argv[optind++];
	if (strcmp(*command, "help") == 0) /* help [COMMAND] */
		return help_command(optind < argc ? argv[optind] : NULL, argc - optind);
	if (!is_command(*command))
		return usage_error("unknown command \"%s\"", *command);
	if ((rc = parse_options(argc, argv, cfg, a)) != 0)
		return rc;
	if (a->help) {
		cli_print_command_help(stdout, *command);
		return 1;
	}
	if (a->nodes_given > 1)
		return usage_error("-n given %d times: give one comma-separated list "
				   "(-n URI,URI,...)",
				a->nodes_given);
	if ((optind >= argc || argv[optind][0] == '\0') && strcmp(*command, "latch") == 0)
		return usage_error("%s", "latch: set, down, count or wait is missing "
					 "(latch set|down|count|wait NAME ...)");
	if (optind >= argc || argv[optind][0] == '\0')
		return usage_error("%s: the lock NAME is missing or empty", *command);
	*name = argv[optind++];
	return check_command(*command, a, argc, argv);
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
	default_times(&cfg, &a);
	if ((rc = configure(&cfg, &a)) != 0 || (rc = check_sanity(command, &cfg, &a)) != 0) {
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
