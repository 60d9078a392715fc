/*
 * RLock: acquire, release and the wait for a release (pub/sub), on one server.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/alloc.h"
#include "core/ids.h"
#include "core/time.h"
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

static void make_shown(char *out, size_t size, const char *name, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len && n + 8 < size; i++) {
		unsigned char ch = (unsigned char)name[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '\\')
			out[n++] = (char)ch;
		else
			n += (size_t)snprintf(out + n, size - n, "\\x%02x", ch);
	}
	if (i < len)
		n += (size_t)snprintf(out + n, size - n, "...");
	out[n] = '\0';
}

int dlock_lock_new(dlock_lock **out, dlock_client *client, const char *name)
{
	dlock_lock *l;
	size_t len;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: out is NULL");
	*out = NULL;
	if (client == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: client is NULL");
	if (name == NULL || name[0] == '\0')
		return dlock__seterr(DLOCK_EINVAL, "lock: the name is %s", name ? "empty" : "NULL");
	len = strnlen(name, DLOCK__NAME_MAX + 1);
	if (len > DLOCK__NAME_MAX)
		return dlock__seterr(DLOCK_EINVAL, "lock: the name is longer than %d bytes",
				DLOCK__NAME_MAX);
	l = dlock__calloc(1, sizeof(*l));
	if (l == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "lock: out of memory");
	if (dlock__errbuf_init(&l->err) != 0 || pthread_mutex_init(&l->cb_mu, NULL) != 0)
		abort();
	l->client = client;
	l->name_len = len;
	l->holds = dlock__holds_of(client);
	l->name = dlock__strndup(name, len);
	l->channel = dlock__prefix_name("redisson_lock__channel", name, len, &l->channel_len);
	l->latch_prefix = dlock__prefix_name("redisson_unlock_latch", name, len, &l->latch_prefix_len);
	if (l->holds == NULL || l->name == NULL || l->channel == NULL || l->latch_prefix == NULL) {
		dlock_lock_free(l);
		return dlock__seterr(DLOCK_ENOMEM, "lock: out of memory");
	}
	make_shown(l->shown, sizeof(l->shown), name, len);
	*out = l;
	return 0;
}

void dlock_lock_free(dlock_lock *l)
{
	if (l == NULL)
		return;
	if (l->holds != NULL)
		dlock__holds_detach(l->holds, l);
	dlock__free(l->name);
	dlock__free(l->channel);
	dlock__free(l->latch_prefix);
	dlock__errbuf_destroy(&l->err);
	pthread_mutex_destroy(&l->cb_mu);
	dlock__free(l);
}

const char *dlock_lock_name(const dlock_lock *l)
{
	return l ? l->name : "";
}

const char *dlock_lock_errmsg(const dlock_lock *l)
{
	return l ? dlock__errbuf_read(&l->err) : "";
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

/* The owner string: explicit, or `<uuid>:<tid>` of the calling thread. */
static int resolve_owner(dlock_lock *l, const char *owner, char *buf, size_t size,
		const char **out)
{
	if (owner == NULL) {
		dlock_client_owner(l->client, dlock_thread_id(), buf, size);
		*out = buf;
		return 0;
	}
	if (owner[0] == '\0' || strnlen(owner, DLOCK__OWNER_MAX + 1) > DLOCK__OWNER_MAX)
		return dlock__seterr(DLOCK_EINVAL, "lock %s: the owner is %s", l->shown,
				owner[0] ? "too long" : "empty");
	*out = owner;
	return 0;
}

int dlock__acquire_prepare(dlock_lock *l, const char *owner, int64_t lease_ms, dlock__acquire *a)
{
	int64_t lease = lease_ms < 0 ? l->client->opts.watchdog_timeout_ms : lease_ms;
	int rc = resolve_owner(l, owner, a->owner_buf, sizeof(a->owner_buf), &a->owner);

	if (rc < 0)
		return rc;
	a->lease_ms = lease_ms;
	/* A thread's own owner (this client's uuid) can only be held through
	 * this client, so its record is the truth: no record means no holds,
	 * and a count one higher than recorded can only be a lost reply of ours.
	 * An explicit owner may be shared with other clients and processes: its
	 * count is only compared after a reply of ours was lost. */
	a->believed = dlock__holds_count(l->holds, l->name, l->name_len, a->owner,
			owner == NULL);
	if (a->believed < 0 && owner == NULL)
		a->believed = 0;
	a->argv[0] = l->name;
	a->lens[0] = l->name_len;
	a->argv[1] = a->lease_s;
	a->lens[1] = (size_t)snprintf(a->lease_s, sizeof(a->lease_s), "%" PRId64, lease);
	a->argv[2] = a->owner;
	a->lens[2] = strlen(a->owner);
	a->argv[3] = a->believed_s;
	a->lens[3] = (size_t)snprintf(a->believed_s, sizeof(a->believed_s), "%" PRId64, a->believed);
	return 0;
}

