/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: the Redis Cluster hash slot of a key.
 *
 * slot = CRC16(key) mod 16384, where CRC16 is the XMODEM variant the cluster
 * specification names (poly 0x1021, init 0, no reflection, no final xor) and
 * only the hash tag is hashed when the key has one: the bytes between the
 * first '{' and the first '}' after it, provided there is at least one.
 * Keys are bytes (they may hold NUL); all functions are pure and reentrant.
 */
#ifndef DLOCK_CORE_SLOT_H
#define DLOCK_CORE_SLOT_H

#include <stddef.h>
#include <stdint.h>

/* The number of hash slots of a Redis Cluster (fixed by the protocol). */
#define DLOCK__SLOTS 16384

/* CRC16-XMODEM of len bytes (the cluster specification's appendix A). */
uint16_t dlock__crc16(const char *buf, size_t len);

/*
 * Whether key[0..len) has a hash tag, and where: 1 with *tag and *tag_len
 * set to the bytes between the braces, or 0 (no '{', no '}' after it, or
 * "{}" first) with *tag = key and *tag_len = len, the bytes that are hashed
 * either way. tag and tag_len may be NULL when only the answer is wanted.
 */
int dlock__key_tag(const char *key, size_t len, const char **tag, size_t *tag_len);

/* The hash slot (0..16383) of key[0..len). key may be NULL when len is 0. */
uint16_t dlock__key_slot(const char *key, size_t len);

#endif
