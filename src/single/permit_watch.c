/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watch_force_unlock for expirable permits. A force release
 * (dlock_semaphore_force_release) gives every taken permit back and
 * publishes the new count on redisson_sc:{name}, as any release does. A
 * handle that holds a permit listens there (the subscription the holds and
 * the waiters share: core/drive/reactor.h), and a message, or a
 * subscription made anew (one may have gone unheard), renews its renewed
 * permits at once and checks those with a fixed lease (extending nothing):
 * a permit the server no longer has is found lost within a round trip
 * instead of at the next renewal or the lease's end. Each release of
 * anyone's permit costs a listener one call. A deletion of the keys that
 * publishes nothing (Redisson's delete()) is found at the next renewal (a
 * leased permit: at its release).
 */
#include <stddef.h>

#include "core/base/alloc.h"
#include "core/base/time.h"
#include "single/semaphore_internal.h"

#define SEM_OF_LISTEN(w) ((dlock_semaphore *)((char *)(w) - offsetof(dlock_semaphore, listen)))

static void heard(dlock__channel_watch *w)
{
	dlock__permit_renew_now(SEM_OF_LISTEN(w));
}

void dlock__permit_watch_update(dlock_semaphore *s)
{
	int64_t now = dlock__now_ms();
	dlock__permit *p;
	int want = 0;

	if (!s->client->opts.watch_force_unlock)
		return; /* never listening: nothing to walk */
	dlock__mutex_lock(&s->mu);
	for (p = s->permits; p != NULL && !want; p = p->next)
		want = dlock__permit_listens(p, now);
	want = want && !s->freed;
	if (want && !s->listening) {
		s->listen.heard = heard;
		s->job.started = 1; /* the loop sees the job from now: its end must stop it */
		/* Not listening (no node now, out of memory): the renewals still find a loss. */
		s->listening = dlock__holds_listen(s->client, s->channel, s->channel_len,
					       &s->listen) == 0;
	} else if (!want && s->listening) {
		dlock__holds_unlisten(s->client, &s->listen);
		s->listening = 0;
	}
	dlock__mutex_unlock(&s->mu);
}
