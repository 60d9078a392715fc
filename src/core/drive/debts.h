/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a client's debts - the owed replies of all its connections
 * (the protocol: core/net/owed.h). The client waits for them before an
 * acquire (step 3), collects them from idle connections (step 4) and
 * resets a connection that owes for too long (step 5).
 */
#ifndef DLOCK_CORE_DEBTS_H
#define DLOCK_CORE_DEBTS_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "core/net/owed.h"
#include "core/drive/pool.h"

/* While replies are owed, the background thread looks for them this often. */
#define DLOCK__OWED_POLL_MS 20

/*
 * Step 3: 0 when the server owes nothing (its idle connections' replies
 * read now), otherwise DLOCK_ETIMEDOUT with a message; it never waits
 * (`deadline` is unused: an acquire waits for the replies on its loop,
 * trying again as its wait goes on).
 * `key` is the lock's: in a cluster, the member serving it is asked.
 */
int dlock__client_owes(dlock_client *client, const char *key, size_t len, int64_t deadline);

#endif
