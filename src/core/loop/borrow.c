/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Blocking calls on the loop (core/loop/loop.h): the loop a blocking call
 * borrows, and a blocking step's wait for one descriptor, which is a turn
 * of that loop like any other - no second way of waiting.
 */
#include <stddef.h>

#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/base/time.h"
#include "core/loop/loop.h"

dlock__loop *dlock__loop_borrow(dlock__loop *spare)
{
	dlock__loop *l = dlock__thread_loop();

	if (l == NULL) {
		dlock__loop_init_quiet(spare);
		l = spare;
	}
	l->busy++;
	return l;
}

void dlock__loop_give_back(dlock__loop *l, dlock__loop *spare)
{
	l->busy--;
	if (l == spare)
		dlock__loop_destroy(spare);
	else if (l->busy == 0)
		dlock__loop_quiet(l); /* no descriptor left open between calls */
}

typedef struct fd_wait {
	dlock__io io; /* first: the loop hands back &io */
	dlock__timer timer;
	int outcome; /* 0 waiting, 1 ready, 2 the deadline passed */
} fd_wait;

static void fd_ready(dlock__io *io, short revents)
{
	fd_wait *w = (fd_wait *)io;

	(void)revents;
	if (w->outcome == 0)
		w->outcome = 1;
}

static void deadline_passed(dlock__timer *t)
{
	fd_wait *w = (fd_wait *)((char *)t - offsetof(fd_wait, timer));

	if (w->outcome == 0)
		w->outcome = 2;
}

int dlock__loop_wait_fd(int fd, short events, int64_t deadline)
{
	dlock__loop spare, *l = dlock__loop_borrow(&spare);
	fd_wait w = { .outcome = 0 };
	int rc;

	w.io.slot = (size_t)-1;
	dlock__timer_init(&w.timer, deadline_passed);
	rc = dlock__io_start(l, &w.io, fd, events, fd_ready);
	if (rc == 0 && deadline != DLOCK__NEVER)
		rc = dlock__timer_set(l, &w.timer, deadline);
	if (rc < 0)
		rc = dlock__seterr(DLOCK_ENOMEM, "loop: out of memory");
	while (rc == 0 && w.outcome == 0)
		rc = dlock__loop_run_once(l, DLOCK__NEVER);
	dlock__io_stop(l, &w.io);
	dlock__timer_stop(l, &w.timer);
	dlock__loop_give_back(l, &spare);
	return rc < 0 ? rc : w.outcome == 1;
}
