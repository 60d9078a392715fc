/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock_diagnostics - take a RedLock over several Redis servers and show
 * how each server voted.
 *
 * A RedLock is held when a quorum (n/2+1) of n independent servers granted
 * it within its lease. This program tries once (or waits up to -w), prints
 * the outcome, the validity (how long the caller may rely on the lock), and
 * one line per server from dlock_redlock_member_status(): its vote (acquired, held
 * by another owner, error, young = restarted too recently to count, or not
 * awaited = the outcome was decided before it answered), the error and the
 * message naming the server and the cause. Then it holds the lock
 * briefly, checks it is still held on a quorum, and releases it. Use it to
 * see which servers of a RedLock deployment are reachable and agree, or to
 * watch a lock survive a dead server (with 5 servers, 2 may be down).
 *
 *   redlock_diagnostics [-l LEASE_MS] [-w WAIT_MS] [--hold MS] [--timeout MS]
 *                       [--restart-guard MS] [--name NAME] [URI...]
 *
 *   -l LEASE_MS          the lease (default 10000); the lock is never renewed
 *   -w WAIT_MS           how long to wait when others hold it (default 0: one attempt)
 *   --hold MS            how long to hold it before releasing (default 500)
 *   --timeout MS         connect and per-command deadline per server (default 500):
 *                        a dead server costs at most this much
 *   --restart-guard MS   ignore the "free" vote of a server up for less than MS while
 *                        another shows the lock held ("young"); default: the longer of
 *                        the lease and the watchdog timeout (30 s); 0 = off
 *   --name NAME          the lock's name (default "diagnostics")
 *   URI...               redis://[[user]:password@]host[:port][/db], one per server;
 *                        default: $DLOCK_NODES (comma-separated), else the five servers
 *                        redis://127.0.0.1:6379 ... redis://127.0.0.1:6383
 *
 * Exit status: 0 acquired and released; 2 held by others; 3 no quorum (too
 * many servers failed); 4 expired (a quorum, but too late); 1 other errors.
 *
 * Try it: run two copies at once with --hold 3000 (the second one reports
 * "held by others" and which servers the first one holds), or kill one or
 * two of the servers and run it again.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlock.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_NODES 64

static const char *const default_nodes[] = {
	"redis://127.0.0.1:6379", "redis://127.0.0.1:6380", "redis://127.0.0.1:6381",
	"redis://127.0.0.1:6382", "redis://127.0.0.1:6383",
};

static const char *vote_name(dlock_vote v)
{
	switch (v) {
	case DLOCK_VOTE_ACQUIRED: return "acquired";
	case DLOCK_VOTE_HELD: return "held";
	case DLOCK_VOTE_ERROR: return "error";
	case DLOCK_VOTE_YOUNG: return "young";
	case DLOCK_VOTE_NONE: return "not awaited";
	}
	return "?";
}

/* The code's name, shorter than dlock_strerror() for a table column. */
static const char *error_name(int error)
{
	switch (error) {
	case DLOCK_OK: return "-";
	case DLOCK_EINVAL: return "EINVAL";
	case DLOCK_ENOMEM: return "ENOMEM";
	case DLOCK_ECONN: return "ECONN";
	case DLOCK_ETIMEDOUT: return "ETIMEDOUT";
	case DLOCK_EAUTH: return "EAUTH";
	case DLOCK_ESERVER: return "ESERVER";
	case DLOCK_EWRONGTYPE: return "EWRONGTYPE";
	case DLOCK_EPROTO: return "EPROTO";
	case DLOCK_ENOTACQUIRED: return "ENOTACQUIRED";
	case DLOCK_ENOTOWNER: return "ENOTOWNER";
	case DLOCK_ELOST: return "ELOST";
	case DLOCK_ENOQUORUM: return "ENOQUORUM";
	case DLOCK_EEXPIRED: return "EEXPIRED";
	case DLOCK_ESYS: return "ESYS";
	}
	return "?";
}

static const char *outcome_name(int rc)
{
	switch (rc) {
	case 0: return "acquired";
	case DLOCK_ENOTACQUIRED: return "held by others";
	case DLOCK_ENOQUORUM: return "no quorum";
	case DLOCK_EEXPIRED: return "expired";
	}
	return dlock_strerror(rc);
}

static int exit_for(int rc)
{
	switch (rc) {
	case 0: return 0;
	case DLOCK_ENOTACQUIRED: return 2;
	case DLOCK_ENOQUORUM: return 3;
	case DLOCK_EEXPIRED: return 4;
	}
	return 1;
}

