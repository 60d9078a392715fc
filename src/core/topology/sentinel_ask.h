/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: asking the sentinels where the primary is (sentinel_ask.c),
 * above what a sentinel-managed node knows (sentinel.h), which knows no
 * asking.
 */
#ifndef DLOCK_CORE_SENTINEL_ASK_H
#define DLOCK_CORE_SENTINEL_ASK_H

#include <stddef.h>
#include <stdint.h>

#include "core/loop/loop.h"
#include "core/net/conn.h"
#include "core/topology/sentinel.h"

/*
 * The primary's address into host/port (and the resolution's epoch, which
 * changes whenever the address does): the cached one, or, when none is
 * known or it is suspect, the sentinels' answer now, before `deadline` -
 * the asking below driven on the loop this call borrows (sentinel_ask.c).
 */
int dlock__sentinel_primary(dlock__sentinel *s, int64_t deadline, char *host, size_t hostlen,
		int *port, uint64_t *epoch);

/*
 * Asking the sentinels as an operation on `loop` (sentinel_ask.c): in
 * order, each with an even share of what is left before deadline, each a
 * non-blocking connection on that loop. 0 with *out NULL when the cached
 * address is good (dlock__sentinel_cached); else *out is under way and
 * its end posts `ready` to `loop`. The finder's start/over/take/drop.
 */
int dlock__sentinel_ask_start(dlock__sentinel *s, dlock__loop *loop, dlock__task *ready,
		int64_t deadline, dlock__finding **out);
int dlock__sentinel_ask_over(const dlock__finding *f);
int dlock__sentinel_ask_take(dlock__finding *f, char *host, size_t hostlen, int *port,
		uint64_t *epoch);
void dlock__sentinel_ask_drop(dlock__finding *f);

/* The node's finder (core/net/conn.h): dlock__sentinel_primary and _suspect. */
dlock__finder dlock__sentinel_finder(dlock__sentinel *s);

#endif