int64_t dlock__acquire_count(const redisReply *r)
{
	return r->element[0]->integer;
}

int dlock__acquire_finish(dlock_lock *l, dlock__acquire *a, const redisReply *r,
		int64_t sent_at, int64_t *ttl)
{
	dlock_client *c = l->client;
	int rc = dlock__reply_check(&c->node, r, "acquire");

	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_INTEGER) {
		*ttl = r->integer;
		return dlock__seterr_node(DLOCK_ENOTACQUIRED, c->node.label,
				"lock %s is held by another owner (ttl %lld ms)", l->shown, r->integer);
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER)
		return dlock__seterr_node(DLOCK_EPROTO, c->node.label,
				"acquire %s: unexpected reply type %d", l->shown, r->type);
	rc = dlock__holds_acquired(l->holds, l, l->name, l->name_len, a->owner,
			dlock__acquire_count(r), a->lease_ms, sent_at);
	if (rc < 0) {
		/* Nobody would renew or track it: give the hold back. */
		dlock_lock_unlock_as(l, a->owner);
		rc = dlock__seterr_node(DLOCK_ENOMEM, c->node.label,
				"lock %s: out of memory recording the hold", l->shown);
	}
	return rc;
}

/*
 * One acquire attempt. Returns 0 acquired, DLOCK_ENOTACQUIRED with *ttl
 * (the holder's PTTL) when someone else holds it, or an error.
 */
static int attempt(dlock_lock *l, dlock__acquire *a, int64_t *ttl)
{
	redisReply *r = NULL;
	int64_t sent_at = dlock__now_ms();
	int rc;

	/* Safe to repeat after a dropped connection when the count before is
	 * known: see the acquire script. */
	rc = dlock__client_run(l->client, &dlock__script_acquire, 1, 4, a->argv, a->lens,
			a->believed >= 0, &r);
	if (rc == 0)
		rc = dlock__acquire_finish(l, a, r, sent_at, ttl);
	else if (rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT || rc == DLOCK_EPROTO)
		dlock__holds_uncertain(l->holds, l->name, l->name_len, a->owner);
	freeReplyObject(r);
	return rc;
}

static int check_times(dlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
	if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
		return dlock__seterr(DLOCK_EINVAL, "lock %s: wait must be >= 0 or DLOCK_WAIT_FOREVER",
				l->shown);
	if (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG)
		return dlock__seterr(DLOCK_EINVAL, "lock %s: lease must be > 0 or DLOCK_LEASE_WATCHDOG",
				l->shown);
	return 0;
}

/*
 * The wait, as Redisson does it: after a failed attempt join the lock's
 * channel, then try again each time an unlock message arrives, the
 * subscription becomes active, or the holder's TTL runs out - whichever
 * comes first. A lost message costs at most the holder's TTL.
 */
static int acquire(dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms)
{
	dlock__acquire a;
	int64_t deadline, ttl = -1;
	dlock__sub *sub;
	uint64_t seen = 0;
	int rc;

	if ((rc = check_times(l, wait_ms, lease_ms)) < 0)
		return rc;
	if ((rc = dlock__acquire_prepare(l, owner, lease_ms, &a)) < 0)
		return rc;
	deadline = dlock__deadline_in(wait_ms);
	rc = attempt(l, &a, &ttl);
	if (rc != DLOCK_ENOTACQUIRED || wait_ms == 0)
		return rc;

	sub = dlock__sub_join(l->client->reactor, l->channel, l->channel_len);
	if (sub == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory", l->shown);
	for (;;) {
		int64_t now = dlock__now_ms(), wake = deadline;

		if (now >= deadline)
			break;
		if (ttl >= 0 && now + ttl < wake)
			wake = now + ttl;
		dlock__sub_wait(l->client->reactor, sub, &seen, wake);
		/* The count may have changed meanwhile (another thread, same owner). */
		if ((rc = dlock__acquire_prepare(l, owner, lease_ms, &a)) < 0)
			break;
		rc = attempt(l, &a, &ttl);
		if (rc != DLOCK_ENOTACQUIRED)
			break;
	}
	dlock__sub_leave(l->client->reactor, sub);
	return rc;
}

int dlock_lock_lock(dlock_lock *l, int64_t lease_ms)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: NULL handle");
	return dlock__errbuf_record(&l->err, acquire(l, NULL, DLOCK_WAIT_FOREVER, lease_ms));
}

