/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The renewal of expirable permits taken through a semaphore handle (their
 * records: permits.c).
 *
 * A permit taken with the watchdog lease is renewed by the handle's job on
 * its client's background loop (where the lock watchdog runs too), every
 * third of the watchdog timeout: one script call moves the lease end of
 * every such permit of the handle (Redisson's updateLeaseTime, many at a
 * time). A permit the server no longer has is LOST: its renewal ends and
 * the lost callback runs. A renewal that cannot reach the server is tried
 * again soon (a quarter of the period, at most a second later, as the lock
 * watchdog does), until the lease would have run out since the last
 * renewal that did: then the permit is lost too. A loss is final: once
 * dlock_semaphore_check() has said the lease ran out, a renewal
 * that still finds the permit (a late one the server ran when it came
 * back) does not make it held again; the next run of the job tells the
 * loss instead, and the permit comes back on the server when the lease it
 * has there ends. Freeing the handle stops the job; its permits then come
 * back when their leases pass. With watch_force_unlock, a message on the
 * channel (permit_watch.c) runs the job at once, and that run also checks
 * the permits with a fixed lease, extending nothing: one the server no
 * longer has before its lease ends is lost the same way.
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fmt.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/drive/holder.h"
#include "core/drive/reactor.h"
#include "core/drive/stats.h"
#include "core/drive/client.h"
#include "single/acquire.h"
#include "single/semaphore_internal.h"

#define JOB_OF(p, field) ((dlock__permit_job *)((char *)(p) - offsetof(dlock__permit_job, field)))
#define SEM_OF(j) ((dlock_semaphore *)((char *)(j) - offsetof(dlock_semaphore, job)))

/* A renewal that failed is tried again after at most this long. */
#define RENEW_RETRY_MS 1000

/* The time between renewals. */
static int64_t period(const dlock_semaphore *s)
{
	int64_t p = s->client->opts.watchdog_timeout_ms / 3;

	return p > 0 ? p : 1;
}

/* After a failure: a quarter of the period (the lock watchdog's pace), so
 * that a short watchdog timeout leaves room for more tries, at most a
 * second. */
static int64_t retry_in(const dlock_semaphore *s)
{
	int64_t r = period(s) / 4 + 1;

	return r < RENEW_RETRY_MS ? r : RENEW_RETRY_MS;
}

static void job_run(dlock__timer *t);

/* On the loop: arm the timer for the next renewal unless one is under way. */
static void kick(dlock__task *t)
{
	dlock__permit_job *j = JOB_OF(t, kick);
	dlock_semaphore *s = SEM_OF(j);

	if (j->stopped || j->running || j->armed)
		return;
	if (dlock__timer_set(j->loop, &j->timer, dlock__now_ms() + period(s)) == 0)
		j->armed = 1;
}

/* The renewal round's buffers (argument lists), freed once it is over. */
static void free_round(dlock__permit_job *j)
{
	dlock__free(j->argv);
	dlock__free(j->lens);
	dlock__free(j->mem);
	j->argv = NULL;
	j->lens = NULL;
	j->mem = NULL;
}

/* On the loop: end the job for good, and tell a waiting dlock_semaphore_free(). */
static void job_stop_here(dlock__permit_job *j)
{
	dlock_semaphore *s = SEM_OF(j);

	dlock__timer_stop(j->loop, &j->timer);
	dlock__loop_unpost(j->loop, &j->kick);
	dlock__loop_unpost(j->loop, &j->now);
	dlock__permit_watch_stop_here(s);
	if (j->running) {
		dlock__mux_loop_end(&j->ml);
		dlock__mux_clear(&j->mop, 1);
		j->running = 0;
	}
	free_round(j);
	dlock__mutex_lock(&s->mu);
	j->stopped = 1;
	pthread_cond_broadcast(&j->stopped_cv);
	dlock__mutex_unlock(&s->mu);
}

static void stop_task(dlock__task *t)
{
	job_stop_here(JOB_OF(t, stop));
}

/* On the loop: a message came on the channel; renew now, or right after
 * the renewal under way (it may have been sent before the message). */
