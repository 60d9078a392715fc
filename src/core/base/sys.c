/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernel's side of the seam (core/base/sys.h), and the switch. */
#include <errno.h>
#include <stdatomic.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/base/sys.h"

static int64_t kernel_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t kernel_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int kernel_random(void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int kernel_connect_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -1;
	return err;
}

static ssize_t kernel_recv(int fd, void *buf, size_t len)
{
	return recv(fd, buf, len, 0);
}

static ssize_t kernel_send(int fd, const void *buf, size_t len)
{
	return send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

const dlock__sys dlock__sys_kernel = {
	.now_us = kernel_now_us,
	.wall_ms = kernel_wall_ms,
	.random = kernel_random,
	.resolve = getaddrinfo,
	.resolve_free = freeaddrinfo,
	.socket = socket,
	.connect = connect,
	.connect_error = kernel_connect_error,
	.sockopt = setsockopt,
	.close = close,
	.recv = kernel_recv,
	.send = kernel_send,
	.poll = poll,
};

static _Atomic(const dlock__sys *) current = &dlock__sys_kernel;

const dlock__sys *dlock__sys_get(void)
{
	return atomic_load_explicit(&current, memory_order_acquire);
}

void dlock__sys_set(const dlock__sys *sys)
{
	atomic_store_explicit(&current, sys != NULL ? sys : &dlock__sys_kernel,
			memory_order_release);
}
