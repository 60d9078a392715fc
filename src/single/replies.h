/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: what the single-lock scripts answer, read without side effects
 * (so the mapping can be fuzzed on its own).
 */
#ifndef DLOCK_SINGLE_REPLIES_H
#define DLOCK_SINGLE_REPLIES_H

#include <stdint.h>
#include <hiredis/hiredis.h>

typedef struct dlock__acquired {
	int64_t count; /* holds after the acquire */
	int64_t token; /* fenced: the token; else 0 */
	int64_t ttl;   /* not acquired: how long the holder keeps it (-1: no expiry) */
	int64_t waiters; /* not acquired, asked with the "taken" channel: its listeners; else -1 */
	int role;        /* not acquired, asked with roles: watch 1 or sleep 2; else 0 */
} dlock__acquired;

/*
 * An acquire script's reply: 0 acquired ({count} or {count, token} when
 * fenced), DLOCK_ENOTACQUIRED (an integer: the holder's TTL), DLOCK_EPROTO
 * for any other shape. Error replies are the caller's (dlock__reply_check).
 */
int dlock__parse_acquire(const redisReply *r, int fenced, dlock__acquired *out);

/* A release script's reply: 0 with *left holds left (>= 0), DLOCK_ENOTOWNER (nil; or -2,
 * *left -2: others hold it now), DLOCK_EPROTO. */
int dlock__parse_release(const redisReply *r, int64_t *left);

#endif
