/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rediss:// against real redis-servers with a TLS port and certificates this
 * test makes with openssl: plain and mutual TLS, a wrong CA (which ends even
 * a forever wait at once), an expired certificate, a wrong name, the insecure
 * switch, a plain client on the TLS port and a TLS client on the plain one
 * (clear errors, no hang), a plain answer to the hello told as such, a
 * stalled handshake bounded by the connect timeout, and a RedLock over TLS
 * servers.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_harness.h"
#include "support.h"

static char dir[64];

static char *in_dir(const char *file)
{
	static char paths[8][128];
	static int next;
	char *p = paths[next++ % 8];
	snprintf(p, sizeof paths[0], "%s/%s", dir, file);
	return p;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	cr_assert_eq(system(cmd), 0, "failed: %s", cmd);
}

/* A CA, and a certificate it signs for 127.0.0.1 and localhost (days < 0:
 * expired yesterday). EC keys: fast to make. */
static void make_ca(const char *name)
{
	sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	   "-keyout %s.key -out %s.crt -days 2 -subj /CN=%s 2>/dev/null",
			dir, name, name, name);
}

static void make_cert(const char *name, const char *ca, int days, const char *ext)
{
	sh("cd %s && printf '%s\\n' > %s.ext && "
	   "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout %s.key "
	   "-out %s.csr -subj /CN=%s 2>/dev/null && "
	   "openssl x509 -req -in %s.csr -CA %s.crt -CAkey %s.key -CAcreateserial -out %s.crt "
	   "-days %d -extfile %s.ext 2>/dev/null",
			dir, ext, name, name, name, name, name, ca, ca, name, days, name);
}

static void make_certificates(void)
{
	snprintf(dir, sizeof dir, "/tmp/dlock-tls-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	make_ca("ca");
	make_ca("otherca");
	make_cert("server", "ca", 2, "subjectAltName=IP:127.0.0.1,DNS:localhost");
	make_cert("expired", "ca", -1, "subjectAltName=IP:127.0.0.1,DNS:localhost");
	make_cert("client", "ca", 2, "extendedKeyUsage=clientAuth");
}

typedef struct tls_server {
	rh_server *srv;
	int tls_port;
	char uri[64]; /* rediss://127.0.0.1:TLS_PORT */
} tls_server;

/* A server with a plain port (the harness's) and a TLS port. */
static void tls_start(tls_server *t, const char *cert, const char *auth_clients)
{
	char crt[32], key[32];
	snprintf(crt, sizeof crt, "%s.crt", cert);
	snprintf(key, sizeof key, "%s.key", cert);
	if (getenv("DLOCK_TEST_NO_TLS") != NULL) /* the version matrix's servers */
		cr_skip_test("DLOCK_TEST_NO_TLS: this redis-server was built without TLS");
	for (int attempt = 0; attempt < 5 && t->srv == NULL; attempt++) {
		char port[16];
		t->tls_port = rh_free_port();
		snprintf(port, sizeof port, "%d", t->tls_port);
		const char *args[] = { "--tls-port", port, "--tls-cert-file", in_dir(crt),
			"--tls-key-file", in_dir(key), "--tls-ca-cert-file", in_dir("ca.crt"),
			"--tls-auth-clients", auth_clients, NULL };
		t->srv = rh_server_start(args);
	}
	cr_assert_not_null(t->srv, "could not start a TLS redis-server");
	snprintf(t->uri, sizeof t->uri, "rediss://127.0.0.1:%d", t->tls_port);
}

static tls_server one;

static void setup(void)
{
	make_certificates();
	tls_start(&one, "server", "no");
}

static void teardown(void)
{
	rh_server_free(one.srv);
	one = (tls_server){ 0 };
	sh("rm -rf %s", dir);
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 60);

static dlock_client_options tls_options(const char *ca)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.connect_timeout_ms = 2000;
	o.command_timeout_ms = 2000;
	o.tls_ca_file = ca ? in_dir(ca) : NULL;
	return o;
}

/* Opening must fail with DLOCK_ECONN and a message naming the node and
 * holding each fragment. */
