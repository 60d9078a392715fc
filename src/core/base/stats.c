/* SPDX-License-Identifier: BSD-3-Clause */
/* Histograms and event names of dlock/stats.h (core/base/stats.h). */
#include <stddef.h>

#include "core/base/stats.h"

static const int64_t stat_bounds_us[DLOCK_STAT_BUCKETS - 1] = {
	100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 30000000, 60000000, 300000000, 1800000000,
};

const int64_t *dlock_stat_bounds_us(void)
{
	return stat_bounds_us;
}

int dlock__stat_bucket(int64_t us)
{
	/* A binary search over the 20 bounds: at most 5 comparisons. */
	int lo = 0, hi = DLOCK_STAT_BUCKETS - 1;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (us <= stat_bounds_us[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

void dlock__hist_add(dlock__hist *h, int64_t us)
{
	if (us < 0)
		us = 0;
	atomic_fetch_add_explicit(&h->counts[dlock__stat_bucket(us)], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_us, (uint64_t)us, memory_order_relaxed);
}

void dlock__hist_read(const dlock__hist *h, dlock_stat_histogram *out)
{
	size_t i;

	out->count = 0;
	out->sum_us = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
	for (i = 0; i < DLOCK_STAT_BUCKETS; i++) {
		out->counts[i] = atomic_load_explicit(&h->counts[i], memory_order_relaxed);
		out->count += out->counts[i];
	}
}

const char *dlock_stat_event_type_str(int type)
{
	switch (type) {
	case DLOCK_STAT_ACQUIRED:
		return "acquired";
	case DLOCK_STAT_NOT_ACQUIRED:
		return "not-acquired";
	case DLOCK_STAT_RELEASED:
		return "released";
	case DLOCK_STAT_LOST:
		return "lost";
	case DLOCK_STAT_RENEWAL_FAILED:
		return "renewal-failed";
	case DLOCK_STAT_NODE_DOWN:
		return "node-down";
	case DLOCK_STAT_NODE_UP:
		return "node-up";
	case DLOCK_STAT_BRAIN_SPLIT:
		return "brain-split";
	default:
		return "unknown";
	}
}
