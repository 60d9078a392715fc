/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: kept commands sent again (core/net/owed.h, rule 6). A
 * connection closed or reset while it still owes the replies of commands
 * that must run (a fair waiter's leave) hands them to its client; they go
 * out again, owed and kept, on the next healthy connection: an idle one,
 * one put back, or one the drain opens for them without waiting. Until
 * then they count as owed by the node, so no acquisition overtakes them.
 * A server away for longer than DLOCK__RESEND_MAX_MS is not sent them any
 * more: a place left behind then expires by its deadline, and the next fair
 * acquisition of the lock drops it (as Redisson's).
 */
#ifndef DLOCK_CORE_RESEND_H
#define DLOCK_CORE_RESEND_H

#include "core/drive/client_state.h"

#define DLOCK__RESEND_MAX_MS 60000

/* Under pool_mu: conn, about to be closed or reset, hands over what it keeps. */
void dlock__resend_take(dlock_client *client, dlock__conn *conn);

/* Under pool_mu: what waits goes out on conn (healthy, about to be pooled).
 * 1 when it took any. */
int dlock__resend_hand_over(dlock_client *client, dlock__conn *conn);

/* Under pool_mu: forget what waits (sent no more). */
void dlock__resend_drop(dlock_client *client);

/* The drain's step (in pool.c, beside the connections it takes) (pool_mu not held): with kept commands waiting and no
 * idle connection, open one for them, never waiting. */
void dlock__resend_drive(dlock_client *client);

/* At close. */
void dlock__resend_free(dlock_client *client);

#endif
