/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One server listed twice under two spellings would be counted twice: a
 * RedLock "quorum" on one physical server, a MultiLock re-entering its own
 * hold. Refused when made, by address (core/drive/identity.c), and at each
 * acquisition by the run_id the servers gave once connected, which catches
 * what no address shows (a server's TCP port and its socket, a Sentinel's
 * primary also listed by address, two names behind one NAT).
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "multilock/parts.h"
#include "single/member.h"

/* Members i and j are one resource on one server (the rules say which db matter). */
static int refuse(dlock_lock *const *members, size_t j, size_t i, const dlock__rules *rules,
		const char *how, const char *what)
{
	const char *a = dlock_client_node(dlock__lock_client(members[j]));
	const char *b = dlock_client_node(dlock__lock_client(members[i]));

	if (rules->one_per_server)
		return dlock__seterr(DLOCK_EDUPLICATE,
				"redlock: one server listed twice for lock %s: %s (member %zu) and "
				"%s (member %zu) %s %s; a quorum needs independent servers",
				dlock__lock_shown(members[i]), a, j, b, i, how, what);
	return dlock__seterr(DLOCK_EDUPLICATE,
			"multilock: lock %s listed twice on one server: %s (member %zu) and %s "
			"(member %zu) %s %s",
			dlock__lock_shown(members[i]), a, j, b, i, how, what);
}

int dlock__members_distinct(dlock_lock *const *members, size_t n, const dlock__rules *rules)
{
	char where[300];
	size_t i, j;

	for (i = 1; i < n; i++)
		for (j = 0; j < i; j++)
			if (dlock__lock_same_resource(members[j], members[i],
					    rules->one_per_server, where, sizeof(where)))
				return refuse(members, j, i, rules, "both reach", where);
	return 0;
}

/* The same name (and db, unless one per server) on members i and j. */
static int same_key(const dlock__engine *e, size_t j, size_t i)
{
	dlock_lock *a = e->members[j], *b = e->members[i];

	return dlock__lock_name_len(a) == dlock__lock_name_len(b) &&
			memcmp(dlock__lock_name(a), dlock__lock_name(b), dlock__lock_name_len(a)) ==
					0 &&
			(e->rules.one_per_server || dlock__lock_db(a) == dlock__lock_db(b));
}

int dlock__engine_servers_check(const dlock__engine *e)
{
	char (*ids)[41] = NULL, shown[64];
	size_t i, j;
	int rc = 0;

	if (e->n < 2 || (ids = dlock__calloc(e->n, sizeof(*ids))) == NULL)
		return 0; /* out of memory: the addresses were checked when it was made */
	for (i = 0; i < e->n && rc == 0; i++) {
		if (!dlock__lock_run_id(e->members[i], ids[i]))
			continue;
		for (j = 0; j < i && rc == 0; j++)
			if (strcmp(ids[i], ids[j]) == 0 && same_key(e, j, i)) {
				snprintf(shown, sizeof(shown), "run_id %.12s...", ids[i]);
				rc = refuse(e->members, j, i, &e->rules, "are one server:", shown);
			}
	}
	dlock__free(ids);
	return rc;
}
