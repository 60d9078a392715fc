/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: what tests reach of a RedLock handle. */
#ifndef DLOCK_REDLOCK_INTERNAL_H
#define DLOCK_REDLOCK_INTERNAL_H

#include "dlock/redlock.h"
#include "multilock/engine.h"

/* The engine of a RedLock handle (for tests that stage faults through it). */
dlock__engine *dlock__redlock_engine(dlock_redlock *r);

#endif