static void print_votes(dlock_redlock *lock)
{
	size_t i, n = dlock_redlock_size(lock), late = 0;

	printf("  %-22s %-11s %-10s %-8s %-8s %s\n", "NODE", "VOTE", "ERROR", "TTL_MS", "UPTIME_S",
	       "MESSAGE");
	for (i = 0; i < n; i++) {
		dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
		char ttl[24] = "-", up[24] = "-";

		if (dlock_redlock_member_status(&st, lock, i) != 0) {
			printf("  %-22s (no status)\n", "?");
			continue;
		}
		if (st.ttl_ms >= 0)
			snprintf(ttl, sizeof(ttl), "%lld", (long long)st.ttl_ms);
		if (st.uptime_s >= 0)
			snprintf(up, sizeof(up), "%lld", (long long)st.uptime_s);
		printf("  %-22s %-11s %-10s %-8s %-8s %s\n", st.node != NULL ? st.node : "?",
		       vote_name(st.vote), error_name(st.error), ttl, up, st.message);
		late += st.vote == DLOCK_VOTE_NONE;
	}
	if (late > 0)
		printf("  (not awaited: the outcome was decided before that server answered;\n"
		       "   the release is sent to it all the same)\n");
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int number(const char *opt, const char *arg, long long min, long long *out)
{
	char *end;

	*out = strtoll(arg, &end, 10);
	if (*arg == '\0' || *end != '\0' || *out < min) {
		fprintf(stderr, "redlock_diagnostics: %s needs a number >= %lld, not \"%s\"\n", opt,
			min, arg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	dlock_client_options copts = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ropts = DLOCK_REDLOCK_OPTIONS_INIT;
	const char *uris[MAX_NODES];
	const char *name = "diagnostics";
	char *env_copy = NULL;
	size_t n = 0, i;
	long long lease = 10000, wait = 0, hold = 500, timeout = 500, guard = -1;
	int64_t validity = 0;
	dlock_redlock *lock = NULL;
	int rc, status;

	for (int a = 1; a < argc; a++) {
		const char *opt = argv[a];
		long long *target = NULL, min = 0;

		if (strcmp(opt, "-l") == 0)
			target = &lease, min = 1;
		else if (strcmp(opt, "-w") == 0)
			target = &wait;
		else if (strcmp(opt, "--hold") == 0)
			target = &hold;
		else if (strcmp(opt, "--timeout") == 0)
			target = &timeout, min = 1;
		else if (strcmp(opt, "--restart-guard") == 0)
			target = &guard;
		if (target != NULL) {
			if (a + 1 >= argc || number(opt, argv[++a], min, target) != 0)
				return 1;
		} else if (strcmp(opt, "--name") == 0 && a + 1 < argc) {
			name = argv[++a];
		} else if (opt[0] == '-') {
			fprintf(stderr, "usage: redlock_diagnostics [-l LEASE_MS] [-w WAIT_MS] "
				"[--hold MS] [--timeout MS] [--restart-guard MS] [--name NAME] [URI...]\n");
			return strcmp(opt, "-h") == 0 || strcmp(opt, "--help") == 0 ? 0 : 1;
		} else if (n < MAX_NODES) {
			uris[n++] = opt;
		}
	}
	if (n == 0 && getenv("DLOCK_NODES") != NULL && *getenv("DLOCK_NODES") != '\0') {
		char *save = NULL, *tok;

		env_copy = strdup(getenv("DLOCK_NODES"));
		if (env_copy == NULL)
			return 1;
		for (tok = strtok_r(env_copy, ",", &save); tok != NULL && n < MAX_NODES;
		     tok = strtok_r(NULL, ",", &save))
			uris[n++] = tok;
	}
	if (n == 0) {
		for (i = 0; i < sizeof(default_nodes) / sizeof(default_nodes[0]); i++)
			uris[n++] = default_nodes[i];
	}

	copts.connect_timeout_ms = (int)timeout;
	copts.command_timeout_ms = (int)timeout;
	ropts.restart_guard_ms = guard;
	rc = dlock_redlock_new_from_uris(&lock, uris, n, name, &copts, &ropts);
	if (rc != 0) {
		fprintf(stderr, "redlock_diagnostics: %s: %s\n", dlock_strerror(rc), dlock_errmsg_last());
		free(env_copy);
		return 1;
	}

	printf("RedLock \"%s\" on %zu server%s (quorum %zu), lease %lld ms, wait %lld ms\n", name, n,
	       n == 1 ? "" : "s", n / 2 + 1, lease, wait);
	rc = dlock_redlock_acquire(lock, NULL, wait, lease);
	if (rc == 0)
		rc = dlock_redlock_validity_ms(&validity, lock, NULL);
	if (rc == 0)
		printf("outcome: acquired, valid for %lld ms\n", (long long)validity);
	else
		printf("outcome: %s (%s)\n", outcome_name(rc), dlock_redlock_errmsg(lock));
	print_votes(lock);
	status = exit_for(rc);

	if (rc == 0) {
		/* Work only within the validity: past it, another owner may hold the lock. */
		if (hold >= validity)
			hold = validity > 100 ? validity - 100 : 0;
		printf("holding it for %lld ms\n", hold);
		sleep_ms((long)hold);
		rc = dlock_redlock_check(lock, NULL);
		printf("check: %s\n", rc == 0 ? "still held on a quorum" : outcome_name(rc));
		rc = dlock_redlock_release(lock, NULL);
		if (rc == 0) {
			printf("released\n");
		} else {
			/* Some server did not answer the release: its copy expires with the lease. */
			printf("release: %s (%s); what was not released expires within %lld ms\n",
			       dlock_strerror(rc), dlock_redlock_errmsg(lock), lease);
			status = 1;
		}
	}

	dlock_redlock_free(lock);
	free(env_copy);
	return status;
}
