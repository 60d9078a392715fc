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
 * A hold with a fixed lease listens too, and is checked the same way, in
 * the same EVAL, but only checked: its lease is what the caller asked for,
 * and a message (anyone's unlock, a stray PUBLISH) must not extend it. A
 * lease that ran out is not a loss: such a hold is no longer checked.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/mux/mux_loop.h"
#include "core/drive/reactor.h"
#include "core/drive/stats.h"
#include "core/base/fmt.h"
#include "core/topology/slot.h"
#include "core/base/time.h"
#include "single/holds_table.h"
#include "single/scripts.h"

/* Holds renewed per EVAL (Redisson's lockWatchdogBatchSize). */
#define RENEW_BATCH 100
/* Walks of the table for leases that ran out are at least this far apart,
 * so that many leases ending one by one cost few walks. */
#define SWEEP_GAP_MS 1000

/*
 * Whether x goes in this round (h->mu held): every watchdog hold (`all`),
 * or one a notice asked to check - a leased one only while its lease lasts.
 * A watchdog hold whose TTL must have run out without a renewal reaching
 * the server is marked lost instead; a leased hold whose lease ran out
 * stops listening (nothing is left to hear), asked or not; one still
 * listening brings *sweep (when to look again) to its lease's end.
 */
static int in_round(dlock__holds *h, hold *x, int64_t now, int all, int64_t *sweep,
		lost_event *cb, size_t *ncb)
{
	int asked = x->check, over;

	if (x->lost || (x->watchdog && !asked && !all) || (!x->watchdog && x->watch == NULL))
		return 0;
	x->check = 0;
	/* While a release is on its way its answer settles the record. */
	over = x->releasing == 0 && (x->expired || dlock__holds_expired(h, x, now));
	if (!x->watchdog && over) {
		dlock__holds_unwatch(x);
		return 0;
	}
	if (!x->watchdog) {
		if (dlock__holds_valid_until(h, x) < *sweep)
			*sweep = dlock__holds_valid_until(h, x);
		return asked;
	}
	if (over)
		dlock__holds_mark_lost(h, x, DLOCK_LOST_UNREACHABLE, cb, ncb);
	return !over;
}

/* What the renew script reads for x: "-" for a check only, then its form. */
static void how_of(char how[3], const hold *x)
{
	if (!x->watchdog)
		*how++ = '-';
	if (x->form != 0)
		*how++ = x->form;
	*how = 0;
}

/*
 * Collect every watched hold (`all`), or only those a notice asked to
 * check, into *out (and room for a loss event each into *cb), and mark lost
 * those whose TTL must have run out without a renewal reaching the server.
 * The walk also ends the watches of leases that ran out, and says when the
 * next one ends (h->sweep_due: the job runs then, for that alone).
 * The arrays are sized under the table's lock, so a table that grows
 * meanwhile cannot leave any hold out of the round.
 * Returns how many; -1 when out of memory (try again soon).
 */
static ssize_t collect(dlock__holds *h, int64_t now, int all, renewal **out, lost_event **cb,
		size_t *ncb)
{
	int64_t sweep = DLOCK__NEVER;
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
			if (!in_round(h, x, now, all, &sweep, *cb, ncb))
				continue;
			(*out)[n].name = dlock__strndup(x->name, x->name_len);
			(*out)[n].owner = dlock__strdup(x->owner);
			if ((*out)[n].name == NULL || (*out)[n].owner == NULL) {
				dlock__free((*out)[n].name);
				dlock__free((*out)[n].owner);
				continue; /* try again next turn */
			}
			(*out)[n].name_len = x->name_len;
			(*out)[n].form = x->form;
			(*out)[n].check = !x->watchdog;
			how_of((*out)[n].how, x);
			(*out)[n].epoch = x->epoch;
			/* Only a cluster splits batches by slot: elsewhere one slot for all. */
			(*out)[n].slot = h->client->node.cluster != NULL
					? dlock__key_slot(x->name, x->name_len)
					: 0;
			n++;
		}
	}
	/* Every hold was seen: the next walk at the next lease's end. */
	if (sweep != DLOCK__NEVER && sweep < now + SWEEP_GAP_MS)
		sweep = now + SWEEP_GAP_MS;
	h->sweep_due = sweep;
	dlock__mutex_unlock(&h->mu);
	return (ssize_t)n;
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

