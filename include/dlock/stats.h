/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/stats.h - what locks cost: a typed event hook and a stats snapshot
 * per client, with no exporter dependency.
 *
 *	static void on_event(const dlock_stat_event *ev, void *ud)
 *	{
 *		if (ev->type == DLOCK_STAT_LOST)
 *			fprintf(stderr, "lost %s: %s\n", ev->name, dlock_lost_reason_str(ev->reason));
 *	}
 *	o.on_event = on_event;               // dlock_client_options, version 6
 *	...
 *	dlock_stats *s;
 *	dlock_client_stats(&s, client);      // counters and histograms so far
 *	printf("%llu acquired\n", (unsigned long long)s->acquired);
 *	dlock_stats_free(s);
 *
 * The hook runs on the thread that saw the event: the caller's for an
 * acquisition or release it made, the client's (or the loop's) for a
 * renewal or a loss; a node going down or up, on whichever thread read
 * (or missed) that node's reply - the caller's too, in a blocking call.
 * It may run with the library's internal locks held: it must return
 * quickly and must not call dlock. Without a hook nothing is formatted or
 * called; the counters are kept either way (a relaxed atomic add each).
 *
 * A MultiLock's or RedLock's own events (acquired with its votes, released,
 * lost) go to the hook and stats of its first member's client; each
 * member's client reports its own node events. Open them all with one
 * hook.
 */
#ifndef DLOCK_STATS_H
#define DLOCK_STATS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What happened. Only appended. */
typedef enum dlock_stat_event_type {
	DLOCK_STAT_ACQUIRED = 1,       /**< a lock, permit or MultiLock/RedLock was taken:
	                                    wait_ms, attempts, votes/members */
	DLOCK_STAT_NOT_ACQUIRED = 2,   /**< an acquisition ended without it: code says why
	                                    (DLOCK_ENOTACQUIRED: held by others) */
	DLOCK_STAT_RELEASED = 3,       /**< the last hold was released: hold_ms */
	DLOCK_STAT_LOST = 4,           /**< a held lock was lost: reason, hold_ms */
	DLOCK_STAT_RENEWAL_FAILED = 5, /**< a renewal did not get through: node, code */
	DLOCK_STAT_NODE_DOWN = 6,      /**< a node that answered stopped answering: node, code */
	DLOCK_STAT_NODE_UP = 7,        /**< a node that was down answers again: node */
	DLOCK_STAT_BRAIN_SPLIT = 8     /**< a lock this client believed it held was found
	                                    held by another owner: name, node, owner (ours) */
} dlock_stat_event_type;

/** One event. Strings are valid during the hook only; absent ones are NULL. */
typedef struct dlock_stat_event {
	dlock_stat_event_type type;
	const char *name;  /**< the lock's name (for a MultiLock/RedLock, its first member's) */
	const char *owner; /**< the owner that acquired, held or lost it */
	const char *node;  /**< "host:port" for node events, renewal failures, brain splits */
	int code;          /**< DLOCK_E* for not acquired, renewal failed, node down; else 0 */
	int reason;        /**< lost: a dlock_lost_reason; else 0 */
	int64_t wait_ms;   /**< acquired / not acquired: from the call to the outcome */
	int64_t hold_ms;   /**< released / lost: from the acquisition */
	int attempts;      /**< acquired / not acquired: acquisition scripts sent (rounds
	                        for a MultiLock/RedLock) */
	int votes;         /**< acquired: members that granted it (1 for a single lock) */
	int members;       /**< members asked (1 for a single lock) */
} dlock_stat_event;

typedef void (*dlock_stat_event_cb)(const dlock_stat_event *ev, void *userdata);

/** A short, fixed name of an event type ("acquired", "node-down", ...). */
DLOCK_EXTERN const char *dlock_stat_event_type_str(int type);

/**
 * Fixed histogram buckets: counts[i] counts values <= dlock_stat_bounds_us()[i]
 * (not cumulative), counts[DLOCK_STAT_BUCKETS - 1] the rest (+Inf).
 * Bounds: 100 us, 250 us, 500 us, 1 ms, 2.5, 5, 10, 25, 50, 100, 250, 500 ms,
 * 1 s, 2.5 s, 5 s, 10 s, 30 s, 1 min, 5 min, 30 min, +Inf.
 */
#define DLOCK_STAT_BUCKETS 21

/** The DLOCK_STAT_BUCKETS - 1 finite bounds above, in microseconds, ascending
 *  (static: valid for the program's life). */
DLOCK_EXTERN const int64_t *dlock_stat_bounds_us(void);

typedef struct dlock_stat_histogram {
	uint64_t count;
	uint64_t sum_us;
	uint64_t counts[DLOCK_STAT_BUCKETS];
} dlock_stat_histogram;

/** One node's figures. */
typedef struct dlock_stat_node {
	const char *node;            /**< "host:port" (valid as long as the snapshot) */
	uint64_t commands;           /**< commands (scripts included) that got a reply */
	uint64_t errors;             /**< commands that failed: no reply in time, dropped
	                                  connection, an error reply */
	uint64_t downs;              /**< times it went down (DLOCK_STAT_NODE_DOWN) */
	int up;                      /**< 1: its last command got a reply */
	dlock_stat_histogram rtt;    /**< round trip of each command that got a reply */
} dlock_stat_node;

/**
 * A client's figures since it was opened. Allocated by the library; fields
 * are only appended.
 */
typedef struct dlock_stats {
	uint64_t acquired;           /**< DLOCK_STAT_ACQUIRED events */
	uint64_t not_acquired;       /**< held by others when the wait ended */
	uint64_t failed;             /**< other acquisition failures (no quorum, node down, ...) */
	uint64_t released;
	uint64_t lost;
	uint64_t renewals;           /**< renewal scripts that kept a hold */
	uint64_t renewal_failures;
	uint64_t brain_splits;
	uint64_t held;               /**< holds now (gauge) */
	dlock_stat_histogram wait;   /**< acquisitions, acquired or not: time to the outcome */
	dlock_stat_histogram hold;   /**< released or lost holds: time held */
	size_t nnodes;
	dlock_stat_node *nodes;
} dlock_stats;

/** Free a snapshot. Accepts NULL. */
DLOCK_EXTERN void dlock_stats_free(dlock_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
