/* SPDX-License-Identifier: BSD-3-Clause */
/* `dlock --help`. */
#ifndef DLOCK_CLI_HELP_H
#define DLOCK_CLI_HELP_H

#include <stdio.h>

void cli_print_help(FILE *out);

#endif
