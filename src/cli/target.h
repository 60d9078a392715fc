/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lock a `dlock` command works on: one name on the configured nodes, in
 * one of the three modes, behind one small interface.
 */
#ifndef DLOCK_CLI_TARGET_H
#define DLOCK_CLI_TARGET_H

#include <stdio.h>

#include <dlock.h>

/* Exit statuses (sysexits.h names, as SPEC §7 lists them). */
#define EXIT_NOT_OWNER 1
#define EXIT_USAGE 64
#define EXIT_WRONGTYPE 65 /* EX_DATAERR: the key is not a lock (another library's?) */
#define EXIT_UNAVAILABLE 69
#define EXIT_LOST 70
#define EXIT_CONFLICT 75

/* How long a wait keeps trying a server that has not answered once (a
 * typo'd host, a port nothing listens on): the client option
 * first_contact_timeout_ms of every command. --help and dlock(1) promise
 * the command ends within 5 s: the rest is room for starting, the first
 * attempt and exiting on a busy machine. */
#define CLI_FIRST_CONTACT_MS 4000

typedef enum cli_mode { MODE_RLOCK, MODE_REDLOCK, MODE_MULTILOCK } cli_mode;

/* What the global options say. */
typedef struct cli_config {
	char **nodes; /* URIs */
	size_t n;
	const char *nodes_from; /* where they came from: "-n", "--nodes", "DLOCK_NODES", ... */
	cli_mode mode;
	int mode_given;
	int64_t timeout_ms; /* per-command deadline (also used to connect) */
	int64_t watchdog_ms;
	int64_t restart_guard_ms; /* -1 = default */
	int conflict_exit;
	int quiet;               /* -q: nothing on stderr when the lock is busy */
	int fenced;              /* fenced locks: acquisitions return a token */
	int fair;                /* fair locks: waiters served in the order they asked */
	int rw_half;             /* -s/-x: DLOCK_LOCK_READ or DLOCK_LOCK_WRITE (0: an RLock) */
	int64_t permits;         /* run -c N: a permit of an expirable semaphore of N (0: a lock) */
	int sync_replicas;       /* replicas that must acknowledge an acquisition (0: off) */
	int64_t sync_timeout_ms; /* how long an acquisition waits for them */
	int sync_aof;            /* replicas that must fsync it, the primary too (0: off) */
	int watch_force_unlock;  /* holds hear a force unlock at once (run) */
	/* rediss:// nodes: the client options' TLS fields (NULL/0: defaults) */
	const char *tls_ca, *tls_ca_dir, *tls_cert, *tls_key, *tls_server_name;
	int tls_insecure;
	/* redis+sentinel:// nodes: the sentinels' own credentials (NULL: none) */
	char *sentinel_user, *sentinel_password;
	/* run/acquire register who they are (holder.c): the client options' label
	 * and command (NULL: not registered) */
	const char *label, *command;
	/* run/acquire/hold --metrics-textfile (metrics.c); NULL: none */
	const char *metrics_path;
} cli_config;

typedef struct cli_target {
	cli_mode mode;
	int fenced;
	size_t n;
	const char *name;
	dlock_client **clients;
	dlock_lock **locks;
	dlock_redlock *redlock;
	dlock_multilock *multilock;
	/* run -c N: one permit of the expirable semaphore `name` (target_permit.c) */
	dlock_semaphore *sem;
	int64_t permits;
	int permits_checked; /* the count was set, or found to be N */
	char permit_id[DLOCK_PERMIT_ID_SIZE];
	int quiet;     /* -q: a busy lock is not reported */
	size_t failed_node; /* cli_target_open: 1 + the node whose client did not open (0: none) */
	char err[256]; /* the CLI's own message for the last failure ("" none) */
} cli_target;

/* Open clients and handles (lazily connected: a dead node is a failed vote). */
int cli_target_open(cli_target *t, const cli_config *cfg, const char *name);
/* Why cli_target_open failed, naming the node that did not open (a bad
 * URI) and where it came from (-n, DLOCK_NODES): buf, or the library's line. */
const char *cli_target_open_errmsg(const cli_target *t, const cli_config *cfg, char *buf,
		size_t len);
void cli_target_close(cli_target *t);

/* The owner a `run` uses: "<first client's uuid>:<pid>", Redisson's form. */
void cli_target_default_owner(const cli_target *t, char owner[DLOCK_OWNER_SIZE]);
/* What the job is told it holds (DLOCK_OWNER): owner, or the permit's id. */
const char *cli_target_job_owner(const cli_target *t, const char *owner);
/* "lock" or "permit of semaphore", for messages: `<what> "NAME" ...`. */
const char *cli_target_what(const cli_target *t);

/* *token is set for fenced targets (cfg.fenced), else left alone. */
int cli_target_acquire(cli_target *t, const char *owner, int64_t wait_ms, int64_t lease_ms,
		int64_t *validity_ms, int64_t *token);
int cli_target_release(cli_target *t, const char *owner);
/* How long the hold is certain to last without another renewal (*ms);
 * 0 held, DLOCK_ELOST, DLOCK_ENOTOWNER (local state, no traffic). */
int cli_target_validity(cli_target *t, const char *owner, int64_t *ms);
/* Call fn(reason, arg) on a background thread when the hold is lost
 * (reason: dlock_lost_reason). */
int cli_target_on_lost(cli_target *t, void (*fn)(int reason, void *arg), void *arg);
/* The last failure's line, with cli_hint's advice. */
const char *cli_target_errmsg(const cli_target *t);
/* msg, or a copy (per thread, until the next call) that tells what to do
 * when the server refused dlock for want of the right password. */
const char *cli_hint(const char *msg);
/* Make a wait in progress on another thread return DLOCK_ECANCELED. */
void cli_target_cancel(cli_target *t);
/* "dlock: <command>: lock NAME not acquired: <why>" on stderr, in the words
 * a user needs (a key of the wrong type says so); nothing under -q when
 * others hold it (DLOCK_ENOTACQUIRED). */
void cli_report_failure(const char *command, const cli_target *t, int rc);
size_t cli_target_quorum(const cli_target *t);
/* *locked = 1 when anyone holds NAME (a quorum of nodes, in RedLock mode);
 * 0 or the query's error. */
int cli_target_is_locked(cli_target *t, int *locked);

/* run/acquire (holder.c): cfg's label (--label, else "") and command (run's
 * CMD and its arguments, cut at 200 bytes; else the command's name). */
void cli_holder_configure(cli_config *cfg, const char *command, const char *label,
		char *const *argv);
/* After a failure to acquire: "; held by <who> for <how long>" (or the
 * owner) in buf, from a look at the nodes; "" when no one holds it. */
void cli_holder_after_failure(const cli_target *t, char *buf, size_t len);

/* `status`: print a table, or JSON; returns an exit status. */
int cli_target_status(cli_target *t, int json, FILE *out);
/* `unlock --force`: delete the lock on every node; returns an exit status. */
int cli_target_force(cli_target *t, FILE *out);

/* The exit status for a failed acquire. */
int cli_exit_for(int rc, const cli_config *cfg);

/* The permit half (target_permit.c): what the functions above do for a
 * target with a semaphore. */
int cli_permit_open(cli_target *t, const cli_config *cfg);
int cli_permit_acquire(cli_target *t, int64_t wait_ms, int64_t lease_ms, int64_t *validity_ms);
int cli_permit_release(cli_target *t);
int cli_permit_validity(cli_target *t, int64_t *ms);
int cli_permit_on_lost(cli_target *t, void (*fn)(int reason, void *arg), void *arg);

#endif
