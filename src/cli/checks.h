/* SPDX-License-Identifier: BSD-3-Clause */
/* What the options and the command need and exclude (checks.c). Each check
 * returns 0, or EXIT_USAGE after one line on stderr. */
#ifndef DLOCK_CLI_CHECKS_H
#define DLOCK_CLI_CHECKS_H

#include "options.h"

/* --fenced, --fair, -s/-x and -c each say what NAME is: one of them at most. */
int cli_check_kind(const cli_config *cfg);

/* A default the user did not type follows the one they did (--timeout, --watchdog). */
void cli_default_times(cli_config *cfg, const cli_args *a);

/* Options that could not work together: refused rather than left to fail
 * at run time (or to do nothing). */
int cli_check_sanity(const char *command, const cli_config *cfg, const cli_args *a);

/* What the command needs beyond the name, and the options it does not
 * take; run's `--` after NAME is skipped (optind moves past it). */
int cli_check_command(const char *command, const cli_args *a, int argc, char **argv);

#endif
