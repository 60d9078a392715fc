/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/client.h - a connection to one Redis server.
 *
 * A client holds a small pool of connections to one server, a UUID that
 * names it in lock owners (`<uuid>:<thread-id>`), and one background thread
 * that renews watchdog locks and receives unlock messages for waiters.
 * A client is safe to use from many threads at once.
 */
#ifndef DLOCK_CLIENT_H
#define DLOCK_CLIENT_H

#include "common.h"
#include "errors.h"
#include "stats.h"
#include "loop.h"
#include "async.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_client dlock_client;

#define DLOCK_CLIENT_OPTIONS_VERSION 6

/**
 * Client options. Initialise with DLOCK_CLIENT_OPTIONS_INIT or
 * dlock_client_options_init(), then change what you need. Fields are only
 * ever appended; `version` tells the library which fields you know.
 */
typedef struct dlock_client_options {
	unsigned int version;
	/** Deadline to connect and authenticate, ms (default 1000; at most 1 day). */
	int64_t connect_timeout_ms;
	/** Deadline for one command's reply, ms (default 1000; at most 1 day).
	 *  Keep it well below your leases: a hung server costs at most this much. */
	int64_t command_timeout_ms;
	/** Lease of locks held without one; renewed every third of it
	 *  (default 30000, Redisson's lockWatchdogTimeout; at most 1 day). */
	int64_t watchdog_timeout_ms;
	/** Connections kept for commands; threads beyond it wait (default 8). */
	int pool_size;
	/** 0: dlock_client_new() connects and authenticates before returning,
	 *  so a bad password or an unreachable server fails there. 1: connect
	 *  on first use (a quorum member that may be down at start), or at
	 *  dlock_client_connect(). */
	int lazy_connect;

	/* Version 2: TLS, for rediss:// URIs (ignored for others). The files
	 * are read by dlock_client_new(); the strings need not outlive it. */
	/** PEM file of the CA certificates that may sign the server's
	 *  certificate; NULL (and no tls_ca_dir): the system's CAs. */
	const char *tls_ca_file;
	/** A directory of hashed CA certificates (openssl rehash); NULL: none. */
	const char *tls_ca_dir;
	/** Mutual TLS: this client's certificate and its key (PEM); NULL: none. */
	const char *tls_cert_file;
	const char *tls_key_file;
	/** The name the server's certificate must carry (and SNI); NULL: the
	 *  URI's host, an IP address being matched as one. */
	const char *tls_server_name;
	/** 1: do NOT verify the server's certificate or name. Anyone on the
	 *  path can then impersonate the server and hand out its locks; for
	 *  tests only. Messages about such a node say "TLS, NOT verified". */
	int tls_insecure;

	/* Version 3: Sentinel and replica acknowledgement. */
	/** redis+sentinel:// URIs: the credentials the sentinels ask for (their
	 *  own `requirepass`/ACL, not the primary's); NULL: no AUTH to sentinels.
	 *  Copied by dlock_client_new(). */
	const char *sentinel_user;
	const char *sentinel_password;
	/** Replicas that must acknowledge an acquisition (WAIT) before it counts;
	 *  fewer within sync_timeout_ms: the hold is rolled back and the call
	 *  fails with DLOCK_ENOSYNC. 0 (default): do not wait for replicas.
	 *  Replication stays asynchronous: see docs/topologies.md, "Replica acknowledgement". */
	int sync_replicas;
	/** How long an acquisition waits for those acknowledgements, ms
	 *  (default 1000, Redisson's slavesSyncTimeout; at most 1 day). */
	int64_t sync_timeout_ms;

	/* Version 4: giving up on servers that never answered; noticing force unlocks. */
	/** How long a wait keeps trying servers that have not answered once since
	 *  the client was opened (a typo'd host, a port nothing listens on), ms,
	 *  from the wait's start: no try starts that could end (a connect timeout
	 *  later) past it, so the wait ends within it with DLOCK_ECONN, the
	 *  message saying "never answered since start" (a MultiLock/RedLock: once
	 *  too few members that can still answer are left for a quorum,
	 *  DLOCK_ENOQUORUM). A server that answered once and then went away is
	 *  waited for as long as the wait lasts. 0 (default): as long as the wait.
	 *  Whatever it says, failures no wait heals end a wait at once: refused
	 *  credentials, a TLS handshake refused (untrusted certificate, wrong
	 *  name), a key that is not a lock. */
	int64_t first_contact_timeout_ms;
	/** 1: every hold (and expirable permit) also listens on its lock's unlock
	 *  channel and checks itself when a message comes, so a force unlock from
	 *  anywhere is reported lost (lost callback) within a round trip instead
	 *  of at the next renewal or, for a fixed lease, not before the release.
	 *  A watchdog hold is renewed by that check; a fixed lease is only looked
	 *  at, never extended. Costs one subscription per held lock name, and one
	 *  call for the name's holds per message there (any unlock of it) and per
	 *  new subscription. Redisson's forceUnlock of a fair lock publishes where no
	 *  one listens: that one is found at the next renewal. 0 (default): off. */
	int watch_force_unlock;

	/* Version 5: the caller's event loop. */
	/** The loop (dlock/loop.h) that runs this client's background work and
	 *  asynchronous operations: the client then starts no thread of its own,
	 *  and it and its locks may only be used from the thread that drives the
	 *  loop. A blocking call on such a client drives the loop itself until
	 *  it returns. The loop must outlive the client. NULL (default): the
	 *  client runs one background thread. */
	dlock_loop *loop;

	/* Version 6: who holds it (dlock_client_holder), what locks cost (dlock/stats.h). */
	/** Non-NULL (even ""): the client registers itself on each node where it
	 *  holds something, so that others can tell who holds a lock: one key
	 *  `dlock:holder:<client UUID>` per client and node (see
	 *  dlock_client_holder) with this label, the host name, the pid,
	 *  `command` and the time of registration. It is written with the first
	 *  acquisition on a node (in the same round trip; on a cluster whose
	 *  slot for the key is another node's, by the background thread at
	 *  once), kept alive with the client's renewals while it holds anything
	 *  there, deleted when the client is freed, and expires a watchdog
	 *  timeout after the client stops holding or stops. A refused write (an
	 *  ACL) fails nothing. Redisson's data is left as it is. At most 200
	 *  bytes are kept; copied by dlock_client_new().
	 *  NULL (default): no registration, nothing extra on the wire. */
	const char *label;
	/** What this process does, for the registration ("./nightly.sh");
	 *  NULL: none. At most 200 bytes are kept. */
	const char *command;
	/** Called for each event (dlock/stats.h); NULL (default): none. */
	dlock_stat_event_cb on_event;
	/** Passed to on_event. */
	void *event_userdata;
	/** Make an acquisition count only once it is on disk: the primary
	 *  fsynced it to its append-only file and this many replicas did to
	 *  theirs (WAITAOF 1 sync_aof, Redis 7.2+, `appendonly yes` on each),
	 *  within sync_timeout_ms; else the hold is rolled back and the call
	 *  fails with DLOCK_ENOSYNC. Replaces the WAIT of sync_replicas, which
	 *  must then be 0 or no more than sync_aof. A server older than 7.2, or
	 *  one without `appendonly yes`, fails the acquisition (rolled back)
	 *  with DLOCK_ESERVER. 0 (default): off. */
	int sync_aof;
} dlock_client_options;

