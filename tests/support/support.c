/* SPDX-License-Identifier: BSD-3-Clause */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

void dl_sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Entries of a /proc directory, or -1. */
static int dir_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int dl_count_fds(void)
{
	int n = dir_entries("/proc/self/fd");

	return n < 0 ? -1 : n - 1; /* the directory's own descriptor */
}

int dl_count_threads(void)
{
	return dir_entries("/proc/self/task");
}

void dl_gate_init(dl_gate *g)
{
	pthread_condattr_t a;

	memset(g, 0, sizeof *g);
	pthread_mutex_init(&g->mu, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cv, &a);
	pthread_condattr_destroy(&a);
}

void dl_gate_destroy(dl_gate *g)
{
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
}

void dl_gate_add(dl_gate *g, int delta)
{
	pthread_mutex_lock(&g->mu);
	g->value += delta;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

int dl_gate_get(dl_gate *g)
{
	int v;

	pthread_mutex_lock(&g->mu);
	v = g->value;
	pthread_mutex_unlock(&g->mu);
	return v;
}

static int64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int dl_gate_wait(dl_gate *g, int want, int64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L };
	int v;

	pthread_mutex_lock(&g->mu);
	while (g->value < want && monotonic_ms() < deadline)
		if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) == ETIMEDOUT)
			break;
	v = g->value;
	pthread_mutex_unlock(&g->mu);
	return v;
}

void dl_failures_init(dl_failures *f)
{
	memset(f, 0, sizeof *f);
	pthread_mutex_init(&f->mu, NULL);
}

void dl_failures_record(dl_failures *f, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&f->mu);
	if (f->count++ == 0) {
		va_start(ap, fmt);
		vsnprintf(f->first, sizeof f->first, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&f->mu);
}

int dl_failures_get(dl_failures *f, char *first, size_t len)
{
	int n;

	pthread_mutex_lock(&f->mu);
	n = f->count;
	snprintf(first, len, "%s", f->first);
	pthread_mutex_unlock(&f->mu);
	return n;
}

void dl_lost_init(dl_lost *r)
{
	pthread_condattr_t a;

	memset(r, 0, sizeof *r);
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &a);
	pthread_condattr_destroy(&a);
}

void dl_lost_destroy(dl_lost *r)
{
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
}

void dl_lost_note(void *ud, const dlock_lost_event *ev)
{
	dl_lost *r = ud;
	int64_t now = monotonic_ms();

	pthread_mutex_lock(&r->mu);
	if (r->fired++ == 0) {
		r->at_ms = now;
		r->reason = (int)ev->reason;
		snprintf(r->name, sizeof r->name, "%s", ev->name ? ev->name : "(null)");
		snprintf(r->owner, sizeof r->owner, "%s", ev->owner ? ev->owner : "(null)");
		snprintf(r->node, sizeof r->node, "%s", ev->node ? ev->node : "(null)");
	}
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

int dl_lost_wait(dl_lost *r, int64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L };
	int fired;

	pthread_mutex_lock(&r->mu);
	while (r->fired == 0 && monotonic_ms() < deadline)
		if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT)
			break;
	fired = r->fired;
	pthread_mutex_unlock(&r->mu);
	return fired;
}

int dl_lost_count(dl_lost *r)
{
	int n;

	pthread_mutex_lock(&r->mu);
	n = r->fired;
	pthread_mutex_unlock(&r->mu);
	return n;
}

void dl_log_line(int fd, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	ssize_t w;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof buf) {
		n = (int)sizeof buf - 1;
		buf[n - 1] = '\n';
	}
	w = write(fd, buf, (size_t)n);
	(void)w;
}

int dl_read_counter(int fd)
{
	int v = -1;

	if (pread(fd, &v, sizeof v, 0) != (ssize_t)sizeof v)
		return -1;
	return v;
}

int dl_reap_exited(const pid_t *kids, int *exited, int *status, int n)
{
	int reaped = 0;

	for (int i = 0; i < n; i++)
		if (!exited[i] && waitpid(kids[i], &status[i], WNOHANG) == kids[i]) {
			exited[i] = 1;
			reaped++;
		}
	return reaped;
}

const char *dl_vote_name(dlock_vote v)
{
	switch (v) {
	case DLOCK_VOTE_NONE:
		return "NONE";
	case DLOCK_VOTE_ACQUIRED:
		return "ACQUIRED";
	case DLOCK_VOTE_HELD:
		return "HELD";
	case DLOCK_VOTE_ERROR:
		return "ERROR";
	case DLOCK_VOTE_YOUNG:
		return "YOUNG";
	}
	return "?";
}

void dl_kill_unexited(const pid_t *kids, const int *exited, int *status, int n)
{
	for (int i = 0; i < n; i++)
		if (!exited[i]) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], &status[i], 0);
		}
}
