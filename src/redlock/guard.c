/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>

#include "core/base/alloc.h"
#include "core/base/time.h"
#include "redlock/guard.h"
#include "core/drive/client.h"
#include "single/member.h"

/* The guard's window for member i: the option, or by default the longer of
 * the watchdog timeout and the lease. */
static int64_t window_of(const dlock__guard *g, dlock_lock *member, int64_t lease_ms)
{
	int64_t w = g->window_ms;

	if (w < 0) {
		w = dlock__lock_watchdog_ms(member);
		if (lease_ms > w)
			w = lease_ms;
	}
	return w;
}

/* Doubt one acquired vote: refuse it when its server's start is unknown or recent. */
static void judge(dlock__member_try *t, dlock_client *c, int known, int64_t started, int64_t w)
{
	if (!known) {
		t->st.vote = DLOCK_VOTE_YOUNG;
		snprintf(t->st.message, sizeof(t->st.message),
				"%.160s: uptime unknown; vote not counted by the restart guard",
				dlock_client_node(c));
		return;
	}
	t->st.uptime_s = (dlock__now_ms() - started) / 1000;
	if (dlock__now_ms() - started < w) {
		t->st.vote = DLOCK_VOTE_YOUNG;
		snprintf(t->st.message, sizeof(t->st.message),
				"%.160s: restarted %llds ago (guard window %lld ms); vote not counted",
				dlock_client_node(c), (long long)t->st.uptime_s, (long long)w);
	}
}

int dlock__guard_vouch(void *arg, dlock_lock *member, int64_t lease_ms, int64_t started_ms)
{
	const dlock__guard *g = arg;

	return g->window_ms == 0 || dlock__now_ms() - started_ms >= window_of(g, member, lease_ms);
}

void dlock__guard_filter(void *arg, dlock_lock *const *members, dlock__member_try *tries, size_t n,
		int64_t lease_ms)
{
	const dlock__guard *g = arg;
	size_t *q; /* the members asked */
	dlock_client **clients;
	int64_t *started;
	int *rcs;
	size_t i, k = 0;
	int held = 0;

	if (g->window_ms == 0)
		return;
	for (i = 0; i < n; i++)
		held |= tries[i].st.vote == DLOCK_VOTE_HELD;
	/* Uncontended and not strict: nothing to doubt, no round trip spent. */
	if (!held && !g->strict)
		return;
	q = dlock__calloc(n, sizeof(*q) + sizeof(*clients) + sizeof(*started) + sizeof(*rcs));
	if (q == NULL) { /* out of memory: no acquired vote can be vouched for */
		for (i = 0; i < n; i++)
			if (tries[i].st.vote == DLOCK_VOTE_ACQUIRED)
				judge(&tries[i], dlock__lock_client(members[i]), 0, 0, 0);
		return;
	}
	clients = (dlock_client **)(q + n);
	started = (int64_t *)(clients + n);
	rcs = (int *)(started + n);
	/* The acquired votes' servers are asked their uptime all at once. */
	for (i = 0; i < n; i++) {
		if (tries[i].st.vote != DLOCK_VOTE_ACQUIRED)
			continue;
		/* In a cluster: the member that serves the lock's key (NULL: unknown). */
		clients[k] = dlock__client_for_key(dlock__lock_client(members[i]),
				dlock__lock_name(members[i]), dlock__lock_name_len(members[i]));
		q[k++] = i;
	}
	dlock__clients_started_at(clients, k, started, rcs);
	for (size_t j = 0; j < k; j++) {
		i = q[j];
		judge(&tries[i], clients[j], rcs[j] == 0, started[j],
				window_of(g, members[i], lease_ms));
	}
	dlock__free(q);
}
