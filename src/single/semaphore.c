/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The semaphore handle (dlock/semaphore.h) and its one-command calls: the
 * count's changes and queries, a plain release, an expirable permit's
 * release. Acquisitions are operations (semaphore_op.c); expirable permits
 * and their renewal live in permits.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fmt.h"
#include "core/base/time.h"
#include "core/drive/reactor.h"
#include "core/topology/slot.h"
#include "single/acquire.h"
#include "single/lock_internal.h"
#include "single/semaphore_internal.h"

int dlock_semaphore_options_init(dlock_semaphore_options *opts, unsigned int version)
{
	static const dlock_semaphore_options defaults = DLOCK_SEMAPHORE_OPTIONS_INIT;

	if (opts == NULL || version == 0 || version > DLOCK_SEMAPHORE_OPTIONS_VERSION)
		return dlock__seterr(DLOCK_EINVAL, "semaphore options: %s",
				opts == NULL ? "NULL" : "unknown version");
	*opts = defaults;
	opts->version = version;
	return 0;
}

/* Redisson's suffixName(): "{name}:suffix", or "name:suffix" when the name has a '{'. */
static char *suffix_name(const char *name, size_t len, const char *suffix, size_t *out_len)
{
	int braced = memchr(name, '{', len) != NULL;
	size_t slen = strlen(suffix), n = len + 1 + slen + (braced ? 0 : 2);
	char *s = dlock__malloc(n + 1), *p = s;

	if (s == NULL)
		return NULL;
	if (!braced)
		*p++ = '{';
	memcpy(p, name, len);
	p += len;
	if (!braced)
		*p++ = '}';
	*p++ = ':';
	memcpy(p, suffix, slen + 1);
	*out_len = n;
	return s;
}

/* "dlock_semaphore_undo:{name}:" (its slot the count's), for receipts. */
static char *receipt_prefix(const char *name, size_t len, size_t *out_len)
{
	size_t n;
	char *p = dlock__prefix_name("dlock_semaphore_undo", name, len, &n), *q;

	if (p == NULL || (q = dlock__realloc(p, n + 2)) == NULL) {
		dlock__free(p);
		return NULL;
	}
	q[n] = ':';
	q[n + 1] = '\0';
	*out_len = n + 1;
	return q;
}

int dlock_semaphore_new(dlock_semaphore **out, dlock_client *client, const char *name,
		const dlock_semaphore_options *opts)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s;
	size_t len;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "semaphore: out is NULL");
	*out = NULL;
	if (client == NULL)
		return dlock__seterr(DLOCK_EINVAL, "semaphore: client is NULL");
	if (opts != NULL) {
		if (opts->version == 0 || opts->version > DLOCK_SEMAPHORE_OPTIONS_VERSION)
			return dlock__seterr(DLOCK_EINVAL, "semaphore: unknown options version %u",
					opts->version);
		o.kind = opts->kind;
	}
	if (o.kind != DLOCK_SEMAPHORE_PLAIN && o.kind != DLOCK_SEMAPHORE_EXPIRABLE)
		return dlock__seterr(DLOCK_EINVAL, "semaphore: unknown kind %d", (int)o.kind);
	if (name == NULL || name[0] == '\0')
		return dlock__seterr(DLOCK_EINVAL, "semaphore: the name is %s", name ? "empty" : "NULL");
	len = strnlen(name, DLOCK__NAME_MAX + 1);
	if (len > DLOCK__NAME_MAX)
		return dlock__seterr(DLOCK_EINVAL, "semaphore: the name is longer than %d bytes",
				DLOCK__NAME_MAX);
	if (client->node.cluster != NULL && memchr(name, '{', len) != NULL &&
			!dlock__key_tag(name, len, NULL, NULL))
		return dlock__seterr(DLOCK_EINVAL,
				"semaphore: in a cluster the name \"%.64s\" has a '{' without a hash "
				"tag after it, so its keys would hash to different slots",
				name);
	s = dlock__calloc(1, sizeof(*s));
	if (s == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "semaphore: out of memory");
	if (dlock__errbuf_init(&s->err) != 0 || pthread_mutex_init(&s->mu, NULL) != 0 ||
			dlock__cond_init(&s->job.stopped_cv) != 0)
		abort();
	atomic_init(&s->refs, 1);
	s->kind = o.kind;
	s->client = client;
	dlock__client_handle_added(client, 1);
	s->name = dlock__strndup(name, len);
	s->name_len = len;
	s->channel = dlock__prefix_name("redisson_sc", name, len, &s->channel_len);
	if (s->kind == DLOCK_SEMAPHORE_EXPIRABLE)
		s->timeouts = suffix_name(name, len, "timeout", &s->timeouts_len);
	else
		s->receipt_prefix = receipt_prefix(name, len, &s->receipt_prefix_len);
	dlock__shown_name(s->shown, sizeof(s->shown), name, len);
	s->job.loop = dlock__sem_loop(s);
	dlock__permit_job_init(s);
	if (s->name == NULL || s->channel == NULL ||
			(s->kind == DLOCK_SEMAPHORE_EXPIRABLE ? s->timeouts : s->receipt_prefix) == NULL) {
		dlock__sem_unref(s);
		return dlock__seterr(DLOCK_ENOMEM, "semaphore: out of memory");
	}
	*out = s;
	return 0;
}

