/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reactor's tending on its loop: the timed job (the watchdog) and the
 * deferred flushes run when due, then the channels and the connection are
 * looked after (reactor_subs.c, reactor_conn.c) and the timer armed for
 * what comes next; its start (its own thread, or the caller's loop) and stop.
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/base/time.h"
#include "core/drive/reactor_internal.h"

/* What is due now, the job once at most (r->mu held; dropped around each). */
static void run_due(dlock__reactor *r)
{
	int job_ran = 0;

	while (!r->stopping) {
		int64_t now = dlock__now_ms();

		if (r->flush != NULL && now >= r->flush_due) {
			r->flush_due = DLOCK__NEVER;
			dlock__mutex_unlock(&r->mu);
			r->flush(r->flush_arg);
			dlock__mutex_lock(&r->mu);
			continue;
		}
		/* Once per pass: a job due again already (a round that took longer
		 * than its retry interval) runs on the loop's next turn, after
		 * what else is ready - not over and over in here. */
		if (r->job != NULL && !job_ran && now >= r->job_due) {
			int64_t next;

			job_ran = 1;
			r->job_due = DLOCK__NEVER;
			dlock__mutex_unlock(&r->mu);
			next = r->job(r->job_arg, now);
			dlock__mutex_lock(&r->mu);
			if (next < r->job_due)
				r->job_due = next;
			continue;
		}
		if (r->conn != NULL && r->conn->connecting && now >= r->connect_deadline) {
			dlock__mutex_unlock(&r->mu);
			dlock__reactor_drop(r);
			dlock__mutex_lock(&r->mu);
			continue;
		}
		break;
	}
}

/* When something is due next: the job, a flush, a reconnect, a connect's
 * deadline (r->mu held). */
static int64_t next_due(const dlock__reactor *r)
{
	int64_t until = r->job != NULL ? r->job_due : DLOCK__NEVER;

	if (r->flush_due < until)
		until = r->flush_due;
	if (r->conn == NULL && r->subs != NULL && r->reconnect_at < until)
		until = r->reconnect_at;
	if (r->conn != NULL && r->conn->connecting && r->connect_deadline < until)
		until = r->connect_deadline;
	return until;
}

/*
 * Run what is due, then arm the timer for what comes next. The job runs
 * once per call at most: one that falls behind (a watchdog round that
 * failed slowly and is due again already) goes again on the loop's next
 * turn, after what else is ready there - on the caller's loop everything
 * else, the replies that give back the connections it waits for among it.
 */
static void tend(dlock__reactor *r)
{
	int64_t until, watch_due;

	dlock__mutex_lock(&r->mu);
	run_due(r);
	if (r->checks)
		dlock__reactor_notify_watchers(r);
	dlock__reactor_sync_subs(r);
	until = next_due(r);
	dlock__mutex_unlock(&r->mu);
	if (r->stopping)
		return;
	watch_due = dlock__watch_tend(&r->watch, r->loop);
	if (watch_due < until)
		until = watch_due;
	if (r->conn != NULL && dlock__conn_buffered(r->conn))
		until = 0; /* TLS has messages the socket no longer shows */
	dlock__reactor_watch_fds(r);
	dlock__timer_set(r->loop, &r->timer, until);
}

/* The Sentinel watch subscribed, or failed to: tend it again. */
static void watch_changed(void *arg)
{
	dlock__reactor_wake(arg);
}

static void tend_task(dlock__task *t)
{
	tend((dlock__reactor *)((char *)t - offsetof(dlock__reactor, tend_task)));
}

static void tend_timer(dlock__timer *t)
{
	dlock__reactor *r = (dlock__reactor *)((char *)t - offsetof(dlock__reactor, timer));

	if (r->conn != NULL && dlock__conn_buffered(r->conn))
		dlock__reactor_read_messages(r);
	tend(r);
}

/* The client's own thread, when no loop of the caller's drives it. */
static void *reactor_main(void *arg)
{
	dlock__reactor *r = arg;

	while (!r->stopping)
		dlock__loop_run_once(r->loop, DLOCK__NEVER);
	if (r->self_stopped) { /* its client was freed from one of its callbacks */
		dlock__loop_destroy(&r->own_loop);
		pthread_mutex_destroy(&r->mu);
		dlock__free(r);
	}
	return NULL;
}

int dlock__reactor_start(dlock__reactor **out, const dlock__node *node, dlock__loop *loop)
{
	dlock__reactor *r;
	int rc;

	*out = NULL;
	r = dlock__calloc(1, sizeof(*r));
	if (r == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "%s: out of memory", node->label);
	r->node = node;
	dlock__watch_init(&r->watch, node->sentinel, watch_changed, r);
	r->job_due = DLOCK__NEVER;
	r->flush_due = DLOCK__NEVER;
	r->conn_io.slot = r->watch_io.slot = (size_t)-1;
	dlock__task_init(&r->tend_task, tend_task);
	dlock__task_init(&r->lookup_task, dlock__reactor_lookup_over);
	dlock__timer_init(&r->timer, tend_timer);
	if (pthread_mutex_init(&r->mu, NULL) != 0) {
		dlock__free(r);
		return dlock__seterr(DLOCK_ESYS, "pthread_mutex_init failed");
	}
	r->loop = loop;
	if (loop == NULL) {
		r->loop = &r->own_loop;
		rc = dlock__loop_init(&r->own_loop);
		if (rc == 0) {
			rc = pthread_create(&r->thread, NULL, reactor_main, r);
			if (rc != 0) {
				dlock__loop_destroy(&r->own_loop);
				rc = dlock__seterr(DLOCK_ESYS, "pthread_create: %s", strerror(rc));
			}
		}
		if (rc < 0) {
			pthread_mutex_destroy(&r->mu);
			dlock__free(r);
			return rc;
		}
		r->own_thread = 1;
	}
	*out = r;
	return 0;
}

void dlock__reactor_stop(dlock__reactor *r, int forked)
{
	dlock__sub *s;
	int self;

	if (r == NULL)
		return;
	/* From its own thread (a callback freed its client, at the end of that
	 * turn): the thread cannot join itself; it ends and frees what is left. */
	self = !forked && r->own_thread && pthread_equal(pthread_self(), r->thread);
	r->stopping = 1;
	if (!forked && r->own_thread && !self) {
		dlock__reactor_wake(r);
		pthread_join(r->thread, NULL);
	}
	if (r->job_stop != NULL)
		r->job_stop(r->job_arg, forked);
	if (r->flush_stop != NULL)
		r->flush_stop(r->flush_arg, forked);
	while ((s = r->subs) != NULL) {
		r->subs = s->next;
		dlock__sub_free(s);
	}
	if (!forked) {
		dlock__io_stop(r->loop, &r->conn_io);
		dlock__io_stop(r->loop, &r->watch_io);
		dlock__timer_stop(r->loop, &r->timer);
		dlock__loop_unpost(r->loop, &r->tend_task);
	}
	dlock__conn_close(r->conn);
	r->conn = NULL;
	dlock__watch_close(&r->watch, forked);
	if (self) {
		r->self_stopped = 1;
		pthread_detach(r->thread);
		return;
	}
	pthread_mutex_destroy(&r->mu);
	if (r->own_thread)
		dlock__loop_destroy(&r->own_loop);
	dlock__free(r);
}

void dlock__reactor_set_job(dlock__reactor *r, dlock__reactor_job job,
		void (*stop)(void *arg, int forked), void *arg)
{
	dlock__mutex_lock(&r->mu);
	r->job = job;
	r->job_stop = stop;
	r->job_arg = arg;
	dlock__mutex_unlock(&r->mu);
}

void dlock__reactor_schedule(dlock__reactor *r, int64_t due)
{
	int sooner;

	dlock__mutex_lock(&r->mu);
	sooner = due < r->job_due;
	if (sooner)
		r->job_due = due;
	dlock__mutex_unlock(&r->mu);
	if (sooner)
		dlock__reactor_wake(r);
}

void dlock__reactor_set_flush(dlock__reactor *r, void (*flush)(void *arg),
		void (*stop)(void *arg, int forked), void *arg)
{
	dlock__mutex_lock(&r->mu);
	r->flush = flush;
	r->flush_stop = stop;
	r->flush_arg = arg;
	dlock__mutex_unlock(&r->mu);
}

void dlock__reactor_flush_at(dlock__reactor *r, int64_t due)
{
	int sooner;

	if (r == NULL)
		return; /* stopped: the client is being freed */
	dlock__mutex_lock(&r->mu);
	sooner = due < r->flush_due;
	if (sooner)
		r->flush_due = due;
	dlock__mutex_unlock(&r->mu);
	if (sooner)
		dlock__reactor_wake(r);
}

int dlock__reactor_own_thread(const dlock__reactor *r)
{
	return r->own_thread;
}

struct dlock_loop *dlock__reactor_loop(const dlock__reactor *r)
{
	return r->loop;
}
