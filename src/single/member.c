/* SPDX-License-Identifier: BSD-3-Clause */
#include <string.h>

#include "core/drive/client.h"
#include "single/lock_internal.h"
#include "single/member.h"

dlock_client *dlock__lock_client(const dlock_lock *l)
{
	return l->client;
}

const char *dlock__lock_shown(const dlock_lock *l)
{
	return l->shown;
}

const char *dlock__lock_name(const dlock_lock *l)
{
	return l->name;
}

size_t dlock__lock_name_len(const dlock_lock *l)
{
	return l->name_len;
}

int dlock__lock_is_fenced(const dlock_lock *l)
{
	return l->kind == DLOCK_LOCK_FENCED;
}

int dlock__lock_same_resource(
		const dlock_lock *a, const dlock_lock *b, int any_db, char *where, size_t len)
{
	const dlock__node *x = &a->client->node, *y = &b->client->node;

	/* The name first: only a server shared under one name costs a lookup. */
	return a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0 &&
			(any_db || x->db == y->db) && dlock__node_same_server(x, y, where, len);
}

int dlock__lock_db(const dlock_lock *l)
{
	return l->client->node.db;
}

int dlock__lock_run_id(const dlock_lock *l, char out[41])
{
	return dlock__client_run_id(l->client, out);
}

int64_t dlock__lock_ttl(const dlock_lock *l, int64_t lease_ms)
{
	return lease_ms > 0 ? lease_ms : l->client->opts.watchdog_timeout_ms;
}

int64_t dlock__lock_watchdog_ms(const dlock_lock *l)
{
	return l->client->opts.watchdog_timeout_ms;
}

int dlock__lock_record(dlock_lock *l, int rc)
{
	return dlock__errbuf_record(&l->err, rc);
}
