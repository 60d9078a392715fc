/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asking the sentinels where the primary is, as an operation on a loop
 * (see sentinel.h): one non-blocking exchange at a time (core/net/exchange.h),
 * each sentinel an even share of what is left of the deadline, so a hung
 * one cannot use it all - and the loop's other work goes on meanwhile.
 * A blocking caller drives the same operation on the loop it borrows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/base/time.h"
#include "core/net/exchange.h"
#include "core/topology/sentinel_ask.h"

#define HOST_MAX 256

struct dlock__finding {
	dlock__exchange x; /* the sentinel being asked now */
	dlock__sentinel *s;
	dlock__loop *loop;
	dlock__task *ready;
	int64_t deadline;
	size_t order[DLOCK__SENTINELS_MAX], n, tried;
	const char *argv[3];
	size_t lens[3];
	int over, rc;
	char host[HOST_MAX];
	int port;
	char last[DLOCK__ERRMSG_MAX]; /* why the last sentinel asked did not say */
};

/* The reply to GET-MASTER-ADDR-BY-NAME: [ip, port], or nil for a name it does not monitor. */
static int read_address(dlock__finding *f, const dlock__node *sn, const redisReply *r)
{
	int rc = dlock__reply_check(sn, r, "SENTINEL GET-MASTER-ADDR-BY-NAME");
	long p;

	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_NIL)
		return dlock__seterr_node(DLOCK_ESERVER, sn->label,
				"monitors no primary named \"%s\" (check the name after the sentinels "
				"in the URI)",
				dlock__sentinel_master(f->s));
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
			r->element[0]->type != REDIS_REPLY_STRING ||
			r->element[1]->type != REDIS_REPLY_STRING || r->element[0]->len >= HOST_MAX)
		return dlock__seterr_node(DLOCK_EPROTO, sn->label,
				"SENTINEL GET-MASTER-ADDR-BY-NAME: not an [ip, port] reply");
	p = strtol(r->element[1]->str, NULL, 10);
	if (p < 1 || p > 65535)
		return dlock__seterr_node(DLOCK_EPROTO, sn->label,
				"SENTINEL GET-MASTER-ADDR-BY-NAME: bad port in the reply");
	memcpy(f->host, r->element[0]->str, r->element[0]->len + 1);
	f->port = (int)p;
	return 0;
}

/* The asking is over with rc: tell the caller. */
static void finish(dlock__finding *f, int rc)
{
	f->over = 1;
	f->rc = rc;
	dlock__loop_post(f->loop, f->ready);
}

static void answered(dlock__exchange *x, int rc, redisReply *reply);

/* Ask the next sentinel, with its share of what is left. */
static void ask_next(dlock__finding *f)
{
	while (f->tried < f->n) {
		int64_t now = dlock__now_ms();
		const dlock__node *sn = dlock__sentinel_node(f->s, f->order[f->tried]);
		int rc;

		if (now >= f->deadline)
			break;
		rc = dlock__exchange_start(&f->x, f->loop, sn,
				now + (f->deadline - now) / (int64_t)(f->n - f->tried), 3, f->argv,
				f->lens, "SENTINEL GET-MASTER-ADDR-BY-NAME", answered);
		if (rc == 0)
			return;
		snprintf(f->last, sizeof(f->last), "%s", dlock__errmsg_thread());
		f->tried++;
	}
	finish(f, DLOCK_ETIMEDOUT);
}

static void answered(dlock__exchange *x, int rc, redisReply *reply)
{
	dlock__finding *f = (dlock__finding *)x;
	const dlock__node *sn = dlock__sentinel_node(f->s, f->order[f->tried]);

	dlock__exchange_stop(x);
	if (rc == 0)
		rc = read_address(f, sn, reply);
	freeReplyObject(reply);
	if (rc == 0) {
		dlock__sentinel_named(f->s, f->order[f->tried], f->host, f->port);
		f->tried++;
		finish(f, 0);
		return;
	}
	snprintf(f->last, sizeof(f->last), "%s", dlock__errmsg_thread());
	f->tried++;
	if (f->tried == f->n || dlock__now_ms() >= f->deadline)
		finish(f, rc);
	else
		ask_next(f);
}

