/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The servers' password for the command, kept out of sight: read from a file
 * or an environment variable instead of the command line (where ps and
 * /proc/PID/cmdline show it), removed from the environment before the command
 * `dlock run` starts, and given to the library inside the URIs in memory only.
 */
#ifndef DLOCK_CLI_SECRETS_H
#define DLOCK_CLI_SECRETS_H

#include <stddef.h>

typedef struct cli_secret_args {
	const char *file; /* --password-file */
	const char *env;  /* --password-env VAR */
	const char *user; /* --user */
} cli_secret_args;

/*
 * Find the password (--password-file, --password-env, else $DLOCK_PASSWORD)
 * and user (--user, else $DLOCK_USER), take them and DLOCK_NODES (when it
 * carries a password) out of the environment, and put them into every URI
 * of nodes[0..n) that has no userinfo of its own (a URI's own wins).
 * Returns 0, or an exit status after a message that never shows a secret.
 */
int cli_secret_apply(char **nodes, size_t n, const cli_secret_args *a);

/* The sentinels' own credentials ($DLOCK_SENTINEL_USER,
 * $DLOCK_SENTINEL_PASSWORD), taken out of the environment: NULL when unset.
 * The caller frees them. */
void cli_sentinel_secrets(char **user, char **password);

#endif
