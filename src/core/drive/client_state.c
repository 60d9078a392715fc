/* SPDX-License-Identifier: BSD-3-Clause */
/* What every part of a client asks of it (see client_state.h). */
#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/base/ids.h"
#include "core/drive/client_state.h"
#include "core/topology/cluster.h"

int dlock__client_check_fork(dlock_client *c)
{
	if (c->pid == dlock__pid())
		return 0;
	return dlock__seterr_node(DLOCK_EFORKED, c->node.label,
			"this client was opened by process %d before fork(): its watchdog and "
			"connections do not exist here; open a new client in the child",
			(int)c->pid);
}

dlock_client *dlock__client_for_key(dlock_client *c, const char *key, size_t len)
{
	dlock_client *m = NULL;

	if (c->node.cluster == NULL)
		return c;
	return dlock__cluster_route(c->node.cluster, key, len, &m) == 0 ? m : NULL;
}
