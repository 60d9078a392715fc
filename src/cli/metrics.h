/* SPDX-License-Identifier: BSD-3-Clause */
/* --metrics-textfile: the lock's figures for node_exporter's textfile collector. */
#ifndef DLOCK_CLI_METRICS_H
#define DLOCK_CLI_METRICS_H

#include "target.h"

/* Write t's clients' figures, summed, to path (atomically: a temporary
 * file renamed over it). path NULL: nothing. 0, or -1 with one line on
 * stderr. */
int cli_metrics_write(const cli_target *t, const char *path);

#endif
