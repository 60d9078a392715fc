/* SPDX-License-Identifier: BSD-3-Clause */
/* RedLock: the engine with a quorum of n/2+1, validity, and the restart guard. */
#include <string.h>

#include "dlock/errors.h"
#include "dlock/redlock.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/base/fields.h"
#include "multilock/engine.h"
#include "redlock/guard.h"
#include "redlock/redlock_internal.h"

struct dlock_redlock {
	dlock__engine engine;
	dlock__guard guard;
	dlock_lost_cb lost_cb;
	/* What dlock_redlock_new_from_uris() made, and frees. */
	dlock_client **clients;
	dlock_lock **locks;
	size_t owned;
};

dlock__engine *dlock__redlock_engine(dlock_redlock *r)
{
	return &r->engine;
}

/* The fields after `version`, and the version that added each. */
static const dlock__field fields[] = {
	DLOCK__FIELD(dlock_redlock_options, drift_factor, 1),
	DLOCK__FIELD(dlock_redlock_options, restart_guard_ms, 1),
	DLOCK__FIELD(dlock_redlock_options, restart_guard_strict, 1),
	DLOCK__FIELD(dlock_redlock_options, fenced, 1),
};
static const dlock_redlock_options defaults = DLOCK_REDLOCK_OPTIONS_INIT;
static const dlock__versioned versioned = DLOCK__VERSIONED("redlock options",
		"DLOCK_REDLOCK_OPTIONS_INIT", DLOCK_REDLOCK_OPTIONS_VERSION, dlock_redlock_options,
		&defaults, fields);

int dlock_redlock_options_init(dlock_redlock_options *opts, unsigned int version)
{
	return dlock__versioned_init(opts, version, &versioned);
}

/* The caller's options (NULL: defaults), as far as their version has them. */
static int copy_options(dlock_redlock_options *dst, const dlock_redlock_options *src)
{
	return dlock__versioned_load(dst, src, &versioned);
}

static int check_options(const dlock_redlock_options *o)
{
	if (!(o->drift_factor >= 0 && o->drift_factor < 1))
		return dlock__seterr(
				DLOCK_EINVAL, "redlock options: drift_factor must be in [0, 1)");
	if (o->restart_guard_ms < -1)
		return dlock__seterr(
				DLOCK_EINVAL, "redlock options: restart_guard_ms must be >= -1");
	return 0;
}

