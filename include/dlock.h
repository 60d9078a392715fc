/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock.h - distributed locks on Redis, wire-compatible with Redisson.
 *
 * Threading rule: a dlock_client may be used by any number of threads at
 * once, and so may a dlock_lock (the default owner is the calling thread).
 * Exceptions are marked on their functions: dlock_set_allocator(), and the
 * _free functions,
 * which must not race with other calls on the same object.
 *
 * Errors: functions return 0 or a negative DLOCK_E* code (dlock/errors.h);
 * the handle keeps a one-line message naming the node and the cause.
 */
#ifndef DLOCK_H
#define DLOCK_H

#include "dlock/common.h"
#include "dlock/version.h"
#include "dlock/errors.h"
#include "dlock/client.h"
#include "dlock/lock.h"
#include "dlock/multilock.h"
#include "dlock/redlock.h"
#include "dlock/loop.h"
#include "dlock/async.h"
#include "dlock/countdown.h"
#include "dlock/semaphore.h"
#include "dlock/stats.h"

#endif
