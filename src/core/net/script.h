/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: Lua scripts sent as EVALSHA, with EVAL when the server does not
 * know the script yet (NOSCRIPT: first use, a restart, SCRIPT FLUSH).
 */
#ifndef DLOCK_CORE_SCRIPT_H
#define DLOCK_CORE_SCRIPT_H

#include <pthread.h>

#include "core/net/conn.h"

typedef struct dlock__script {
	const char *name; /* for messages: "EVALSHA <name>" */
	const char *body;
	pthread_once_t once;
	char sha[41];
	/* The same script publishing with SPUBLISH (made on first use), for a
	 * cluster with sharded pub/sub: see dlock__script_for(). */
	pthread_once_t sharded_once;
	struct dlock__script *sharded;
	/* It takes a hold (a lock, a permit): a client with a label registers
	 * itself on the connection that carries it (core/drive/holder.h). */
	int registers;
} dlock__script;

#define DLOCK__SCRIPT(name, body) \
	{ \
		name, body, PTHREAD_ONCE_INIT, "", PTHREAD_ONCE_INIT, NULL, 0 \
	}

/* A script that takes a hold (see `registers`). */
#define DLOCK__SCRIPT_HOLDS(name, body) \
	{ \
		name, body, PTHREAD_ONCE_INIT, "", PTHREAD_ONCE_INIT, NULL, 1 \
	}

/*
 * The script to send to `node`: `s`, or on a cluster node with sharded
 * pub/sub (Redis 7+, as Redisson does there) its twin that publishes with
 * SPUBLISH, since waiters there listen with SSUBSCRIBE. Falls back to `s`
 * when the twin cannot be made (out of memory).
 */
dlock__script *dlock__script_for(dlock__script *s, const dlock__node *node);

/* Most keys plus arguments a script call may have. */
#define DLOCK__SCRIPT_MAX_ARGS 1024

/* Keys plus arguments of the lock scripts, at most (dlock__call). */
#define DLOCK__CALL_MAX 12

/*
 * One call of a lock script, built by the layer that knows the keys and
 * run by whoever sends it (one server, or many at once: core/mux/mux.h).
 */
typedef struct dlock__call {
	dlock__script *script;
	int nkeys;
	int argc; /* keys then args */
	const char *argv[DLOCK__CALL_MAX];
	size_t lens[DLOCK__CALL_MAX];
	/* A call with more than DLOCK__CALL_MAX (the watchdog's batches): its
	 * keys and args are here instead (see dlock__call_args). */
	const char *const *many_argv;
	const size_t *many_lens;
} dlock__call;

/* Start an empty call of `script`: push its keys, keys_done, then its args. */
static inline void dlock__call_begin(dlock__call *c, dlock__script *script)
{
	c->script = script;
	c->argc = 0;
	c->many_argv = NULL;
	c->many_lens = NULL;
}

/* The call's keys then args, wherever they are. */
static inline const char *const *dlock__call_argv(const dlock__call *c)
{
	return c->many_argv != NULL ? c->many_argv : c->argv;
}

static inline const size_t *dlock__call_lens(const dlock__call *c)
{
	return c->many_lens != NULL ? c->many_lens : c->lens;
}

/* Append a key (before any argument) or an argument. */
static inline void dlock__call_push(dlock__call *c, const char *p, size_t len)
{
	c->argv[c->argc] = p;
	c->lens[c->argc++] = len;
}

/* The keys are pushed: what follows are arguments. */
static inline void dlock__call_keys_done(dlock__call *c)
{
	c->nkeys = c->argc;
}

/* One more key for a call whose arguments are pushed already: they move up. */
static inline void dlock__call_add_key(dlock__call *c, const char *p, size_t len)
{
	int i;

	for (i = c->argc; i > c->nkeys; i--) {
		c->argv[i] = c->argv[i - 1];
		c->lens[i] = c->lens[i - 1];
	}
	c->argv[c->nkeys] = p;
	c->lens[c->nkeys++] = len;
	c->argc++;
}

/*
 * Build the EVALSHA command for `s` into argv/lens (which need 3 + nkeys +
 * nargs slots): "EVALSHA", sha, numkeys, keys..., args... The numkeys text
 * lives in numbuf (16 bytes). Returns the argument count.
 */
int dlock__script_argv(dlock__script *s, int nkeys, const char *const *keys, const size_t *key_lens,
		int nargs, const char *const *args, const size_t *arg_lens, const char **argv,
		size_t *lens, char numbuf[16]);

/* Turn an EVALSHA argv (from dlock__script_argv) into EVAL in place. */
void dlock__script_argv_to_eval(dlock__script *s, const char **argv, size_t *lens);

#endif
