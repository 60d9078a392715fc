/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>

#include "core/time.h"
#include "redlock/guard.h"
#include "core/client.h"
#include "single/member.h"

void dlock__guard_filter(void *arg, dlock_lock *const *members, dlock__member_try *tries, size_t n,
		int64_t lease_ms)
{
	const dlock__guard *g = arg;
	int64_t window = g->window_ms;
	size_t i;
	int held = 0;

	if (window == 0)
		return;
	for (i = 0; i < n; i++)
		held |= tries[i].st.vote == DLOCK_VOTE_HELD;
	/* Uncontended and not strict: nothing to doubt, no round trip spent. */
	if (!held && !g->strict)
		return;
	for (i = 0; i < n; i++) {
		dlock_client *c = dlock__lock_client(members[i]);
		int64_t started, w = window;

		if (tries[i].st.vote != DLOCK_VOTE_ACQUIRED)
			continue;
		if (w < 0) {
			w = dlock__lock_watchdog_ms(members[i]);
			if (lease_ms > w)
				w = lease_ms;
		}
		/* If the uptime cannot be read, the node's vote is not trusted either. */
		if (dlock__client_started_at(c, &started) < 0) {
			tries[i].st.vote = DLOCK_VOTE_YOUNG;
			snprintf(tries[i].st.message, sizeof(tries[i].st.message),
					"%.160s: uptime unknown; vote not counted by the restart guard",
					dlock_client_node(c));
			continue;
		}
		tries[i].st.uptime_s = (dlock__now_ms() - started) / 1000;
		if (dlock__now_ms() - started < w) {
			tries[i].st.vote = DLOCK_VOTE_YOUNG;
			snprintf(tries[i].st.message, sizeof(tries[i].st.message),
					"%.160s: restarted %llds ago (guard window %lld ms); vote not counted",
					dlock_client_node(c), (long long)tries[i].st.uptime_s,
					(long long)w);
		}
	}
}