int dlock__sentinel_ask_start(dlock__sentinel *s, dlock__loop *loop, dlock__task *ready,
		int64_t deadline, dlock__finding **out)
{
	const char *master = dlock__sentinel_master(s);
	char host[HOST_MAX];
	uint64_t epoch;
	int port;
	dlock__finding *f;

	*out = NULL;
	if (dlock__sentinel_cached(s, host, sizeof(host), &port, &epoch))
		return 0;
	f = dlock__calloc(1, sizeof(*f));
	if (f == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "sentinel:%s: out of memory", master);
	f->s = s;
	f->loop = loop;
	f->ready = ready;
	f->deadline = deadline;
	f->argv[0] = "SENTINEL";
	f->argv[1] = "GET-MASTER-ADDR-BY-NAME";
	f->argv[2] = master;
	f->lens[0] = 8;
	f->lens[1] = 23;
	f->lens[2] = strlen(master);
	snprintf(f->last, sizeof(f->last), "no time left to ask");
	dlock__sentinel_order(s, f->order, &f->n);
	*out = f;
	ask_next(f); /* may be over at once: `ready` is posted, never run here */
	return 0;
}

int dlock__sentinel_ask_over(const dlock__finding *f)
{
	return f->over;
}

int dlock__sentinel_ask_take(dlock__finding *f, char *host, size_t hostlen, int *port,
		uint64_t *epoch)
{
	int rc = f->rc;

	if (rc == 0 && !dlock__sentinel_cached(f->s, host, hostlen, port, epoch)) {
		/* Suspected again meanwhile: this answer is still the newest one. */
		snprintf(host, hostlen, "%s", f->host);
		*port = f->port;
		*epoch = dlock__sentinel_epoch(f->s);
	}
	if (rc < 0)
		dlock__seterr(rc, "sentinel:%s: no sentinel named the primary (%zu of %zu asked): %s",
				dlock__sentinel_master(f->s), f->tried, dlock__sentinel_count(f->s),
				f->last);
	dlock__free(f);
	return rc;
}

void dlock__sentinel_ask_drop(dlock__finding *f)
{
	if (f == NULL)
		return;
	dlock__exchange_stop(&f->x);
	if (f->over)
		dlock__loop_unpost(f->loop, f->ready);
	dlock__free(f);
}

/* Nothing to do when the asking ends: the drive below looks at f->over. */
static void noted(dlock__task *t)
{
	(void)t;
}

int dlock__sentinel_primary(dlock__sentinel *s, int64_t deadline, char *host, size_t hostlen,
		int *port, uint64_t *epoch)
{
	dlock__loop spare, *l;
	dlock__finding *f = NULL;
	dlock__task ready;
	int rc;

	if (dlock__sentinel_cached(s, host, hostlen, port, epoch))
		return 0;
	dlock__task_init(&ready, noted);
	l = dlock__loop_borrow(&spare);
	rc = dlock__sentinel_ask_start(s, l, &ready, deadline, &f);
	while (rc == 0 && f != NULL && !f->over)
		rc = dlock__loop_run_once(l, DLOCK__NEVER);
	if (rc < 0) {
		dlock__sentinel_ask_drop(f);
	} else if (f != NULL) {
		dlock__loop_unpost(l, &ready);
		rc = dlock__sentinel_ask_take(f, host, hostlen, port, epoch);
	} else if (!dlock__sentinel_cached(s, host, hostlen, port, epoch)) {
		rc = dlock__seterr(DLOCK_ECONN, "sentinel:%s: the primary's address was lost",
				dlock__sentinel_master(s));
	}
	dlock__loop_give_back(l, &spare);
	return rc;
}

/* The node's finder (core/net/conn.h): the asking, for net to drive. */
static int find_primary(void *self, int64_t deadline, char *host, size_t hostlen, int *port,
		uint64_t *epoch)
{
	return dlock__sentinel_primary(self, deadline, host, hostlen, port, epoch);
}

static void suspect_primary(void *self)
{
	dlock__sentinel_suspect(self);
}

static int start_finding(void *self, dlock__loop *loop, dlock__task *ready, int64_t deadline,
		dlock__finding **out)
{
	return dlock__sentinel_ask_start(self, loop, ready, deadline, out);
}

dlock__finder dlock__sentinel_finder(dlock__sentinel *s)
{
	dlock__finder f = { find_primary, start_finding, dlock__sentinel_ask_over,
		dlock__sentinel_ask_take, dlock__sentinel_ask_drop, suspect_primary, s };

	return f;
}
