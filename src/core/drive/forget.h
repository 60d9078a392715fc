/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: deletes nobody waits for (forget.c).
 */
#ifndef DLOCK_CORE_FORGET_H
#define DLOCK_CORE_FORGET_H

#include <stddef.h>

#include "core/drive/client_state.h"


/* How long a deferred command (a used unlock latch's DEL) waits for a
 * command to ride along with before the background thread sends it. */
#define DLOCK__DEFER_DELAY_MS 20

/*
 * Delete a key without waiting for the reply (Redisson deletes a used unlock
 * latch the same way): deferred on an idle pooled connection, whose next
 * reader skips the reply. When every connection is lent out, the delete
 * waits in the client's queue for the next one put back (core/drive/forget.c).
 * Only a connection that dies with it, or running out of memory, leaves
 * the key to its TTL.
 */
void dlock__client_forget(dlock_client *client, const char *key, size_t len);

/* Under pool_mu: the queued deletes go out with conn, a healthy connection
 * about to be pooled. 1 when it took any (schedule a flush). */
int dlock__forgets_hand_over(dlock_client *client, dlock__conn *conn);

/* At close: queued and deferred deletes are written now, without waiting. */
void dlock__forgets_send(dlock_client *client);
void dlock__forgets_free(dlock_client *client);

#endif
