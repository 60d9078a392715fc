/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: who holds it - a client with a label registers itself where it
 * holds something (dlock_client_options.label, dlock_client_holder).
 *
 * One STRING key per client, `dlock:holder:<client UUID>`, of `key=value\n`
 * lines, with the watchdog timeout as TTL. It costs nothing on the wire of
 * its own while it is fresh:
 * - written as a deferred command (its reply skipped) in front of an
 *   acquisition's script on the connection that carries it, so it shares
 *   the acquisition's write and round trip (core/mux/mux_group.c, for the
 *   scripts marked `registers`), when it is older than a third of its TTL;
 * - refreshed by the client's background thread every third of the TTL
 *   while the layer above says something is held (dlock__holder_held),
 *   then left to expire;
 * - deleted when the client is freed.
 * A cluster has one such key for the whole client, on the node serving its
 * slot: when that is not the acquisition's node, the background thread
 * writes it at once instead. Its replies are read and dropped: a refusal
 * (an ACL, OOM) never fails or delays anything.
 */
#ifndef DLOCK_CORE_HOLDER_H
#define DLOCK_CORE_HOLDER_H

#include "core/drive/client_state.h"

/* The key's prefix; the client's UUID follows. */
#define DLOCK__HOLDER_PREFIX "dlock:holder:"

typedef struct dlock__holder dlock__holder;

/* At most this many bytes of the label and of the command are kept. */
#define DLOCK__HOLDER_TEXT_MAX 200

/* A new client's registration when its options have a label (opened at
 * the top, not as a cluster's member): the label and command are copied
 * (c->opts then points at the copies). 0, or DLOCK_ENOMEM. */
int dlock__holder_new(dlock_client *c);

/* A cluster's member uses its root's registration (root outlives it). */
void dlock__holder_share(dlock_client *member, const dlock_client *root);

/* A group of a multiplexed run that takes a hold is about to be sent on
 * conn to c: the registration goes in front when it is not fresh. */
void dlock__holder_ride(dlock_client *c, dlock__conn *conn);

/* The layer above recorded (+1) or dropped (-1) a hold taken through c:
 * the registration is refreshed while any is recorded. */
void dlock__holder_held(dlock_client *c, int delta);

/* The background thread's turn (the client's flush): refresh when due. */
void dlock__holder_tick(dlock_client *c);

/* The background thread stops: a refresh under way ends (not in a forked child). */
void dlock__holder_stop(void *arg, int forked);

/* The client is freed: the key is deleted (best effort, one command
 * timeout; not in a forked child, not if never written), then freed. */
void dlock__holder_free(dlock_client *c);

#endif