static void now_task(dlock__task *t)
{
	dlock__permit_job *j = JOB_OF(t, now);

	if (j->stopped)
		return;
	j->heard = 1;
	if (j->running) {
		j->again = 1;
		return;
	}
	if (dlock__timer_set(j->loop, &j->timer, dlock__now_ms()) == 0)
		j->armed = 1;
}

void dlock__permit_renew_now(dlock_semaphore *s)
{
	dlock__loop_post(s->job.loop, &s->job.now);
}

void dlock__permit_job_init(dlock_semaphore *s)
{
	dlock__timer_init(&s->job.timer, job_run);
	dlock__task_init(&s->job.kick, kick);
	dlock__task_init(&s->job.stop, stop_task);
	dlock__task_init(&s->job.now, now_task);
	dlock__permit_watch_init(s);
}

void dlock__permit_job_stop(dlock_semaphore *s)
{
	dlock__permit_job *j = &s->job;
	int any;

	dlock__mutex_lock(&s->mu);
	s->freed = 1;
	any = j->started;
	dlock__mutex_unlock(&s->mu);
	dlock__permit_watch_update(s); /* stops listening: nothing posts `now` after it */
	if (!any)
		return; /* the loop never saw the job */
	if (!dlock__reactor_own_thread(s->client->reactor) ||
			atomic_load(&j->loop->driver) == dlock_thread_id()) {
		/* The caller drives the loop (its own, or this is a callback on it). */
		job_stop_here(j);
		return;
	}
	dlock__loop_post(j->loop, &j->stop);
	dlock__mutex_lock(&s->mu);
	while (!j->stopped)
		pthread_cond_wait(&j->stopped_cv, &s->mu);
	dlock__mutex_unlock(&s->mu);
}

/* Losses found by a renewal, told outside the mutex. */
typedef struct lost_note {
	char id[DLOCK_PERMIT_ID_SIZE];
	int reason;
} lost_note;

/* Room to note a loss of each of s's permits (s->mu held); NULL when out
 * of memory: the losses are still recorded, only not told. */
static lost_note *new_notes(const dlock_semaphore *s)
{
	const dlock__permit *p;
	size_t cap = 0;

	for (p = s->permits; p != NULL; p = p->next)
		cap++;
	return dlock__calloc(cap + 1, sizeof(lost_note));
}

/* p was found lost: note it for its callback (notes NULL: not told). */
static void note_loss(lost_note *notes, size_t *n, const dlock__permit *p)
{
	if (notes == NULL)
		return;
	memcpy(notes[*n].id, p->id, DLOCK_PERMIT_ID_SIZE);
	notes[(*n)++].reason = p->lost;
}

static void tell(dlock_semaphore *s, const lost_note *notes, size_t n)
{
	dlock_lost_cb cb;
	void *ud;
	size_t i;

	dlock__mutex_lock(&s->mu);
	cb = s->lost_cb;
	ud = s->lost_ud;
	dlock__mutex_unlock(&s->mu);
	if (cb == NULL || n == 0)
		return;
	atomic_fetch_add(&s->refs, 1); /* a callback may free the handle */
	for (i = 0; i < n; i++) {
		dlock_lost_event ev = { s->name, notes[i].id, (dlock_lost_reason)notes[i].reason,
			dlock_client_node(s->client) };

		cb(&ev, ud);
	}
	dlock__sem_unref(s);
}

static void rearm(dlock__permit_job *j, int64_t due)
{
	if (!j->stopped && dlock__timer_set(j->loop, &j->timer, due) == 0)
		j->armed = 1;
}

/* The run's answer for p: 1 held (renewed), 0 gone, -1 not in it or none. */
static int answer_for(const dlock__permit_job *j, const redisReply *r, const dlock__permit *p)
{
	const unsigned char *raw = (const unsigned char *)j->mem + 24;
	size_t i;

	for (i = 0; i < j->nids; i++)
		if (memcmp(p->raw, raw + i * 40, 16) == 0)
			return r->element[i]->type == REDIS_REPLY_INTEGER &&
					r->element[i]->integer == 1;
	return -1;
}

