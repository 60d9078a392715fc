/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A host name looked up within a deadline (see resolve.h). The lookup runs
 * on a detached thread; whichever of it and the caller finishes last frees
 * the shared state, so a caller that gave up returns at its deadline and
 * the late answer is dropped. A caller on a loop is told by a task the
 * thread posts there; one that drops the lookup first is told nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/base/sys.h"
#include "core/loop/loop.h"
#include "core/net/resolve.h"
#include "core/base/time.h"

typedef struct dlock__lookup {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int users; /* the caller and the thread: the last one out frees it */
	int done, rc;
	struct addrinfo *res;
	dlock__loop *loop; /* told when done: `ready` posted there (NULL: nobody) */
	dlock__task *ready;
	char port[16];
	char host[];
} lookup;

static void hints_for(struct addrinfo *hints, int flags)
{
	memset(hints, 0, sizeof(*hints));
	hints->ai_family = AF_UNSPEC;
	hints->ai_socktype = SOCK_STREAM;
	hints->ai_flags = AI_NUMERICSERV | flags;
}

/* One user leaves (l->mu held); the last one frees what is left. */
static void leave(lookup *l)
{
	int last = --l->users == 0;

	dlock__mutex_unlock(&l->mu);
	if (!last)
		return;
	if (l->res != NULL)
		dlock__sys_get()->resolve_free(l->res);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	dlock__free(l);
}

static void *lookup_main(void *arg)
{
	lookup *l = arg;
	struct addrinfo hints, *res = NULL;
	int rc;

	hints_for(&hints, 0);
	rc = dlock__sys_get()->resolve(l->host, l->port, &hints, &res);
	dlock__mutex_lock(&l->mu);
	l->rc = rc;
	l->res = rc == 0 ? res : NULL;
	l->done = 1;
	pthread_cond_signal(&l->cv);
	if (l->loop != NULL)
		dlock__loop_post(l->loop, l->ready); /* under mu: a drop waits for it */
	leave(l);
	return NULL;
}

static lookup *lookup_new(const char *host, const char *port)
{
	size_t len = strlen(host);
	lookup *l = dlock__calloc(1, sizeof(*l) + len + 1);

	if (l == NULL)
		return NULL;
	if (pthread_mutex_init(&l->mu, NULL) != 0) {
		dlock__free(l);
		return NULL;
	}
	if (dlock__cond_init(&l->cv) < 0) {
		pthread_mutex_destroy(&l->mu);
		dlock__free(l);
		return NULL;
	}
	memcpy(l->host, host, len + 1);
	snprintf(l->port, sizeof(l->port), "%s", port);
	l->users = 2;
	return l;
}

/* Start the lookup's thread; 0 when it could not start (l is freed then).
 * It takes no signal: those are the application's threads' to handle. */
static int lookup_start(lookup *l)
{
	pthread_attr_t attr;
	pthread_t tid;
	sigset_t all, old;
	int started = 0;

	if (pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		started = pthread_create(&tid, &attr, lookup_main, l) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
	}
	if (!started) {
		dlock__mutex_lock(&l->mu);
		l->users = 1;
		leave(l);
	}
	return started;
}

/* Wait for the thread's answer until deadline; the caller leaves either way. */
static int lookup_wait(lookup *l, int64_t deadline, struct addrinfo **out, const char **why)
{
	struct timespec ts;
	int rc;

	dlock__deadline_timespec(deadline, &ts);
	dlock__mutex_lock(&l->mu);
	while (!l->done && dlock__now_ms() < deadline)
		if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
			break;
	if (!l->done) {
		*why = "no answer before the connect timeout";
		rc = DLOCK_ETIMEDOUT;
	} else if (l->rc != 0) {
		*why = gai_strerror(l->rc);
		rc = DLOCK_ECONN;
	} else {
		*out = l->res;
		l->res = NULL;
		rc = 0;
	}
	leave(l);
	return rc;
}

int dlock__resolve(const char *host, int port, int64_t deadline, struct addrinfo **out,
		const char **why)
{
	struct addrinfo hints;
	char service[16];
	lookup *l;
	int rc;

	*out = NULL;
	snprintf(service, sizeof(service), "%d", port);
	hints_for(&hints, AI_NUMERICHOST);
	rc = dlock__sys_get()->resolve(host, service, &hints, out);
	if (rc != EAI_NONAME) {
		*why = rc != 0 ? gai_strerror(rc) : NULL;
		return rc == 0 ? 0 : DLOCK_ECONN;
	}
	if (dlock__now_ms() >= deadline) {
		*why = "no time left before the connect timeout";
		return DLOCK_ETIMEDOUT;
	}
	/* A name: out of memory or no thread, look it up here, unbounded. */
	if ((l = lookup_new(host, service)) == NULL || !lookup_start(l)) {
		hints_for(&hints, 0);
		rc = dlock__sys_get()->resolve(host, service, &hints, out);
		*why = rc != 0 ? gai_strerror(rc) : NULL;
		return rc == 0 ? 0 : DLOCK_ECONN;
	}
	return lookup_wait(l, deadline, out, why);
}

/* A numeric address, read at once: 0 (*out set), DLOCK_ECONN, or 1 (a name). */
static int numeric(const char *host, const char *service, struct addrinfo **out, const char **why)
{
	struct addrinfo hints;
	int rc;

	hints_for(&hints, AI_NUMERICHOST);
	rc = dlock__sys_get()->resolve(host, service, &hints, out);
	if (rc == EAI_NONAME)
		return 1;
	*why = rc != 0 ? gai_strerror(rc) : NULL;
	return rc == 0 ? 0 : DLOCK_ECONN;
}

int dlock__resolve_start(const char *host, int port, dlock__loop *loop, dlock__task *ready,
		struct addrinfo **out, dlock__lookup **started, const char **why)
{
	char service[16];
	lookup *l;
	int rc;

	*out = NULL;
	*started = NULL;
	snprintf(service, sizeof(service), "%d", port);
	if ((rc = numeric(host, service, out, why)) <= 0)
		return rc;
	/* Told from another thread: the loop needs its wake-up descriptor. */
	if (dlock__loop_wakeable(loop) < 0 || (l = lookup_new(host, service)) == NULL)
		return dlock__resolve(host, port, DLOCK__NEVER, out, why);
	l->loop = loop;
	l->ready = ready;
	if (!lookup_start(l))
		return dlock__resolve(host, port, DLOCK__NEVER, out, why);
	*started = l;
	return 0;
}

int dlock__resolve_take(dlock__lookup *l, struct addrinfo **out, const char **why)
{
	int rc;

	dlock__mutex_lock(&l->mu);
	if (!l->done) {
		dlock__mutex_unlock(&l->mu);
		return 1;
	}
	if (l->rc != 0) {
		*why = gai_strerror(l->rc);
		rc = DLOCK_ECONN;
	} else {
		*out = l->res;
		l->res = NULL;
		rc = 0;
	}
	l->loop = NULL;
	leave(l);
	return rc;
}

int dlock__resolve_over(dlock__lookup *l)
{
	int done;

	dlock__mutex_lock(&l->mu);
	done = l->done;
	dlock__mutex_unlock(&l->mu);
	return done;
}

void dlock__resolve_drop(dlock__lookup *l)
{
	dlock__loop *loop;
	dlock__task *ready;

	if (l == NULL)
		return;
	dlock__mutex_lock(&l->mu);
	loop = l->loop;
	ready = l->ready;
	l->loop = NULL;
	leave(l);
	if (loop != NULL)
		dlock__loop_unpost(loop, ready); /* posted already: not run now */
}
