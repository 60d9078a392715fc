/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The watchdog: the client's background thread renews every hold taken
 * without a lease, every third of the watchdog timeout, many per EVAL
 * (Redisson's renewExpiration with lockWatchdogBatchSize). A renewal that
 * finds the hold gone, or that cannot reach the server before the TTL must
 * have run out, marks it lost: renewal stops and its callbacks run.
 *
 * With watch_force_unlock, a hold also listens on its lock's channel: a
 * message there (anyone's unlock, a force unlock included) asks for a
 * renewal of that hold at once, out of turn, which finds a deleted key
 * as a round would - within a round trip instead of up to a period later.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/base/fmt.h"
#include "core/topology/slot.h"
#include "core/base/time.h"
#include "single/holds_table.h"
#include "single/scripts.h"

/* Holds renewed per EVAL (Redisson's lockWatchdogBatchSize). */
#define RENEW_BATCH 100

/*
 * Collect every watched hold (`all`), or only those a notice asked to
 * check, into *out (and room for a loss event each into *cb), and mark lost
 * those whose TTL must have run out without a renewal reaching the server.
 * The arrays are sized under the table's lock, so a table that grows
 * meanwhile cannot leave any hold out of the round.
 * Returns how many; -1 when out of memory (try again soon).
 */
static ssize_t collect(dlock__holds *h, int64_t now, int all, renewal **out, lost_event **cb,
		size_t *ncb)
{
	size_t i, n = 0, max;
	hold *x;

	dlock__mutex_lock(&h->mu);
	max = h->count;
	*out = dlock__calloc(max ? max : 1, sizeof(**out));
	*cb = dlock__calloc(max ? max : 1, sizeof(**cb));
	if (*out == NULL || *cb == NULL) {
		dlock__mutex_unlock(&h->mu);
		return -1;
	}
	for (i = 0; i < h->nbuckets; i++) {
		for (x = h->buckets[i]; x != NULL; x = x->next) {
			if (!x->watchdog || x->lost || !(all || x->check))
				continue;
			x->check = 0;
			/* While a release is on its way its answer settles the record. */
			if (x->releasing == 0 && (x->expired || dlock__holds_expired(h, x, now))) {
				dlock__holds_mark_lost(h, x, DLOCK_LOST_UNREACHABLE, *cb, ncb);
				continue;
			}
			(*out)[n].name = dlock__strndup(x->name, x->name_len);
			(*out)[n].owner = dlock__strdup(x->owner);
			if ((*out)[n].name == NULL || (*out)[n].owner == NULL) {
				dlock__free((*out)[n].name);
				dlock__free((*out)[n].owner);
				continue; /* try again next turn */
			}
			(*out)[n].name_len = x->name_len;
			(*out)[n].epoch = x->epoch;
			/* Only a cluster splits batches by slot: elsewhere one slot for all. */
			(*out)[n].slot = h->client->node.cluster != NULL
					? dlock__key_slot(x->name, x->name_len)
					: 0;
			n++;
		}
	}
	dlock__mutex_unlock(&h->mu);
	return (ssize_t)n;
}

/* Renew one batch; 0 when the server answered for every hold. */
static int renew_batch(dlock__holds *h, renewal *batch, size_t n, size_t offset, lost_event *cb,
		size_t *ncb)
{
	dlock_client *c = h->client;
	const char *keys[RENEW_BATCH], *args[RENEW_BATCH + 1];
	size_t key_lens[RENEW_BATCH], arg_lens[RENEW_BATCH + 1], i;
	char ttl[24];
	redisReply *r = NULL;
	int64_t sent_at;
	int rc;

	dlock__conn *conn = NULL;

	/* A pooled connection: the server may accept no new one (maxclients)
	 * while those it has work. In a cluster, the member serving the batch's slot. */
	c = dlock__client_for_key(c, batch[offset].name, batch[offset].name_len);
	if (c == NULL)
		return -1;
	rc = dlock__client_conn_get(c, &conn, dlock__deadline_in(c->opts.command_timeout_ms));
	if (rc < 0) {
		dlock__client_note_reply(h->client, rc, NULL); /* a cluster's map is suspect */
		return -1;
	}
	args[0] = ttl;
	arg_lens[0] = dlock__fmt_i64(ttl, c->opts.watchdog_timeout_ms);
	for (i = 0; i < n; i++) {
		keys[i] = batch[offset + i].name;
		key_lens[i] = batch[offset + i].name_len;
		args[i + 1] = batch[offset + i].owner;
		arg_lens[i + 1] = strlen(batch[offset + i].owner);
	}
	sent_at = dlock__now_ms();
	rc = dlock__script_run(conn, &dlock__script_renew, (int)n, keys, key_lens, (int)n + 1, args,
			arg_lens, &r, dlock__deadline_in(c->opts.command_timeout_ms));
	dlock__client_conn_put(c, conn);
	dlock__client_note_reply(h->client, rc, r); /* a MOVED updates a cluster's map */
	if (rc == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements != n))
		rc = -1; /* an error reply (OOM, READONLY ...): try again later */
	if (rc == 0) {
		dlock__mutex_lock(&h->mu);
		for (i = 0; i < n; i++) {
			renewal *w = &batch[offset + i];
			hold *x = dlock__holds_find(h, w->name, w->name_len, w->owner);

			if (x == NULL || x->epoch != w->epoch || x->lost || x->expired)
				continue;
			/* A cluster's slot moved: listen where the hold now lives. */
			if (x->watch != NULL && x->watch_rx != c->reactor)
				dlock__holds_rewatch(h, x, c->reactor);
			if (r->element[i]->type == REDIS_REPLY_INTEGER &&
					r->element[i]->integer == 1)
				x->confirmed_at = sent_at;
			else if (x->releasing == 0) /* else the release may have run first */
				dlock__holds_mark_lost(h, x,
						r->element[i]->type == REDIS_REPLY_INTEGER &&
										r->element[i]->integer <
												0
								? DLOCK_LOST_REPLACED
								: DLOCK_LOST_GONE,
						cb, ncb);
		}
		dlock__mutex_unlock(&h->mu);
	}
	freeReplyObject(r);
	return rc == 0 ? 0 : -1;
}

static int by_slot(const void *a, const void *b)
{
	unsigned x = ((const renewal *)a)->slot, y = ((const renewal *)b)->slot;

	return x < y ? -1 : x > y;
}

/* How many renewals from i on go in one EVAL: at most RENEW_BATCH, of one
 * slot (a cluster refuses keys of several slots in one script; Redisson
 * groups its batches the same way). */
static size_t same_slot_run(const renewal *batch, size_t n, size_t i)
{
	size_t k = 1;

	while (i + k < n && k < RENEW_BATCH && batch[i + k].slot == batch[i].slot)
		k++;
	return k;
}

/* Renew the holds collect() picks; 0, or -1 when some renewal failed. */
static int renew_round(dlock__holds *h, int64_t now, int all)
{
	size_t n, i, ncb = 0;
	renewal *batch = NULL;
	lost_event *cb = NULL;
	ssize_t got = collect(h, now, all, &batch, &cb, &ncb);
	int failed = 0;

	if (got < 0) {
		dlock__free(batch);
		dlock__free(cb);
		return -1;
	}
	n = (size_t)got;
	qsort(batch, n, sizeof(*batch), by_slot);
	for (i = 0; i < n;) {
		size_t k = same_slot_run(batch, n, i);

		if (renew_batch(h, batch, k, i, cb, &ncb) < 0)
			failed = 1;
		i += k;
	}
	for (i = 0; i < n; i++) {
		dlock__free(batch[i].name);
		dlock__free(batch[i].owner);
	}
	dlock__free(batch);
	dlock__holds_run_callbacks(h, cb, ncb);
	dlock__free(cb);
	return failed ? -1 : 0;
}

/*
 * The reactor's job: renew every watched hold, every third of the timeout;
 * run between rounds (a notice), only the holds asked to be checked.
 */
int64_t dlock__watchdog_run(void *arg, int64_t now)
{
	dlock__holds *h = arg;
	int64_t period = h->client->opts.watchdog_timeout_ms / 3, next;
	int all, failed;

	dlock__mutex_lock(&h->mu);
	all = now >= h->round_due;
	dlock__mutex_unlock(&h->mu);
	failed = renew_round(h, now, all) < 0;

	dlock__mutex_lock(&h->mu);
	/* After a failure, try again sooner: the TTL keeps running. From the
	 * round's end: one that met timeouts may have outlasted the interval. */
	if (all)
		h->round_due = h->watched == 0 ? DLOCK__NEVER
					       : (failed ? dlock__now_ms() + period / 4 + 1
							 : now + period);
	next = h->round_due;
	dlock__mutex_unlock(&h->mu);
	return next;
}

void dlock__watchdog_notice(void *arg, const dlock__sub *s)
{
	dlock__holds *h = arg;
	int asked = 0;
	size_t i;
	hold *x;

	dlock__mutex_lock(&h->mu);
	for (i = 0; i < h->nbuckets; i++)
		for (x = h->buckets[i]; x != NULL; x = x->next)
			if (x->watch == s && !x->lost)
				x->check = asked = 1;
	dlock__mutex_unlock(&h->mu);
	if (asked)
		dlock__reactor_schedule(h->client->reactor, dlock__now_ms());
}