/* s->mu held: apply the run's answer `said` to p, and `now`'s verdict on
 * its lease. A leased permit was only checked: held changes nothing, and
 * its lease running out is its end, not a loss. */
static void apply_answer(dlock__permit *p, int said, const dlock__permit_job *j, int64_t now)
{
	if (!p->renewed) {
		if (said == 0 && !p->expired && !dlock__permit_expired(p, now))
			p->lost = DLOCK_LOST_GONE;
		return;
	}
	if (said == 1 && !p->expired)
		p->confirmed_at = j->sent_at;
	else if (said == 0 && !p->expired)
		p->lost = DLOCK_LOST_GONE;
	if (p->lost == 0 && (p->expired || dlock__permit_expired(p, now)))
		p->lost = DLOCK_LOST_UNREACHABLE;
}

static void job_done(dlock__mux_loop *ml)
{
	dlock__permit_job *j = (dlock__permit_job *)((char *)ml - offsetof(dlock__permit_job, ml));
	dlock_semaphore *s = SEM_OF(j);
	redisReply *r = j->mop.reply;
	int ok = j->mop.rc == 0 && r != NULL && r->type == REDIS_REPLY_ARRAY &&
		 r->elements == j->nids;
	int64_t now = dlock__now_ms();
	lost_note *notes = NULL;
	size_t nnotes = 0, left = 0;
	uint64_t renewed = 0;
	dlock__permit *p;

	j->running = 0;
	dlock__mutex_lock(&s->mu);
	notes = new_notes(s);
	for (p = s->permits; p != NULL; p = p->next) {
		int said;

		if (p->lost)
			continue;
		said = ok ? answer_for(j, r, p) : -1;
		renewed += p->renewed && said == 1 && !p->expired;
		apply_answer(p, said, j, now);
		if (p->lost != 0 && p->counted) {
			p->counted = 0;
			dlock__stat_lost(s->client, s->name, p->id, p->lost, now - p->since);
		}
		if (p->lost != 0)
			note_loss(notes, &nnotes, p);
		left += p->renewed && p->lost == 0;
	}
	dlock__mutex_unlock(&s->mu);
	if (ok)
		dlock__stat_renewed(s->client, renewed);
	else
		dlock__stat_renewal_failed(s->client, j->mop.client->node.label,
				j->mop.rc < 0 ? j->mop.rc : DLOCK_EPROTO);
	if (!ok && j->mop.rc == 0)
		dlock__seterr_node(DLOCK_EPROTO, s->client->node.label,
				"semaphore %s: unexpected renewal reply", s->shown);
	dlock__mux_loop_end(ml);
	dlock__mux_clear(&j->mop, 1);
	free_round(j);
	/* Again: a message came meanwhile (maybe about a leased permit). */
	if (left > 0 || j->again)
		rearm(j, j->again ? now : now + (ok ? period(s) : retry_in(s)));
	j->again = 0;
	/* A lost permit, or a leased one whose lease ran out, listens no more. */
	dlock__permit_watch_update(s);
	/* Last: the callback may free the handle. */
	tell(s, notes, nnotes);
	dlock__free(notes);
}

/* s->mu held: a renewed permit whose lease ran out since the last renewal
 * that reached the server (or that a check saw run out) is lost first, and
 * noted: a renewal now could only make it held again. Returns how many
 * permits go in the run. */
static size_t lapse_and_count(
		dlock_semaphore *s, int heard, int64_t now, lost_note *notes, size_t *nnotes)
{
	size_t n = 0;
	dlock__permit *p;

	for (p = s->permits; p != NULL; p = p->next) {
		if (p->renewed && p->lost == 0 && (p->expired || dlock__permit_expired(p, now))) {
			p->lost = DLOCK_LOST_UNREACHABLE;
			note_loss(notes, nnotes, p);
		}
		n += dlock__permit_in_run(p, heard, now);
	}
	return n;
}

/* s->mu held: the run's arguments for its n permits - KEYS the name, its
 * timeouts and channel; ARGV now, then each permit's id and new lease
 * end. 0, or -1 when out of memory (free_round frees what was made). */
