/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "dlock/version.h"
#include "core/base/error.h"

static _Thread_local char thread_msg[DLOCK__ERRMSG_MAX];
static _Thread_local char thread_copy[DLOCK__ERRMSG_MAX];

const char *dlock_strerror(int error)
{
	switch (error) {
	case DLOCK_OK:
		return "success";
	case DLOCK_EINVAL:
		return "invalid argument";
	case DLOCK_ENOMEM:
		return "out of memory";
	case DLOCK_ECONN:
		return "connection failed";
	case DLOCK_ETIMEDOUT:
		return "timed out";
	case DLOCK_EAUTH:
		return "authentication failed";
	case DLOCK_ESERVER:
		return "server error";
	case DLOCK_EWRONGTYPE:
		return "key holds a value that is not a lock";
	case DLOCK_EPROTO:
		return "unexpected reply";
	case DLOCK_ENOTACQUIRED:
		return "lock held by another owner";
	case DLOCK_ENOTOWNER:
		return "lock not held by this owner";
	case DLOCK_ELOST:
		return "lock lost";
	case DLOCK_ENOQUORUM:
		return "too few nodes could vote for a quorum";
	case DLOCK_EEXPIRED:
		return "lock expired while acquiring";
	case DLOCK_ESYS:
		return "system call failed";
	case DLOCK_ECANCELED:
		return "wait canceled";
	case DLOCK_EFORKED:
		return "client opened before fork(); open a new one in the child";
	case DLOCK_EBUSY:
		return "still in use";
	case DLOCK_ENOSYNC:
		return "too few replicas acknowledged the acquisition";
	case DLOCK_EDUPLICATE:
		return "one server listed twice";
	default:
		return "unknown error";
	}
}

const char *dlock_lost_reason_str(int reason)
{
	switch (reason) {
	case DLOCK_LOST_GONE:
		return "the hold was gone from the server";
	case DLOCK_LOST_UNREACHABLE:
		return "no renewal reached the server before the lease ran out";
	case DLOCK_LOST_FORCED:
		return "force-unlocked";
	case DLOCK_LOST_REPLACED:
		return "the key was replaced by a value that is not a lock";
	default:
		return "unknown";
	}
}

const char *dlock_version(void)
{
	return DLOCK_VERSION_STRING;
}

const char *dlock_errmsg_last(void)
{
	return thread_msg;
}

size_t dlock_errmsg_last_r(char *buf, size_t len)
{
	return dlock__copy_msg(buf, len, thread_msg);
}

size_t dlock__copy_msg(char *buf, size_t len, const char *msg)
{
	size_t n = strlen(msg);

	if (buf != NULL && len > 0)
		snprintf(buf, len, "%s", msg);
	return n;
}

const char *dlock__errmsg_thread(void)
{
	return thread_msg;
}

int dlock__seterr(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(thread_msg, sizeof(thread_msg), fmt, ap);
	va_end(ap);
	return code;
}

int dlock__seterr_node(int code, const char *node, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(thread_msg, sizeof(thread_msg), "%s: ", node ? node : "?");

	if (n < 0 || (size_t)n >= sizeof(thread_msg))
		return code;
	va_start(ap, fmt);
	vsnprintf(thread_msg + n, sizeof(thread_msg) - (size_t)n, fmt, ap);
	va_end(ap);
	return code;
}

int dlock__errbuf_init(dlock__errbuf *eb)
{
	eb->msg[0] = '\0';
	return pthread_mutex_init(&eb->mu, NULL) == 0 ? 0 : DLOCK_ESYS;
}

void dlock__errbuf_destroy(dlock__errbuf *eb)
{
	pthread_mutex_destroy(&eb->mu);
}

int dlock__errbuf_record(dlock__errbuf *eb, int code)
{
	if (code < 0 && eb != NULL) {
		dlock__mutex_lock(&eb->mu);
		memcpy(eb->msg, thread_msg, sizeof(eb->msg));
		dlock__mutex_unlock(&eb->mu);
	}
	return code;
}

size_t dlock__errbuf_read_r(char *buf, size_t len, const dlock__errbuf *eb)
{
	dlock__errbuf *m = (dlock__errbuf *)eb; /* the mutex is not part of the value */
	size_t n;

	if (eb == NULL)
		return dlock__copy_msg(buf, len, "");
	dlock__mutex_lock(&m->mu);
	n = dlock__copy_msg(buf, len, m->msg);
	dlock__mutex_unlock(&m->mu);
	return n;
}

const char *dlock__errbuf_read(const dlock__errbuf *eb)
{
	dlock__errbuf *m = (dlock__errbuf *)eb; /* the mutex is not part of the value */

	if (eb == NULL)
		return "";
	dlock__mutex_lock(&m->mu);
	memcpy(thread_copy, m->msg, sizeof(thread_copy));
	dlock__mutex_unlock(&m->mu);
	return thread_copy;
}

void dlock__mutex_lock(pthread_mutex_t *mu)
{
	if (pthread_mutex_lock(mu) != 0)
		abort();
}

void dlock__mutex_unlock(pthread_mutex_t *mu)
{
	if (pthread_mutex_unlock(mu) != 0)
		abort();
}

int dlock__cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t attr;
	int rc;

	if (pthread_condattr_init(&attr) != 0)
		return DLOCK_ESYS;
	rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(cv, &attr);
	pthread_condattr_destroy(&attr);
	return rc == 0 ? 0 : DLOCK_ESYS;
}
