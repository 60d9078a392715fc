/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queries over the members, as Redisson's locks have them: whether the lock
 * is held (by anyone, or by an owner) on a quorum of members, and a
 * member's TTL. Each member is asked in turn through the single-lock API; an
 * answer is given only when the members that answered settle it.
 */
#include <stdio.h>

#include "dlock/errors.h"
#include "core/base/error.h"
#include "multilock/parts.h"
#include "single/member.h"

/* held: ask "is `owner` holding it" (owner NULL: the calling thread); else "is it locked". */
static int ask_member(dlock_lock *m, int held, const char *owner, int *yes)
{
	return held ? dlock_lock_is_held_as(yes, m, owner) : dlock_lock_is_locked(yes, m);
}

static int ask_quorum(dlock__engine *e, int held, const char *owner, int *out)
{
	size_t i, yes = 0, no = 0;
	char first[DLOCK__ERRMSG_MAX] = "";
	int first_rc = 0;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "multilock query: NULL argument");
	for (i = 0; i < e->n; i++) {
		int v = 0, rc = ask_member(e->members[i], held, owner, &v);

		if (rc < 0 && first_rc == 0) {
			first_rc = rc;
			snprintf(first, sizeof(first), "%s", dlock__errmsg_thread());
		}
		yes += rc == 0 && v;
		no += rc == 0 && !v;
	}
	*out = 0;
	/* One server answering twice is no quorum (servers.c). */
	if ((first_rc = dlock__engine_servers_check(e)) < 0)
		return first_rc;
	*out = yes >= e->rules.quorum;
	/* Settled: a quorum says yes, or too many say no for one to be possible. */
	if (yes >= e->rules.quorum || no > e->n - e->rules.quorum)
		return 0;
	return dlock__seterr(first_rc == DLOCK_EWRONGTYPE ? DLOCK_EWRONGTYPE : DLOCK_ENOQUORUM,
			"lock %s: %zu of %zu members answered (%zu yes, %zu no; %zu needed): "
			"cannot tell; %s",
			dlock__lock_shown(e->members[0]), yes + no, e->n, yes, no, e->rules.quorum,
			first);
}

int dlock__engine_is_locked(dlock__engine *e, int *out)
{
	return ask_quorum(e, 0, NULL, out);
}

int dlock__engine_is_held(dlock__engine *e, const char *owner, int *out)
{
	return ask_quorum(e, 1, owner, out);
}

int dlock__engine_member_ttl(dlock__engine *e, size_t i, int64_t *out_ms)
{
	int rc;

	if (out_ms == NULL || i >= e->n)
		return dlock__seterr(DLOCK_EINVAL, "multilock query: %s",
				out_ms == NULL ? "NULL argument" : "no such member");
	rc = dlock_lock_remaining_ttl(out_ms, e->members[i]);
	return rc < 0 ? dlock__seterr(rc, "%s", dlock__errmsg_thread()) : 0;
}
