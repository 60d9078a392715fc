/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The single-server lock handle (RLock, its fenced and fair kinds, and the
 * halves of a read-write lock) and
 * its names. The queries that read the server are in query.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fmt.h"
#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/topology/slot.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "single/lock_internal.h"
#include "single/acquire.h"
#include "single/scripts.h"

char *dlock__prefix_name(const char *prefix, const char *name, size_t name_len, size_t *out_len)
{
	size_t plen = strlen(prefix);
	int braced = memchr(name, '{', name_len) != NULL;
	size_t len = plen + 1 + name_len + (braced ? 0 : 2);
	char *s = dlock__malloc(len + 1), *p = s;

	if (s == NULL)
		return NULL;
	memcpy(p, prefix, plen);
	p += plen;
	*p++ = ':';
	if (!braced)
		*p++ = '{';
	memcpy(p, name, name_len);
	p += name_len;
	if (!braced)
		*p++ = '}';
	*p = '\0';
	*out_len = len;
	return s;
}

/* The name is usable as a key (and, in a cluster, hashes with its channel). */
static int check_name(const dlock_client *client, const char *name, size_t *out_len)
{
	size_t len;

	if (name == NULL || name[0] == '\0')
		return dlock__seterr(DLOCK_EINVAL, "lock: the name is %s", name ? "empty" : "NULL");
	len = strnlen(name, DLOCK__NAME_MAX + 1);
	if (len > DLOCK__NAME_MAX)
		return dlock__seterr(DLOCK_EINVAL, "lock: the name is longer than %d bytes",
				DLOCK__NAME_MAX);
	if (client->node.cluster != NULL && memchr(name, '{', len) != NULL &&
			!dlock__key_tag(name, len, NULL, NULL))
		return dlock__seterr(DLOCK_EINVAL,
				"lock: in a cluster the name \"%.64s\" has a '{' without a hash tag "
				"after it, so its key and its channel would hash to different slots "
				"(Redis refuses such a script: CROSSSLOT); use a name without '{', or "
				"one with a whole {tag}",
				name);
	*out_len = len;
	return 0;
}

/* The name's copy and the keys and channels its kind uses; 0 or -1 (out of memory). */
static int make_names(dlock_lock *l, const char *name, size_t len)
{
	l->name_len = len;
	l->name = dlock__strndup(name, len);
	/* Both halves of a read-write lock share Redisson's redisson_rwlock channel. */
	l->channel = dlock__prefix_name(dlock__lock_is_rw(l) ? "redisson_rwlock" : "redisson_lock__channel",
			name, len, &l->channel_len);
	/* Waiters that take a plain or fenced lock tell the others (acquire_op.c). */
	if (l->kind == DLOCK_LOCK_PLAIN || l->kind == DLOCK_LOCK_FENCED) {
		l->taken = dlock__prefix_name("dlock_lock__taken", name, len, &l->taken_len);
		l->waiters = dlock__prefix_name("dlock_lock__waiters", name, len, &l->waiters_len);
		l->wake = dlock__prefix_name("dlock_lock__wake", name, len, &l->wake_len);
	}
	if (l->kind == DLOCK_LOCK_FENCED)
		l->token_key = dlock__prefix_name(
				"redisson_lock_token", name, len, &l->token_key_len);
	/* Every kind knows the fair keys: a force unlock tells a fair lock by its queue. */
	l->queue = dlock__prefix_name("redisson_lock_queue", name, len, &l->queue_len);
	l->timeouts = dlock__prefix_name("redisson_lock_timeout", name, len, &l->timeouts_len);
	if (l->name == NULL || l->channel == NULL ||
			(l->kind == DLOCK_LOCK_FENCED && l->token_key == NULL) ||
			((l->kind == DLOCK_LOCK_PLAIN || l->kind == DLOCK_LOCK_FENCED) &&
					(l->taken == NULL || l->waiters == NULL ||
							l->wake == NULL)) ||
			l->queue == NULL || l->timeouts == NULL)
		return -1;
	dlock__shown_name(l->shown, sizeof(l->shown), name, len);
	return 0;
}

