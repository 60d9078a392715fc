/* SPDX-License-Identifier: BSD-3-Clause */
#include <criterion/criterion.h>

#include "redis_harness.h"
#include "support.h"

void dl__pass(int rc, const char *expr, const char *file, int line)
{
	if (rc >= 0)
		return;
	cr_assert_fail("%s:%d: %s returned %d (%s): %s", file, line, expr, rc, dlock_strerror(rc),
			dlock_errmsg_last());
}

dlock_client *dl_client(const char *uri, int64_t timeout_ms, int64_t watchdog_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;
	int rc;

	if (timeout_ms > 0)
		o.connect_timeout_ms = o.command_timeout_ms = timeout_ms;
	if (watchdog_ms > 0)
		o.watchdog_timeout_ms = watchdog_ms;
	rc = dlock_client_new(&c, uri, &o);
	cr_assert_eq(rc, 0, "dlock_client_new %s: %s (%s)", uri, dlock_strerror(rc),
			dlock_errmsg_last());
	return c;
}

dlock_client *dl_client_opts(const char *uri, const dlock_client_options *o)
{
	dlock_client *c = NULL;
	int rc = dlock_client_new(&c, uri, o);

	cr_assert_eq(rc, 0, "dlock_client_new(%s): %s (%s)", uri, dlock_strerror(rc),
			dlock_errmsg_last());
	cr_assert_not_null(c);
	return c;
}

dlock_lock *dl_lock(dlock_client *client, const char *name)
{
	dlock_lock *l = NULL;
	int rc = dlock_lock_new(&l, client, name, NULL);

	cr_assert_eq(rc, 0, "dlock_lock_new %s: %s (%s)", name, dlock_strerror(rc),
			dlock_errmsg_last());
	return l;
}

const dlock_lock_options *dl_kind(dlock_lock_kind kind)
{
	static const dlock_lock_options kinds[] = {
		{ DLOCK_LOCK_OPTIONS_VERSION, DLOCK_LOCK_PLAIN, DLOCK_FAIR_WAIT_DEFAULT },
		{ DLOCK_LOCK_OPTIONS_VERSION, DLOCK_LOCK_FAIR, DLOCK_FAIR_WAIT_DEFAULT },
		{ DLOCK_LOCK_OPTIONS_VERSION, DLOCK_LOCK_FENCED, DLOCK_FAIR_WAIT_DEFAULT },
		{ DLOCK_LOCK_OPTIONS_VERSION, DLOCK_LOCK_READ, DLOCK_FAIR_WAIT_DEFAULT },
		{ DLOCK_LOCK_OPTIONS_VERSION, DLOCK_LOCK_WRITE, DLOCK_FAIR_WAIT_DEFAULT },
	};

	cr_assert((int)kind >= 0 && (size_t)kind < sizeof(kinds) / sizeof(*kinds),
			"dl_kind: no kind %d", (int)kind);
	return &kinds[kind];
}

void dl_owner(dlock_client *client, char *buf, size_t len)
{
	cr_assert_geq(len, DLOCK_OWNER_SIZE);
	cr_assert_eq(dlock_client_owner(buf, client, dlock_thread_id()), 0, "%s",
			dlock_errmsg_last());
}

void dl_failures_assert_none(dl_failures *f)
{
	char first[512];
	int n = dl_failures_get(f, first, sizeof first);

	cr_assert_eq(n, 0, "%d failure(s) in worker threads; first: %s", n, first);
}

void dl_single_up(dl_single *t, const char *name, int64_t timeout_ms, int64_t watchdog_ms)
{
	t->s = rh_server_start(NULL);
	cr_assert_not_null(t->s);
	t->c = dl_client(rh_server_uri(t->s), timeout_ms, watchdog_ms);
	t->l = dl_lock(t->c, name);
}

void dl_single_down(dl_single *t)
{
	dlock_lock_free(t->l);
	dlock_client_free(t->c);
	rh_server_free(t->s);
}

void dl_assert_held_once_then_release(rh_server *s, dlock_lock *l)
{
	int64_t count = 0;

	cr_assert_eq(dlock_lock_hold_count(&count, l, NULL), 0);
	cr_assert_eq(count, 1);
	cr_assert_eq(dlock_lock_release(l, NULL), 0);
	cr_assert_eq(rh_command_int(s, "EXISTS %s", dlock_lock_name(l)), 0);
}

rh_server *dl_srv;

void dl_server_start(void)
{
	dl_srv = rh_server_start(NULL);
	cr_assert_not_null(dl_srv, "redis-server did not start");
}

void dl_server_stop(void)
{
	rh_server_free(dl_srv);
	dl_srv = NULL;
}

static int with_validity(int rc, int64_t *validity_ms, dlock_redlock *r, const char *owner)
{
	*validity_ms = 0;
	if (rc == 0 && dlock_redlock_validity_ms(validity_ms, r, owner) < 0)
		*validity_ms = 0; /* lost at once: the test's own checks say so */
	return rc;
}

int dl_redlock_acquire_v(int64_t *validity_ms, dlock_redlock *r, const char *owner,
		int64_t wait_ms, int64_t lease_ms)
{
	return with_validity(dlock_redlock_acquire(r, owner, wait_ms, lease_ms), validity_ms, r,
			owner);
}

int dl_redlock_acquire_fenced_v(int64_t *validity_ms, int64_t *token, dlock_redlock *r,
		const char *owner, int64_t wait_ms, int64_t lease_ms)
{
	return with_validity(dlock_redlock_acquire_fenced(token, r, owner, wait_ms, lease_ms),
			validity_ms, r, owner);
}
