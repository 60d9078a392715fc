/* SPDX-License-Identifier: BSD-3-Clause */
/* `dlock latch set|down|count|wait`: Redisson's RCountDownLatch from a shell. */
#ifndef DLOCK_CLI_LATCH_H
#define DLOCK_CLI_LATCH_H

#include "target.h"

/*
 * Run `latch VERB [-w MS] NAME [COUNT]` on cfg's one node: argv (argc
 * entries) is what follows VERB on the command line; wait_ms is a -w given
 * before VERB (DLOCK_WAIT_FOREVER when absent). Returns the exit status:
 * 0 done (set: it was set; wait: the count is zero), 1 set found the latch
 * existing, 75 the wait ran out with the count above zero, 65 the key is
 * not a count, 69 the server could not be reached, 64 a usage error.
 */
int cli_latch(const cli_config *cfg, const char *verb, int64_t wait_ms, int argc, char **argv);

#endif
