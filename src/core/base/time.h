/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: every duration in dlock is measured on CLOCK_MONOTONIC, read
 * through the seam (core/base/sys.h). */
#ifndef DLOCK_CORE_TIME_H
#define DLOCK_CORE_TIME_H

#include <stdint.h>
#include <time.h>

/* A deadline that never comes. */
#define DLOCK__NEVER INT64_MAX

/* Monotonic milliseconds since an arbitrary start. */
int64_t dlock__now_ms(void);

/* Monotonic microseconds, the same clock (dlock__now_ms() is this / 1000). */
int64_t dlock__now_us(void);

/* Epoch milliseconds (CLOCK_REALTIME): only where Redisson's data holds
 * epoch times (a fair queue's places, expirable permits, holder labels). */
int64_t dlock__wall_ms(void);

/* now + ms, saturating (ms < 0 means never). */
int64_t dlock__deadline_in(int64_t ms);

/* Milliseconds left until deadline, clamped to [0, INT32_MAX] for poll(). */
int dlock__ms_until(int64_t deadline);

/* A CLOCK_MONOTONIC timespec at deadline, for pthread_cond_timedwait on a
 * condition variable made with dlock__cond_init(). */
void dlock__deadline_timespec(int64_t deadline, struct timespec *ts);

/* Sleep until deadline (or a little past: a sleep is never cut short). */
void dlock__sleep_until(int64_t deadline);

#endif
