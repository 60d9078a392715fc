/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: what the layers above (MultiLock, RedLock) may ask of a lock
 * handle. They never read struct dlock_lock or struct dlock_client: a
 * field moved there changes this file's implementation, nothing above.
 * The hold record (single/holds.h) and the batched calls
 * (single/acquire.h) complete the list.
 */
#ifndef DLOCK_SINGLE_MEMBER_H
#define DLOCK_SINGLE_MEMBER_H

#include <stdint.h>

#include "dlock/lock.h"

/* Longest explicit owner accepted. */
#define DLOCK__OWNER_MAX 1024

/* The client the handle was made on. */
dlock_client *dlock__lock_client(const dlock_lock *l);

/* The lock's name (its key) and its length. */
const char *dlock__lock_name(const dlock_lock *l);
size_t dlock__lock_name_len(const dlock_lock *l);

/* The name as messages show it (printable, truncated). */
const char *dlock__lock_shown(const dlock_lock *l);

/* A fenced lock (its acquisitions give tokens). */
int dlock__lock_is_fenced(const dlock_lock *l);

/*
 * The same name on the same server (by resolved address or socket file,
 * see dlock__node_same_server; `where` gets the address they share) - in
 * any database when any_db is set, else in the same one.
 */
int dlock__lock_same_resource(
		const dlock_lock *a, const dlock_lock *b, int any_db, char *where, size_t len);

/* The database the handle's client selects. */
int dlock__lock_db(const dlock_lock *l);

/* The run_id of the server the handle's client reached (1), or 0 when not
 * known yet (see dlock__client_run_id); out: 41 bytes. */
int dlock__lock_run_id(const dlock_lock *l, char out[41]);

/* The TTL an acquisition with lease_ms sets: the lease, or the watchdog timeout. */
int64_t dlock__lock_ttl(const dlock_lock *l, int64_t lease_ms);

/* The watchdog timeout of the handle's client. */
int64_t dlock__lock_watchdog_ms(const dlock_lock *l);

/* Keep rc as the handle's last error (for dlock_lock_errmsg); returns rc. */
int dlock__lock_record(dlock_lock *l, int rc);

#endif
