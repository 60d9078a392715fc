/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Naming a lock's holder for people: `status`, `status --watch` and the
 * "not acquired" message of run/acquire.
 */
#include <stdio.h>

#include "status.h"

const char *cli_holder_describe(dlock_client *client, const char *owner, char *buf, size_t len)
{
	(void)client;
	snprintf(buf, len, "%s", owner);
	return buf;
}
