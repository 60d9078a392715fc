/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fastclock - an LD_PRELOAD shim that makes a process's clocks run fast:
 * from the moment it is loaded, CLOCK_REALTIME and CLOCK_MONOTONIC (and
 * gettimeofday, time) advance FASTCLOCK_FACTOR times as fast as the real
 * ones (default 2). Preloaded into redis-server it stands for a server
 * whose clock runs fast: its keys expire early (libfaketime cannot start
 * redis-server here). Built without sanitizers: it goes into a process
 * that has none.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static double factor = 2.0;
static struct timespec base_real, base_mono;

__attribute__((constructor)) static void fastclock_init(void)
{
	const char *f = getenv("FASTCLOCK_FACTOR");

	real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
	if (f != NULL && atof(f) > 0)
		factor = atof(f);
	real_clock_gettime(CLOCK_REALTIME, &base_real);
	real_clock_gettime(CLOCK_MONOTONIC, &base_mono);
}

static void scale(const struct timespec *base, struct timespec *ts)
{
	double d = (double)(ts->tv_sec - base->tv_sec) * 1e9 +
			(double)(ts->tv_nsec - base->tv_nsec);
	long long ns = (long long)base->tv_nsec + (long long)(d * factor);

	ts->tv_sec = base->tv_sec + (time_t)(ns / 1000000000LL);
	ts->tv_nsec = (long)(ns % 1000000000LL);
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	int rc;

	if (real_clock_gettime == NULL)
		fastclock_init();
	rc = real_clock_gettime(clk, ts);
	if (rc != 0)
		return rc;
	if (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)
		scale(&base_real, ts);
	else if (clk == CLOCK_MONOTONIC || clk == CLOCK_MONOTONIC_COARSE ||
			clk == CLOCK_MONOTONIC_RAW)
		scale(&base_mono, ts);
	return 0;
}

int gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec ts;

	(void)tz;
	clock_gettime(CLOCK_REALTIME, &ts);
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *out)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (out != NULL)
		*out = ts.tv_sec;
	return ts.tv_sec;
}
