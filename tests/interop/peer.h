/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The real Redisson in a child JVM (redisson/src/main/java/dlock/interop/Peer.java),
 * driven line by line: a request names a worker thread (Redisson's lock owner
 * is the client id and the thread), a command and its arguments; the reply
 * carries the value and System.nanoTime() around the call, which on Linux is
 * CLOCK_MONOTONIC, so jp_now_ns() times compare with it directly.
 *
 * Every function fails the calling Criterion test on a broken peer (no reply
 * in time, the JVM gone); a Redisson exception is a reply with ok == 0.
 */
#ifndef DLOCK_TEST_INTEROP_PEER_H
#define DLOCK_TEST_INTEROP_PEER_H

#include <stdint.h>

typedef struct java_peer java_peer;

typedef struct jp_reply {
	int ok;              /* 0: Redisson threw; value holds the exception */
	char value[400];     /* "-", "true", a count, a token, an owner, ... */
	int64_t t_start_ns;  /* CLOCK_MONOTONIC just before the call */
	int64_t t_end_ns;    /* and just after it returned */
} jp_reply;

/* Start the JVM on the servers (comma-separated redis:// URIs; multi and red
 * locks span all of them), or on one Redis Cluster (a redis+cluster:// URI,
 * e.g. rh_cluster_seed_uri(): Redisson in cluster mode, sharded pub/sub as it
 * chooses) with Redisson's lockWatchdogTimeout = watchdog_ms;
 * returns once Redisson is connected and warmed up. The class path comes from
 * DLOCK_REDISSON_CLASSPATH, which tests/interop/run.sh sets. */
java_peer *jp_start(const char *servers, int64_t watchdog_ms);

/* Ask the JVM to quit and reap it (SIGKILL after 10 s). NULL is a no-op. */
void jp_stop(java_peer *p);

/* Kill the JVM with SIGKILL, as a crash would (no unlock, no shutdown: its
 * connections just drop), and reap it. NULL is a no-op. */
void jp_kill(java_peer *p);

/* The Redisson version the peer runs, e.g. "3.52.0". */
const char *jp_version(const java_peer *p);

/* Send "COMMAND ARGS" to WORKER without waiting; returns the request's number. */
long jp_send(java_peer *p, const char *worker, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Wait up to timeout_ms for request seq's reply: 1 with *out filled, 0 on
 * timeout (the reply may come later: wait again). */
int jp_poll(java_peer *p, long seq, int64_t timeout_ms, jp_reply *out);

/* jp_poll that fails the test when the reply does not come in 30 s. */
void jp_wait(java_peer *p, long seq, jp_reply *out);

/* Send and wait; fails the test unless Redisson returned (no exception).
 * Returns out->value. */
const char *jp_ok(java_peer *p, jp_reply *out, const char *worker, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* CLOCK_MONOTONIC in ns: the clock of jp_reply's times. */
int64_t jp_now_ns(void);

#endif
