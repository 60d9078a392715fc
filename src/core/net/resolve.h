/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a host name looked up within a deadline. getaddrinfo blocks
 * for as long as the system's resolver waits (5 s per try by default when
 * a DNS reply is lost), which would let one connect overrun its timeout.
 */
#ifndef DLOCK_CORE_RESOLVE_H
#define DLOCK_CORE_RESOLVE_H

#include <netdb.h>
#include <stdint.h>

/*
 * The addresses of host:port (TCP), before deadline, into *out (free with
 * freeaddrinfo). A numeric address is read at once; a name is looked up on
 * a thread of its own, left to finish alone when the deadline passes.
 * Returns 0, DLOCK_ECONN (*why says why it does not resolve) or
 * DLOCK_ETIMEDOUT (no answer in time).
 */
int dlock__resolve(const char *host, int port, int64_t deadline, struct addrinfo **out,
		const char **why);

#endif