static void open_fails(
		const char *uri, const dlock_client_options *o, const char *want, const char *also)
{
	dlock_client *c = NULL;
	int64_t t0 = rh_now_ms();
	int rc = dlock_client_new(&c, uri, o);
	int64_t took = rh_now_ms() - t0;
	const char *msg = dlock_errmsg_last();
	cr_assert_neq(rc, 0, "%s opened", uri);
	cr_assert(rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT, "rc %d: %s", rc, msg);
	cr_assert(strstr(msg, "127.0.0.1:") && strstr(msg, want), "message \"%s\" lacks \"%s\"",
			msg, want);
	cr_assert(also == NULL || strstr(msg, also), "message \"%s\" lacks \"%s\"", msg, also);
	cr_assert(took < 2 * o->connect_timeout_ms + 1000, "failing took %lld ms", (long long)took);
}

Test(tls, a_lock_over_tls_is_the_same_lock)
{
	dlock_client_options o = tls_options("ca.crt");
	dlock_client *c = dl_client_opts(one.uri, &o);
	dlock_lock *l = dl_lock(c, "over-tls");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
	char owner[128];
	dl_owner(c, owner, sizeof owner);
	cr_assert_eq(rh_command_int(one.srv, "HEXISTS over-tls %s", owner), 1,
			"the hold is not on the server");
	dl_pass(dlock_lock_release(l, NULL));
	/* A plain client of the same server shares the lock. */
	dlock_client *plain = dl_client(rh_server_uri(one.srv), 2000, 30000);
	dlock_lock *other = dl_lock(plain, "over-tls");
	dl_assert_one_lock(l, other);
	dl_free_locks(other, l);
	dl_close_clients(plain, c);
}

/* Unlock messages reach a waiter over TLS, and a plain waiter from a TLS unlock. */
Test(tls, unlocks_wake_waiters_across_tls_and_plain)
{
	dlock_client_options o = tls_options("ca.crt");
	dlock_client *c = dl_client_opts(one.uri, &o);
	dlock_client *plain = dl_client(rh_server_uri(one.srv), 2000, 30000);
	dlock_lock *over_tls = dl_lock(c, "wake"), *over_plain = dl_lock(plain, "wake");
	dl_assert_unlock_wakes(over_plain, over_tls);
	dl_assert_unlock_wakes(over_tls, over_plain);
	dl_free_locks(over_tls, over_plain);
	dl_close_clients(plain, c);
}

Test(tls, a_certificate_from_another_ca_is_refused)
{
	dlock_client_options o = tls_options("otherca.crt");
	open_fails(one.uri, &o, "not trusted", "tls_ca_file");
}

/* An untrusted certificate is no outage: a wait, even forever and with no
 * first-contact period, ends at its first refusal. */
Test(tls, an_untrusted_certificate_ends_a_forever_wait_at_once)
{
	dlock_client_options o = tls_options("otherca.crt");
	o.lazy_connect = 1;
	dlock_client *c = dl_client_opts(one.uri, &o);
	dlock_lock *l = dl_lock(c, "untrusted-wait");
	/* One handshake (a retry on a fresh connection makes two), well within
	 * a connect timeout each. */
	dl_assert_try(l, DLOCK_WAIT_FOREVER, 10000, DLOCK_ECONN, 0, 2 * o.connect_timeout_ms);
	cr_expect(strstr(dlock_lock_errmsg(l), "not trusted") != NULL, "message: %s",
			dlock_lock_errmsg(l));
	dl_free_locks(l);
	dl_close_clients(c);
}

Test(tls, the_system_cas_do_not_trust_a_private_ca)
{
	dlock_client_options o = tls_options(NULL);
	open_fails(one.uri, &o, "not trusted", NULL);
}

/* A name mismatch is not a CA problem: the message says which names the
 * certificate carries and how to give one (not to give a CA). */
static void assert_names_hint(const char *msg)
{
	cr_assert(strstr(msg, "tls_server_name") && strstr(msg, "--tls-server-name"),
			"message \"%s\" lacks the option to use", msg);
	cr_assert(strstr(msg, "tls_ca_file") == NULL, "message \"%s\" asks for a CA", msg);
}

Test(tls, a_wrong_name_is_refused_with_the_names_the_certificate_carries)
{
	dlock_client_options o = tls_options("ca.crt");
	o.tls_server_name = "redis.example.com";
	open_fails(one.uri, &o, "\"redis.example.com\"", "\"localhost\"");
	const char *msg = dlock_errmsg_last();
	cr_assert(strstr(msg, "\"127.0.0.1\""), "message \"%s\" lacks the certificate's IP", msg);
	assert_names_hint(msg);
}

