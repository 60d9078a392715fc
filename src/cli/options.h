/* SPDX-License-Identifier: BSD-3-Clause */
/* The command line's options (options.c) and the usage error every check shares. */
#ifndef DLOCK_CLI_OPTIONS_H
#define DLOCK_CLI_OPTIONS_H

#include <stdint.h>

#include "secrets.h"
#include "target.h"

/* The longest time the library takes in its client options (--timeout,
 * --watchdog, --sync-timeout); the others may be as long as TIME_MAX_MS
 * (options.c). --help states both. */
#define CLIENT_TIME_MAX_MS (24 * 3600 * 1000LL)

/* What the command options say (the global ones go into cli_config). */
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

/* "dlock: <message> (see dlock --help)" on stderr; returns EXIT_USAGE. */
__attribute__((format(printf, 1, 2))) int cli_usage_error(const char *fmt, ...);

/* Parse options until the first operand (optind is left there); returns 0,
 * or an exit status after one line on stderr. */
int cli_parse_options(int argc, char **argv, cli_config *cfg, cli_args *a);

#endif
