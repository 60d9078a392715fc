/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The permit half of a target (`run -c N NAME`): one permit of the
 * expirable semaphore NAME (Redisson's RPermitExpirableSemaphore) of N
 * permits, held as a lock is - renewed while the job runs, given back when
 * it has exited - so that at most N such jobs run at once. The first user
 * sets N; a run that says another N is refused, since the count is shared
 * and one run cannot quietly change what every other machine counts on.
 * `unlock --force NAME` gives every taken permit back: the holders, which
 * listen on the semaphore's channel, stop their jobs at once.
 */
#include <stdio.h>
#include <string.h>

#include "target.h"

int cli_permit_open(cli_target *t, const cli_config *cfg)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;

	o.kind = DLOCK_SEMAPHORE_EXPIRABLE;
	t->permits = cfg->permits;
	return dlock_semaphore_new(&t->sem, t->clients[0], t->name, &o);
}

/* Set the count to N if nobody has, else make sure it is N. A semaphore's
 * total is its free permits plus those taken (Redisson's setPermits counts
 * it so), read at once by the query. */
static int check_count(cli_target *t)
{
	dlock_semaphore_info *info = NULL;
	int64_t total;
	int set = 0, rc;

	if (t->permits_checked)
		return 0;
	if ((rc = dlock_semaphore_try_set_permits(&set, t->sem, t->permits)) < 0)
		return rc;
	if (!set) {
		if ((rc = dlock_semaphore_query(&info, t->sem)) < 0)
			return rc;
		total = dlock_semaphore_info_available(info) +
				(int64_t)dlock_semaphore_info_permits(info);
		dlock_semaphore_info_free(info);
		if (total != t->permits) {
			snprintf(t->err, sizeof(t->err),
					"it has %lld permit%s, not %lld: run with -c %lld (its first "
					"user set the count; to start over, delete the keys %s and "
					"{%s}:timeout while no job holds a permit)",
					(long long)total, total == 1 ? "" : "s",
					(long long)t->permits, (long long)total, t->name, t->name);
			return DLOCK_EINVAL;
		}
	}
	t->permits_checked = 1;
	return 0;
}

int cli_permit_acquire(cli_target *t, int64_t wait_ms, int64_t lease_ms, int64_t *validity_ms)
{
	int rc;

	t->err[0] = '\0';
	if ((rc = check_count(t)) < 0)
		return rc;
	rc = dlock_semaphore_acquire_permit(t->permit_id, t->sem, wait_ms, lease_ms);
	if (rc == 0 && dlock_semaphore_validity_ms(validity_ms, t->sem, t->permit_id) != 0)
		*validity_ms = 0;
	return rc;
}

int cli_permit_release(cli_target *t)
{
	t->err[0] = '\0';
	return dlock_semaphore_release_permit(t->sem, t->permit_id);
}

int cli_permit_validity(cli_target *t, int64_t *ms)
{
	return dlock_semaphore_validity_ms(ms, t->sem, t->permit_id);
}

typedef struct lost_hook {
	void (*fn)(int reason, void *arg);
	void *arg;
} lost_hook;

static lost_hook hook; /* one permit per process: the CLI's own state */

static void on_permit_lost(const dlock_lost_event *ev, void *userdata)
{
	(void)userdata;
	hook.fn((int)ev->reason, hook.arg);
}

int cli_permit_on_lost(cli_target *t, void (*fn)(int reason, void *arg), void *arg)
{
	hook.fn = fn;
	hook.arg = arg;
	return dlock_semaphore_set_lost_cb(t->sem, on_permit_lost, NULL);
}
