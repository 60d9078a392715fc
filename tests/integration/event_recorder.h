/* SPDX-License-Identifier: BSD-3-Clause */
/* What an on_event hook saw (dlock/stats.h), for the events tests. */
#ifndef DLOCK_TEST_EVENT_RECORDER_H
#define DLOCK_TEST_EVENT_RECORDER_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define MAX_EVENTS 256

typedef struct seen_event {
	dlock_stat_event ev; /* strings below, not the hook's */
	char name[64], node[64], owner[80];
} seen_event;

typedef struct recorder {
	pthread_mutex_t mu;
	seen_event ev[MAX_EVENTS];
	int n;
} recorder;

static inline void on_event(const dlock_stat_event *ev, void *ud)
{
	recorder *r = ud;
	seen_event *s;

	pthread_mutex_lock(&r->mu);
	if (r->n < MAX_EVENTS) {
		s = &r->ev[r->n++];
		s->ev = *ev;
		snprintf(s->name, sizeof(s->name), "%s", ev->name ? ev->name : "");
		snprintf(s->node, sizeof(s->node), "%s", ev->node ? ev->node : "");
		snprintf(s->owner, sizeof(s->owner), "%s", ev->owner ? ev->owner : "");
	}
	pthread_mutex_unlock(&r->mu);
}

static inline void rec_init(recorder *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
}

static inline int rec_count(recorder *r, dlock_stat_event_type type)
{
	int i, n = 0;

	pthread_mutex_lock(&r->mu);
	for (i = 0; i < r->n; i++)
		n += r->ev[i].ev.type == type;
	pthread_mutex_unlock(&r->mu);
	return n;
}

/* A copy of the first event of `type`; 0 when none came within ms. */
static inline int rec_wait(recorder *r, dlock_stat_event_type type, int64_t ms, seen_event *out)
{
	int64_t until = rh_now_ms() + ms;
	int i;

	for (;;) {
		pthread_mutex_lock(&r->mu);
		for (i = 0; i < r->n; i++)
			if (r->ev[i].ev.type == type) {
				if (out != NULL)
					*out = r->ev[i];
				pthread_mutex_unlock(&r->mu);
				return 1;
			}
		pthread_mutex_unlock(&r->mu);
		if (rh_now_ms() >= until)
			return 0;
		dl_sleep_ms(5);
	}
}

static inline dlock_client *hooked_client(const char *uri, recorder *r, int64_t timeout_ms,
		int64_t watchdog_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	if (timeout_ms > 0)
		o.connect_timeout_ms = o.command_timeout_ms = timeout_ms;
	if (watchdog_ms > 0)
		o.watchdog_timeout_ms = watchdog_ms;
	o.on_event = on_event;
	o.event_userdata = r;
	return dl_client_opts(uri, &o);
}

static inline uint64_t sum_counts(const dlock_stat_histogram *h)
{
	uint64_t n = 0;

	for (int i = 0; i < DLOCK_STAT_BUCKETS; i++)
		n += h->counts[i];
	return n;
}

#endif
