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

static int t_resolve(const char *host, const char *service, const struct addrinfo *hints,
		struct addrinfo **out)
{
	calls[RESOLVE]++;
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
	int rc = dlock_client_open(&c, uri, NULL);

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
	cr_assert_eq(dlock_lock_try(l, 0, 5000), 0, "%s", dlock_lock_errmsg(l));
	cr_expect_eq(dlock_lock_validity(&ms, l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_expect(ms > 0 && ms <= 5000, "validity %lld ms of a 5 s lease", (long long)ms);
	cr_assert_eq(dlock_lock_unlock(l), 0, "%s", dlock_lock_errmsg(l));
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
	dlock_client_close(c);
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
	dlock_client_close(c);
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
	dlock_client_close(c);
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
	rc = dlock_lock_try(l, 0, 5000);
	cr_expect_eq(rc, DLOCK_ECONN, "rc %d: %s", rc, dlock_lock_errmsg(l));
	cr_expect(strstr(dlock_lock_errmsg(l), "127.0.0.1") != NULL, "%s", dlock_lock_errmsg(l));
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS seam:fail"), 0, "taken though nothing went out");
	send_fails = 0;
	cr_expect_eq(dlock_lock_try(l, 0, 5000), 0, "%s", dlock_lock_errmsg(l));
	cr_expect_eq(dlock_lock_unlock(l), 0, "%s", dlock_lock_errmsg(l));
	dlock_lock_free(l);
	dlock_client_close(c);
}
