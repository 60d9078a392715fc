/* SPDX-License-Identifier: BSD-3-Clause */
/* The benchmark programs' clocks: CLOCK_MONOTONIC (comparable across the
 * processes of one machine, and with the peers' nanoTime/hrtime) and the
 * process's own CPU time. */
#ifndef DLOCK_BENCH_CLOCK_H
#define DLOCK_BENCH_CLOCK_H

#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* User + system CPU of this process so far, µs. */
static inline double cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
		(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

#endif
