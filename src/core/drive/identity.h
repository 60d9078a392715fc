/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: which server a client reached (identity.c).
 */
#ifndef DLOCK_CORE_IDENTITY_H
#define DLOCK_CORE_IDENTITY_H

#include <stddef.h>

#include "core/drive/client_state.h"


/*
 * Which server the client reached (core/drive/identity.c): the run_id its latest
 * connection learnt; 1 when known (out: 41 bytes), 0 when not yet, when INFO
 * was refused, or for a cluster root (which connects nowhere).
 */
int dlock__client_run_id(dlock_client *client, char out[41]);

/* Keep the run_id a connection of the client learnt (called as it is put back). */
void dlock__client_note_run_id(dlock_client *client, const dlock__conn *conn);

/* x and y reach the same server, db aside: one resolved address and port,
 * one socket file (by real path), the same Sentinel-managed primary or
 * cluster (a seed in common). `where` gets what they share ("127.0.0.1:6379"),
 * for messages. core/drive/identity.c */
int dlock__node_same_server(const dlock__node *x, const dlock__node *y, char *where, size_t len);

#endif
