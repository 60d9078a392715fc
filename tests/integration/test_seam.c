/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The seam (core/base/sys.h): a table swapped in before a client opens sees
 * every socket, byte, name lookup, wait, clock reading and random number of
 * a real lock's life against a real server, and what it answers is what
 * the library acts on. (ci/seam.sh checks that nothing calls the kernel
 * around it; this checks that going through it works.)
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <string.h>

#include <dlock.h>

#include "core/base/sys.h"
#include "core/base/time.h"
#include "redis_harness.h"
#include "support.h"

TestSuite(seam, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

enum { NOW, WALL, RANDOM, RESOLVE, SOCKET, CONNECT, CLOSE, RECV, SEND, POLL, NCALLS };
static const char *const call_name[NCALLS] = { "now_us", "wall_ms", "random", "resolve",
	"socket", "connect", "close", "recv", "send", "poll" };
static _Atomic long calls[NCALLS];

static const dlock__sys *kernel = &dlock__sys_kernel;
static int64_t clock_shift_us;
static int fill_random;      /* random gives 0xab bytes */
static _Atomic int send_fails; /* send fails with ECONNRESET */

static int64_t t_now_us(void)
{
	calls[NOW]++;
	return kernel->now_us() + clock_shift_us;
}

static int64_t t_wall_ms(void)
{
	calls[WALL]++;
	return kernel->wall_ms();
}

static int t_random(void *buf, size_t len)
{
	calls[RANDOM]++;
	if (!fill_random)
		return kernel->random(buf, len);
	memset(buf, 0xab, len);
	return 0;
}

/* A name whose lookup takes lookup_ms: a slow DNS server. */
#define SLOW_NAME "slow.dlock.test"
static int64_t lookup_ms;

static int t_resolve(const char *host, const char *service, const struct addrinfo *hints,
		struct addrinfo **out)
{
	calls[RESOLVE]++;
	if (host != NULL && strcmp(host, SLOW_NAME) == 0) {
		struct timespec ts = { (time_t)(lookup_ms / 1000), (long)(lookup_ms % 1000) * 1000000L };

		if (hints != NULL && (hints->ai_flags & AI_NUMERICHOST))
			return EAI_NONAME;
		nanosleep(&ts, NULL);
		host = "127.0.0.1";
	}
	return kernel->resolve(host, service, hints, out);
}

static int t_socket(int domain, int type, int protocol)
{
	calls[SOCKET]++;
	return kernel->socket(domain, type, protocol);
}

static int t_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	calls[CONNECT]++;
	return kernel->connect(fd, addr, len);
}

static int t_close(int fd)
{
	calls[CLOSE]++;
	return kernel->close(fd);
}

static ssize_t t_recv(int fd, void *buf, size_t len)
{
	calls[RECV]++;
	return kernel->recv(fd, buf, len);
}

static ssize_t t_send(int fd, const void *buf, size_t len)
{
	calls[SEND]++;
	if (send_fails) {
		errno = ECONNRESET;
		return -1;
	}
	return kernel->send(fd, buf, len);
}

static int t_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	calls[POLL]++;
	return kernel->poll(fds, n, timeout_ms);
}

static dlock__sys counting;

static void use_counting_seam(void)
{
	counting = dlock__sys_kernel;
	counting.now_us = t_now_us;
	counting.wall_ms = t_wall_ms;
	counting.random = t_random;
	counting.resolve = t_resolve;
	counting.socket = t_socket;
	counting.connect = t_connect;
	counting.close = t_close;
	counting.recv = t_recv;
	counting.send = t_send;
	counting.poll = t_poll;
	dlock__sys_set(&counting);
}

static dlock_client *open_client(const char *uri)
{
	dlock_client *c = NULL;
	int rc = dlock_client_new(&c, uri, NULL);

	cr_assert_eq(rc, 0, "open %s: %s", uri, dlock_client_errmsg(NULL));
	return c;
}