Test(tls, an_address_the_certificate_lacks_points_to_its_name)
{
	tls_server named = { 0 };
	make_cert("named", "ca", 2, "subjectAltName=DNS:redis.internal");
	tls_start(&named, "named", "no");
	dlock_client_options o = tls_options("ca.crt");
	open_fails(named.uri, &o, "\"redis.internal\"", "\"127.0.0.1\"");
	assert_names_hint(dlock_errmsg_last());

	o.tls_server_name = "redis.internal";
	dlock_client *c = dl_client_opts(named.uri, &o);
	dl_pass(dlock_client_ping(c));
	dlock_client_free(c);
	rh_server_free(named.srv);
}

Test(tls, a_name_in_the_certificate_is_accepted)
{
	dlock_client_options o = tls_options("ca.crt");
	o.tls_server_name = "localhost";
	dlock_client *c = dl_client_opts(one.uri, &o);
	dl_pass(dlock_client_ping(c));
	dlock_client_free(c);
}

Test(tls, insecure_skips_verification)
{
	dlock_client_options o = tls_options("otherca.crt");
	o.tls_insecure = 1;
	dlock_client *c = dl_client_opts(one.uri, &o);
	dl_pass(dlock_client_ping(c));
	dlock_client_free(c);
}

Test(tls, an_expired_certificate_is_refused)
{
	tls_server old = { 0 };
	tls_start(&old, "expired", "no");
	dlock_client_options o = tls_options("ca.crt");
	open_fails(old.uri, &o, "certificate has expired", NULL);
	rh_server_free(old.srv);
}

Test(tls, mutual_tls_needs_the_client_certificate)
{
	tls_server m = { 0 };
	tls_start(&m, "server", "yes");
	dlock_client_options o = tls_options("ca.crt");
	o.tls_cert_file = in_dir("client.crt");
	o.tls_key_file = in_dir("client.key");
	dlock_client *c = dl_client_opts(m.uri, &o);
	dlock_lock *l = dl_lock(c, "mutual");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000));
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
	dlock_client_free(c);

	/* Without it the server refuses, after the client's side of the
	 * handshake is done (TLS 1.3): the first command's reply says so. */
	dlock_client_options bare = tls_options("ca.crt");
	dlock_client *nc = NULL;
	int rc = dlock_client_new(&nc, m.uri, &bare);
	cr_assert_eq(rc, DLOCK_ECONN, "rc %d: %s", rc, dlock_errmsg_last());
	cr_assert(strstr(dlock_errmsg_last(), "client certificate"), "%s", dlock_errmsg_last());
	rh_server_free(m.srv);
}

Test(tls, a_missing_ca_file_fails_at_open_naming_it)
{
	dlock_client_options o = tls_options("no-such-ca.crt");
	dlock_client *c = NULL;
	cr_assert_eq(dlock_client_new(&c, one.uri, &o), DLOCK_EINVAL);
	cr_assert(strstr(dlock_errmsg_last(), "no-such-ca.crt"), "%s", dlock_errmsg_last());
}

Test(tls, a_plain_client_on_the_tls_port_fails_fast)
{
	char plain_on_tls[64];
	snprintf(plain_on_tls, sizeof plain_on_tls, "redis://127.0.0.1:%d", one.tls_port);
	dlock_client_options o = tls_options(NULL);
	open_fails(plain_on_tls, &o, "rediss://", NULL);
}

/* A plain port never answers a TLS hello (Redis waits for the rest of what
 * it takes for an inline command): the connect timeout bounds the wait and
 * the message points at the port. */
Test(tls, a_tls_client_on_the_plain_port_fails_fast)
{
	char tls_on_plain[64];
	snprintf(tls_on_plain, sizeof tls_on_plain, "rediss://127.0.0.1:%d",
			rh_server_port(one.srv));
	dlock_client_options o = tls_options("ca.crt");
	o.connect_timeout_ms = 500;
	open_fails(tls_on_plain, &o, "TLS handshake", "TLS port");
}

/* A plain server that answers the hello (as a proxy or an older Redis that
 * rejects the bytes at once does): one connection, one error line. */
static void *answer_plain(void *arg)
{
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);
	char buf[1024];
	static const char reply[] = "-ERR Protocol error: expected '*', got '\x16'\r\n";

	if (fd < 0)
		return NULL;
	if (read(fd, buf, sizeof buf) > 0 && write(fd, reply, sizeof reply - 1) < 0)
		perror("answer_plain: write");
	close(fd);
	return NULL;
}

/* OpenSSL reads "-ERR ..." as a record of a bad version: the handshake
 * failure is told (by its reason code) as a plain server, refused at once. */