#define DLOCK_CLIENT_OPTIONS_INIT \
	{ DLOCK_CLIENT_OPTIONS_VERSION, 1000, 1000, 30000, 8, 0, NULL, NULL, NULL, NULL, NULL, 0, \
		NULL, NULL, 0, 1000, 0, 0, NULL, NULL, NULL, NULL, NULL, 0 }

/**
 * Fill `opts` with the defaults of `version` (any 0 < version <=
 * DLOCK_CLIENT_OPTIONS_VERSION: a program built against older headers
 * gets the fields it knows). Returns 0, or DLOCK_EINVAL (with a message)
 * for NULL or an unknown version.
 */
DLOCK_EXTERN int dlock_client_options_init(dlock_client_options *opts, unsigned int version);

/**
 * Open a client for `uri`. Every form the parser accepts (scheme names in
 * any case; the userinfo `[[user]:password@]` percent-decoded, a password
 * alone meaning the default user, and it may hold '@', ':' or '/'; an IPv6
 * address in brackets; no query strings but unix://'s ?db=N; anything else
 * is DLOCK_EINVAL with a message that never quotes the password):
 *
 *   redis://[[user]:password@]host[:port][/db]
 *     One server over TCP; port 6379, db 0 by default.
 *     redis://:s3cret@10.0.0.5:6380/2, redis://[::1]:6379
 *   rediss://[[user]:password@]host[:port][/db]
 *     The same over TLS (the tls_* options; the host is the name the
 *     certificate must carry unless tls_server_name says otherwise).
 *     rediss://app:s3cret@redis.example.com:6380
 *   unix://[[user]:password@]/path/to/redis.sock[?db=N]
 *     A Unix socket (absolute path, at most 107 bytes); db 0 by default.
 *     unix:///var/run/redis/redis.sock?db=1
 *   redis+unix://...
 *     Another spelling of unix:// (redis-py, go-redis).
 *     redis+unix:///tmp/redis.sock
 *   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/NAME[/db]
 *     The primary that Sentinel monitors as NAME, found through the listed
 *     sentinels (port 26379 by default, at most 16) and followed across
 *     failovers. The userinfo is the primary's; the sentinels' own
 *     credentials are options (sentinel_user, sentinel_password). No TLS
 *     form (rediss+sentinel:// is refused).
 *     redis+sentinel://:s3cret@10.0.0.1,10.0.0.2:26380/mymaster/0
 *   redis+cluster://[[user]:password@]host[:port][,host[:port]...][/]
 *     A Redis Cluster through seed nodes (port 6379 by default, at most 16;
 *     the others are learnt from them). No db: a cluster has only db 0.
 *     redis+cluster://10.0.0.1:7000,10.0.0.2:7000
 *   rediss+cluster://...
 *     The same over TLS, every node checked with the tls_* options.
 *     rediss+cluster://redis-1.example.com:7000
 *
 * `opts` may be NULL for defaults; it is copied. On success *out is a new
 * client that belongs to the caller and is freed with dlock_client_free().
 *
 * Errors: DLOCK_EINVAL (bad URI or options), DLOCK_ECONN, DLOCK_ETIMEDOUT,
 * DLOCK_EAUTH, DLOCK_ESERVER (SELECT refused), DLOCK_EPROTO, DLOCK_ENOMEM, DLOCK_ESYS.
 * The message is in dlock_errmsg_last().
 */
