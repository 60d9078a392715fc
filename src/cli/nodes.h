/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node list (-n/--nodes, else $DLOCK_NODES, else the default): split
 * into URIs, refused when empty or when an element is, and shown in
 * messages with any password masked.
 */
#ifndef DLOCK_CLI_NODES_H
#define DLOCK_CLI_NODES_H

#include <stddef.h>

#include "target.h"

/* The default node: a local server on Redis's port. */
#define CLI_DEFAULT_NODES "redis://127.0.0.1:6379"

/*
 * Split list, which came from `from` (the option as typed: "-n",
 * "--nodes"; or "DLOCK_NODES"), into cfg->nodes. An empty list or an empty
 * element (a comma at either end, two in a row) is refused: 0, or
 * EXIT_USAGE after one line naming `from` and the list; EXIT_UNAVAILABLE
 * when out of memory.
 */
int cli_nodes_parse(cli_config *cfg, const char *list, const char *from);

/* text (a URI or a list) into buf with every password shown as "***". */
const char *cli_nodes_shown(const char *text, char *buf, size_t len);

#endif
