/* SPDX-License-Identifier: BSD-3-Clause */
/* The command line's options: getopt_long's loop, each option into the
 * configuration (cli_config) or what the commands read (cli_args). */
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "duration.h"
#include "options.h"

int cli_usage_error(const char *fmt, ...)
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
/* The longest -w, -l, --grace, --interval and --restart-guard (the client
 * options' bound is CLIENT_TIME_MAX_MS, options.h). */
#define TIME_MAX_MS ((int64_t)INT_MAX)
/* The library's bound for --sync-replicas and --sync-aof. */
#define SYNC_MAX 1024

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

static int parse_mode(const char *text, cli_config *cfg)
{
	if (strcmp(text, "rlock") == 0)
		cfg->mode = MODE_RLOCK;
	else if (strcmp(text, "redlock") == 0)
		cfg->mode = MODE_REDLOCK;
	else if (strcmp(text, "multilock") == 0)
		cfg->mode = MODE_MULTILOCK;
	else
		return cli_usage_error(
				"unknown mode \"%s\": use rlock, redlock or multilock", text);
	cfg->mode_given = 1;
	return 0;
}

/* -s/--shared, -x/--exclusive: a half of Redisson's RReadWriteLock. */
static int parse_half(int c, cli_config *cfg)
{
	int half = c == 's' ? DLOCK_LOCK_READ : DLOCK_LOCK_WRITE;

	if (cfg->rw_half != 0 && cfg->rw_half != half)
		return cli_usage_error("%s", "-s (shared) and -x (exclusive) exclude each other");
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

/* The global options -n, -m, -q, -h, -V: 0 when c is none of them, else 1,
 * or EXIT_USAGE. `name` is the option as typed. */
static int global_option(int c, const char *name, const char *arg, cli_config *cfg, cli_args *a)
{
	switch (c) {
	case 'n':
		a->nodes = arg;
		a->nodes_from = strcmp(name, "-n") == 0 ? "-n" : "--nodes";
		a->nodes_given++;
		break;
	case 'q':
		cfg->quiet = 1;
		break;
	case 'm':
		if (parse_mode(arg, cfg) != 0)
			return EXIT_USAGE;
		break;
	case 'h':
		a->help = 1;
		break;
	case 'V':
		a->version = 1;
		break;
	default:
		return 0;
	}
	return 1;
}

/* The command options without a number: 0 when c is none of them, else 1,
 * or EXIT_USAGE. */
static int command_option(int c, const char *arg, cli_config *cfg, cli_args *a)
{
	switch (c) {
	case OPT_OWNER:
		a->owner = arg;
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
		a->label = arg;
		break;
	case OPT_METRICS:
		cfg->metrics_path = arg;
		a->metrics_given = 1;
		break;
	case OPT_WATCH:
		a->watch = 1;
		break;
	default:
		return 0;
	}
	return 1;
}

/* What getopt_long could not take (c ':' or '?'), in one line: EXIT_USAGE. */
static int option_error(int c, char **argv)
{
	if (c == ':')
		return cli_usage_error("option %s needs a value", argv[optind - 1]);
	return cli_usage_error("unknown option %s", argv[optind - 1]);
}

/* The option getopt_long returned, to whichever kind takes it: 0 or EXIT_USAGE. */
static int take_option(int c, const char *name, char **argv, cli_config *cfg, cli_args *a)
{
	int known = numeric_option(c, name, optarg, cfg, a);

	if (known == 0)
		known = connection_option(c, optarg, cfg, a);
	if (known == 0)
		known = global_option(c, name, optarg, cfg, a);
	if (known == 0)
		known = command_option(c, optarg, cfg, a);
	if (known == 0)
		return option_error(c, argv);
	return known == EXIT_USAGE ? EXIT_USAGE : 0;
}

int cli_parse_options(int argc, char **argv, cli_config *cfg, cli_args *a)
{
	int c, rc, longindex = -1;
	char name[64];

	opterr = 0; /* our own one-line messages */
	while ((c = getopt_long(argc, argv, "+:n:m:hVw:l:sxc:qE:", long_options, &longindex)) !=
			-1) {
		typed_name(c, longindex, name, sizeof(name));
		longindex = -1;
		if ((rc = take_option(c, name, argv, cfg, a)) != 0)
			return rc;
	}
	return 0;
}
