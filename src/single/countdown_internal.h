/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: the countdown latch handle (RCountDownLatch) and its one
 * operation, which every latch call - blocking or not - runs
 * (countdown_op.c).
 */
#ifndef DLOCK_SINGLE_COUNTDOWN_INTERNAL_H
#define DLOCK_SINGLE_COUNTDOWN_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/countdown.h"
#include "core/base/error.h"
#include "core/drive/client.h"

struct dlock_countdown {
	dlock_client *client;
	char *name; /* the key, verbatim */
	size_t name_len;
	char *channel; /* redisson_countdownlatch__channel__{name} */
	size_t channel_len;
	char shown[80]; /* the name as messages show it: printable, truncated */
	int report_missing; /* options: a latch that does not exist counts -1 */
	dlock__errbuf err;
	/* The caller's reference and one per operation not yet ended: a free
	 * from an operation's callback leaves the last free to its end. */
	_Atomic int refs;
};

/* What a latch operation does. */
typedef enum dlock__latch_kind {
	DLOCK__LATCH_SET,
	DLOCK__LATCH_DOWN,
	DLOCK__LATCH_COUNT,
	DLOCK__LATCH_DELETE,
	DLOCK__LATCH_AWAIT
} dlock__latch_kind;

/* Drop one reference; the last frees the handle. */
void dlock__countdown_unref(dlock_countdown *c);

/*
 * Run one operation of `kind` (arg: the count to set, or the await's
 * wait) to its end on the calling thread. *value (may be NULL) gets its
 * answer (the result's value). Returns its code, the handle's and
 * the thread's message set from it.
 */
int dlock__countdown_block(dlock_countdown *c, dlock__latch_kind kind, int64_t arg,
		int64_t *value);

#endif
