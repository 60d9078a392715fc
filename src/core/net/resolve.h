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

#include "core/loop/loop.h"

/*
 * The addresses of host:port (TCP), before deadline, into *out (free with
 * freeaddrinfo). A numeric address is read at once; a name is looked up on
 * a thread of its own, left to finish alone when the deadline passes.
 * Returns 0, DLOCK_ECONN (*why says why it does not resolve) or
 * DLOCK_ETIMEDOUT (no answer in time).
 */
int dlock__resolve(const char *host, int port, int64_t deadline, struct addrinfo **out,
		const char **why);

/*
 * The same without waiting, for a caller on a loop. A numeric address is
 * read at once (*out set, *lookup NULL); a name starts a lookup (*lookup
 * set) whose end posts `ready` to `loop`: then dlock__resolve_take() gives
 * the answer. No thread (or no memory for one): looked up here. 0, or
 * DLOCK_ECONN (*why). The caller's deadline is its own to keep: it drops
 * a lookup that takes too long.
 */
typedef struct dlock__lookup dlock__lookup;
int dlock__resolve_start(const char *host, int port, dlock__loop *loop, dlock__task *ready,
		struct addrinfo **out, dlock__lookup **lookup, const char **why);

/* Whether the answer is in (`ready` was posted or is about to be). */
int dlock__resolve_over(dlock__lookup *l);

/* The answer: 1 not yet (l stays the caller's); else l is over and freed:
 * 0 (*out, free with the seam's resolve_free) or DLOCK_ECONN (*why). */
int dlock__resolve_take(dlock__lookup *l, struct addrinfo **out, const char **why);

/* Give up a lookup not taken: nothing is posted after this returns. */
void dlock__resolve_drop(dlock__lookup *l);

#endif