/*
 * A round on the reactor's loop: every batch of RENEW_BATCH holds (of one
 * slot) is one op of one multiplexed run, so the batches go out at once and
 * a server that does not answer costs the round one command timeout, while
 * the loop serves everything else.
 */
struct dlock__renewing {
	dlock__holds *h;
	renewal *batch; /* every hold of the round, by slot */
	size_t n;
	lost_event *cb; /* losses, reported when the round is over */
	size_t ncb;
	dlock__mux_op *ops; /* one per batch */
	dlock__call *calls;
	size_t *first; /* per op: its first renewal in batch[] */
	size_t nops;
	const char **argv; /* per op: its keys, the TTL, its owners, their forms */
	size_t *lens;
	char ttl[24];
	int all;
	int64_t now, sent_at;
	dlock__mux_loop ml;
};

static void round_free(struct dlock__renewing *rd)
{
	size_t i;

	if (rd->ops != NULL)
		dlock__mux_clear(rd->ops, rd->nops);
	for (i = 0; i < rd->n; i++) {
		dlock__free(rd->batch[i].name);
		dlock__free(rd->batch[i].owner);
	}
	dlock__free(rd->batch);
	dlock__free(rd->cb);
	dlock__free(rd->ops);
	dlock__free(rd->calls);
	dlock__free(rd->first);
	dlock__free(rd->argv);
	dlock__free(rd->lens);
	dlock__free(rd);
}

/* Apply one batch's answer (h->mu held); 0 when it answered for every hold. */
static int batch_answered(struct dlock__renewing *rd, size_t j)
{
	dlock__holds *h = rd->h;
	const dlock__mux_op *op = &rd->ops[j];
	const redisReply *r = op->reply;
	size_t i, k = (size_t)rd->calls[j].nkeys;
	uint64_t renewed = 0;

	dlock__client_note_reply(h->client, op->rc, r); /* a MOVED updates a cluster's map */
	if (op->rc < 0 || r->type != REDIS_REPLY_ARRAY || r->elements != k) {
		dlock__stat_renewal_failed(h->client, op->client->node.label,
				op->rc < 0 ? op->rc : DLOCK_ESERVER);
		return -1; /* no answer, or an error reply (OOM, READONLY ...): again later */
	}
	for (i = 0; i < k; i++) {
		renewal *w = &rd->batch[rd->first[j] + i];
		hold *x = dlock__holds_find(h, w->name, w->name_len, w->owner, w->form);
		const redisReply *e = r->element[i];

		if (x == NULL || x->epoch != w->epoch || x->lost || x->expired)
			continue;
		/* A cluster's slot moved: listen where the hold now lives. */
		if (x->watch != NULL && x->watch_rx != op->client->reactor)
			dlock__holds_rewatch(h, x, op->client->reactor);
		if (e->type == REDIS_REPLY_INTEGER && e->integer == 1) {
			if (!w->check) { /* a check extended nothing */
				x->confirmed_at = rd->sent_at;
				renewed++;
			}
			continue;
		}
		if (x->releasing != 0)
			continue; /* the release may have run first */
		/* A leased hold found gone as its lease ran out: the end it was
		 * taken for, not a loss. */
		if (w->check && dlock__holds_expired(h, x, dlock__now_ms()))
			continue;
		/* Our field gone, the key held by others: two owners believed it theirs. */
		if (e->type == REDIS_REPLY_INTEGER && e->integer == 2)
			dlock__stat_brain_split(h->client, x->name, op->client->node.label, x->owner);
		dlock__holds_mark_lost(h, x,
					e->type == REDIS_REPLY_INTEGER && e->integer < 0
							? DLOCK_LOST_REPLACED
							: DLOCK_LOST_GONE,
					rd->cb, &rd->ncb);
	}
	dlock__stat_renewed(h->client, renewed);
	return 0;
}

/*
 * When the next round is due, after one that started at `now`, took `took`
 * ms and failed or not. A long round (very many holds) reaches its last
 * holds late, and how late changes from round to round: the next one
 * starts that much earlier (at most a third of the period), so that those
 * holds wait at most about a period between renewals, not a period and
 * the change. A round of a few holds takes a millisecond: no change.
 */
