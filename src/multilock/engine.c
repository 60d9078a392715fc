/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The quorum engine: Redisson's MultiLock loop, with a parallel first
 * attempt in front and Redlock's validity rule behind (parts.h lists the
 * files). This file holds what every part reads of the engine: the owner
 * field on each member, the tries in which the steps record the members'
 * answers, and the status published. The engine is made and destroyed in
 * engine_life.c; an acquisition starts in engine_acquire.c and runs its
 * steps in engine_rounds.c.
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/base/fields.h"
#include "multilock/parts.h"
#include "single/holds.h"
#include "single/member.h"

int dlock__engine_owner_is_ours(const dlock__engine *e, const char *owner)
{
	size_t i;

	for (i = 0; owner != NULL && i < e->n; i++) {
		const char *id = dlock_client_id(dlock__lock_client(e->members[i]));

		if (strncmp(owner, id, 36) == 0 && owner[36] == ':')
			return 1;
	}
	return 0;
}

int dlock__engine_owner(char owner[DLOCK_OWNER_SIZE], const dlock__engine *e, uint64_t id)
{
	return dlock_client_owner(owner, dlock__lock_client(e->members[0]), id);
}

const char *dlock__member_owner(const dlock__engine *e, size_t i, const char *owner, char buf[64])
{
	if (owner != NULL)
		return owner;
	dlock_client_owner(buf, dlock__lock_client(e->members[i]), dlock_thread_id());
	return buf;
}

/* How long a server that timed out is not waited for: after that, it is
 * given one more chance of a command timeout. */
#define SLOW_WINDOW_MS 2000

int dlock__member_is_slow(const dlock__engine *e, size_t i)
{
	int64_t at = dlock__client_timed_out_at(dlock__lock_client(e->members[i]));

	return at != 0 && dlock__now_ms() < at + SLOW_WINDOW_MS;
}

static void status_reset(const dlock__engine *e, size_t i, dlock_member_status *st)
{
	memset(st, 0, sizeof(*st));
	st->version = DLOCK_MEMBER_STATUS_VERSION;
	st->node = dlock_client_node(dlock__lock_client(e->members[i]));
	st->ttl_ms = -1;
	st->uptime_s = -1;
}

/* t NULL: the engine's published status. */
void dlock__tries_reset(const dlock__engine *e, dlock__member_try *t, const char *owner)
{
	size_t i;

	for (i = 0; i < e->n; i++) {
		if (t == NULL) {
			status_reset(e, i, &e->status[i]);
			continue;
		}
		memset(&t[i], 0, sizeof(t[i]));
		status_reset(e, i, &t[i].st);
		t[i].believed = -1;
		t[i].owner_ptr = dlock__member_owner(e, i, owner, t[i].owner);
		if (t[i].owner_ptr != owner)
			t[i].owner_ptr = t[i].owner;
	}
}

void dlock__try_fail(dlock__member_try *t, int rc, const char *msg)
{
	t->st.vote = DLOCK_VOTE_ERROR;
	t->st.error = rc;
	snprintf(t->st.message, sizeof(t->st.message), "%s", msg);
}

size_t dlock__tries_count(const dlock__member_try *t, size_t n, dlock_vote vote)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += t[i].st.vote == vote;
	return k;
}

/* ------------------------------------------------------------------ */
/* State                                                                */

/* The fields after `version`, and the version that added each. */
static const dlock__field status_fields[] = {
	DLOCK__FIELD(dlock_member_status, node, 1),
	DLOCK__FIELD(dlock_member_status, vote, 1),
	DLOCK__FIELD(dlock_member_status, error, 1),
	DLOCK__FIELD(dlock_member_status, ttl_ms, 1),
	DLOCK__FIELD(dlock_member_status, uptime_s, 1),
	DLOCK__FIELD(dlock_member_status, message, 1),
};
static const dlock_member_status status_defaults = DLOCK_MEMBER_STATUS_INIT;
static const dlock__versioned status_versioned = DLOCK__VERSIONED("member status",
		"DLOCK_MEMBER_STATUS_INIT", DLOCK_MEMBER_STATUS_VERSION, dlock_member_status,
		&status_defaults, status_fields);

int dlock_member_status_init(dlock_member_status *s, unsigned int version)
{
	return dlock__versioned_init(s, version, &status_versioned);
}

int dlock__engine_status(const dlock__engine *e, size_t i, dlock_member_status *out)
{
	pthread_mutex_t *mu = (pthread_mutex_t *)&e->mu; /* the lock is not part of the value */
	dlock_member_status st;
	int rc;

	if ((rc = dlock__versioned_check(out, &status_versioned)) < 0)
		return rc;
	if (i >= e->n)
		return dlock__seterr(DLOCK_EINVAL, "member status: no such member %zu (of %zu)", i,
				e->n);
	dlock__mutex_lock(mu);
	st = e->status[i];
	dlock__mutex_unlock(mu);
	/* Only the fields the caller's version has: its struct may end there. */
	return dlock__versioned_store(out, &st, &status_versioned);
}

void dlock__engine_set_lost(dlock__engine *e, dlock__engine_lost_fn fn, void *userdata)
{
	dlock__mutex_lock(&e->mu);
	e->lost_fn = fn;
	e->lost_ud = userdata;
	dlock__mutex_unlock(&e->mu);
}
