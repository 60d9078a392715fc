/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: the quorum engine shared by MultiLock (quorum = n) and RedLock
 * (quorum = n/2+1). It knows nothing of restart guards: RedLock plugs its
 * vote filter in through the rules.
 */
#ifndef DLOCK_MULTILOCK_ENGINE_H
#define DLOCK_MULTILOCK_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>

#include "dlock/async.h"
#include "dlock/multilock.h"
#include "core/base/error.h"

/* One member's part in an acquisition round. */
typedef struct dlock__member_try {
	dlock_member_status st;
	int touched;      /* a command that may have taken the member was sent */
	int64_t believed; /* the owner's count there before this round (-1 unknown) */
	int64_t count;    /* holds after our acquire, when ACQUIRED/YOUNG */
	int64_t taken;    /* holds after our acquire, kept whatever the vote becomes
	                     later (a failed TTL reset or fencing write-back): what a
	                     rollback gives back; 0 when not taken */
	int64_t token;    /* fenced members: the token this member gave */
	char owner[64];   /* the owner field used on this member */
	const char *owner_ptr;
} dlock__member_try;

/*
 * Drop votes that must not count: called after the parallel attempt with
 * every member's vote; may turn DLOCK_VOTE_ACQUIRED into DLOCK_VOTE_YOUNG.
 */
typedef void (*dlock__vote_filter)(void *arg, dlock_lock *const *members, dlock__member_try *tries,
		size_t n, int64_t lease_ms);

/*
 * Whether member's vote counts whatever the others answer (its server's
 * start, started_ms on this process's clock, is old enough): a quorum of
 * such votes may be decided at once, without hearing the rest.
 */
typedef int (*dlock__vote_vouch)(void *arg, dlock_lock *member, int64_t lease_ms, int64_t started_ms);

typedef struct dlock__rules {
	size_t quorum;
	int share_wait;     /* RedLock: a waiting member gets max(remaining/n, 1) ms */
	int check_validity; /* RedLock: refuse a quorum whose TTL ran out */
	int one_per_server; /* RedLock: one name is on a server once, whatever the db */
	double drift_factor;
	dlock__vote_filter filter;
	dlock__vote_vouch vouch; /* with a filter: NULL, every vote may be doubted */
	void *filter_arg;
} dlock__rules;

typedef void (*dlock__engine_lost_fn)(void *self, const char *owner, int reason, void *userdata);

/* What outlives the engine for work still under way on the loop (loss.c). */
struct dlock__engine_link;

typedef struct dlock__engine {
	dlock_lock **members;
	size_t n;
	dlock__rules rules;
	int fenced; /* every member is a fenced lock */
	dlock__errbuf err;
	pthread_mutex_t mu;          /* status, callback */
	dlock_member_status *status; /* of the last acquisition */
	void *self;                  /* the public handle, for callbacks */
	dlock__engine_lost_fn lost_fn;
	void *lost_ud;
	char **armed; /* owners whose loss is still to be reported */
	struct dlock__engine_link *link;
	/* Per member: a release (EVALSHA) answered there, so its server has the
	 * script - one given up unanswered runs without a NOSCRIPT (release.c). */
	atomic_int *release_ran;
	/* Per member: releases still on their way there after the op that sent
	 * them went on at its quorum (release.c). The member is not asked to
	 * acquire meanwhile: on another connection, its acquire could run
	 * before that release and be undone by it. */
	atomic_int *release_due;
	/* Releases started on this lock: a late grant of an acquisition that
	 * went on before one of them is given back, not joined (attempt.c). */
	atomic_uint release_gen;
	/* When a member last became due (monotonic ms), and the asynchronous
	 * acquisitions waiting for dues to be answered (engine.c): on the
	 * loop of the first member's client, where releases go late. */
	_Atomic int64_t due_at;
	struct dlock__engine_op *due_waiters;
	/* The latest acquisition (monotonic ms), for hold_ms (dlock/stats.h):
	 * one per lock, so with several owners at once it is the latest's. */
	_Atomic int64_t held_since;
	size_t narmed;
	/* Tests only (NULL otherwise): called with a step's name ("finalize")
	 * just before it, to stage a fault at that exact point. */
	void (*test_hook)(const char *step, void *arg);
	void *test_hook_arg;
} dlock__engine;

int dlock__engine_init(dlock__engine *e, dlock_lock *const *members, size_t n,
		const dlock__rules *rules, void *self);
void dlock__engine_destroy(dlock__engine *e);

/* *token (may be NULL): a fenced engine's quorum-monotonic token. */
int dlock__engine_acquire(dlock__engine *e, const char *owner, int64_t wait_ms, int64_t lease_ms,
		int64_t *validity_ms, int64_t *token);
int dlock__engine_release(dlock__engine *e, const char *owner);
/* An owner named after one of the members' clients (`<uuid>:<id>`): this
 * process's alone, so its records are the truth and a cancel gives back
 * exactly what was taken. dlock__engine_owner() names one. */
int dlock__engine_owner_is_ours(const dlock__engine *e, const char *owner);
int dlock__engine_owner(char owner[DLOCK_OWNER_SIZE], const dlock__engine *e, uint64_t id);
/* The same as operations (dlock/async.h), for an explicit owner. */
int dlock__engine_acquire_async(dlock_op **out, dlock__engine *e, const char *owner,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata);
int dlock__engine_release_async(dlock_op **out, dlock__engine *e, const char *owner,
		dlock_op_cb cb, void *userdata);
int dlock__engine_check(const dlock__engine *e, const char *owner);

/* A member's due release was answered: acquisitions waiting look again. */
void dlock__engine_dues_woken(dlock__engine *e);

/* How long a quorum of the owner's member holds is certain to last (*ms);
 * 0, DLOCK_ELOST, DLOCK_ENOTOWNER as dlock__engine_check(). */
int dlock__engine_validity(const dlock__engine *e, const char *owner, int64_t *ms);
int dlock__engine_status(const dlock__engine *e, size_t i, dlock_member_status *out);
void dlock__engine_set_lost(dlock__engine *e, dlock__engine_lost_fn fn, void *userdata);

/* DLOCK_EDUPLICATE when two members holding one name are one server by
 * the run_id their servers gave on the connections made so far (servers.c;
 * sends nothing: members not connected yet are not compared), else 0. */
int dlock__engine_servers_check(const dlock__engine *e);

/* Queries over the members (query.c): held on a quorum, a member's PTTL. */
int dlock__engine_is_locked(dlock__engine *e, int *out);
int dlock__engine_is_held(dlock__engine *e, const char *owner, int *out);
int dlock__engine_member_ttl(dlock__engine *e, size_t i, int64_t *out_ms);
/* The same as operations (dlock/async.h): the answer in result.value. */
int dlock__engine_is_locked_async(dlock_op **out, dlock__engine *e, dlock_op_cb cb, void *userdata);
int dlock__engine_is_held_async(dlock_op **out, dlock__engine *e, const char *owner,
		dlock_op_cb cb, void *userdata);
int dlock__engine_member_ttl_async(dlock_op **out, dlock__engine *e, size_t i, dlock_op_cb cb,
		void *userdata);

#endif