dlock__loop *dlock__sem_loop(dlock_semaphore *s)
{
	return dlock__reactor_loop(s->client->reactor);
}

void dlock_semaphore_free(dlock_semaphore *s)
{
	if (s == NULL)
		return;
	dlock__permit_job_stop(s);
	dlock__sem_unref(s);
}

void dlock__sem_unref(dlock_semaphore *s)
{
	if (atomic_fetch_sub(&s->refs, 1) > 1)
		return;
	dlock__permits_free(s);
	dlock__free(s->name);
	dlock__free(s->channel);
	dlock__free(s->timeouts);
	dlock__free(s->receipt_prefix);
	dlock__errbuf_destroy(&s->err);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->job.stopped_cv);
	dlock__client_handle_added(s->client, -1);
	dlock__free(s);
}

const char *dlock_semaphore_name(const dlock_semaphore *s)
{
	return s ? s->name : NULL;
}

const char *dlock_semaphore_errmsg(const dlock_semaphore *s)
{
	return s ? dlock__errbuf_read(&s->err) : "";
}

/* Run one script call; *out the integer reply (or the first element of
 * an array reply). 0, or a command's error (with a message). */
static int run_int(dlock_semaphore *s, const dlock__call *call, int retry, const char *what,
		int64_t *out)
{
	redisReply *r = NULL;
	int rc;

	if ((rc = dlock__client_check_fork(s->client)) < 0)
		return rc;
	rc = dlock__client_run_call(s->client, call, retry, NULL, &r);
	if (rc == 0)
		rc = dlock__reply_check(&s->client->node, r, what);
	if (rc == 0 && r->type == REDIS_REPLY_INTEGER)
		*out = r->integer;
	else if (rc == 0)
		rc = dlock__seterr_node(DLOCK_EPROTO, s->client->node.label,
				"%s %s: unexpected reply type %d", what, s->shown, r->type);
	freeReplyObject(r);
	return rc;
}

/* Keys count and channel (and the timeouts of an expirable one when `all`). */
static void push_keys(dlock_semaphore *s, dlock__call *call, dlock__script *script, int all)
{
	dlock__call_begin(call, script);
	dlock__call_push(call, s->name, s->name_len);
	dlock__call_push(call, s->channel, s->channel_len);
	if (all && s->timeouts != NULL)
		dlock__call_push(call, s->timeouts, s->timeouts_len);
	dlock__call_keys_done(call);
}

