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

#endif