DLOCK_EXTERN int dlock_client_new(dlock_client **out, const char *uri,
		const dlock_client_options *opts);

/**
 * Drop the caller's reference to the client. Each lock, semaphore and latch
 * made from it, and each operation under way or kept (dlock_op_free), holds
 * one too: the client goes with the last, in whatever order they are
 * freed - its background thread stopped, every connection closed. Locks
 * still held are not released: leased ones expire, watchdog ones stop
 * being renewed and expire within the watchdog timeout. Operations under
 * way are not canceled (cancel them first to end them now). Safe from any
 * callback of dlock's (an operation's, a lost or event callback, on the
 * caller's loop or the client's thread): the client goes once that
 * callback's turn of the loop is over. Accepts NULL. (Before 1.0 it
 * returned DLOCK_EBUSY while handles were alive; it cannot fail now.)
 */
DLOCK_EXTERN void dlock_client_free(dlock_client *client);

/**
 * Connect and authenticate now (and read a cluster's slot map): what
 * dlock_client_new() does before it returns when `lazy_connect` is 0. A
 * lazy client connects on first use otherwise; this call makes a bad
 * address or password fail here instead. Again on a connected client: a
 * PING. Errors: as dlock_client_new()'s (DLOCK_ECONN, DLOCK_ETIMEDOUT,
 * DLOCK_EAUTH, ...), DLOCK_EFORKED, DLOCK_EINVAL (NULL); the message is
 * dlock_client_errmsg()'s.
 */
DLOCK_EXTERN int dlock_client_connect(dlock_client *client);

/**
 * Cancel every wait for a lock (RLock, and MultiLock/RedLock members) that
 * is in progress on this client when it is called: each returns
 * DLOCK_ECANCELED once its current command has been answered (at most the
 * command timeout), having given back whatever that command took. Waits
 * that start later are not affected. Safe from any thread (not from a
 * signal handler). Errors: DLOCK_EINVAL (NULL).
 */
DLOCK_EXTERN int dlock_client_cancel_waits(dlock_client *client);

/*
 * fork(): a client belongs to the process that opened it. Its background
 * thread (the watchdog, the pub/sub waits) does not exist in a child made
 * by fork(), so every call of the child that would talk to the server
 * returns DLOCK_EFORKED, rather than a lock nobody renews. Open a new
 * client in the child. The child may dlock_client_free() its copy (it
 * sends nothing and leaves the parent's connections alone) if no other
 * thread was inside dlock when it forked; otherwise let it go with exec or
 * _exit. The parent's client is not affected.
 */

/** The client's UUID (36 characters), fixed for its life. */
DLOCK_EXTERN const char *dlock_client_id(const dlock_client *client);

/** "host:port" of the client's server, as used in error messages. */
DLOCK_EXTERN const char *dlock_client_node(const dlock_client *client);

/** Room for an owner name dlock writes: `<uuid>:<id>` and its NUL. */
#define DLOCK_OWNER_SIZE 64

/**
 * Write the owner name `<uuid>:<thread_id>` (Redisson's hash field) into
 * `owner`. 0, or DLOCK_EINVAL (NULL argument).
 */
