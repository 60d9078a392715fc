/* SPDX-License-Identifier: BSD-3-Clause */
/* MultiLock: the engine with a quorum of every member. */
#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fields.h"
#include "multilock/engine.h"

struct dlock_multilock {
	dlock__engine engine;
	dlock_lost_cb lost_cb;
};

/* No fields after `version` yet: the table is empty, the version checked. */
static const dlock_multilock_options defaults = DLOCK_MULTILOCK_OPTIONS_INIT;
static const dlock__versioned versioned = { "multilock options", "DLOCK_MULTILOCK_OPTIONS_INIT",
	DLOCK_MULTILOCK_OPTIONS_VERSION, sizeof(dlock_multilock_options), &defaults, NULL, 0 };

int dlock_multilock_options_init(dlock_multilock_options *opts, unsigned int version)
{
	return dlock__versioned_init(opts, version, &versioned);
}

int dlock_multilock_new(dlock_multilock **out, dlock_lock *const *members, size_t n,
		const dlock_multilock_options *opts)
{
	dlock__rules rules = { 0 };
	dlock_multilock_options o;
	dlock_multilock *m;
	int rc;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "multilock: out is NULL");
	*out = NULL;
	if ((rc = dlock__versioned_load(&o, opts, &versioned)) < 0)
		return rc;
	m = dlock__calloc(1, sizeof(*m));
	if (m == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	rules.quorum = n;
	rc = dlock__engine_init(&m->engine, members, n, &rules, m);
	if (rc < 0) {
		dlock__free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void dlock_multilock_free(dlock_multilock *m)
{
	if (m == NULL)
		return;
	dlock__engine_destroy(&m->engine);
	dlock__free(m);
}

#define CHECK_HANDLE(m) \
	do { \
		if ((m) == NULL) \
			return dlock__seterr(DLOCK_EINVAL, "multilock: NULL handle"); \
	} while (0)

int dlock_multilock_acquire(dlock_multilock *m, const char *owner, int64_t wait_ms,
		int64_t lease_ms)
{
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err,
			dlock__engine_acquire(&m->engine, owner, wait_ms, lease_ms, NULL, NULL));
}

int dlock_multilock_acquire_fenced(int64_t *token, dlock_multilock *m, const char *owner,
		int64_t wait_ms, int64_t lease_ms)
{
	CHECK_HANDLE(m);
	if (token == NULL || !m->engine.fenced)
		return dlock__errbuf_record(&m->engine.err,
				dlock__seterr(DLOCK_EINVAL,
						token ? "multilock: the members are not fenced locks"
						      : "multilock: NULL token"));
	return dlock__errbuf_record(&m->engine.err,
			dlock__engine_acquire(&m->engine, owner, wait_ms, lease_ms, NULL, token));
}

int dlock_multilock_release(dlock_multilock *m, const char *owner)
{
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err, dlock__engine_release(&m->engine, owner));
}

int dlock_multilock_check(const dlock_multilock *m, const char *owner)
{
	CHECK_HANDLE(m);
	return dlock__engine_check(&m->engine, owner);
}

int dlock_multilock_validity_ms(int64_t *ms, const dlock_multilock *m, const char *owner)
{
	if (ms == NULL)
		return dlock__seterr(DLOCK_EINVAL, "multilock validity: NULL argument");
	*ms = 0;
	CHECK_HANDLE(m);
	return dlock__engine_validity(&m->engine, owner, ms);
}

static void forward_lost(void *self, const char *owner, int reason, void *userdata)
{
	dlock_multilock *m = self;
	dlock_lost_event ev = { dlock_lock_name(m->engine.members[0]), owner,
		(dlock_lost_reason)reason, NULL };

	m->lost_cb(&ev, userdata);
}

int dlock_multilock_set_lost_cb(dlock_multilock *m, dlock_lost_cb cb, void *userdata)
{
	CHECK_HANDLE(m);
	/* Set before the handle is shared: the background thread reads it under the engine lock. */
	dlock__mutex_lock(&m->engine.mu);
	m->lost_cb = cb;
	dlock__mutex_unlock(&m->engine.mu);
	dlock__engine_set_lost(&m->engine, cb ? forward_lost : NULL, userdata);
	return 0;
}

size_t dlock_multilock_size(const dlock_multilock *m)
{
	return m ? m->engine.n : 0;
}

dlock_lock *dlock_multilock_member(dlock_multilock *m, size_t i)
{
	return m != NULL && i < m->engine.n ? m->engine.members[i] : NULL;
}

int dlock_multilock_member_status(dlock_member_status *out, const dlock_multilock *m, size_t i)
{
	CHECK_HANDLE(m);
	return dlock__engine_status(&m->engine, i, out);
}

size_t dlock_multilock_errmsg_r(char *buf, size_t len, const dlock_multilock *m)
{
	return m ? dlock__errbuf_read_r(buf, len, &m->engine.err) : dlock__copy_msg(buf, len, "");
}

const char *dlock_multilock_errmsg(const dlock_multilock *m)
{
	return m ? dlock__errbuf_read(&m->engine.err) : "";
}

size_t dlock_multilock_quorum(const dlock_multilock *m)
{
	return m ? m->engine.rules.quorum : 0;
}

int dlock_multilock_is_locked(int *out, dlock_multilock *m)
{
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err, dlock__engine_is_locked(&m->engine, out));
}

int dlock_multilock_is_held(int *out, dlock_multilock *m, const char *owner)
{
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err, dlock__engine_is_held(&m->engine, owner, out));
}

int dlock_multilock_member_ttl_ms(int64_t *out_ms, dlock_multilock *m, size_t i)
{
	CHECK_HANDLE(m);
	return dlock__errbuf_record(
			&m->engine.err, dlock__engine_member_ttl(&m->engine, i, out_ms));
}

int dlock_multilock_is_locked_async(
		dlock_op **out, dlock_multilock *m, dlock_op_cb cb, void *userdata)
{
	if (out != NULL)
		*out = NULL;
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err,
			dlock__engine_is_locked_async(out, &m->engine, cb, userdata));
}

int dlock_multilock_is_held_async(dlock_op **out, dlock_multilock *m, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	if (out != NULL)
		*out = NULL;
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err,
			dlock__engine_is_held_async(out, &m->engine, owner, cb, userdata));
}

int dlock_multilock_member_ttl_ms_async(dlock_op **out, dlock_multilock *m, size_t i, dlock_op_cb cb,
		void *userdata)
{
	if (out != NULL)
		*out = NULL;
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err,
			dlock__engine_member_ttl_async(out, &m->engine, i, cb, userdata));
}

int dlock_multilock_check_servers(dlock_multilock *m)
{
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err, dlock__engine_servers_check(&m->engine));
}

int dlock_multilock_acquire_async(dlock_op **out, dlock_multilock *m, const char *owner,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err,
			dlock__engine_acquire_async(out, &m->engine, owner, wait_ms, lease_ms, cb,
					userdata));
}

int dlock_multilock_release_async(dlock_op **out, dlock_multilock *m, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	CHECK_HANDLE(m);
	return dlock__errbuf_record(&m->engine.err,
			dlock__engine_release_async(out, &m->engine, owner, cb, userdata));
}

int dlock_multilock_owner(char owner[DLOCK_OWNER_SIZE], const dlock_multilock *m, uint64_t id)
{
	CHECK_HANDLE(m);
	return dlock__engine_owner(owner, &m->engine, id);
}