/* A fair lock (its queue holds epoch times: the wall clock) taken and given back. */
static void lock_and_unlock(dlock_client *c, const char *name)
{
	dlock_lock_options o;
	dlock_lock *l = NULL;
	int64_t ms = 0;

	dlock_lock_options_init(&o, DLOCK_LOCK_OPTIONS_VERSION);
	o.kind = DLOCK_LOCK_FAIR;
	cr_assert_eq(dlock_lock_new(&l, c, name, &o), 0);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 5000), 0, "%s", dlock_lock_errmsg(l));
	cr_expect_eq(dlock_lock_validity_ms(&ms, l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_expect(ms > 0 && ms <= 5000, "validity %lld ms of a 5 s lease", (long long)ms);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	dlock_lock_free(l);
}

Test(seam, a_locks_life_goes_through_it)
{
	char uri[128];
	dlock_client *c;

	use_counting_seam();
	/* A name, not an address: the lookup goes through the seam too. */
	snprintf(uri, sizeof uri, "redis://localhost:%d", rh_server_port(dl_srv));
	c = open_client(uri);
	lock_and_unlock(c, "seam:life");
	dlock_client_free(c);
	for (int i = 0; i < NCALLS; i++)
		cr_expect_gt(calls[i], 0, "%s never went through the seam", call_name[i]);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS seam:life"), 0, "the lock is still held");
}

/* The seam's random bytes make the client's id (a version 4 UUID). */
Test(seam, random_numbers_are_the_seams)
{
	dlock_client *c;

	fill_random = 1;
	use_counting_seam();
	c = open_client(rh_server_uri(dl_srv));
	cr_expect_str_eq(dlock_client_id(c), "abababab-abab-4bab-abab-abababababab");
	dlock_client_free(c);
}

/* Its clock is the library's: a clock ten days ahead of the kernel's is
 * what every deadline is measured on, and locks work as before. */
Test(seam, the_clock_is_the_seams)
{
	int64_t kernel_ms = dlock__sys_kernel.now_us() / 1000;
	dlock_client *c;

	clock_shift_us = INT64_C(10) * 24 * 3600 * 1000000;
	use_counting_seam();
	cr_expect_geq(dlock__now_ms() - kernel_ms, INT64_C(10) * 24 * 3600 * 1000);
	c = open_client(rh_server_uri(dl_srv));
	lock_and_unlock(c, "seam:clock");
	dlock_client_free(c);
}

/* Bytes that cannot be sent: the seam's failure is the caller's error, one
 * line naming the node; the kernel's seam back, the same client works. */
Test(seam, a_send_that_fails_there_fails_the_call)
{
	dlock_client *c;
	dlock_lock *l = NULL;
	int rc;

	use_counting_seam();
	c = open_client(rh_server_uri(dl_srv));
	cr_assert_eq(dlock_lock_new(&l, c, "seam:fail", NULL), 0);
	send_fails = 1;
	rc = dlock_lock_acquire(l, NULL, 0, 5000);
	cr_expect_eq(rc, DLOCK_ECONN, "rc %d: %s", rc, dlock_lock_errmsg(l));
	cr_expect(strstr(dlock_lock_errmsg(l), "127.0.0.1") != NULL, "%s", dlock_lock_errmsg(l));
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS seam:fail"), 0, "taken though nothing went out");
	send_fails = 0;
	cr_expect_eq(dlock_lock_acquire(l, NULL, 0, 5000), 0, "%s", dlock_lock_errmsg(l));
	cr_expect_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* ---- a host name looked up on a loop ---------------------------------------------- */

/* A client on `loop` that reaches the test's server by the slow name. */
static dlock_client *slow_client_on(dlock_loop *loop, int64_t connect_timeout_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	char uri[128];

	o.loop = loop;
	o.lazy_connect = 1;
	o.connect_timeout_ms = connect_timeout_ms;
	snprintf(uri, sizeof uri, "redis://" SLOW_NAME ":%d", rh_server_port(dl_srv));
	return dl_client_opts(uri, &o);
}

/* Drive the loop until o has its callback or `within_ms` passed; the
 * longest single turn of the loop, ms. */
static int64_t drive(dlock_loop *loop, const dl_outcome *o, int64_t within_ms)
{
	int64_t until = rh_now_ms() + within_ms, longest = 0;

	while (o->calls == 0 && rh_now_ms() < until) {
		int64_t t0 = rh_now_ms();

		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
		if (rh_now_ms() - t0 > longest)
			longest = rh_now_ms() - t0;
	}
	return longest;
}

/* While the name is looked up the caller's loop goes on turning (old: the
 * whole lookup inside one turn, the caller's program stopped with it). */
Test(seam, a_name_looked_up_does_not_stop_the_callers_loop)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l = NULL;
	dl_outcome o = { 0 };
	int64_t t0, longest;

	lookup_ms = 1500;
	use_counting_seam();
	dl_pass(dlock_loop_new(&loop, NULL));
	c = slow_client_on(loop, 5000);
	dl_pass(dlock_lock_new(&l, c, "seam:lookup", NULL));
	t0 = rh_now_ms();
	dl_pass(dlock_lock_acquire_async(NULL, l, "owner-1", 0, 5000, dl_note, &o));
	longest = drive(loop, &o, 10000);
	cr_assert_eq(o.calls, 1, "no callback");
	cr_expect_eq(o.code, 0, "acquire: %d", o.code);
	cr_expect_geq(o.at - t0, 1500, "acquired before the name was found");
	cr_expect_lt(longest, 750, "one turn of the loop took %lld ms (the lookup takes 1500)",
			(long long)longest);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS seam:lookup"), 1);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/* A lookup slower than the connect timeout: the operation ends at the
 * timeout, and the lookup's late answer (after the client is gone) is
 * dropped harmlessly. */
Test(seam, a_lookup_past_the_connect_timeout_ends_at_the_timeout)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l = NULL;
	dl_outcome o = { 0 };
	int64_t t0;

	lookup_ms = 2500;
	use_counting_seam();
	dl_pass(dlock_loop_new(&loop, NULL));
	c = slow_client_on(loop, 300);
	dl_pass(dlock_lock_new(&l, c, "seam:slow", NULL));
	t0 = rh_now_ms();
	dl_pass(dlock_lock_acquire_async(NULL, l, "owner-1", 0, 5000, dl_note, &o));
	drive(loop, &o, 10000);
	cr_assert_eq(o.calls, 1, "no callback");
	cr_expect_lt(o.code, 0, "acquired through a lookup that never ended");
	cr_expect_lt(o.at - t0, 2000, "ended %lld ms after it started (connect timeout 300)",
			(long long)(o.at - t0));
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
	/* The lookup's thread answers now, to nobody. */
	struct timespec ts = { 3, 0 };
	nanosleep(&ts, NULL);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS seam:slow"), 0);
}

/* A blocking call through the slow name works as before (its thread's loop
 * is woken by the lookup's end). */
Test(seam, a_blocking_call_waits_for_the_lookup)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c;
	char uri[128];

	lookup_ms = 300;
	use_counting_seam();
	o.lazy_connect = 1;
	snprintf(uri, sizeof uri, "redis://" SLOW_NAME ":%d", rh_server_port(dl_srv));
	c = dl_client_opts(uri, &o);
	lock_and_unlock(c, "seam:blocking");
	dlock_client_free(c);
}
