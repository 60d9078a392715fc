/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <limits.h>

#include "core/base/sys.h"
#include "core/base/time.h"

int64_t dlock__now_ms(void)
{
	return dlock__sys_get()->now_us() / 1000;
}

int64_t dlock__now_us(void)
{
	return dlock__sys_get()->now_us();
}

int64_t dlock__wall_ms(void)
{
	return dlock__sys_get()->wall_ms();
}

int64_t dlock__deadline_in(int64_t ms)
{
	int64_t now = dlock__now_ms();

	if (ms < 0 || ms > DLOCK__NEVER - now)
		return DLOCK__NEVER;
	return now + ms;
}

int dlock__ms_until(int64_t deadline)
{
	int64_t left;

	if (deadline == DLOCK__NEVER)
		return INT_MAX;
	left = deadline - dlock__now_ms();
	if (left <= 0)
		return 0;
	return left > INT_MAX ? INT_MAX : (int)left;
}

void dlock__deadline_timespec(int64_t deadline, struct timespec *ts)
{
	/* A year ahead stands in for "never": timedwait wants a real time. */
	if (deadline == DLOCK__NEVER)
		deadline = dlock__now_ms() + (int64_t)365 * 24 * 3600 * 1000;
	ts->tv_sec = (time_t)(deadline / 1000);
	ts->tv_nsec = (long)(deadline % 1000) * 1000000L;
}

void dlock__sleep_until(int64_t deadline)
{
	struct timespec ts;

	dlock__deadline_timespec(deadline, &ts);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}
