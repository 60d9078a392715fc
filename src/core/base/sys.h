/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: the seam between dlock and the world it runs in.
 *
 * Every byte sent to or read from a server, every socket opened, every
 * name looked up, every wait for a descriptor, the clock and the random
 * numbers go through one table of functions. The kernel's table is the
 * default; a test or a simulator swaps in its own (dlock__sys_set) - a
 * simulated network of in-memory servers, a clock that moves when the
 * simulator says so, one seed for every random choice - and runs the real
 * engine against it. Nothing else in src/ calls those system functions
 * (ci/seam.sh checks it).
 *
 * What stays outside: TLS (OpenSSL drives its own socket reads), the
 * epoll descriptor a caller's loop is handed (dlock_loop_fd) with its
 * timer, the loop's wake-up eventfd (posts between real threads), and
 * the condition variables of blocking calls made from other threads. A
 * simulation runs on a caller's loop (its hooks), on one thread.
 */
#ifndef DLOCK_CORE_SYS_H
#define DLOCK_CORE_SYS_H

#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

typedef struct dlock__sys {
	/* CLOCK_MONOTONIC in microseconds: every duration and deadline. */
	int64_t (*now_us)(void);
	/* CLOCK_REALTIME in milliseconds: only where Redisson's data holds
	 * epoch times (a fair queue's places, holder labels). */
	int64_t (*wall_ms)(void);
	/* Fill buf with random bytes (request ids, owner uuids, jitter). 0 or -1. */
	int (*random)(void *buf, size_t len);
	/* getaddrinfo(3) and freeaddrinfo(3). */
	int (*resolve)(const char *host, const char *service, const struct addrinfo *hints,
			struct addrinfo **out);
	void (*resolve_free)(struct addrinfo *ai);
	/* socket(2) (non-blocking, close-on-exec: the caller passes the flags),
	 * connect(2), the outcome of a non-blocking connect (SO_ERROR: 0 or an
	 * errno; -1 with errno when it cannot be read), setsockopt(2), close(2). */
	int (*socket)(int domain, int type, int protocol);
	int (*connect)(int fd, const struct sockaddr *addr, socklen_t len);
	int (*connect_error)(int fd);
	int (*sockopt)(int fd, int level, int name, const void *value, socklen_t len);
	int (*close)(int fd);
	/* recv(2) and send(2) on a connected socket; send never raises SIGPIPE. */
	ssize_t (*recv)(int fd, void *buf, size_t len);
	ssize_t (*send)(int fd, const void *buf, size_t len);
	/* poll(2): the wait for descriptors and deadlines. */
	int (*poll)(struct pollfd *fds, nfds_t n, int timeout_ms);
} dlock__sys;

/* The table in use (the kernel's unless one was set). */
const dlock__sys *dlock__sys_get(void);

/* Use `sys` from now on (NULL: the kernel's again). Set it before any
 * client is opened and keep it alive while the library runs; not for
 * threads racing with the library's own. */
void dlock__sys_set(const dlock__sys *sys);

/* The kernel's table, for a test or simulator that wraps some of it. */
extern const dlock__sys dlock__sys_kernel;

#endif
