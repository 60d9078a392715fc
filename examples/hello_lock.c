/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hello_lock - take the lock "hello" on one Redis server, say who holds it,
 * and release it.
 *
 *   hello_lock [redis://[[user]:password@]host[:port][/db]]
 *
 * The server comes from the argument, else the first URI of $DLOCK_NODES
 * (a comma-separated list), else redis://127.0.0.1:6379.
 *
 * Build against an installed dlock:
 *   cc hello_lock.c $(pkg-config --cflags --libs dlock) -o hello_lock
 */
#include <dlock.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	const char *uri = argc > 1 ? argv[1] : getenv("DLOCK_NODES");
	char first[1024];
	dlock_client *client = NULL;
	dlock_lock *lock = NULL;
	char owner[64];
	int64_t ttl_ms = 0;
	int rc;

	if (uri == NULL || *uri == '\0') {
		uri = "redis://127.0.0.1:6379";
	} else if (strchr(uri, ',') != NULL) {
		/* One client talks to one server: take the first of the list. */
		snprintf(first, sizeof first, "%.*s", (int)strcspn(uri, ","), uri);
		uri = first;
	}

	rc = dlock_client_new(&client, uri, NULL);
	if (rc != 0) {
		/* No handle yet: the message is kept for the calling thread. */
		fprintf(stderr, "hello_lock: %s: %s\n", dlock_strerror(rc), dlock_errmsg_last());
		return 1;
	}

	rc = dlock_lock_new(&lock, client, "hello", NULL);
	if (rc != 0) {
		fprintf(stderr, "hello_lock: %s: %s\n", dlock_strerror(rc), dlock_client_errmsg(client));
		dlock_client_free(client);
		return 1;
	}

	/* Wait up to 5 s for the lock; hold it with a 10 s lease (never renewed). */
	rc = dlock_lock_acquire(lock, NULL, 5000, 10000);
	if (rc != 0) {
		fprintf(stderr, "hello_lock: %s: %s\n", dlock_strerror(rc), dlock_lock_errmsg(lock));
		dlock_lock_free(lock);
		dlock_client_free(client);
		return rc == DLOCK_ENOTACQUIRED ? 2 : 1;
	}

	dlock_client_owner(owner, client, dlock_thread_id());
	dlock_lock_remaining_ttl_ms(&ttl_ms, lock);
	printf("%s holds \"%s\" on %s (expires in %lld ms)\n", owner, dlock_lock_name(lock),
	       dlock_client_node(client), (long long)ttl_ms);

	rc = dlock_lock_release(lock, NULL);
	if (rc != 0)
		fprintf(stderr, "hello_lock: %s: %s\n", dlock_strerror(rc), dlock_lock_errmsg(lock));
	else
		printf("released \"%s\"\n", dlock_lock_name(lock));

	dlock_lock_free(lock);
	dlock_client_free(client);
	return rc == 0 ? 0 : 1;
}