static int64_t next_due(dlock__holds *h, int64_t now, int64_t took, int all, int failed)
{
	int64_t period = h->client->opts.watchdog_timeout_ms / 3, next;
	int64_t early = took < period / 3 ? took : period / 3;

	dlock__mutex_lock(&h->mu);
	/* After a failure, try again sooner: the TTL keeps running. From the
	 * round's end: one that met timeouts may have outlasted the interval. */
	if (all)
		h->round_due = h->watched == 0 ? DLOCK__NEVER
					       : (failed ? dlock__now_ms() + period / 4 + 1
							 : now + period - early);
	/* Or sooner, to drop the watches of leases that ran out. */
	next = h->round_due < h->sweep_due ? h->round_due : h->sweep_due;
	dlock__mutex_unlock(&h->mu);
	return next;
}

/* The round's end: answers applied, losses reported, the next one asked for. */
static void round_end(struct dlock__renewing *rd, int failed)
{
	dlock__holds *h = rd->h;
	int64_t next = next_due(h, rd->now, dlock__now_ms() - rd->now, rd->all, failed);

	dlock__holds_run_callbacks(h, rd->cb, rd->ncb);
	rd->ncb = 0;
	if (h->again)
		next = dlock__now_ms(); /* asked to check meanwhile */
	h->again = 0;
	h->renewing = NULL;
	round_free(rd);
	dlock__reactor_schedule(h->client->reactor, next);
}

static void round_over(dlock__mux_loop *ml)
{
	struct dlock__renewing *rd =
			(struct dlock__renewing *)((char *)ml - offsetof(struct dlock__renewing, ml));
	size_t j;
	int failed = 0;

	dlock__mux_loop_end(ml);
	dlock__mutex_lock(&rd->h->mu);
	for (j = 0; j < rd->nops; j++)
		failed |= batch_answered(rd, j) < 0;
	dlock__mutex_unlock(&rd->h->mu);
	round_end(rd, failed);
}

/* Build one op per batch: keys, then the TTL, then the owners, then how
 * each is renewed (its form: a read hold renews its timeout keys too). */
static int round_build(struct dlock__renewing *rd)
{
	size_t i, j, k, off = 0;

	for (i = 0; i < rd->n; i += same_slot_run(rd->batch, rd->n, i))
		rd->nops++;
	rd->ops = dlock__calloc(rd->nops, sizeof(*rd->ops));
	rd->calls = dlock__calloc(rd->nops, sizeof(*rd->calls));
	rd->first = dlock__calloc(rd->nops, sizeof(*rd->first));
	rd->argv = dlock__calloc(3 * rd->n + rd->nops, sizeof(*rd->argv));
	rd->lens = dlock__calloc(3 * rd->n + rd->nops, sizeof(*rd->lens));
	if (rd->ops == NULL || rd->calls == NULL || rd->first == NULL || rd->argv == NULL ||
			rd->lens == NULL)
		return -1;
	dlock__fmt_i64(rd->ttl, rd->h->client->opts.watchdog_timeout_ms);
	for (i = 0, j = 0; i < rd->n; i += k, j++) {
		dlock__call *c = &rd->calls[j];
		const char **argv = rd->argv + off;
		size_t *lens = rd->lens + off, m;

		k = same_slot_run(rd->batch, rd->n, i);
		for (m = 0; m < k; m++) {
			argv[m] = rd->batch[i + m].name;
			lens[m] = rd->batch[i + m].name_len;
			argv[k + 1 + m] = rd->batch[i + m].owner;
			lens[k + 1 + m] = strlen(rd->batch[i + m].owner);
			argv[2 * k + 1 + m] = rd->batch[i + m].how;
			lens[2 * k + 1 + m] = strlen(rd->batch[i + m].how);
		}
		argv[k] = rd->ttl;
		lens[k] = strlen(rd->ttl);
		*c = (dlock__call){ .script = &dlock__script_renew, .nkeys = (int)k,
			.argc = (int)(3 * k + 1), .many_argv = argv, .many_lens = lens };
		/* In a cluster the run sends it to the member serving its slot. */
		rd->ops[j].client = rd->h->client;
		rd->ops[j].call = c;
		rd->first[j] = i;
		off += 3 * k + 1;
	}
	return 0;
}

/*
 * Start a round of the holds collect() picks. 1 when it runs on the loop
 * (it asks for the next one when it is over), 0 when it is over already
 * (nothing to renew), -1 when it could not start (try again soon).
 */
