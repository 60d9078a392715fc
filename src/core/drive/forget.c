/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Deleting keys nobody waits for (a semaphore's used receipt): the DEL rides along
 * with the next command of an idle pooled connection, or the background
 * thread sends it. When every connection is lent out at that moment, it
 * waits in the client's queue and the next connection put back carries it:
 * a busy pool never drops it.
 */
#include <string.h>

#include "core/base/alloc.h"
#include "core/drive/forget.h"
#include "core/base/time.h"

typedef struct dlock__forget {
	struct dlock__forget *next;
	size_t len;
	char key[];
} dlock__forget;

static int defer_del(dlock__conn *conn, const char *key, size_t len)
{
	const char *argv[2] = { "DEL", key };
	size_t lens[2] = { 3, len };

	return dlock__conn_defer(conn, 2, argv, lens);
}

/* Under pool_mu. Out of memory: the key expires by its TTL. */
static void enqueue(dlock_client *c, const char *key, size_t len)
{
	dlock__forget *f = dlock__malloc(sizeof(*f) + len);

	if (f == NULL)
		return;
	f->len = len;
	memcpy(f->key, key, len);
	f->next = c->forgets;
	c->forgets = f;
}

void dlock__client_forget(dlock_client *c, const char *key, size_t len)
{
	int deferred = 0;

	if (c->node.cluster != NULL) {
		c = dlock__client_for_key(c, key, len);
		if (c == NULL)
			return; /* the key expires by its TTL */
	}
	dlock__mutex_lock(&c->pool_mu);
	if (c->n_idle > 0)
		deferred = defer_del(c->idle[c->n_idle - 1], key, len) == 0;
	if (!deferred)
		enqueue(c, key, len);
	dlock__mutex_unlock(&c->pool_mu);
	/* If no command follows soon, the background thread sends it. */
	if (deferred)
		dlock__reactor_flush_at(c->reactor, dlock__now_ms() + DLOCK__DEFER_DELAY_MS);
}

int dlock__forgets_hand_over(dlock_client *c, dlock__conn *conn)
{
	int moved = 0;

	while (c->forgets != NULL && defer_del(conn, c->forgets->key, c->forgets->len) == 0) {
		dlock__forget *f = c->forgets;

		c->forgets = f->next;
		dlock__free(f);
		moved = 1;
	}
	return moved;
}

void dlock__forgets_send(dlock_client *c)
{
	int i;

	dlock__mutex_lock(&c->pool_mu);
	if (c->n_idle > 0)
		dlock__forgets_hand_over(c, c->idle[0]);
	for (i = 0; i < c->n_idle; i++)
		dlock__conn_flush(c->idle[i]);
	dlock__mutex_unlock(&c->pool_mu);
}

void dlock__forgets_free(dlock_client *c)
{
	while (c->forgets != NULL) {
		dlock__forget *f = c->forgets;

		c->forgets = f->next;
		dlock__free(f);
	}
}
