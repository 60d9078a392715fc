/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test harness: real redis-server processes on free 127.0.0.1 ports.
 *
 * Servers run without persistence, in a private temporary directory, and are
 * children of the test process with PR_SET_PDEATHSIG=SIGKILL, so a test that
 * crashes or is killed on timeout (Criterion runs each test in its own
 * process) leaves no server behind. Start servers from the test's main thread
 * (the death signal follows the thread that forked). rh_cleanup_all() also
 * runs at exit.
 */
#ifndef DLOCK_REDIS_HARNESS_H
#define DLOCK_REDIS_HARNESS_H

#include <stdint.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rh_server rh_server;

/*
 * Start one server on a free loopback port and wait until it answers PING
 * (bounded: 10 s). `extra` is a NULL-terminated list of extra command-line
 * arguments for redis-server (e.g. {"--requirepass", "s3cret", NULL}), or
 * NULL. Returns NULL (with a message on stderr) when it cannot start.
 */
rh_server *rh_server_start(const char *const *extra);

/*
 * Start a sentinel (redis-server CONF --sentinel) whose config file holds
 * `conf_lines` (NULL-terminated; e.g. "sentinel monitor m 127.0.0.1 6379 2");
 * the sentinel rewrites it as it learns. `extra` as for rh_server_start()
 * (its --requirepass is used by rh_command).
 */
rh_server *rh_sentinel_start(const char *const *extra, const char *const *conf_lines);

/* Start n servers into out[0..n-1]; returns 0, or -1 after stopping any it started. */
int rh_servers_start(rh_server **out, int n, const char *const *extra);

int rh_server_port(const rh_server *s);

/* The version of the redis-server the harness starts ($DLOCK_TEST_REDIS_SERVER
 * when set, else the one CMake found), as
 * major * 10000 + minor * 100 + patch (7.0.15: 70015); 0 when unknown. For
 * tests of what only some versions do (WAITAOF: 7.2). */
int rh_server_version(void);

/* A loopback port free right now (for a second listener, e.g. --tls-port);
 * another process may take it before it is used: retry on failure. */
int rh_free_port(void);
pid_t rh_server_pid(const rh_server *s);       /* 0 when not running */
const char *rh_server_uri(const rh_server *s); /* "redis://127.0.0.1:PORT" */
/* The server's private directory (its --dir: log, nodes.conf), removed by rh_server_free. */
const char *rh_server_dir(const rh_server *s);

/* SIGKILL and reap; the port is free afterwards. 0 or -1. */
int rh_server_kill(rh_server *s);
/* SIGSTOP / SIGCONT: the process stays, its sockets stop answering. */
int rh_server_pause(rh_server *s);
int rh_server_resume(rh_server *s);
/* Start again on the same port (after kill), empty, and wait until it answers. */
int rh_server_restart(rh_server *s);

/*
 * Start a replica of `primary` (--replicaof, loopback) and wait until the
 * primary lists it online (bounded: 20 s). Free it as any server; pause it
 * with rh_server_pause() to make WAIT fall short. NULL when it cannot start.
 */
rh_server *rh_replica_start(rh_server *primary);

/* Wait until `primary` lists at least n replicas online: 0, or -1 after timeout_ms. */
int rh_wait_replicas(rh_server *primary, int n, int timeout_ms);

/* Kill (if running), reap, remove its directory, free. Accepts NULL. */
void rh_server_free(rh_server *s);

/* Kill every server this process started (also run at exit). */
void rh_cleanup_all(void);

/*
 * Run one command on the server over a cached hiredis connection (made on
 * first use, remade after an error), for setting up and asserting on Redis
 * state. Returns the reply (caller frees with freeReplyObject) or NULL on a
 * transport error. Not for paused servers (1 s timeout).
 */
redisReply *rh_command(rh_server *s, const char *fmt, ...);
redisReply *rh_command_argv(rh_server *s, int argc, const char **argv, const size_t *argvlen);

/* Convenience: run a command whose reply is an integer; INT64_MIN on error or other type. */
int64_t rh_command_int(rh_server *s, const char *fmt, ...);

/* CLOCK_MONOTONIC in milliseconds, for asserting on elapsed time. */
int64_t rh_now_ms(void);

#ifdef __cplusplus
}
#endif

#endif
