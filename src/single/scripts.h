/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: the Lua scripts of the single-server lock (Redisson's data layout). */
#ifndef DLOCK_SINGLE_SCRIPTS_H
#define DLOCK_SINGLE_SCRIPTS_H

#include "core/net/script.h"

/*
 * Acquire. KEYS: name. ARGV: lease ms, owner, hold count the caller
 * believes the owner has (-1 = unknown).
 * Reply: {count} acquired (count = holds after this acquire), or an
 * integer PTTL when another owner holds the lock (-1: it has no expiry).
 */
extern dlock__script dlock__script_acquire;

/*
 * Release one hold. KEYS: name, channel, latch. ARGV: message ("0"),
 * lease ms for a hold that remains (0: keep the TTL), owner, latch ttl ms.
 * Reply: nil not held by owner; otherwise the holds left (0 = released:
 * key deleted, "0" published). A repeat with the same latch returns the
 * first answer.
 */
extern dlock__script dlock__script_release;

/*
 * Force unlock of any kind of lock; a fair one (its queue exists) wakes the
 * head of its queue as Redisson's fair force unlock does. KEYS: name,
 * queue, deadlines, channel. ARGV: message, now (epoch ms).
 * Reply: 1 deleted, 0 none.
 */
extern dlock__script dlock__script_force_release;

/*
 * Watchdog renewal of many holds on one server. KEYS: names. ARGV: ttl ms,
 * then one owner per key. Reply: array of 1 (renewed) / 0 (hold gone) /
 * -1 (the key now holds a value that is not a lock).
 */
extern dlock__script dlock__script_renew;

/*
 * Undo one acquire whose outcome is unknown or unwanted (a quorum attempt
 * that failed, a reply that never came). KEYS: name, channel. ARGV: message
 * ("0"), owner, the hold count that acquire would have produced, lease ms
 * for a hold that remains (0: keep the TTL). Releases one hold only if the count is exactly
 * that, so an acquire that never ran takes nothing away.
 * Reply: -1 nothing done, else holds left (0 = released and published).
 */
extern dlock__script dlock__script_rollback;

/* Fenced acquire: also INCRs the token key. KEYS: name, token key. Reply {count, token} or PTTL. */
extern dlock__script dlock__script_acquire_fenced;

/* Raise a token counter to at least ARGV[1]. KEYS: token key. Reply: the counter after. */
extern dlock__script dlock__script_token_raise;

/* Fair lock scripts (queue and deadlines as Redisson's RFairLock): see scripts.c. */
extern dlock__script dlock__script_fair_acquire;
extern dlock__script dlock__script_fair_leave;
extern dlock__script dlock__script_fair_undo;
extern dlock__script dlock__script_fair_release;

#endif