int dlock_lock_try(dlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: NULL handle");
	return dlock__errbuf_record(&l->err, acquire(l, NULL, wait_ms, lease_ms));
}

int dlock_lock_try_as(dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms)
{
	if (l == NULL || owner == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock: NULL %s", l ? "owner" : "handle");
	return dlock__errbuf_record(&l->err, acquire(l, owner, wait_ms, lease_ms));
}

int dlock__release_prepare(dlock_lock *l, const char *owner, dlock__release *r)
{
	dlock_client *c = l->client;
	char request[33];
	int rc;

	r->latch = NULL;
	if ((rc = resolve_owner(l, owner, r->owner_buf, sizeof(r->owner_buf), &r->owner)) < 0)
		return rc;
	r->latch = dlock__malloc(l->latch_prefix_len + 34);
	if (r->latch == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "unlock %s: out of memory", l->shown);
	dlock__request_id(request);
	memcpy(r->latch, l->latch_prefix, l->latch_prefix_len);
	r->latch[l->latch_prefix_len] = ':';
	memcpy(r->latch + l->latch_prefix_len + 1, request, 33);

	r->argv[0] = l->name;
	r->lens[0] = l->name_len;
	r->argv[1] = l->channel;
	r->lens[1] = l->channel_len;
	r->argv[2] = r->latch;
	r->lens[2] = l->latch_prefix_len + 33;
	r->argv[3] = "0";
	r->lens[3] = 1;
	r->argv[4] = r->lease_s;
	r->lens[4] = (size_t)snprintf(r->lease_s, sizeof(r->lease_s), "%" PRId64,
			dlock__holds_lease(l->holds, l->name, l->name_len, r->owner));
	r->argv[5] = r->owner;
	r->lens[5] = strlen(r->owner);
	/* The latch must outlive the one retry a dropped connection causes. */
	r->argv[6] = r->latch_ttl;
	r->lens[6] = (size_t)snprintf(r->latch_ttl, sizeof(r->latch_ttl), "%d",
			3 * (c->opts.connect_timeout_ms + c->opts.command_timeout_ms) + 1000);
	return 0;
}

void dlock__release_clear(dlock__release *r)
{
	dlock__free(r->latch);
	r->latch = NULL;
}

int dlock__release_finish(dlock_lock *l, dlock__release *r, const redisReply *reply)
{
	dlock_client *c = l->client;
	int rc = dlock__reply_check(&c->node, reply, "unlock");

	if (rc < 0)
		return rc;
	if (reply->type == REDIS_REPLY_NIL) {
		int was_lost = dlock__holds_released(l->holds, l->name, l->name_len, r->owner, -1);

		return dlock__seterr_node(was_lost ? DLOCK_ELOST : DLOCK_ENOTOWNER, c->node.label,
				was_lost ? "unlock %s: the hold of %s had been lost" :
				"unlock %s: not held by %s", l->shown, r->owner);
	}
	if (reply->type != REDIS_REPLY_INTEGER || reply->integer < 0)
		return dlock__seterr_node(DLOCK_EPROTO, c->node.label,
				"unlock %s: unexpected reply type %d", l->shown, reply->type);
	dlock__holds_released(l->holds, l->name, l->name_len, r->owner, reply->integer);
	/* Answered: no repeat can come any more, the latch has done its job. */
	dlock__client_forget(c, r->latch, l->latch_prefix_len + 33);
	return 0;
}

static int release(dlock_lock *l, const char *owner)
{
	dlock__release rel;
	redisReply *reply = NULL;
	int rc = dlock__release_prepare(l, owner, &rel);

	/* Safe to repeat after a dropped connection: the latch answers the repeat. */
	if (rc == 0)
		rc = dlock__client_run(l->client, &dlock__script_release, 3, 7, rel.argv, rel.lens, 1,
				&reply);
	if (rc == 0)
		rc = dlock__release_finish(l, &rel, reply);
	freeReplyObject(reply);
	dlock__release_clear(&rel);
	return rc;
}

int dlock_lock_unlock(dlock_lock *l)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "unlock: NULL handle");
	return dlock__errbuf_record(&l->err, release(l, NULL));
}

int dlock_lock_unlock_as(dlock_lock *l, const char *owner)
{
	if (l == NULL || owner == NULL)
		return dlock__seterr(DLOCK_EINVAL, "unlock: NULL %s", l ? "owner" : "handle");
	return dlock__errbuf_record(&l->err, release(l, owner));
}