#define CHECK_SEM(s, what) \
	do { \
		if ((s) == NULL) \
			return dlock__seterr(DLOCK_EINVAL, "semaphore %s: NULL handle", what); \
	} while (0)

int dlock_semaphore_try_set_permits(int *set, dlock_semaphore *s, int64_t permits)
{
	dlock__call call;
	char n[24];
	int64_t v = 0;
	int rc;

	CHECK_SEM(s, "try set permits");
	if (permits < 0)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: a negative count (%lld)", s->shown, (long long)permits));
	push_keys(s, &call, &dlock__script_sem_try_set, 0);
	dlock__call_push(&call, n, dlock__fmt_i64(n, permits));
	rc = run_int(s, &call, 1, "try set permits", &v);
	if (rc == 0 && set != NULL)
		*set = v == 1;
	return dlock__errbuf_record(&s->err, rc);
}

int dlock_semaphore_add_permits(dlock_semaphore *s, int64_t delta)
{
	dlock__call call;
	char n[24];
	int64_t v;

	CHECK_SEM(s, "add permits");
	push_keys(s, &call, &dlock__script_sem_add, 0);
	dlock__call_push(&call, n, dlock__fmt_i64(n, delta));
	/* Not retried: a repeat would add twice. */
	return dlock__errbuf_record(&s->err, run_int(s, &call, 0, "add permits", &v));
}

int dlock_semaphore_set_permits(dlock_semaphore *s, int64_t permits)
{
	dlock__call call;
	char n[24];
	int64_t v;

	CHECK_SEM(s, "set permits");
	push_keys(s, &call, &dlock__script_sem_set, 1);
	dlock__call_push(&call, n, dlock__fmt_i64(n, permits));
	return dlock__errbuf_record(&s->err, run_int(s, &call, 1, "set permits", &v));
}

int dlock_semaphore_available(int64_t *out, dlock_semaphore *s)
{
	dlock__call call;
	char now[24];
	int64_t v = 0;
	int rc;

	CHECK_SEM(s, "available");
	if (out == NULL)
		return dlock__errbuf_record(&s->err,
				dlock__seterr(DLOCK_EINVAL, "semaphore %s: out is NULL", s->shown));
	if (s->kind == DLOCK_SEMAPHORE_PLAIN) {
		const char *argv[2] = { "GET", s->name };
		size_t lens[2] = { 3, s->name_len };
		redisReply *r = NULL;

		if ((rc = dlock__client_check_fork(s->client)) == 0)
			rc = dlock__client_run(s->client, 2, argv, lens, 1, &r);
		if (rc == 0)
			rc = dlock__reply_check(&s->client->node, r, "GET");
		if (rc == 0 && r->type == REDIS_REPLY_STRING)
			v = strtoll(r->str, NULL, 10);
		else if (rc == 0 && r->type != REDIS_REPLY_NIL)
			rc = dlock__seterr_node(DLOCK_EPROTO, s->client->node.label,
					"GET %s: unexpected reply type %d", s->shown, r->type);
		freeReplyObject(r);
	} else {
		dlock__call_begin(&call, &dlock__script_sem_available);
		dlock__call_push(&call, s->name, s->name_len);
		dlock__call_push(&call, s->timeouts, s->timeouts_len);
		dlock__call_push(&call, s->channel, s->channel_len);
		dlock__call_keys_done(&call);
		dlock__call_push(&call, now, dlock__fmt_i64(now, dlock__wall_ms()));
		rc = run_int(s, &call, 1, "available permits", &v);
	}
	if (rc == 0)
		*out = v;
	return dlock__errbuf_record(&s->err, rc);
}

