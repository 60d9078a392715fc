/* SPDX-License-Identifier: BSD-3-Clause */
/* `dlock --help`, `dlock help COMMAND`, `dlock COMMAND --help`. */
#ifndef DLOCK_CLI_HELP_H
#define DLOCK_CLI_HELP_H

#include <stdio.h>

/* The overview: the commands, the global options, the exit statuses. */
void cli_print_help(FILE *out);
/* One command's help (help_cmd.c); -1 when command is none of dlock's. */
int cli_print_command_help(FILE *out, const char *command);

#endif
