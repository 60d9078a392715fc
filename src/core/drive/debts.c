/* SPDX-License-Identifier: BSD-3-Clause */
/* A client's debts: see debts.h, and owed.h for the whole protocol. */
#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/base/time.h"
#include "core/drive/debts.h"
#include "core/drive/reactor.h"


int dlock__client_owes(dlock_client *c, const char *key, size_t len, int64_t deadline)
{
	if (c->node.cluster != NULL && (c = dlock__client_for_key(c, key, len)) == NULL)
		return 0; /* no member now: the acquire finds out why */
	if (atomic_load(&c->node.owed) == 0)
		return 0;
	(void)deadline; /* never waited on: a wait is the acquire's, on its loop */
	dlock__client_drain(c);
	if (atomic_load(&c->node.owed) == 0)
		return 0;
	dlock__reactor_flush_at(c->reactor, dlock__now_ms() + DLOCK__OWED_POLL_MS);
	return dlock__seterr_node(DLOCK_ETIMEDOUT, c->node.label,
			"still owes %d replies to commands that timed out: not asked again until "
			"they come (a late release could undo a new hold)",
			atomic_load(&c->node.owed));
}