int dlock_semaphore_force_release(int64_t *freed, dlock_semaphore *s)
{
	dlock__call call;
	int64_t v = 0;
	int rc, any;

	if (freed != NULL)
		*freed = 0;
	CHECK_SEM(s, "force release");
	if (s->kind != DLOCK_SEMAPHORE_EXPIRABLE)
		return dlock__errbuf_record(&s->err,
				dlock__seterr(DLOCK_EINVAL,
						"semaphore %s: a force release is for an expirable "
						"semaphore (a plain one does not know which permits "
						"are taken)",
						s->shown));
	push_keys(s, &call, &dlock__script_sem_force_release, 1);
	/* Retried: a repeat finds nothing taken and frees nothing more. */
	rc = run_int(s, &call, 1, "force release", &v);
	if (rc == 0 && freed != NULL)
		*freed = v;
	dlock__mutex_lock(&s->mu);
	any = s->job.started && !s->freed;
	dlock__mutex_unlock(&s->mu);
	if (rc == 0 && v > 0 && any)
		dlock__permit_renew_now(s); /* this handle's own permits are lost too */
	return dlock__errbuf_record(&s->err, rc);
}

void dlock__sem_release_call(dlock_semaphore *s, dlock__call *call, int64_t k, char kbuf[24])
{
	push_keys(s, call, &dlock__script_sem_release, 0);
	dlock__call_push(call, kbuf, dlock__fmt_i64(kbuf, k));
}

int dlock_semaphore_release(dlock_semaphore *s, int64_t permits)
{
	dlock__call call;
	char k[24];
	int64_t v;

	CHECK_SEM(s, "release");
	if (s->kind != DLOCK_SEMAPHORE_PLAIN || permits < 1)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: %s", s->shown,
				permits < 1 ? "release fewer than 1 permit"
					    : "an expirable semaphore releases permits by id"));
	dlock__sem_release_call(s, &call, permits, k);
	/* Not retried: a repeat would give the permits back twice. */
	return dlock__errbuf_record(&s->err, run_int(s, &call, 0, "release", &v));
}

void dlock__permit_release_call(dlock_semaphore *s, dlock__call *call, const unsigned char raw[16],
		char now[24])
{
	push_keys(s, call, &dlock__script_permit_release, 1);
	dlock__call_push(call, (const char *)raw, 16);
	dlock__call_push(call, now, dlock__fmt_i64(now, dlock__wall_ms()));
}

int dlock_semaphore_release_permit(dlock_semaphore *s, const char *id)
{
	unsigned char raw[16];
	dlock__call call;
	char now[24];
	int64_t v = 0;
	int rc, mine;

	CHECK_SEM(s, "release permit");
	if (s->kind != DLOCK_SEMAPHORE_EXPIRABLE || id == NULL || dlock__permit_id_parse(id, raw) < 0)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: %s", s->shown,
				s->kind != DLOCK_SEMAPHORE_EXPIRABLE
						? "a plain semaphore has no permit ids"
						: "a permit id is 32 hex digits"));
	mine = dlock__permit_forget(s, id); /* renewal ends whatever the answer */
	dlock__permit_release_call(s, &call, raw, now);
	/* Retried on a dead connection: a repeat finds the permit gone (0). */
	rc = run_int(s, &call, 1, "release permit", &v);
	if (rc == 0 && v == 2)
		rc = dlock__seterr_node(DLOCK_ELOST, s->client->node.label,
				"semaphore %s: permit %s had expired (given back anyway)", s->shown, id);
	else if (rc == 0 && v == 0 && mine >= 0)
		rc = dlock__seterr_node(DLOCK_ELOST, s->client->node.label,
				"semaphore %s: permit %s was gone from the server", s->shown, id);
	else if (rc == 0 && v == 0)
		rc = dlock__seterr_node(DLOCK_ENOTOWNER, s->client->node.label,
				"semaphore %s: no permit %s (released already, or never taken)",
				s->shown, id);
	else if (rc == 0 && mine == 0)
		rc = dlock__seterr(DLOCK_ELOST, "semaphore %s: permit %s had been lost", s->shown, id);
	return dlock__errbuf_record(&s->err, rc);
}
