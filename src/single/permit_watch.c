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
#define SEM_OF_JOB(j) ((dlock_semaphore *)((char *)(j) - offsetof(dlock_semaphore, job)))
#define JOB_OF_ENDS(t) ((dlock__permit_job *)((char *)(t) - offsetof(dlock__permit_job, ends)))
#define JOB_OF_KICK(t) \
	((dlock__permit_job *)((char *)(t) - offsetof(dlock__permit_job, ends_kick)))

static void heard(dlock__channel_watch *w)
{
	dlock__permit_renew_now(SEM_OF_LISTEN(w));
}

/*
 * Leases that run out. A leased permit listens while its lease lasts; when
 * the first such lease ends the `ends` timer looks again, so a handle whose
 * leases were let run out does not keep its subscription until the next
 * message. On the loop.
 */
static void arm_ends(dlock_semaphore *s)
{
	dlock__permit_job *j = &s->job;
	int64_t now = dlock__now_ms(), due = DLOCK__NEVER, end;
	dlock__permit *p;

	dlock__mutex_lock(&s->mu);
	/* Leases not yet over only: one over already is dropped by the update. */
	for (p = s->permits; p != NULL && s->listening && !j->stopped; p = p->next)
		if (!p->renewed && dlock__permit_listens(p, now) &&
				(end = dlock__permit_lease_end(p)) < due)
			due = end;
	dlock__mutex_unlock(&s->mu);
	if (due < j->ends_due && dlock__timer_set(j->loop, &j->ends, due) == 0)
		j->ends_due = due;
}

static void ends_fired(dlock__timer *t)
{
	dlock__permit_job *j = JOB_OF_ENDS(t);
	dlock_semaphore *s = SEM_OF_JOB(j);

	j->ends_due = DLOCK__NEVER;
	dlock__permit_watch_update(s); /* still listening: it asks for the next end */
}

static void ends_kick(dlock__task *t)
{
	arm_ends(SEM_OF_JOB(JOB_OF_KICK(t)));
}

void dlock__permit_watch_init(dlock_semaphore *s)
{
	dlock__timer_init(&s->job.ends, ends_fired);
	dlock__task_init(&s->job.ends_kick, ends_kick);
	s->job.ends_due = DLOCK__NEVER;
}

void dlock__permit_watch_stop_here(dlock_semaphore *s)
{
	dlock__timer_stop(s->job.loop, &s->job.ends);
	dlock__loop_unpost(s->job.loop, &s->job.ends_kick);
	s->job.ends_due = DLOCK__NEVER;
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
	/* A leased permit may have come: its lease's end. Posted under the
	 * mutex while not freed, so the job's stop takes it off again. */
	if (s->listening)
		dlock__loop_post(s->job.loop, &s->job.ends_kick);
	dlock__mutex_unlock(&s->mu);
}
