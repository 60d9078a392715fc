/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rediss+cluster://: a Redis Cluster whose nodes speak TLS (tls-cluster yes,
 * so CLUSTER SHARDS and MOVED name their TLS ports), with certificates made
 * here by openssl: locks on every shard and a waiter woken by sharded
 * pub/sub, all over verified TLS; a wrong CA is refused with a clear error.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

static char dir[64], ca[128], other_ca[128], cert[128], key[128];
static rh_cluster *cl;

/* A CA, a certificate for 127.0.0.1 it signs, and a CA that signs nothing. */
static void make_certificates(void)
{
	char cmd[2048];

	snprintf(dir, sizeof dir, "/tmp/dlock-cluster-tls-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(ca, sizeof ca, "%s/ca.crt", dir);
	snprintf(other_ca, sizeof other_ca, "%s/other.crt", dir);
	snprintf(cert, sizeof cert, "%s/node.crt", dir);
	snprintf(key, sizeof key, "%s/node.key", dir);
	snprintf(cmd, sizeof cmd,
			"cd %s && exec >openssl.log 2>&1 && "
			"openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 "
			"-subj /CN=dlock-test-ca && "
			"openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt "
			"-days 2 -subj /CN=dlock-other-ca && "
			"openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr "
			"-subj /CN=localhost && "
			"printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > ext && "
			"openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
			"-out node.crt -days 2 -extfile ext",
			dir);
	cr_assert_eq(system(cmd), 0, "openssl failed (see %s/openssl.log)", dir);
}

static void up(void)
{
	if (getenv("DLOCK_TEST_NO_TLS") != NULL) /* the version matrix's servers */
		cr_skip_test("DLOCK_TEST_NO_TLS: this redis-server was built without TLS");
	make_certificates();
	const char *tls[] = { "--tls-port", "auto", "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "no", "--tls-cluster", "yes",
		"--tls-replication", "yes", NULL };
	cl = rh_cluster_start(3, 0, tls);
	cr_assert_not_null(cl, "could not start a TLS cluster");
}

static void down(void)
{
	char cmd[128];

	rh_cluster_free(cl);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(cluster_tls, .init = up, .fini = down, .timeout = 120);

static dlock_client *tls_client(const char *with_ca)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.tls_ca_file = with_ca;
	return dl_client_opts(rh_cluster_tls_seed_uri(cl), &o);
}

Test(cluster_tls, locks_and_wake_ups_over_verified_tls)
{
	dlock_client *ca_ = tls_client(ca), *cb = tls_client(ca);
	char owner[128];

	dl_owner(ca_, owner, sizeof owner);
	for (int i = 0; i < 12; i++) { /* 12 names: every shard */
		char name[16];
		dlock_lock *l;

		snprintf(name, sizeof name, "tls-%d", i);
		l = dl_lock(ca_, name);
		dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
		rh_server *s = rh_cluster_slot_owner(cl, NULL, rh_cluster_key_slot(cl, name));
		cr_assert_eq(rh_command_int(s, "HEXISTS %s %s", name, owner), 1);
		dl_pass(dlock_lock_release(l, NULL));
		dlock_lock_free(l);
	}
	dlock_lock *a = dl_lock(ca_, "tls-wake"), *b = dl_lock(cb, "tls-wake");
	dl_assert_unlock_wakes(a, b);
	dl_free_locks(a, b);
	dl_close_clients(ca_, cb);
}

Test(cluster_tls, a_wrong_ca_is_refused_clearly)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	o.tls_ca_file = other_ca;
	cr_assert_eq(dlock_client_new(&c, rh_cluster_tls_seed_uri(cl), &o), DLOCK_ECONN);
	cr_assert_not_null(strstr(dlock_errmsg_last(), "certificate"), "%s", dlock_errmsg_last());
	cr_assert_null(c);
}
