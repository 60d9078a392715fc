/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>

#include "dlock/errors.h"
#include "multilock/quorum.h"

size_t dlock__votes_count(const dlock_member_status *st, size_t n, dlock_vote vote)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += st[i].vote == vote;
	return k;
}

size_t dlock__votes_with_error(const dlock_member_status *st, size_t n, int error)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += st[i].vote == DLOCK_VOTE_ERROR && st[i].error == error;
	return k;
}

int dlock__quorum_hopeless(const dlock_member_status *st, size_t n, size_t quorum, size_t gone)
{
	size_t final = dlock__votes_with_error(st, n, DLOCK_EWRONGTYPE) +
			dlock__votes_with_error(st, n, DLOCK_EAUTH) + gone;

	return final > n - quorum;
}

int64_t dlock__quorum_validity(int64_t ttl_ms, int64_t elapsed_ms, double drift_factor)
{
	return ttl_ms - elapsed_ms - (int64_t)((double)ttl_ms * drift_factor) - 2;
}

int dlock__quorum_failure(const dlock_member_status *st, size_t n, size_t quorum, int expired)
{
	size_t errors = dlock__votes_count(st, n, DLOCK_VOTE_ERROR);
	size_t held = dlock__votes_count(st, n, DLOCK_VOTE_HELD);
	int rc;

	/* Too few nodes answering is the infrastructure's fault. A young node's
	 * vote the restart guard refused is contention: the guard doubts it
	 * only when another node shows a holder (or in strict mode). */
	if (expired)
		rc = DLOCK_EEXPIRED;
	else if (n - errors < quorum)
		rc = dlock__votes_with_error(st, n, DLOCK_EWRONGTYPE) > 0 ? DLOCK_EWRONGTYPE
									  : DLOCK_ENOQUORUM;
	else
		rc = DLOCK_ENOTACQUIRED;
	/* Out of memory on our side is the truth, whatever it cost (a member
	 * whose real TTL could not be set is why an acquisition expired). */
	if ((rc == DLOCK_ENOQUORUM || rc == DLOCK_EEXPIRED ||
			    (rc == DLOCK_ENOTACQUIRED && held == 0)) &&
			dlock__votes_with_error(st, n, DLOCK_ENOMEM) > 0)
		rc = DLOCK_ENOMEM;
	return rc;
}

int dlock__quorum_tally_text(char *buf, size_t len, const dlock_member_status *st, size_t n,
		size_t quorum)
{
	size_t unanswered = dlock__votes_count(st, n, DLOCK_VOTE_NONE);
	int k = snprintf(buf, len, "%zu of %zu needed, %zu took it, %zu held by others, %zu failed",
			quorum, n,
			dlock__votes_count(st, n, DLOCK_VOTE_ACQUIRED) +
					dlock__votes_count(st, n, DLOCK_VOTE_YOUNG),
			dlock__votes_count(st, n, DLOCK_VOTE_HELD),
			dlock__votes_count(st, n, DLOCK_VOTE_ERROR));

	if (unanswered > 0 && k >= 0) {
		int fits = (size_t)k < len;

		k += snprintf(fits ? buf + k : NULL, fits ? len - (size_t)k : 0,
				", %zu not yet answered", unanswered);
	}
	return k;
}

int64_t dlock__backoff_next(dlock__backoff *b, int contention, int64_t left, uint64_t random)
{
	int64_t pause;

	if (contention) {
		b->current = 0;
		pause = (int64_t)(random % (uint64_t)b->jitter_ms);
	} else {
		b->current = b->current == 0 ? b->min_ms : b->current * 2;
		if (b->current > b->max_ms)
			b->current = b->max_ms;
		pause = b->current / 2 + (int64_t)(random % (uint64_t)(b->current / 2 + 1));
	}
	return pause < left ? pause : left;
}

int dlock__parallel_decided(
		dlock__parallel *p, const dlock__tally *t, int64_t now, int64_t *wake_at)
{
	int64_t grace_end;

	if (p->deadline != 0) {
		if (now >= p->deadline)
			return 1;
		*wake_at = p->deadline;
	}
	if (t->n - t->failed < p->quorum)
		return 1;
	if (t->ok < p->quorum)
		return 0;
	/* Only servers that timed out last time are still to answer: they are
	 * likely still hung, do not wait for them at all. */
	if (t->pending_live == 0)
		return 1;
	if (p->wait_all || p->hear_all)
		return 0;
	if (p->quorum_at == 0)
		p->quorum_at = now;
	grace_end = p->quorum_at + (p->quorum_at - p->started > 2 ? p->quorum_at - p->started : 2);
	if (now >= grace_end)
		return 1;
	*wake_at = grace_end;
	return 0;
}