static int make(dlock_redlock **out, dlock_lock *const *members, size_t n,
		const dlock_redlock_options *user)
{
	dlock_redlock_options o, *opts = &o;
	dlock__rules rules = { 0 };
	dlock_redlock *r;
	int rc;

	if ((rc = copy_options(&o, user)) < 0 || (rc = check_options(&o)) < 0)
		return rc;
	r = dlock__calloc(1, sizeof(*r));
	if (r == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "redlock: out of memory");
	r->guard.window_ms = opts->restart_guard_ms;
	r->guard.strict = opts->restart_guard_strict;
	rules.quorum = n / 2 + 1;
	rules.share_wait = 1;
	rules.check_validity = 1;
	rules.one_per_server = 1;
	rules.drift_factor = opts->drift_factor;
	/* The guard judges the votes together: a quorum of votes it vouches for
	 * (servers known to be older than its window) decides at once; a vote
	 * it might doubt makes the engine hear every member (or its timeout). */
	rules.filter = opts->restart_guard_ms != 0 ? dlock__guard_filter : NULL;
	rules.vouch = dlock__guard_vouch;
	rules.filter_arg = &r->guard;
	rc = dlock__engine_init(&r->engine, members, n, &rules, r);
	if (rc < 0) {
		dlock__free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int dlock_redlock_new(dlock_redlock **out, dlock_lock *const *members, size_t n,
		const dlock_redlock_options *opts)
{
	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "redlock: out is NULL");
	*out = NULL;
	return make(out, members, n, opts);
}

int dlock_redlock_new_from_uris(dlock_redlock **out, const char *const *uris, size_t n,
		const char *name, const dlock_client_options *client_opts,
		const dlock_redlock_options *opts)
{
	dlock_client_options copts;
	dlock_redlock_options ro;
	dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
	dlock_client **clients = NULL;
	dlock_lock **locks = NULL;
	size_t i, made = 0;
	int rc = 0;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "redlock: out is NULL");
	*out = NULL;
	if (uris == NULL || n == 0)
		return dlock__seterr(DLOCK_EINVAL, "redlock: no server URIs");
	if ((rc = dlock__client_options_copy(&copts, client_opts)) < 0 ||
			(rc = copy_options(&ro, opts)) < 0)
		return rc;
	/* A server that is down at start is a failed vote, not a failed open. */
	copts.lazy_connect = 1;
	lo.kind = ro.fenced ? DLOCK_LOCK_FENCED : DLOCK_LOCK_PLAIN;
	clients = dlock__calloc(n, sizeof(*clients));
	locks = dlock__calloc(n, sizeof(*locks));
	if (clients == NULL || locks == NULL) {
		rc = dlock__seterr(DLOCK_ENOMEM, "redlock: out of memory");
		goto fail;
	}
	for (made = 0; made < n; made++) {
		rc = dlock_client_new(&clients[made], uris[made], &copts);
		if (rc == 0)
			rc = dlock_lock_new(&locks[made], clients[made], name, &lo);
		if (rc < 0) {
			/* Say which of the servers it was. */
			char msg[DLOCK__ERRMSG_MAX];

			memcpy(msg, dlock_errmsg_last(), sizeof(msg));
			rc = dlock__seterr(rc, "server %zu of %zu: %s", made + 1, n, msg);
			made++;
			goto fail;
		}
	}
	rc = make(out, locks, n, opts);
	if (rc < 0)
		goto fail;
	(*out)->clients = clients;
	(*out)->locks = locks;
	(*out)->owned = n;
	return 0;
fail:
	for (i = 0; i < made; i++) {
		dlock_lock_free(locks[i]);
		dlock_client_free(clients[i]);
	}
	dlock__free(clients);
	dlock__free(locks);
	return rc;
}

void dlock_redlock_free(dlock_redlock *r)
{
	size_t i;

	if (r == NULL)
		return;
	dlock__engine_destroy(&r->engine);
	for (i = 0; i < r->owned; i++) {
		dlock_lock_free(r->locks[i]);
		dlock_client_free(r->clients[i]);
	}
	dlock__free(r->locks);
	dlock__free(r->clients);
	dlock__free(r);
}

#define CHECK_HANDLE(r) \
	do { \
		if ((r) == NULL) \
			return dlock__seterr(DLOCK_EINVAL, "redlock: NULL handle"); \
	} while (0)

int dlock_redlock_acquire(dlock_redlock *r, const char *owner, int64_t wait_ms, int64_t lease_ms)
{
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err,
			dlock__engine_acquire(&r->engine, owner, wait_ms, lease_ms, NULL, NULL));
}

int dlock_redlock_acquire_fenced(int64_t *token, dlock_redlock *r, const char *owner,
		int64_t wait_ms, int64_t lease_ms)
{
	CHECK_HANDLE(r);
	if (token == NULL || !r->engine.fenced)
		return dlock__errbuf_record(&r->engine.err,
				dlock__seterr(DLOCK_EINVAL,
						token ? "redlock: the members are not fenced locks (options.fenced)"
						      : "redlock: NULL token"));
	return dlock__errbuf_record(&r->engine.err,
			dlock__engine_acquire(&r->engine, owner, wait_ms, lease_ms, NULL, token));
}

int dlock_redlock_release(dlock_redlock *r, const char *owner)
{
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err, dlock__engine_release(&r->engine, owner));
}

int dlock_redlock_check(const dlock_redlock *r, const char *owner)
{
	CHECK_HANDLE(r);
	return dlock__engine_check(&r->engine, owner);
}

int dlock_redlock_validity_ms(int64_t *ms, const dlock_redlock *r, const char *owner)
{
	if (ms == NULL)
		return dlock__seterr(DLOCK_EINVAL, "redlock validity: NULL argument");
	*ms = 0;
	CHECK_HANDLE(r);
	return dlock__engine_validity(&r->engine, owner, ms);
}

