/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: error messages.
 *
 * Lower layers describe a failure with dlock__seterr(), which writes the
 * calling thread's last message (dlock_errmsg_last()). The public function
 * that returns the code copies it onto its handle with dlock__errbuf_record(),
 * so the handle keeps the message of its last failure for any thread to read.
 */
#ifndef DLOCK_CORE_ERROR_H
#define DLOCK_CORE_ERROR_H

#include <pthread.h>

#define DLOCK__ERRMSG_MAX 512

typedef struct dlock__errbuf {
	pthread_mutex_t mu;
	char msg[DLOCK__ERRMSG_MAX];
} dlock__errbuf;

/* Format the thread's last message; returns code, so: return dlock__seterr(...). */
int dlock__seterr(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like dlock__seterr(), for a failure on `node` ("host:port: ..."). */
int dlock__seterr_node(int code, const char *node, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));

/* The calling thread's last message. */
const char *dlock__errmsg_thread(void);

int dlock__errbuf_init(dlock__errbuf *eb);
void dlock__errbuf_destroy(dlock__errbuf *eb);

/* When code < 0, copy the thread's last message onto the handle. Returns code. */
int dlock__errbuf_record(dlock__errbuf *eb, int code);

/* A thread-owned copy of the handle's message. */
const char *dlock__errbuf_read(const dlock__errbuf *eb);
/* The same, copied into buf (the _r getters); returns the message's length. */
size_t dlock__errbuf_read_r(char *buf, size_t len, const dlock__errbuf *eb);
/* Copy msg into buf as snprintf would; returns strlen(msg). */
size_t dlock__copy_msg(char *buf, size_t len, const char *msg);

/* Lock/unlock that abort on failure: a failing mutex is a bug (libuv does the same). */
void dlock__mutex_lock(pthread_mutex_t *mu);
void dlock__mutex_unlock(pthread_mutex_t *mu);

/* A condition variable that waits on CLOCK_MONOTONIC. */
int dlock__cond_init(pthread_cond_t *cv);

#endif
