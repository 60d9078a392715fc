/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: reading a cluster's slot map (cluster_refresh.c), above what
 * the cluster knows (cluster_state.h) and below the router (cluster.h).
 */
#ifndef DLOCK_CORE_CLUSTER_REFRESH_H
#define DLOCK_CORE_CLUSTER_REFRESH_H

#include <stdint.h>

#include "core/loop/loop.h"
#include "core/topology/cluster_state.h"

/* Read the slot map now, before deadline (dlock_client_new without
 * lazy_connect): the reading below driven on the loop this call borrows. */
int dlock__cluster_refresh(dlock__cluster *cl, int64_t deadline);

/*
 * Reading the slot map as an operation on `loop` (cluster_refresh.c): the
 * known primaries, then the seeds, asked in turn over non-blocking
 * connections on that loop, each with an even share of what is left
 * before deadline. Its end posts `ready` to `loop`; then take the outcome
 * (0, or the failure with its message; r is freed). Drop one not taken:
 * nothing is posted after.
 */
int dlock__cluster_read_start(dlock__cluster *cl, dlock__loop *loop, dlock__task *ready,
		int64_t deadline, dlock__map_read **out);
int dlock__cluster_read_over(const dlock__map_read *r);
int dlock__cluster_read_take(dlock__map_read *r);
void dlock__cluster_read_drop(dlock__map_read *r);

/* The same for a reading: forget it without touching its loop. */
void dlock__cluster_read_forget(dlock__map_read *r);

#endif
