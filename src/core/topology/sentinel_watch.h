/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: the +switch-master watch of a Sentinel-managed node (sentinel_watch.c). */
#ifndef DLOCK_CORE_SENTINEL_WATCH_H
#define DLOCK_CORE_SENTINEL_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/loop/loop.h"
#include "core/net/exchange.h"

struct dlock__sentinel;
struct dlock__conn;

typedef struct dlock__watch {
	struct dlock__sentinel *s; /* NULL: not a Sentinel-managed node, nothing to watch */
	struct dlock__conn *conn;  /* subscribed at one sentinel */
	size_t next;               /* the sentinel to subscribe at next */
	int64_t retry_at;
	dlock__exchange x; /* subscribing: the connect and SUBSCRIBE, on the loop */
	int subscribing;
	/* Its end (subscribed, or failed: retry_at set): tend again. */
	void (*changed)(void *arg);
	void *arg;
} dlock__watch;

void dlock__watch_init(dlock__watch *w, struct dlock__sentinel *s, void (*changed)(void *arg),
		void *arg);
/* Close it (`forked`: in a forked child, without touching the loop). */
void dlock__watch_close(dlock__watch *w, int forked);

/* Subscribe when there is no subscription and it is time to try: an
 * operation on `loop` (within the connect timeout), whose end calls
 * `changed`; returns when it next wants to be tended. */
int64_t dlock__watch_tend(dlock__watch *w, dlock__loop *loop);

/* The descriptor to poll and its events; -1 when not subscribed. */
int dlock__watch_fd(const dlock__watch *w, short *events);

/* Read what arrived; 1 when it announced that this node's primary moved
 * (the cached address is then the new one). */
int dlock__watch_read(dlock__watch *w);

#endif
