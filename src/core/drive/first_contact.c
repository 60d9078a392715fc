/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which failures a wait rides out: a server that answered once and went
 * away (restarting, partitioned) is waited for as long as the wait lasts;
 * one that never answered (a typo'd host, a port nothing listens on) only
 * for first_contact_timeout_ms; a TLS refusal not at all.
 */
#include <stdio.h>

#include "dlock/errors.h"
#include "core/drive/client.h"
#include "core/topology/cluster.h"
#include "core/base/error.h"

int dlock__client_answered(dlock_client *c)
{
	if (c->node.cluster != NULL)
		return dlock__cluster_answered(c->node.cluster);
	return atomic_load(&c->node.answered);
}

int dlock__client_refused(dlock_client *c, int rc)
{
	return rc == DLOCK_ECONN && atomic_load(&c->node.refused);
}

int dlock__client_first_contact_over(dlock_client *c, int rc, int64_t since, int64_t next)
{
	int64_t period = c->opts.first_contact_timeout_ms;

	if ((rc != DLOCK_ECONN && rc != DLOCK_ETIMEDOUT) || period == 0)
		return 0;
	/* No try starts that could not fail within the period (a connect
	 * takes at most its timeout): the wait ends within it. */
	return next + c->opts.connect_timeout_ms - since > period && !dlock__client_answered(c);
}

int dlock__seterr_never_answered(void)
{
	char msg[DLOCK__ERRMSG_MAX];

	snprintf(msg, sizeof(msg), "%s", dlock__errmsg_thread());
	return dlock__seterr(DLOCK_ECONN, "%s" DLOCK__NEVER_ANSWERED, msg);
}