static int round_start(dlock__holds *h, int64_t now, int all)
{
	struct dlock__renewing *rd = dlock__calloc(1, sizeof(*rd));
	ssize_t got;

	if (rd == NULL)
		return -1;
	rd->h = h;
	rd->now = now;
	rd->all = all;
	got = collect(h, now, all, &rd->batch, &rd->cb, &rd->ncb);
	if (got < 0) {
		round_free(rd);
		return -1;
	}
	rd->n = (size_t)got;
	qsort(rd->batch, rd->n, sizeof(*rd->batch), by_slot);
	if (rd->n > 0 && round_build(rd) == 0) {
		rd->sent_at = dlock__now_ms();
		rd->ml.urgent = 1; /* ahead of the operations waiting for a connection */
		if (dlock__mux_loop_begin(&rd->ml, dlock__reactor_loop(h->client->reactor), rd->ops,
				    rd->nops, NULL, NULL, round_over) == 0) {
			h->renewing = rd;
			return 1;
		}
	}
	/* Nothing to renew, or no memory to send: the losses found still count. */
	dlock__holds_run_callbacks(h, rd->cb, rd->ncb);
	rd->ncb = 0;
	got = rd->n > 0 ? -1 : 0;
	round_free(rd);
	return (int)got;
}

/*
 * The reactor's job: renew every watched hold, every third of the timeout;
 * run between rounds (a notice), only the holds asked to be checked. A
 * round under way is let finish (it asks for the job again when over).
 */
int64_t dlock__watchdog_run(void *arg, int64_t now)
{
	dlock__holds *h = arg;
	int all, started;

	if (h->renewing != NULL) {
		h->again = 1;
		return DLOCK__NEVER;
	}
	dlock__mutex_lock(&h->mu);
	all = now >= h->round_due;
	dlock__mutex_unlock(&h->mu);
	started = round_start(h, now, all);
	if (started == 1)
		return DLOCK__NEVER;
	return next_due(h, now, 0, all, started < 0);
}

void dlock__watchdog_stop(void *arg, int forked)
{
	dlock__holds *h = arg;
	struct dlock__renewing *rd = h->renewing;
	size_t i;

	if (rd == NULL)
		return;
	if (!forked)
		dlock__mux_loop_end(&rd->ml);
	for (i = 0; i < rd->ncb; i++)
		dlock__free(rd->cb[i].owner);
	h->renewing = NULL;
	round_free(rd);
}

void dlock__watchdog_notice(void *arg, const dlock__sub *s)
{
	dlock__holds *h = arg;
	dlock__channel_watch *w;
	int asked = 0;
	size_t i;
	hold *x;

	dlock__mutex_lock(&h->mu);
	for (i = 0; i < h->nbuckets; i++)
		for (x = h->buckets[i]; x != NULL; x = x->next)
			if (x->watch == s && !x->lost)
				x->check = asked = 1;
	for (w = h->listening; w != NULL; w = w->next)
		if (w->sub == s)
			w->heard(w);
	dlock__mutex_unlock(&h->mu);
	if (asked)
		dlock__reactor_schedule(h->client->reactor, dlock__now_ms());
}

int dlock__holds_listen(dlock_client *c, const char *channel, size_t len, dlock__channel_watch *w)
{
	dlock__holds *h = dlock__holds_of(c);
	dlock__reactor *rx = dlock__client_reactor_for(c, channel, len);

	if (h == NULL || rx == NULL)
		return -1;
	/* Listed first, so that the notice the subscription brings finds it. */
	dlock__mutex_lock(&h->mu);
	w->rx = rx;
	w->sub = NULL;
	w->next = h->listening;
	h->listening = w;
	w->sub = dlock__sub_watch(rx, channel, len, dlock__watchdog_notice, h);
	dlock__mutex_unlock(&h->mu);
	if (w->sub == NULL) {
		dlock__holds_unlisten(c, w);
		return -1;
	}
	return 0;
}

void dlock__holds_unlisten(dlock_client *c, dlock__channel_watch *w)
{
	dlock__holds *h = dlock__holds_of(c);
	dlock__channel_watch **at;

	if (h == NULL)
		return; /* listen made it: not reached */
	dlock__mutex_lock(&h->mu);
	for (at = &h->listening; *at != NULL; at = &(*at)->next)
		if (*at == w) {
			*at = w->next;
			break;
		}
	dlock__mutex_unlock(&h->mu);
	if (w->sub != NULL)
		dlock__sub_unwatch(w->rx, w->sub);
	w->sub = NULL;
}