DLOCK_EXTERN int dlock_client_owner(char owner[DLOCK_OWNER_SIZE], const dlock_client *client,
		uint64_t thread_id);

#define DLOCK_HOLDER_VERSION 1

/**
 * Who a registered owner is (dlock_client_options.label). Set `version`
 * (DLOCK_HOLDER_INIT) before asking: the library fills the fields that
 * version has.
 */
typedef struct dlock_holder {
	unsigned int version; /**< DLOCK_HOLDER_VERSION (the fields you know) */
	int registered;     /**< 1: the owner's client registered (the fields below
	                         are its registration); 0: it did not (they are "") */
	char host[256];     /**< the host name of the holder's machine */
	int64_t pid;        /**< its process id */
	char label[208];    /**< its label ("" if it set none) */
	char command[208];  /**< what it runs ("" if it said nothing) */
	int64_t since_ms;   /**< when it registered on this node: Unix time, ms
	                         (for `dlock run`, when it took its lock) */
} dlock_holder;

#define DLOCK_HOLDER_INIT { DLOCK_HOLDER_VERSION, 0, "", 0, "", "", 0 }

/** What DLOCK_HOLDER_INIT does, for `version`. 0, or DLOCK_EINVAL (NULL, or
 *  a version this library does not know). */
DLOCK_EXTERN int dlock_holder_init(dlock_holder *h, unsigned int version);

/**
 * Look up the registration of `owner` - a hash field as lock holders have
 * it: `<client UUID>:<thread>`, a read-write lock's `...:write` - on the
 * client's server (on a cluster, the node that serves the registration's
 * key). Returns 0 and fills *out: `registered` 1 when the owner's
 * client registered, 0 when it did not (a Redisson holder, a client
 * without a label, one whose registration expired: the rest ""); or an
 * error: DLOCK_EINVAL (NULL argument, `out->version` not
 * one this library knows: DLOCK_HOLDER_INIT), one command's errors
 * (errors.h).
 */
DLOCK_EXTERN int dlock_client_holder(dlock_holder *out, dlock_client *client, const char *owner);

/** The id of the calling thread as dlock uses it for owners (its kernel tid). */
DLOCK_EXTERN uint64_t dlock_thread_id(void);

/**
 * Send PING; 0 when the server answered. For health checks.
 * Errors: DLOCK_EINVAL (NULL client), one command's errors (errors.h).
 */
DLOCK_EXTERN int dlock_client_ping(dlock_client *client);

/**
 * Seconds since the server started (INFO server, uptime_in_seconds).
 * Used by RedLock's restart guard; handy for health checks.
 * Errors: DLOCK_EINVAL (NULL argument), one command's errors (errors.h).
 */
DLOCK_EXTERN int dlock_client_uptime_s(int64_t *out_s, dlock_client *client);

/**
 * The one-line message of the most recent failure on this client, from any
 * thread ("" if none), naming the node and the cause. The string is a copy
 * owned by the calling thread, valid until its next dlock call. For the
 * calling thread's own last failure use dlock_errmsg_last().
 */
DLOCK_EXTERN const char *dlock_client_errmsg(const dlock_client *client);

/** dlock_client_errmsg() copied into buf; returns the full length (see dlock_errmsg_last_r). */
DLOCK_EXTERN size_t dlock_client_errmsg_r(char *buf, size_t len, const dlock_client *client);

/**
 * A snapshot of the client's figures, to free with dlock_stats_free().
 * Safe from any thread. Errors: DLOCK_EINVAL (NULL), DLOCK_ENOMEM.
 */
DLOCK_EXTERN int dlock_client_stats(dlock_stats **out, const dlock_client *client);

/* Asynchronous calls (dlock/async.h has the operation, its result and callback). */

/**
 * A client's calls to its server as operations: connect (as
 * dlock_client_connect(), a PING on a connection it makes and
 * authenticates; on a cluster, on the member serving a slot), PING (`code` 0 when it
 * answered; on a cluster it asks the member serving a slot, where the
 * blocking dlock_client_ping() reads the slot map), the server's uptime
 * in seconds (`value`), and a registered owner's holder (`value` 1 and
 * `holder`, or 0 when none registered). Each may be canceled. Errors (no
 * callback then): DLOCK_EINVAL, DLOCK_ENOMEM, DLOCK_EFORKED.
 */
DLOCK_EXTERN int dlock_client_connect_async(dlock_op **out, dlock_client *client, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_client_ping_async(dlock_op **out, dlock_client *client, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_client_uptime_s_async(dlock_op **out, dlock_client *client, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_client_holder_async(dlock_op **out, dlock_client *client,
		const char *owner, dlock_op_cb cb, void *userdata);

#ifdef __cplusplus
}
#endif

#endif
