/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The quorum engine made, its members checked (none twice, none NULL, not
 * fenced and unfenced mixed, no server twice: servers.c), and destroyed.
 */
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "multilock/parts.h"
#include "single/holds.h"
#include "single/member.h"

/* A member that is another one again, itself or on the same server (servers.c). */
static int check_members(dlock_lock *const *members, size_t n, const dlock__rules *rules)
{
	size_t i, j;

	if (members == NULL || n == 0)
		return dlock__seterr(DLOCK_EINVAL, "multilock: no members");
	for (i = 0; i < n; i++) {
		if (members[i] == NULL)
			return dlock__seterr(DLOCK_EINVAL, "multilock: member %zu is NULL", i);
		for (j = 0; j < i; j++)
			if (members[j] == members[i])
				return dlock__seterr(DLOCK_EINVAL,
						"multilock: member %zu is member %zu again", i, j);
	}
	for (i = 1; i < n; i++)
		if (dlock__lock_is_fenced(members[i]) != dlock__lock_is_fenced(members[0]))
			return dlock__seterr(DLOCK_EINVAL,
					"multilock: fenced and unfenced members cannot be mixed");
	return dlock__members_distinct(members, n, rules);
}

int dlock__engine_init(dlock__engine *e, dlock_lock *const *members, size_t n,
		const dlock__rules *rules, void *self)
{
	int rc;

	memset(e, 0, sizeof(*e));
	if ((rc = check_members(members, n, rules)) < 0)
		return rc;
	e->members = dlock__calloc(n, sizeof(*e->members));
	e->status = dlock__calloc(n, sizeof(*e->status));
	e->release_ran = dlock__calloc(n, sizeof(*e->release_ran));
	e->release_due = dlock__calloc(n, sizeof(*e->release_due));
	e->link = dlock__link_new(e);
	if (e->members == NULL || e->status == NULL || e->link == NULL || e->release_ran == NULL ||
			e->release_due == NULL) {
		dlock__link_unref(e->link);
		dlock__free(e->release_ran);
		dlock__free(e->release_due);
		dlock__free(e->members);
		dlock__free(e->status);
		e->members = NULL;
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	}
	memcpy(e->members, members, n * sizeof(*members));
	e->n = n;
	e->rules = *rules;
	e->self = self;
	e->fenced = dlock__lock_is_fenced(members[0]);
	dlock__tries_reset(e, NULL, NULL);
	if (dlock__errbuf_init(&e->err) != 0 || pthread_mutex_init(&e->mu, NULL) != 0)
		abort();
	return 0;
}

void dlock__engine_destroy(dlock__engine *e)
{
	size_t i;

	if (e->members == NULL)
		return;
	dlock__link_cut(e->link);
	for (i = 0; i < e->n; i++)
		dlock__holds_unobserve(e->members[i], e);
	while (e->narmed > 0)
		dlock__free(e->armed[--e->narmed]);
	dlock__free(e->armed);
	dlock__free(e->members);
	dlock__free(e->status);
	dlock__free(e->release_ran);
	dlock__free(e->release_due);
	dlock__errbuf_destroy(&e->err);
	pthread_mutex_destroy(&e->mu);
	e->members = NULL;
}