Test(tls, a_plain_answer_to_the_hello_says_plain_port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	pthread_t th;
	char uri[64];

	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
			listen(fd, 8) == 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	cr_assert_eq(pthread_create(&th, NULL, answer_plain, &fd), 0);
	snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d", ntohs(sa.sin_port));
	dlock_client_options o = tls_options("ca.crt");
	open_fails(uri, &o, "answered without TLS", "use redis://");
	pthread_join(th, NULL);
	close(fd);
}

/* A listener that never answers: the TCP connect completes (the backlog),
 * the handshake never does; the connect timeout bounds it. */
Test(tls, a_stalled_handshake_costs_the_connect_timeout)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
			listen(fd, 8) == 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	char uri[64];
	snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d", ntohs(sa.sin_port));
	dlock_client_options o = tls_options("ca.crt");
	o.connect_timeout_ms = 300;
	int64_t t0 = rh_now_ms();
	dlock_client *c = NULL;
	int rc = dlock_client_new(&c, uri, &o);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ETIMEDOUT, "rc %d: %s", rc, dlock_errmsg_last());
	cr_assert(strstr(dlock_errmsg_last(), "TLS handshake"), "%s", dlock_errmsg_last());
	cr_assert(took >= 290 && took < 1500, "took %lld ms for a 300 ms connect timeout",
			(long long)took);
	close(fd);
}

/* The RedLock's parallel path over TLS, with one member paused: the quorum
 * comes from the other two within the deadlines. */
Test(tls, a_redlock_over_tls_servers)
{
	tls_server s[3] = { 0 };
	for (int i = 0; i < 3; i++)
		tls_start(&s[i], "server", "no");
	const char *uris[] = { s[0].uri, s[1].uri, s[2].uri };
	dlock_client_options o = tls_options("ca.crt");
	o.command_timeout_ms = 300;
	o.connect_timeout_ms = 300;
	o.lazy_connect = 1;
	dlock_redlock *rl = NULL;
	dl_pass(dlock_redlock_new_from_uris(&rl, uris, 3, "tls-red", &o, NULL));
	int64_t validity = 0;
	cr_assert_eq(dl_redlock_acquire_v(&validity, rl, NULL, 0, 10000), 0, "%s", dlock_redlock_errmsg(rl));
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(s[i].srv, "EXISTS tls-red"), 1, "not held on server %d",
				i);
	dl_pass(dlock_redlock_release(rl, NULL));

	rh_server_pause(s[2].srv);
	int64_t t0 = rh_now_ms();
	cr_assert_eq(dl_redlock_acquire_v(&validity, rl, NULL, 0, 10000), 0, "%s", dlock_redlock_errmsg(rl));
	cr_assert(rh_now_ms() - t0 < 2000, "a paused TLS member cost %lld ms",
			(long long)(rh_now_ms() - t0));
	dl_pass(dlock_redlock_release(rl, NULL));
	rh_server_resume(s[2].srv);
	dlock_redlock_free(rl);
	for (int i = 0; i < 3; i++)
		rh_server_free(s[i].srv);
}

#ifdef DLOCK_CLI_PATH
/* The command's --tls-* flags, run as a user would. */
static int cli(char *out, size_t len, const char *args)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s -n %s %s 2>&1", DLOCK_CLI_PATH, one.uri, args);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	int status = pclose(f);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(tls, the_command_takes_the_tls_options)
{
	char out[4096], args[512];
	snprintf(args, sizeof args, "--tls-ca %s run cli-tls -- echo inside", in_dir("ca.crt"));
	cr_assert_eq(cli(out, sizeof out, args), 0, "%s", out);
	cr_assert(strstr(out, "inside"), "%s", out);

	cr_assert_eq(cli(out, sizeof out, "status cli-tls"), 69, "%s", out);
	cr_assert(strstr(out, "not trusted") && strstr(out, "--tls-ca"), "%s", out);

	cr_assert_eq(cli(out, sizeof out, "--tls-insecure status cli-tls"), 0, "%s", out);
	cr_assert(strstr(out, "WARNING") && strstr(out, "NOT verified"), "%s", out);

	snprintf(args, sizeof args, "--tls-cert %s status cli-tls", in_dir("client.crt"));
	cr_assert_eq(cli(out, sizeof out, args), 64, "%s", out);
	cr_assert(strstr(out, "--tls-key"), "%s", out);
}
#endif
