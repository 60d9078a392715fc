/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watch_force_unlock for expirable permits. A force release
 * (dlock_semaphore_force_release) gives every taken permit back and
 * publishes the new count on redisson_sc:{name}, as any release does. A
 * handle that holds a renewed permit listens there (the subscription the
 * holds and the waiters share: core/drive/reactor.h), and a message, or a
 * subscription made anew (one may have gone unheard), renews its permits
 * at once: a permit the server no longer has is found lost within a round
 * trip instead of at the next renewal. Each release of anyone's permit
 * costs a listener one renewal. A deletion of the keys that publishes
 * nothing (Redisson's delete()) is found at the next renewal.
 */
#include <stddef.h>

#include "core/base/alloc.h"
#include "single/semaphore_internal.h"

#define SEM_OF_LISTEN(w) ((dlock_semaphore *)((char *)(w) - offsetof(dlock_semaphore, listen)))

static void heard(dlock__channel_watch *w)
{
	dlock__permit_renew_now(SEM_OF_LISTEN(w));
}

void dlock__permit_watch_update(dlock_semaphore *s)
{
	dlock__permit *p;
	int want = 0;

	dlock__mutex_lock(&s->mu);
	for (p = s->permits; p != NULL && !want; p = p->next)
		want = p->renewed && p->lost == 0;
	want = want && !s->freed && s->client->opts.watch_force_unlock;
	if (want && !s->listening) {
		s->listen.heard = heard;
		/* Not listening (no node now, out of memory): the renewals still find a loss. */
		s->listening = dlock__holds_listen(s->client, s->channel, s->channel_len,
					       &s->listen) == 0;
	} else if (!want && s->listening) {
		dlock__holds_unlisten(s->client, &s->listen);
		s->listening = 0;
	}
	dlock__mutex_unlock(&s->mu);
}
