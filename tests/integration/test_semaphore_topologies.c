/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Semaphores through a Sentinel-managed primary (redis+sentinel://: the
 * client finds the primary by asking the sentinel) and over TLS
 * (rediss://): a release wakes a waiter through the topology's pub/sub
 * connection, and an expirable permit is renewed through it.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_harness.h"
#include "support.h"

#define MASTER "semm"

static rh_server *primary, *sentinel;
static char uri[128];

static void up(void)
{
	char monitor[96];

	cr_assert_not_null(primary = rh_server_start(NULL));
	snprintf(monitor, sizeof monitor, "sentinel monitor " MASTER " 127.0.0.1 %d 1",
			rh_server_port(primary));
	const char *conf[] = { monitor, NULL };
	cr_assert_not_null(sentinel = rh_sentinel_start(NULL, conf));
	snprintf(uri, sizeof uri, "redis+sentinel://127.0.0.1:%d/" MASTER, rh_server_port(sentinel));
}

static void down(void)
{
	rh_server_free(sentinel);
	rh_server_free(primary);
}

TestSuite(semaphore_sentinel, .init = up, .fini = down, .timeout = 60);

typedef struct waiter {
	dlock_semaphore *s;
	int rc;
	int64_t got_at;
} waiter;

static void *wait_thread(void *arg)
{
	waiter *w = arg;

	w->rc = dlock_semaphore_acquire(w->s, 1, 15000);
	w->got_at = rh_now_ms();
	return NULL;
}

static dlock_semaphore *sem_of(dlock_client *c, const char *name, dlock_semaphore_kind kind)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;

	o.kind = kind;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	return s;
}

/* The scenario on clients c and c2 of one topology; `data` is its server. */
static void wake_and_renew(dlock_client *c, dlock_client *c2, rh_server *data)
{
	dlock_semaphore *s = sem_of(c, "sem-sentinel", DLOCK_SEMAPHORE_PLAIN);
	dlock_semaphore *x = sem_of(c, "pes-sentinel", DLOCK_SEMAPHORE_EXPIRABLE);
	waiter w = { .s = sem_of(c2, "sem-sentinel", DLOCK_SEMAPHORE_PLAIN) };
	char id[DLOCK_PERMIT_ID_SIZE];
	pthread_t t;

	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 1));
	cr_assert_eq(rh_command_int(data, "EXISTS sem-sentinel"), 1, "not on the primary");
	dl_pass(dlock_semaphore_acquire(s, 1, 0));
	cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
	dl_sleep_ms(400);
	int64_t released = rh_now_ms();
	dl_pass(dlock_semaphore_release(s, 1));
	pthread_join(t, NULL);
	cr_assert_eq(w.rc, 0, "%s", dlock_semaphore_errmsg(w.s));
	cr_assert_lt(w.got_at - released, 1000, "woken %lld ms after the release",
			(long long)(w.got_at - released));

	dl_pass(dlock_semaphore_try_set_permits(NULL, x, 1));
	dl_pass(dlock_semaphore_acquire_permit(id, x, 0, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(1500);
	cr_assert_eq(dlock_semaphore_check(x, id), 0, "the renewed permit was lost");
	cr_assert_eq(rh_command_int(data, "ZCARD {pes-sentinel}:timeout"), 1);
	dl_pass(dlock_semaphore_release_permit(x, id));
	cr_assert_eq(rh_command_int(data, "ZCARD {pes-sentinel}:timeout"), 0);

	dlock_semaphore_free(w.s);
	dlock_semaphore_free(x);
	dlock_semaphore_free(s);
}

Test(semaphore_sentinel, a_release_wakes_a_waiter_and_a_permit_is_renewed)
{
	dlock_client *c = dl_client(uri, 2000, 600);
	dlock_client *c2 = dl_client(uri, 2000, 0);

	wake_and_renew(c, c2, primary);
	dlock_client_free(c2);
	dlock_client_free(c);
}

/* ---- TLS ------------------------------------------------------------------ */

static char tls_dir[96];
static rh_server *tls_srv;

static void sh(const char *cmd)
{
	cr_assert_eq(system(cmd), 0, "failed: %s", cmd);
}

/* A CA and a server certificate for 127.0.0.1 it signs (EC keys: fast),
 * in a fresh directory under the working directory. */
static void tls_up(void)
{
	char cwd[64], cmd[1024], port[16], crt[128], key[128], ca[128];

	/* The prebuilt servers of the version matrix (ci/versions.sh) have no TLS. */
	if (getenv("DLOCK_TEST_NO_TLS") != NULL)
		cr_skip_test("DLOCK_TEST_NO_TLS: this redis-server was built without TLS");
	cr_assert_not_null(getcwd(cwd, sizeof cwd), "the working directory's name is too long");
	snprintf(tls_dir, sizeof tls_dir, "%s/dlock-sem-tls-XXXXXX", cwd);
	cr_assert_not_null(mkdtemp(tls_dir));
	snprintf(cmd, sizeof cmd,
			"cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
			"-nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=ca 2>/dev/null && "
			"printf 'subjectAltName=IP:127.0.0.1\\n' > server.ext && "
			"openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
			"-keyout server.key -out server.csr -subj /CN=server 2>/dev/null && "
			"openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
			"-out server.crt -days 2 -extfile server.ext 2>/dev/null",
			tls_dir);
	sh(cmd);
	snprintf(crt, sizeof crt, "%s/server.crt", tls_dir);
	snprintf(key, sizeof key, "%s/server.key", tls_dir);
	snprintf(ca, sizeof ca, "%s/ca.crt", tls_dir);
	for (int attempt = 0; attempt < 5 && tls_srv == NULL; attempt++) {
		int p = rh_free_port();
		snprintf(port, sizeof port, "%d", p);
		const char *args[] = { "--tls-port", port, "--tls-cert-file", crt, "--tls-key-file",
			key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no", NULL };
		tls_srv = rh_server_start(args);
		if (tls_srv != NULL)
			snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d", p);
	}
	cr_assert_not_null(tls_srv, "could not start a TLS redis-server");
}

static void tls_down(void)
{
	char cmd[160];

	rh_server_free(tls_srv);
	tls_srv = NULL;
	snprintf(cmd, sizeof cmd, "rm -rf %s", tls_dir);
	sh(cmd);
}

TestSuite(semaphore_tls, .init = tls_up, .fini = tls_down, .timeout = 60);

static dlock_client *tls_client(int64_t watchdog_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	char ca[128];

	snprintf(ca, sizeof ca, "%s/ca.crt", tls_dir);
	o.connect_timeout_ms = 2000;
	o.command_timeout_ms = 2000;
	o.watchdog_timeout_ms = watchdog_ms;
	o.tls_ca_file = ca;
	return dl_client_opts(uri, &o);
}

Test(semaphore_tls, a_release_wakes_a_waiter_and_a_permit_is_renewed)
{
	dlock_client *c = tls_client(600);
	dlock_client *c2 = tls_client(30000);

	wake_and_renew(c, c2, tls_srv);
	dlock_client_free(c2);
	dlock_client_free(c);
}
