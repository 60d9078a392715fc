/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock hold NAME`: etcdctl lock without a command. The lock is held by
 * dlock itself while a script does its work, and the script says when it
 * is done by a signal or by closing dlock's stdin - so a coproc or a pipe
 * from the script releases it even when the script dies:
 *
 *   coproc LOCK { dlock hold deploy; }
 *   read -r owner <&"${LOCK[0]}"    # held from here on
 *   ./deploy.sh
 *   exec {LOCK[1]}>&-; wait          # released
 *
 * The hold is run's (run.c): the same cancellable wait, stop signals and
 * loss notices on one pipe, the same renewals. Nothing is run, so nothing
 * needs stopping: a loss is reported and ends dlock (70).
 *
 * `dlock wait NAME`: until nobody holds NAME, without taking it - a look
 * every WAIT_POLL_MS (a held lock's unlock message is for the waiters
 * queued to take it; a poll keeps this side free of the lock's protocol).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hold.h"
#include "metrics.h"

/* How often the hold's validity is looked at (as run does). */
#define CHECK_INTERVAL_MS 200
/* How often `wait` looks whether the lock is free. */
#define WAIT_POLL_MS 100
#define EXIT_LEASE_END 124
#define EXIT_IOERR 74

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* stdin tells when to release, unless there is none to tell (closed, or
 * /dev/null as cron and `cmd &` in a script give): then only signals do. */
static int watch_stdin(void)
{
	struct stat in, null;

	if (fstat(STDIN_FILENO, &in) < 0)
		return 0;
	if (S_ISCHR(in.st_mode) && stat("/dev/null", &null) == 0 && in.st_rdev == null.st_rdev)
		return 0;
	return 1;
}

/* 1 when stdin reached EOF (or failed); what was written to it is read and dropped. */
static int stdin_closed(void)
{
	char buf[512];
	ssize_t got = read(STDIN_FILENO, buf, sizeof(buf));

	if (got < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	return got <= 0;
}

typedef enum hold_end { HOLD_RELEASE, HOLD_LOST, HOLD_LEASE_END } hold_end;

/* Wait until something ends the hold. */
static hold_end hold_until_done(cli_target *t, const char *owner, int64_t lease_end, int *reason)
{
	struct pollfd p[2] = { { cli_run_wake_fd(), POLLIN, 0 }, { -1, POLLIN, 0 } };
	int stop, lost;
	int64_t ms;

	if (watch_stdin())
		p[1].fd = STDIN_FILENO;
	for (;;) {
		int64_t wait = CHECK_INTERVAL_MS;

		if (lease_end != INT64_MAX && lease_end - now_ms() < wait)
			wait = lease_end - now_ms() > 0 ? lease_end - now_ms() : 0;
		if (poll(p, 2, (int)wait) < 0 && errno != EINTR)
			return HOLD_RELEASE;
		cli_run_notes(&stop, &lost, reason);
		if (stop != 0)
			return HOLD_RELEASE;
		if (p[1].fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) && stdin_closed())
			return HOLD_RELEASE;
		if (now_ms() >= lease_end)
			return HOLD_LEASE_END;
		if (lost)
			return HOLD_LOST;
		if (cli_target_validity(t, owner, &ms) != 0) {
			/* Ended here before a loss was told: its time ran out unrenewed. */
			*reason = DLOCK_LOST_UNREACHABLE;
			return HOLD_LOST;
		}
		if (ms <= 0) { /* the keys can expire now: a lease's end, or renewals failing */
			*reason = DLOCK_LOST_UNREACHABLE;
			return lease_end != INT64_MAX ? HOLD_LEASE_END : HOLD_LOST;
		}
	}
}

int cli_hold(cli_target *t, const cli_config *cfg, const cli_run_args *a)
{
	char owner[128];
	int64_t validity = 0, token = 0, lease_end = INT64_MAX;
	int rc, reason = 0;

	cli_target_default_owner(t, owner);
	if (cli_run_signals(t) < 0) {
		fprintf(stderr, "dlock: hold: cannot set up signals: %s\n", strerror(errno));
		return EXIT_UNAVAILABLE;
	}
	rc = cli_run_acquire(t, "hold", owner, a, &validity, &token);
	if (rc > 0)
		return rc; /* stopped by a signal while waiting */
	if (rc < 0) {
		cli_report_failure("hold", t, rc);
		return cli_exit_for(rc, cfg);
	}
	/* A lease ends when the keys can expire, counted from the acquisition's
	 * send (its round trip comes out of it): none left, no owner printed. */
	if (a->lease_ms > 0 && (cli_target_validity(t, owner, &validity) != 0 || validity <= 0)) {
		fprintf(stderr, "dlock: hold: lock \"%s\": the acquisition took its whole -l "
				"lease; exit 124\n", t->name);
		cli_target_release(t, owner);
		return EXIT_LEASE_END;
	}
	if (a->lease_ms > 0)
		lease_end = now_ms() + validity;
	cli_metrics_write(t, cfg->metrics_path); /* before the owner: then it is there */
	printf("%s\n", owner);
	if (t->fenced)
		printf("%lld\n", (long long)token);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "dlock: hold: writing the owner: %s; releasing \"%s\"\n",
				strerror(errno), t->name);
		cli_target_release(t, owner);
		return EXIT_IOERR;
	}
	switch (hold_until_done(t, owner, lease_end, &reason)) {
	case HOLD_LEASE_END:
		fprintf(stderr, "dlock: hold: lock \"%s\" reached the end of its lease\n", t->name);
		return EXIT_LEASE_END;
	case HOLD_LOST:
		fprintf(stderr, "dlock: hold: lock \"%s\" was lost: %s\n", t->name,
				cli_run_lost_cause(t, reason));
		return EXIT_LOST;
	default:
		break;
	}
	rc = cli_target_release(t, owner);
	if (rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER) {
		fprintf(stderr, "dlock: hold: lock \"%s\" was lost before the release: %s\n",
				t->name, cli_target_errmsg(t));
		return EXIT_LOST;
	}
	if (rc < 0) {
		fprintf(stderr, "dlock: hold: releasing \"%s\": %s\n", t->name, cli_target_errmsg(t));
		return cli_exit_for(rc, cfg);
	}
	return 0;
}

/* A key that exists but is not a lock would look held forever: DLOCK_EWRONGTYPE
 * when a node has one under the name, said on stderr with what it is (nodes
 * that do not answer are left to the looks), else 0. */
static int not_a_lock(cli_target *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		dlock_lock_info *info = NULL;
		int rc = dlock_lock_query(&info, t->locks[i]);

		dlock_lock_info_free(info);
		if (rc == DLOCK_EWRONGTYPE) {
			fprintf(stderr, "dlock: wait: %s\n", dlock_lock_errmsg(t->locks[i]));
			return rc;
		}
	}
	return 0;
}

int cli_wait_free(cli_target *t, const cli_config *cfg, int64_t wait_ms)
{
	int64_t start = now_ms();
	int locked = 1, looks = 0, rc;

	for (;;) {
		int64_t left = wait_ms < 0 ? WAIT_POLL_MS : start + wait_ms - now_ms();
		struct timespec ts;

		if ((rc = cli_target_is_locked(t, &locked)) < 0) {
			fprintf(stderr, "dlock: wait: \"%s\": %s\n", t->name, cli_target_errmsg(t));
			return cli_exit_for(rc, cfg);
		}
		if (!locked)
			return 0;
		if (looks++ == 0 && (rc = not_a_lock(t)) < 0)
			return cli_exit_for(rc, cfg);
		if (left <= 0) {
			if (!cfg->quiet)
				fprintf(stderr, "dlock: wait: lock \"%s\" still held after %lld ms\n",
						t->name, (long long)wait_ms);
			return cfg->conflict_exit;
		}
		if (left > WAIT_POLL_MS)
			left = WAIT_POLL_MS;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (long)(left % 1000) * 1000000;
		nanosleep(&ts, NULL);
	}
}
