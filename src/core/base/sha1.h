/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: SHA-1, for the EVALSHA digests of dlock's scripts. */
#ifndef DLOCK_CORE_SHA1_H
#define DLOCK_CORE_SHA1_H

#include <stddef.h>

/* out receives 40 lowercase hex digits and a NUL (what SCRIPT LOAD returns). */
void dlock__sha1_hex(const void *data, size_t len, char out[41]);

#endif
