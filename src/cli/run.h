/* SPDX-License-Identifier: BSD-3-Clause */
/* `dlock run`: acquire, run a child, release. */
#ifndef DLOCK_CLI_RUN_H
#define DLOCK_CLI_RUN_H

#include "target.h"

typedef struct cli_run_args {
	int64_t wait_ms;  /* DLOCK_WAIT_FOREVER when -w is absent */
	int64_t lease_ms; /* DLOCK_LEASE_WATCHDOG when -l is absent */
	int64_t grace_ms; /* SIGTERM to SIGKILL after a loss */
	char **argv;      /* the command, NULL-terminated */
} cli_run_args;

/* Returns dlock's exit status: the child's, 128+N, or 64/69/70/75. */
int cli_run(cli_target *t, const cli_config *cfg, const cli_run_args *a);

/*
 * run's machinery, for `hold` (hold.c), which holds the lock the same way
 * with no command. cli_run_signals: catch the ending signals and the lock's
 * loss into a pipe (-1 on failure, errno set); cli_run_wake_fd: its read
 * end, to poll; cli_run_notes: what arrived since (the first ending signal
 * or 0, whether the lock was lost, and why: dlock_lost_reason).
 * cli_run_acquire: a's wait and lease, ended early by an ending signal
 * (returns 128+N, nothing held), else the acquire's result.
 */
int cli_run_signals(cli_target *t);
int cli_run_wake_fd(void);
void cli_run_notes(int *stop, int *lost, int *reason);
int cli_run_acquire(cli_target *t, const char *command, const char *owner,
		const cli_run_args *a, int64_t *validity, int64_t *token);
/* Why a lock was lost, in words (reason: dlock_lost_reason). */
const char *cli_run_lost_cause(const cli_target *t, int reason);

#endif
