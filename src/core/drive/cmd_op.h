/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: an operation (core/loop/op.h) of one command on a handle's
 * client - a script call, or a read-only command - whose reply a kind's
 * function judges into the result. The queries and the one-command changes
 * of every handle are such a kind, asynchronous or blocking alike (the
 * blocking call drives the same op on the calling thread).
 *
 * The command is sent in a multiplexed run on the op's loop
 * (core/mux/mux_loop.h): a script as EVALSHA with the EVAL fall-back,
 * a cluster's MOVED/ASK followed. A query is canceled by dropping what is
 * in flight (it changed nothing); a change is not canceled: it finishes and
 * tells.
 */
#ifndef DLOCK_CORE_CMD_OP_H
#define DLOCK_CORE_CMD_OP_H

#include <stddef.h>

#include "core/drive/client.h"
#include "core/mux/mux_loop.h"
#include "core/loop/op.h"

typedef struct dlock__cmd_op dlock__cmd_op;

typedef struct dlock__cmd_kind {
	const char *what; /* the public function, for messages */
	/* Build o->call, or o->argv/lens/argc, on the loop's thread as the op
	 * starts (the handle's state as of then): 0, 1 when the result is
	 * known without a command (the op ends with 0), or an error with its
	 * message. NULL: built by the caller before the submit. */
	int (*prepare)(dlock__cmd_op *o);
	/* The reply, not an error reply (those are failed already): 0 with
	 * o->op.result's fields set, or an error with its message. */
	int (*judge)(dlock__cmd_op *o, const redisReply *r);
	/* Free the kind's own state (not the op); NULL: none. */
	void (*clear)(dlock__cmd_op *o);
	/* Drop the reference the op took on its handle. */
	void (*unref)(void *handle);
	/* It changes something: never canceled, never resent (a repeat could
	 * count twice) unless `retry_safe`. */
	int changes, retry_safe;
} dlock__cmd_kind;

#define DLOCK__CMD_ARGV 4

struct dlock__cmd_op {
	dlock_op op; /* first */
	const dlock__cmd_kind *kind;
	void *handle;
	dlock_client *client; /* the handle's */
	dlock__errbuf *err;   /* the handle's: the outcome is recorded there */
	const char *shown;    /* the handle's name, for messages */
	/* The command: a script call, or (argc > 0) a read-only command. */
	dlock__call call;
	const char *argv[DLOCK__CMD_ARGV];
	size_t lens[DLOCK__CMD_ARGV];
	int argc;
	/* A cluster's redirect: the member named, with ASKING or not. */
	dlock_client *send_to;
	int asking, redirects, in_flight;
	dlock__mux_op mop;
	dlock__mux_loop ml;
};

/*
 * Allocate an op of `size` bytes (a struct that begins with dlock__cmd_op,
 * zeroed) on client's loop, for `handle` (whose reference the caller took:
 * kind->unref drops it at the end). Checks the callback and a forked
 * child. 0, or DLOCK_EINVAL, DLOCK_EFORKED, DLOCK_ENOMEM with the message
 * recorded in err (no op then, and the handle's reference is dropped).
 */
int dlock__cmd_op_new(dlock__cmd_op **out, size_t size, const dlock__cmd_kind *kind, void *handle,
		dlock_client *client, dlock__errbuf *err, const char *shown, dlock_op_cb cb,
		void *userdata);

/* Hand the op to its loop (the asynchronous call); *out (may be NULL) gets it. Returns 0. */
int dlock__cmd_op_submit(dlock__cmd_op *o, dlock_op **out);

/*
 * The blocking call: drive o to its end on the calling thread (its cb and
 * userdata are replaced). Returns the outcome, the calling thread's
 * message set from it; *value (may be NULL) gets result.value, *obj (may
 * be NULL) the result's lock_info or semaphore_info, which becomes the
 * caller's.
 */
int dlock__cmd_op_block(dlock__cmd_op *o, int64_t *value, void **obj);

/* The callback a blocking call makes its op with (dlock__cmd_op_block
 * gives it its record). */
void dlock__cmd_blocking(dlock_op *op, const dlock_result *r, void *userdata);

/*
 * A reply that is a cluster's redirect for a command on key: where to send
 * it again. 1 for MOVED, 2 for ASK, with *to the member named; 0 when r is
 * no redirect (or c no cluster); < 0 when that member cannot be opened, or
 * after DLOCK__MAX_REDIRECTS of them (*redirects counts), with a message.
 */
int dlock__cmd_redirect(dlock_client *c, const redisReply *r, int *redirects, dlock_client **to,
		const char *key, size_t len);

/* The reply's integer into result.value; DLOCK_EPROTO for another shape. */
int dlock__cmd_judge_int(dlock__cmd_op *o, const redisReply *r);

/*
 * A blocking call's op on client c's loop (a MultiLock's runs on its first
 * member's): drive it on the calling thread until *done, which its callback
 * sets - on the thread's own loop when the client has a thread of its own,
 * on the client's loop when the caller drives one. 0, or DLOCK_ENOMEM (no
 * loop: the op was destroyed, no callback).
 */
int dlock__op_block(dlock_op *op, dlock_client *c, const int *done);

#endif
