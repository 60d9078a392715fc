/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/uv.h - dlock's loop driven by a libuv loop. The adapter is the
 * static library libdlock-uv.a (CMake: dlock::uv; pkg-config: dlock-uv),
 * built when libuv is found; libdlock itself does not link libuv.
 *
 *	dlock_uv *du;
 *	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
 *
 *	dlock_uv_new(&du, uv_default_loop(), NULL);
 *	o.loop = dlock_uv_loop(du);          // no dlock thread: all of it runs here
 *	dlock_client_new(&c, "redis://127.0.0.1:6379", &o);
 *	dlock_lock_new(&l, c, "job:42", NULL);
 *	dlock_lock_acquire_async(NULL, l, owner, 0, DLOCK_LEASE_WATCHDOG, on_acquired, NULL);
 *	uv_run(uv_default_loop(), UV_RUN_DEFAULT);   // renews while you hold it
 *	// later, from any callback (a libuv one or a dlock one):
 *	dlock_lock_free(l); dlock_client_free(c); dlock_uv_free(du);
 *
 * Each descriptor dlock watches gets a uv_poll_t, made when it is first
 * watched and stopped (then closed) the moment dlock stops watching it;
 * dlock's one timer is a uv_timer_t.
 *
 * Lifetime: as an active handle does, the adapter keeps uv_run() going
 * for as long as it exists. dlock watches the descriptor through which
 * operations start from dlock_uv_new() to dlock_uv_free(), and a watchdog
 * hold must be renewed for as long as it is held, so no handle is unref'd
 * (an unref'd timer would let uv_run() return with a renewal due).
 * dlock_uv_free() closes them; uv_run() returns once they are closed and
 * nothing of yours is active. All of it on the thread that runs the uv
 * loop (dlock/loop.h).
 */
#ifndef DLOCK_UV_H
#define DLOCK_UV_H

#include <uv.h>

#include "loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The adapter: a dlock loop and the libuv handles that drive it. */
typedef struct dlock_uv dlock_uv;

#define DLOCK_UV_OPTIONS_VERSION 1

/** The adapter's options: none yet beyond the version (room to grow). */
typedef struct dlock_uv_options {
	unsigned int version;
} dlock_uv_options;

#define DLOCK_UV_OPTIONS_INIT { DLOCK_UV_OPTIONS_VERSION }

/** Fill `opts` with the defaults of `version`. 0, or DLOCK_EINVAL. */
DLOCK_EXTERN int dlock_uv_options_init(dlock_uv_options *opts, unsigned int version);

/**
 * Make a dlock loop driven by `uv`: open clients on dlock_uv_loop(*out).
 * `opts` NULL: the defaults. 0, DLOCK_EINVAL (NULL out or uv, an unknown
 * options version), DLOCK_ENOMEM, DLOCK_ESYS (libuv could not watch
 * dlock's descriptor), or dlock_loop_new()'s errors. On failure run the
 * uv loop on too: the handles made are closed, and their close callbacks
 * free the rest.
 */
DLOCK_EXTERN int dlock_uv_new(dlock_uv **out, uv_loop_t *uv, const dlock_uv_options *opts);

/** The dlock loop to open clients on (dlock_client_options.loop). */
DLOCK_EXTERN dlock_loop *dlock_uv_loop(const dlock_uv *du);

/**
 * Free the adapter and its dlock loop, from anywhere on the uv loop's
 * thread: a libuv callback, outside uv_run(), or a dlock callback (an
 * operation's, a lost callback). The dlock loop goes once the clients
 * opened on it are freed too (before or after) and the dlock call that ran
 * the callback returned; until then it keeps driving those clients. Then
 * the handles are closed, and uv_run() returns once their close callbacks
 * (which free the rest) have run and nothing of yours is active - no timer
 * bounce needed. Accepts NULL.
 */
DLOCK_EXTERN void dlock_uv_free(dlock_uv *du);

#ifdef __cplusplus
}
#endif

#endif
