/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: client UUIDs, request ids and thread ids. */
#ifndef DLOCK_CORE_IDS_H
#define DLOCK_CORE_IDS_H

#include <stdint.h>
#include <sys/types.h>

/* A new random UUID, 36 characters and a NUL. */
void dlock__uuid(char out[37]);

/* 32 hex digits that no other request of any client is expected to repeat
 * (Redisson's generateId(): 16 random bytes). */
void dlock__request_id(char out[33]);

/* This process's id without a system call per use: glibc does not cache
 * getpid(), and the fork checks ask on every call. Refreshed in a fork()ed child. */
pid_t dlock__pid(void);

/* A fast per-thread pseudo-random number (jitter, not secrets). */
uint64_t dlock__random(void);

#endif