static void forward_lost(void *self, const char *owner, int reason, void *userdata)
{
	dlock_redlock *r = self;
	dlock_lost_event ev = { dlock_lock_name(r->engine.members[0]), owner,
		(dlock_lost_reason)reason, NULL };

	r->lost_cb(&ev, userdata);
}

int dlock_redlock_set_lost_cb(dlock_redlock *r, dlock_lost_cb cb, void *userdata)
{
	CHECK_HANDLE(r);
	dlock__mutex_lock(&r->engine.mu);
	r->lost_cb = cb;
	dlock__mutex_unlock(&r->engine.mu);
	dlock__engine_set_lost(&r->engine, cb ? forward_lost : NULL, userdata);
	return 0;
}

size_t dlock_redlock_size(const dlock_redlock *r)
{
	return r ? r->engine.n : 0;
}

dlock_lock *dlock_redlock_member(dlock_redlock *r, size_t i)
{
	return r != NULL && i < r->engine.n ? r->engine.members[i] : NULL;
}

int dlock_redlock_member_status(dlock_member_status *out, const dlock_redlock *r, size_t i)
{
	CHECK_HANDLE(r);
	return dlock__engine_status(&r->engine, i, out);
}

size_t dlock_redlock_errmsg_r(char *buf, size_t len, const dlock_redlock *r)
{
	return r ? dlock__errbuf_read_r(buf, len, &r->engine.err) : dlock__copy_msg(buf, len, "");
}

const char *dlock_redlock_errmsg(const dlock_redlock *r)
{
	return r ? dlock__errbuf_read(&r->engine.err) : "";
}

size_t dlock_redlock_quorum(const dlock_redlock *r)
{
	return r ? r->engine.rules.quorum : 0;
}

int dlock_redlock_is_locked(int *out, dlock_redlock *r)
{
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err, dlock__engine_is_locked(&r->engine, out));
}

int dlock_redlock_is_held(int *out, dlock_redlock *r, const char *owner)
{
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err, dlock__engine_is_held(&r->engine, owner, out));
}

int dlock_redlock_member_ttl_ms(int64_t *out_ms, dlock_redlock *r, size_t i)
{
	CHECK_HANDLE(r);
	return dlock__errbuf_record(
			&r->engine.err, dlock__engine_member_ttl(&r->engine, i, out_ms));
}

int dlock_redlock_is_locked_async(dlock_op **out, dlock_redlock *r, dlock_op_cb cb, void *userdata)
{
	if (out != NULL)
		*out = NULL;
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err,
			dlock__engine_is_locked_async(out, &r->engine, cb, userdata));
}

int dlock_redlock_is_held_async(dlock_op **out, dlock_redlock *r, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	if (out != NULL)
		*out = NULL;
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err,
			dlock__engine_is_held_async(out, &r->engine, owner, cb, userdata));
}

int dlock_redlock_member_ttl_ms_async(dlock_op **out, dlock_redlock *r, size_t i, dlock_op_cb cb,
		void *userdata)
{
	if (out != NULL)
		*out = NULL;
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err,
			dlock__engine_member_ttl_async(out, &r->engine, i, cb, userdata));
}

int dlock_redlock_check_servers(dlock_redlock *r)
{
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err, dlock__engine_servers_check(&r->engine));
}

int dlock_redlock_acquire_async(dlock_op **out, dlock_redlock *r, const char *owner,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err,
			dlock__engine_acquire_async(out, &r->engine, owner, wait_ms, lease_ms, cb,
					userdata));
}

int dlock_redlock_release_async(dlock_op **out, dlock_redlock *r, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	CHECK_HANDLE(r);
	return dlock__errbuf_record(&r->engine.err,
			dlock__engine_release_async(out, &r->engine, owner, cb, userdata));
}

int dlock_redlock_owner(char owner[DLOCK_OWNER_SIZE], const dlock_redlock *r, uint64_t id)
{
	CHECK_HANDLE(r);
	return dlock__engine_owner(owner, &r->engine, id);
}