int dlock_lock_new(dlock_lock **out, dlock_client *client, const char *name,
		const dlock_lock_options *opts)
{
	dlock_lock_options o;
	dlock_lock *l;
	size_t len = 0;
	int rc;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: out is NULL");
	*out = NULL;
	if (client == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: client is NULL");
	if ((rc = dlock__lock_options_load(&o, opts)) < 0 ||
			(rc = check_name(client, name, &len)) < 0)
		return rc;
	l = dlock__calloc(1, sizeof(*l));
	if (l == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "lock: out of memory");
	if (dlock__errbuf_init(&l->err) != 0 || pthread_mutex_init(&l->cb_mu, NULL) != 0)
		abort();
	atomic_init(&l->refs, 1);
	l->kind = o.kind;
	l->fair_wait_ms = o.fair_wait_ms;
	l->client = client;
	atomic_init(&l->synced, -1);
	atomic_init(&l->herd_met, 0);
	dlock__client_handle_added(client, 1); /* the client stays while it lives */
	l->holds = dlock__holds_of(client);
	if (l->holds == NULL || make_names(l, name, len) < 0) {
		dlock_lock_free(l);
		return dlock__seterr(DLOCK_ENOMEM, "lock: out of memory");
	}
	*out = l;
	return 0;
}

void dlock_lock_free(dlock_lock *l)
{
	if (l != NULL)
		dlock__lock_unref(l);
}

void dlock__lock_unref(dlock_lock *l)
{
	if (atomic_fetch_sub(&l->refs, 1) > 1)
		return;
	if (l->holds != NULL)
		dlock__holds_detach(l);
	dlock__free(l->name);
	dlock__free(l->channel);
	dlock__free(l->taken);
	dlock__free(l->waiters);
	dlock__free(l->wake);
	dlock__free(l->token_key);
	dlock__free(l->queue);
	dlock__free(l->timeouts);
	dlock__errbuf_destroy(&l->err);
	pthread_mutex_destroy(&l->cb_mu);
	dlock__client_handle_added(l->client, -1);
	dlock__free(l);
}

size_t dlock_lock_errmsg_r(char *buf, size_t len, const dlock_lock *l)
{
	return l ? dlock__errbuf_read_r(buf, len, &l->err) : dlock__copy_msg(buf, len, "");
}

const char *dlock_lock_name(const dlock_lock *l)
{
	return l ? l->name : "";
}

const char *dlock_lock_errmsg(const dlock_lock *l)
{
	return l ? dlock__errbuf_read(&l->err) : "";
}

int dlock_lock_synced_replicas(int *out, const dlock_lock *l)
{
	if (out == NULL || l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "synced replicas: NULL %s",
				out == NULL ? "out" : "handle");
	*out = atomic_load(&((dlock_lock *)l)->synced);
	return 0;
}

int dlock_lock_set_lost_cb(dlock_lock *l, dlock_lost_cb cb, void *userdata)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: NULL handle");
	dlock__mutex_lock(&l->cb_mu);
	l->lost_cb = cb;
	l->lost_ud = userdata;
	dlock__mutex_unlock(&l->cb_mu);
	return 0;
}

void dlock__lock_lost_cb(dlock_lock *l, dlock_lost_cb *cb, void **userdata)
{
	dlock__mutex_lock(&l->cb_mu);
	*cb = l->lost_cb;
	*userdata = l->lost_ud;
	dlock__mutex_unlock(&l->cb_mu);
}

int dlock__resolve_owner(
		const dlock_lock *l, const char *owner, char *buf, size_t size, const char **out)
{
	if (owner == NULL) {
		if (size < DLOCK_OWNER_SIZE) /* a caller's bug: every one passes 64 */
			return dlock__seterr(DLOCK_EINVAL, "lock %s: an owner buffer of %zu bytes",
					l->shown, size);
		dlock_client_owner(buf, l->client, dlock_thread_id());
		*out = buf;
		return 0;
	}
	if (owner[0] == '\0' || strnlen(owner, DLOCK__OWNER_MAX + 1) > DLOCK__OWNER_MAX)
		return dlock__seterr(DLOCK_EINVAL, "lock %s: the owner is %s", l->shown,
				owner[0] ? "too long" : "empty");
	*out = owner;
	return 0;
}

int dlock_lock_check(const dlock_lock *l, const char *owner_in)
{
	char buf[64];
	const char *owner = NULL;
	int rc;

	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock check: NULL handle");
	rc = dlock__resolve_owner(l, owner_in, buf, sizeof(buf), &owner);
	if (rc == 0)
		rc = dlock__holds_state(l, owner);
	return rc;
}

int dlock_lock_validity_ms(int64_t *ms, const dlock_lock *l, const char *owner_in)
{
	char buf[64];
	const char *owner = NULL;
	int rc;

	if (ms == NULL || l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock validity: NULL argument");
	*ms = 0;
	rc = dlock__resolve_owner(l, owner_in, buf, sizeof(buf), &owner);
	if (rc == 0)
		rc = dlock__holds_validity(l, owner, ms);
	return rc;
}