int dlock_lock_force_unlock(dlock_lock *l, int *deleted)
{
	const char *argv[3];
	size_t lens[3];
	redisReply *r = NULL;
	int rc;

	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "force unlock: NULL handle");
	argv[0] = l->name;
	lens[0] = l->name_len;
	argv[1] = l->channel;
	lens[1] = l->channel_len;
	argv[2] = "0";
	lens[2] = 1;
	rc = dlock__client_run(l->client, &dlock__script_force_release, 2, 3, argv, lens, 1, &r);
	if (rc == 0)
		rc = dlock__reply_check(&l->client->node, r, "force unlock");
	if (rc == 0 && r->type != REDIS_REPLY_INTEGER)
		rc = dlock__seterr_node(DLOCK_EPROTO, l->client->node.label,
				"force unlock %s: unexpected reply type %d", l->shown, r->type);
	if (rc == 0) {
		if (deleted != NULL)
			*deleted = r->integer == 1;
		dlock__holds_name_deleted(l->holds, l->name, l->name_len);
	}
	freeReplyObject(r);
	return dlock__errbuf_record(&l->err, rc);
}

/* A read-only query: CMD name [field]. */
static int query(dlock_lock *l, const char *cmd, const char *field, int64_t *out,
		int nil_is_zero)
{
	const char *argv[3] = { cmd, l->name, field };
	size_t lens[3] = { strlen(cmd), l->name_len, field ? strlen(field) : 0 };
	redisReply *r = NULL;
	int rc;

	rc = dlock__client_run(l->client, NULL, 0, field ? 3 : 2, argv, lens, 1, &r);
	if (rc == 0)
		rc = dlock__reply_check(&l->client->node, r, cmd);
	if (rc == 0) {
		if (r->type == REDIS_REPLY_INTEGER)
			*out = r->integer;
		else if (r->type == REDIS_REPLY_NIL && nil_is_zero)
			*out = 0;
		else if (r->type == REDIS_REPLY_STRING)
			*out = strtoll(r->str, NULL, 10);
		else
			rc = dlock__seterr_node(DLOCK_EPROTO, l->client->node.label,
					"%s %s: unexpected reply type %d", cmd, l->shown, r->type);
	}
	freeReplyObject(r);
	return rc;
}

static int query_owner(dlock_lock *l, const char *cmd, const char *owner_in, int64_t *out)
{
	char buf[64];
	const char *owner = NULL;
	int rc = resolve_owner(l, owner_in, buf, sizeof(buf), &owner);

	return rc < 0 ? rc : query(l, cmd, owner, out, 1);
}

#define CHECK_OUT(l, out) \
	do { \
		if ((l) == NULL || (out) == NULL) \
			return dlock__seterr(DLOCK_EINVAL, "lock query: NULL argument"); \
	} while (0)

int dlock_lock_is_locked(dlock_lock *l, int *out)
{
	int64_t v = 0;
	int rc;

	CHECK_OUT(l, out);
	rc = query(l, "EXISTS", NULL, &v, 0);
	*out = rc == 0 && v > 0;
	return dlock__errbuf_record(&l->err, rc);
}

int dlock_lock_is_held_as(dlock_lock *l, const char *owner, int *out)
{
	int64_t v = 0;
	int rc;

	CHECK_OUT(l, out);
	rc = query_owner(l, "HEXISTS", owner, &v);
	*out = rc == 0 && v > 0;
	return dlock__errbuf_record(&l->err, rc);
}

int dlock_lock_is_held(dlock_lock *l, int *out)
{
	return dlock_lock_is_held_as(l, NULL, out);
}

int dlock_lock_hold_count_as(dlock_lock *l, const char *owner, int64_t *out)
{
	int rc;

	CHECK_OUT(l, out);
	*out = 0;
	rc = query_owner(l, "HGET", owner, out);
	return dlock__errbuf_record(&l->err, rc);
}

int dlock_lock_hold_count(dlock_lock *l, int64_t *out)
{
	return dlock_lock_hold_count_as(l, NULL, out);
}

int dlock_lock_remaining_ttl(dlock_lock *l, int64_t *out_ms)
{
	CHECK_OUT(l, out_ms);
	return dlock__errbuf_record(&l->err, query(l, "PTTL", NULL, out_ms, 0));
}

int dlock_lock_check(dlock_lock *l, const char *owner_in)
{
	char buf[64];
	const char *owner = NULL;
	int rc;

	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock check: NULL handle");
	rc = resolve_owner(l, owner_in, buf, sizeof(buf), &owner);
	if (rc == 0)
		rc = dlock__holds_state(l->holds, l->name, l->name_len, owner);
	return rc;
}
