/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: connection descriptors left in an epoll set after their watcher
 * stopped.
 *
 * An operation on a loop watches its pooled connection while it waits for
 * the reply and stops when it has it; the next operation takes the same
 * connection from the pool a moment later. Taking the descriptor out of
 * the epoll set and putting it back each time cost two epoll_ctl calls per
 * operation, a tenth of the client's CPU. So the loop leaves a stopped
 * connection's descriptor in its set and notes it here; the next watch of
 * the same descriptor with the same events costs nothing. Closing it must
 * take it out first (a descriptor still open elsewhere, in a forked child,
 * would stay in the set and report events for a number since reused), so
 * every close of such a descriptor goes through dlock__fd_close().
 */
#ifndef DLOCK_CORE_FD_KEPT_H
#define DLOCK_CORE_FD_KEPT_H

/* Note that epfd still holds fd with `mask` (its POLLIN/POLLOUT). 0, or
 * -1 when fd is beyond the table: take it out of the set now. */
int dlock__fd_keep(int fd, int epfd, int mask);

/* Whether epfd still holds fd (then *mask is what it watches for); the
 * note is dropped either way it was epfd's. 1 or 0. */
int dlock__fd_unkeep(int fd, int epfd, int *mask);

/* Close fd, taking it out of the epoll set that kept it first. */
void dlock__fd_close(int fd);

/* epfd is being closed: forget what it kept. */
void dlock__fd_forget_set(int epfd);

#endif
