/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The expirable permits a semaphore handle took: their ids, their records
 * (added, found, forgotten, pruned long after their lease), whether each
 * is still held (dlock_semaphore_check, its validity) and the lost
 * callback. Their renewal is permit_job.c's.
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

void dlock__permit_id_new(char id[DLOCK_PERMIT_ID_SIZE], unsigned char raw[16])
{
	dlock__request_id(id);
	dlock__permit_id_parse(id, raw);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int dlock__permit_id_parse(const char *id, unsigned char raw[16])
{
	int i, hi, lo;

	if (strnlen(id, 33) != 32)
		return -1;
	for (i = 0; i < 16; i++) {
		if ((hi = hexval(id[2 * i])) < 0 || (lo = hexval(id[2 * i + 1])) < 0)
			return -1;
		raw[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

size_t dlock__permit_deadline(char *buf, int64_t lease_ms)
{
	return dlock__fmt_i64(buf, dlock__wall_ms() + lease_ms);
}

int64_t dlock__permit_lease(const dlock_semaphore *s, int64_t lease_ms)
{
	return lease_ms > 0 ? lease_ms : s->client->opts.watchdog_timeout_ms;
}

/* How long a permit's record outlives its lease when it is never released. */
#define FORGET_AFTER_MS 60000

/* s->mu held: drop the records of permits whose lease ended long ago and
 * that nobody released, so that a program that lets leases run out does
 * not keep them all (dlock_semaphore_check says DLOCK_ENOTOWNER then). */
static void prune(dlock_semaphore *s, int64_t now)
{
	dlock__permit **pp = &s->permits, *p;

	while ((p = *pp) != NULL) {
		if ((p->lost || dlock__permit_expired(p, now)) && now - p->confirmed_at > p->lease_ms + FORGET_AFTER_MS) {
			*pp = p->next;
			if (p->counted) /* a leased permit that ran out: nothing told */
				atomic_fetch_sub_explicit(&s->client->stats.held, 1,
						memory_order_relaxed);
			dlock__free(p);
			dlock__holder_held(s->client, -1);
		} else {
			pp = &p->next;
		}
	}
}

int dlock__permit_add(dlock_semaphore *s, const char *id, const unsigned char raw[16],
		int64_t lease_ms, int64_t sent_at)
{
	dlock__permit *p = dlock__calloc(1, sizeof(*p));
	int post = 0;

	if (p == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "semaphore %s: out of memory", s->shown);
	memcpy(p->id, id, DLOCK_PERMIT_ID_SIZE);
	memcpy(p->raw, raw, 16);
	p->renewed = lease_ms <= 0;
	p->lease_ms = dlock__permit_lease(s, lease_ms);
	p->confirmed_at = sent_at;
	p->since = sent_at;
	p->counted = 1;
	dlock__stat_held(s->client);
	dlock__mutex_lock(&s->mu);
	prune(s, dlock__now_ms());
	p->next = s->permits;
	s->permits = p;
	dlock__holder_held(s->client, 1); /* keeps the registration fresh */
	if (p->renewed && !s->freed) {
		s->job.started = 1;
		post = 1;
	}
	dlock__mutex_unlock(&s->mu);
	if (post)
		dlock__loop_post(s->job.loop, &s->job.kick);
	dlock__permit_watch_update(s); /* a leased permit listens too */
	return 0;
}

/* s->mu held. */
static dlock__permit **find(dlock_semaphore *s, const char *id)
{
	dlock__permit **pp;

	for (pp = &s->permits; *pp != NULL; pp = &(*pp)->next)
		if (strcmp((*pp)->id, id) == 0)
			return pp;
	return NULL;
}

int64_t dlock__permit_lease_end(const dlock__permit *p)
{
	return p->confirmed_at + p->lease_ms - p->lease_ms / 100 - 2;
}

/* s->mu held: the permit's lease has surely passed since its last confirmed renewal. */
int dlock__permit_expired(const dlock__permit *p, int64_t now)
{
	return now >= dlock__permit_lease_end(p);
}

int dlock__permit_listens(const dlock__permit *p, int64_t now)
{
	return p->lost == 0 && (p->renewed || (!p->expired && !dlock__permit_expired(p, now)));
}

/* s->mu held: whether p goes in this run of the job - every renewed permit
 * held, and when a message came (`heard`) the leased ones held too. */
int dlock__permit_in_run(const dlock__permit *p, int heard, int64_t now)
{
	return p->lost == 0 && (p->renewed || (heard && dlock__permit_listens(p, now)));
}

int dlock__permit_forget(dlock_semaphore *s, const char *id)
{
	dlock__permit **pp, *p;
	int rc = -1, counted = 0;
	int64_t now = dlock__now_ms(), since = now;

	dlock__mutex_lock(&s->mu);
	if ((pp = find(s, id)) != NULL) {
		p = *pp;
		*pp = p->next;
		rc = p->lost == 0 && !p->expired && !dlock__permit_expired(p, now);
		counted = p->counted;
		since = p->since;
		dlock__free(p);
		dlock__holder_held(s->client, -1);
	}
	dlock__mutex_unlock(&s->mu);
	dlock__permit_watch_update(s);
	/* A permit ends with the release asked for it: RELEASED when it was
	 * still held, else only the gauge (a loss not told). */
	if (counted && rc == 1)
		dlock__stat_released(s->client, s->name, id, now - since);
	else if (counted)
		atomic_fetch_sub_explicit(&s->client->stats.held, 1, memory_order_relaxed);
	return rc;
}

int dlock_semaphore_check(const dlock_semaphore *cs, const char *id)
{
	dlock_semaphore *s = (dlock_semaphore *)cs; /* the mutex only */
	dlock__permit **pp;
	int rc;

	if (s == NULL || id == NULL)
		return dlock__seterr(DLOCK_EINVAL, "permit check: NULL argument");
	dlock__mutex_lock(&s->mu);
	if ((pp = find(s, id)) == NULL) {
		rc = DLOCK_ENOTOWNER;
	} else if ((*pp)->lost != 0 || (*pp)->expired) {
		rc = DLOCK_ELOST;
	} else if (dlock__permit_expired(*pp, dlock__now_ms())) {
		(*pp)->expired = 1; /* the job tells it (callback) */
		rc = DLOCK_ELOST;
	} else {
		rc = 0;
	}
	dlock__mutex_unlock(&s->mu);
	return rc;
}

int dlock_semaphore_validity_ms(int64_t *ms, const dlock_semaphore *cs, const char *id)
{
	dlock_semaphore *s = (dlock_semaphore *)cs; /* the mutex only */
	dlock__permit **pp;
	int64_t left = 0;
	int rc;

	if (ms != NULL)
		*ms = 0;
	if (ms == NULL || s == NULL || id == NULL)
		return dlock__seterr(DLOCK_EINVAL, "permit validity: NULL argument");
	dlock__mutex_lock(&s->mu);
	if ((pp = find(s, id)) == NULL) {
		rc = DLOCK_ENOTOWNER;
	} else {
		const dlock__permit *p = *pp;

		/* The same bound as dlock__permit_expired(): the lease less 1% + 2 ms of drift. */
		left = p->confirmed_at + p->lease_ms - p->lease_ms / 100 - 2 - dlock__now_ms();
		rc = p->lost == 0 && left > 0 ? 0 : DLOCK_ELOST;
	}
	dlock__mutex_unlock(&s->mu);
	if (rc == 0)
		*ms = left;
	return rc;
}

int dlock_semaphore_set_lost_cb(dlock_semaphore *s, dlock_lost_cb cb, void *userdata)
{
	if (s == NULL)
		return dlock__seterr(DLOCK_EINVAL, "semaphore lost callback: NULL handle");
	dlock__mutex_lock(&s->mu);
	s->lost_cb = cb;
	s->lost_ud = userdata;
	dlock__mutex_unlock(&s->mu);
	return 0;
}

void dlock__permits_free(dlock_semaphore *s)
{
	dlock__permit *p, *next;

	for (p = s->permits; p != NULL; p = next) {
		next = p->next;
		dlock__free(p);
		dlock__holder_held(s->client, -1);
	}
	s->permits = NULL;
}
