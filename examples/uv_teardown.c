/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uv_teardown - a libuv program that shuts dlock down from dlock's own
 * callback, with no timer bounce: two locks are acquired and released
 * asynchronously, and the callback of the last release frees the locks,
 * the client and the adapter (its dlock loop). uv_run() then returns by
 * itself, once the adapter's handles are closed, and uv_loop_close()
 * finds nothing left open.
 *
 *   uv_teardown redis://127.0.0.1:6379
 *
 * Exits 0 and prints one line when all of that held; 1 with the reason
 * otherwise (an alarm kills it if uv_run() never returns).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlock.h>
#include <dlock/uv.h>

#define NLOCKS 2

struct app;

/* One lock's userdata: its app and which lock it is. */
typedef struct slot {
	struct app *a;
	int i;
} slot;

typedef struct app {
	dlock_uv *du;
	slot slots[NLOCKS];
	dlock_client *client;
	dlock_lock *locks[NLOCKS];
	dlock_op *kept;      /* the first acquisition's handle, kept to the end */
	char owner[DLOCK_OWNER_SIZE];
	int released, failed;
	size_t pending_at_end; /* dlock_loop_pending() in the last callback */
	struct timespec torn_down;
} app;

static void fail(app *a, const char *what, const char *message)
{
	fprintf(stderr, "uv_teardown: %s: %s\n", what, message);
	a->failed = 1;
}

/* Everything of dlock's goes, from inside its callback. */
static void tear_down(app *a)
{
	if (dlock_loop_pending(&a->pending_at_end, dlock_uv_loop(a->du)) < 0)
		fail(a, "dlock_loop_pending", dlock_errmsg_last());
	dlock_op_cancel(a->kept); /* ended long ago: nothing happens */
	dlock_op_free(a->kept);
	for (int i = 0; i < NLOCKS; i++)
		dlock_lock_free(a->locks[i]);
	dlock_client_free(a->client);
	dlock_uv_free(a->du);
	clock_gettime(CLOCK_MONOTONIC, &a->torn_down);
}

static void released(dlock_op *op, const dlock_result *r, void *userdata)
{
	app *a = userdata;

	(void)op;
	if (r->code != 0)
		fail(a, "release", r->message);
	if (++a->released == NLOCKS)
		tear_down(a);
}

/* Held: give it back at once (a release's callback comes last). */
static void acquired(dlock_op *op, const dlock_result *r, void *userdata)
{
	slot *s = userdata;
	app *a = s->a;

	(void)op;
	if (r->code != 0) {
		fail(a, "acquire", r->message);
		a->released++; /* nothing to give back */
	} else if (dlock_lock_release_async(NULL, a->locks[s->i], a->owner, released, a) != 0) {
		fail(a, "release", dlock_errmsg_last());
		a->released++;
	} else {
		return;
	}
	if (a->released == NLOCKS)
		tear_down(a);
}

static int64_t ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

int main(int argc, char **argv)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	uv_loop_t uv;
	app a;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: uv_teardown redis://HOST:PORT\n");
		return 2;
	}
	alarm(30); /* uv_run() that never returns is the failure this looks for */
	memset(&a, 0, sizeof(a));
	uv_loop_init(&uv);
	if ((rc = dlock_uv_new(&a.du, &uv, NULL)) != 0) {
		fprintf(stderr, "uv_teardown: dlock_uv_new: %s\n", dlock_strerror(rc));
		return 1;
	}
	o.loop = dlock_uv_loop(a.du);
	if (dlock_client_new(&a.client, argv[1], &o) != 0) {
		fprintf(stderr, "uv_teardown: %s\n", dlock_errmsg_last());
		return 1;
	}
	dlock_client_owner(a.owner, a.client, 1);
	for (int i = 0; i < NLOCKS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "uv_teardown:%d", i);
		a.slots[i] = (slot){ &a, i };
		if (dlock_lock_new(&a.locks[i], a.client, name, NULL) != 0 ||
				dlock_lock_acquire_async(i == 0 ? &a.kept : NULL, a.locks[i], a.owner, 5000,
						DLOCK_LEASE_WATCHDOG, acquired, &a.slots[i]) != 0) {
			fprintf(stderr, "uv_teardown: %s\n", dlock_errmsg_last());
			return 1;
		}
	}
	uv_run(&uv, UV_RUN_DEFAULT);
	if (a.released != NLOCKS)
		fail(&a, "uv_run", "returned before the releases");
	if (a.pending_at_end != 0)
		fail(&a, "dlock_loop_pending", "operations pending in the last callback");
	if ((rc = uv_loop_close(&uv)) != 0)
		fail(&a, "uv_loop_close", uv_strerror(rc));
	if (a.failed)
		return 1;
	printf("uv_teardown: torn down from a dlock callback; uv_run returned %lld ms later, "
	       "no handle left\n",
			(long long)ms_since(&a.torn_down));
	return 0;
}
