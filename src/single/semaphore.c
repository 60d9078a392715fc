/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The semaphore handle (dlock/semaphore.h). Its one-command calls are
 * operations (core/drive/cmd_op.h): the count's changes and queries in
 * semaphore_calls.c, the releases in semaphore_release_op.c, the query in
 * semaphore_query.c; acquisitions are operations too (semaphore_op.c);
 * expirable permits and their renewal live in permits.c.
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

size_t dlock_semaphore_errmsg_r(char *buf, size_t len, const dlock_semaphore *s)
{
	return s ? dlock__errbuf_read_r(buf, len, &s->err) : dlock__copy_msg(buf, len, "");
}

/* Keys count and channel (and the timeouts of an expirable one when `all`). */
void dlock__sem_push_keys(dlock_semaphore *s, dlock__call *call, dlock__script *script, int all)
{
	dlock__call_begin(call, script);
	dlock__call_push(call, s->name, s->name_len);
	dlock__call_push(call, s->channel, s->channel_len);
	if (all && s->timeouts != NULL)
		dlock__call_push(call, s->timeouts, s->timeouts_len);
	dlock__call_keys_done(call);
}

void dlock__sem_cmd_unref(void *s)
{
	dlock__sem_unref(s);
}

int dlock__sem_cmd_new(dlock__cmd_op **out, size_t size, const dlock__cmd_kind *kind,
		dlock_semaphore *s, dlock_op_cb cb, void *userdata)
{
	*out = NULL;
	if (s == NULL)
		return dlock__seterr(DLOCK_EINVAL, "%s: NULL semaphore", kind->what);
	atomic_fetch_add(&s->refs, 1); /* the handle outlives the op, freed or not */
	return dlock__cmd_op_new(out, size, kind, s, s->client, &s->err, s->shown, cb, userdata);
}

void dlock__sem_release_call(dlock_semaphore *s, dlock__call *call, int64_t k, char kbuf[24])
{
	dlock__sem_push_keys(s, call, &dlock__script_sem_release, 0);
	dlock__call_push(call, kbuf, dlock__fmt_i64(kbuf, k));
}

void dlock__permit_release_call(dlock_semaphore *s, dlock__call *call, const unsigned char raw[16],
		char now[24])
{
	dlock__sem_push_keys(s, call, &dlock__script_permit_release, 1);
	dlock__call_push(call, (const char *)raw, 16);
	dlock__call_push(call, now, dlock__fmt_i64(now, dlock__wall_ms()));
}

