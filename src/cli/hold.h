/* SPDX-License-Identifier: BSD-3-Clause */
/* `dlock hold` and `dlock wait`: a lock held, or waited for, by a script. */
#ifndef DLOCK_CLI_HOLD_H
#define DLOCK_CLI_HOLD_H

#include "run.h"

/*
 * hold: take the lock (a's wait and lease), print the owner (and with
 * --fenced the token on a second line), then keep it until a signal whose
 * default would end dlock (SIGPIPE and SIGXFSZ are ignored), or until stdin
 * reaches EOF; release and return 0.
 * A loss while held: 70; the end of a -l lease: 124; not acquired: as run.
 */
int cli_hold(cli_target *t, const cli_config *cfg, const cli_run_args *a);

/*
 * wait: return 0 as soon as nobody holds the lock, without taking it;
 * cfg's conflict exit status when it is still held after wait_ms
 * (DLOCK_WAIT_FOREVER: no limit); 69 or 65 when it cannot be read.
 */
int cli_wait_free(cli_target *t, const cli_config *cfg, int64_t wait_ms);

#endif