static int fill_round(dlock__permit_job *j, dlock_semaphore *s, size_t n, int heard, int64_t now)
{
	size_t k = 0;
	dlock__permit *p;
	char *m;

	j->argv = dlock__calloc(4 + 2 * n, sizeof(*j->argv));
	j->lens = dlock__calloc(4 + 2 * n, sizeof(*j->lens));
	j->mem = dlock__malloc(24 + 40 * n);
	if (j->argv == NULL || j->lens == NULL || j->mem == NULL)
		return -1;
	j->argv[0] = s->name;
	j->lens[0] = s->name_len;
	j->argv[1] = s->timeouts;
	j->lens[1] = s->timeouts_len;
	j->argv[2] = s->channel;
	j->lens[2] = s->channel_len;
	j->argv[3] = j->mem;
	j->lens[3] = dlock__fmt_i64(j->mem, dlock__wall_ms());
	for (p = s->permits; p != NULL; p = p->next) {
		if (!dlock__permit_in_run(p, heard, now))
			continue;
		m = j->mem + 24 + 40 * k;
		memcpy(m, p->raw, 16);
		j->argv[4 + 2 * k] = m;
		j->lens[4 + 2 * k] = 16;
		/* A leased permit is only checked: "" extends nothing. */
		j->argv[5 + 2 * k] = m + 16;
		j->lens[5 + 2 * k] = p->renewed ? dlock__permit_deadline(m + 16, p->lease_ms) : 0;
		k++;
	}
	return 0;
}

/* Start the run of n permits on the job's loop: 0, or -1. */
static int send_round(dlock__permit_job *j, dlock_semaphore *s, size_t n)
{
	j->nids = n;
	memset(&j->call, 0, sizeof(j->call));
	j->call.script = &dlock__script_permit_renew;
	j->call.nkeys = 3;
	j->call.argc = (int)(4 + 2 * n);
	j->call.many_argv = j->argv;
	j->call.many_lens = j->lens;
	memset(&j->mop, 0, sizeof(j->mop));
	j->mop.client = s->client;
	j->mop.call = &j->call;
	j->sent_at = dlock__now_ms();
	j->ml.urgent = 1; /* ahead of the operations waiting for a connection */
	return dlock__mux_loop_begin(&j->ml, j->loop, &j->mop, 1, NULL, NULL, job_done);
}

/* The run could not start: again after the retry interval, the check
 * (heard) still owed. */
static void retry_round(dlock__permit_job *j, dlock_semaphore *s, int heard)
{
	free_round(j);
	j->heard = heard;
	rearm(j, dlock__now_ms() + retry_in(s));
}

/*
 * The timer: renew every renewed permit not lost, in one call. A permit
 * whose lease ran out since the last renewal that reached the server (or
 * that a check saw run out) is lost first, and told: a renewal now could
 * only make it held again.
 */
static void job_run(dlock__timer *t)
{
	dlock__permit_job *j = JOB_OF(t, timer);
	dlock_semaphore *s = SEM_OF(j);
	int64_t now = dlock__now_ms();
	lost_note *notes;
	size_t n, nnotes = 0;
	int heard = j->heard;

	j->armed = 0;
	if (j->stopped || j->running)
		return;
	j->heard = 0;
	dlock__mutex_lock(&s->mu);
	notes = new_notes(s);
	n = lapse_and_count(s, heard, now, notes, &nnotes);
	if (n == 0 || s->freed) {
		dlock__mutex_unlock(&s->mu); /* the next permit taken kicks it again */
	} else if (fill_round(j, s, n, heard, now) < 0) {
		dlock__mutex_unlock(&s->mu);
		retry_round(j, s, heard);
	} else {
		dlock__mutex_unlock(&s->mu);
		if (send_round(j, s, n) < 0)
			retry_round(j, s, heard);
		else
			j->running = 1;
	}
	if (nnotes > 0)
		dlock__permit_watch_update(s);
	/* Last: the callback may free the handle. */
	tell(s, notes, nnotes);
	dlock__free(notes);
}
