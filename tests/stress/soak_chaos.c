/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * soak_chaos - RedLock under chaos: real redis-server processes killed,
 * paused and disconnected while worker processes take turns in a critical
 * section, and an invariant checker that reads what they did.
 *
 * Setup: 5 servers (tests/harness), then 6 worker processes forked from the
 * parent (children never call harness functions; they only use the library,
 * and leave with _exit). Each worker opens its own fenced RedLock
 * (dlock_redlock_new_from_uris, client command and connect timeout 200 ms, watchdog
 * timeout 1500 ms, restart guard ON at its default window: the longer of the
 * watchdog timeout and the lease). Workers 0, 2, 4 hold with the watchdog
 * (a quarter of their sections last 0.1-1.2 s, across renewals); 1, 3, 5
 * with a 1500 ms lease.
 *
 * A critical section reads a counter file ("count last-token"), works a
 * little, writes count+1 and its token back, and appends one line
 * "<token> <begin_us> <end_us> <pid>" (CLOCK_MONOTONIC, shared by the
 * processes of one machine) with one write() to an O_APPEND log. Leased
 * workers take the library at its word - validity ms from the return - and
 * start a section only when that leaves plenty of time, write only before
 * it runs out; watchdog workers write only while dlock_redlock_check() says
 * held and no lost callback fired - a lost lock abandons the section
 * without writing (still unlocked). Every try(wait) must return within
 * wait + 2 x command timeout + margin, every unlock within
 * 2 x command timeout + margin (margin 150 ms, more under sanitizers and
 * valgrind); after every grant a quorum of the members taken must still
 * have at least the reported validity left on their keys (PTTL). Workers
 * log grants ("@G"), failed tries ("@E"), lost/abandoned/skipped sections
 * and what broke ("@V") in the same log.
 *
 * Phase 1 (DLOCK_SOAK_SECONDS - 15 s, default 45 s, at least 10 s): the
 * parent, never taking more than 2 servers down at once, SIGKILLs servers
 * (restarting them empty only after the longest lease/watchdog timeout, as
 * the Redlock spec's delayed restart requires; ONCE immediately, while a
 * holder had its key there, which only the restart guard makes safe),
 * SIGSTOPs them for 0.1-2 s, and drops client connections (CLIENT KILL TYPE
 * normal). A server restarted empty counts as down until the next grant has
 * written the fencing counter back to it, so the servers that lost the
 * counter never outnumber 2 (redlock.h: the tokens' order rests on a server
 * that kept its counter). Phase 2 (~15 s): 3 of 5 servers SIGKILLed for 4 s:
 * tries fail (no quorum) within their deadlines and none is granted; then
 * the servers come back and sections complete again.
 *
 * Checks (one each): no overlapping sections; tokens strictly increasing in
 * begin order; the resource never saw a token <= the last one it accepted;
 * counter == completed sections (and holds the last token); honest
 * validity; no member hold still renewed after an unlock returned (spec:
 * unlock cancels renewal); every loss a holder saw also came through the
 * lost callback; no slow call or undocumented error code; phase 2 as
 * above; workers leave their loop by themselves when the stop file appears
 * (else kill -9, a failure); with every worker unlocked and its clients
 * still open, no lock key outlives a lease. Prints the figures and
 * "N passed, N failed"; exits non-zero on any failure, keeping the log
 * and the chaos journal (timestamps on the same clock). SOAK_DEBUG=1
 * prints unlock errors as they happen.
 */
#include <dlock.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redis_harness.h"
#include "support.h"

#define NSERVERS 5
#define NWORKERS 6
#define MAX_DOWN 2 /* never more servers down at once in phase 1 */
#define CMD_TIMEOUT_MS 200
#define WATCHDOG_MS 1500
#define LEASE_MS 1500
#define LONGEST_TTL_MS 1500 /* max(lease, watchdog timeout) */
#define MAX_WAIT_MS 1500
#define LOCK_NAME "soak:chaos"
#define TOKEN_KEY "redisson_lock_token:{" LOCK_NAME "}"
#define DRIFT_MS (LEASE_MS / 100) /* drift factor 0.01 (the default) */
#define PHASE2_DOWN_MS 4000       /* > LONGEST_TTL_MS: a delayed restart */
#define PHASE2_AFTER_MS 8000      /* run on after the servers came back */
#define COUNTER_LEN 42            /* "%020lld %020lld\n" */

/* Worker-reported violation kinds ("@V pid t kind a b"). */
enum {
	V_SLOW_TRY = 1,
	V_SLOW_UNLOCK,
	V_BAD_RC,
	V_FENCE,
	V_COUNTER_FILE,
	V_IO,
	V_VALIDITY,
	V_RENEWED,
	V_NO_CALLBACK
};

static const char *const v_names[] = { "", "try exceeded wait + 2 x command timeout + margin",
	"unlock exceeded 2 x command timeout + margin", "unexpected error code",
	"resource saw a token <= the last one it accepted", "counter file unreadable",
	"log/counter I/O failed",
	"validity (a) longer than the quorum's keys had left when try returned (b)",
	"unlock (rc a) returned, but the watchdog still renews the hold on member b",
	"dlock_redlock_check() said lost (a) while held, and no lost callback came" };

/* ---- shared by parent and workers (set before fork) -------------------- */

static char g_uris[NSERVERS][64];
static char g_dir[PATH_MAX], g_log_path[PATH_MAX + 16], g_counter_path[PATH_MAX + 16],
		g_stop_path[PATH_MAX + 16], g_exit_path[PATH_MAX + 16],
		g_journal_path[PATH_MAX + 16];
static int64_t g_hard_end_us; /* a worker gives up by itself after this */
static int g_margin_ms;       /* scheduling slack on top of the library's bounds */

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
	return now_us() / 1000;
}

static uint64_t g_rng;

static void rng_seed(uint64_t seed)
{
	g_rng = seed ? seed : 0x9e3779b97f4a7c15ULL;
}

/* Uniform-ish in [0, n). */
static int64_t rnd(int64_t n)
{
	g_rng ^= g_rng >> 12;
	g_rng ^= g_rng << 25;
	g_rng ^= g_rng >> 27;
	return n <= 0 ? 0 : (int64_t)((g_rng * 0x2545f4914f6cdd1dULL >> 11) % (uint64_t)n);
}

/* ---- workers ------------------------------------------------------------ */

static int g_log_fd = -1, g_counter_fd = -1;
static atomic_int g_lost_events; /* lost callbacks (background thread) */
static atomic_int g_lost_flag;   /* a loss since the current acquisition began */
static int g_io_failed;

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line, one write() to the O_APPEND log: lines of processes never mix. */
static void log_line(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf) || write(g_log_fd, buf, (size_t)n) != (ssize_t)n)
		g_io_failed = 1;
}

static void on_lost(const dlock_lost_event *ev, void *userdata)
{
	(void)ev, (void)userdata;
	atomic_fetch_add(&g_lost_events, 1);
	atomic_store(&g_lost_flag, 1);
}

static int stop_requested(void)
{
	return access(g_stop_path, F_OK) == 0;
}

typedef struct wstats {
	long tries, acquired, sections, skipped, abandoned, unlock_errors, validity_reports;
	long renewed_reports;
	int64_t max_overrun_ms, max_unlock_ms, max_stale_ms;
} wstats;

/* Still allowed to write? Watchdog: held on a quorum and no loss reported.
 * Lease: the validity has not run out, with room for the write. */
static int still_held(dlock_redlock *rl, int watchdog, int64_t deadline_us)
{
	if (watchdog)
		return !atomic_load(&g_lost_flag) && dlock_redlock_check(rl, NULL) == 0;
	return now_us() + 5000 <= deadline_us;
}

/* Why a held lock is not held any more: the members' local states. */
static void explain_member_states(dlock_redlock *rl, int idx, int64_t t0, int64_t t1)
{
	size_t i;

	fprintf(stderr,
			"worker %d: granted (try %" PRId64 "..%" PRId64 " us), now check says %d,"
			" lost flag %d:",
			idx, t0, t1, dlock_redlock_check(rl, NULL), atomic_load(&g_lost_flag));
	for (i = 0; i < dlock_redlock_size(rl); i++) {
		dlock_member_status ms;

		dlock_redlock_member_status(&ms, rl, i);
		fprintf(stderr, " [%zu %s vote %d err %d state %d]", i, ms.node, (int)ms.vote,
				ms.error, dlock_lock_check(dlock_redlock_member(rl, i), NULL));
	}
	fprintf(stderr, " at %" PRId64 "\n", now_us());
}

/*
 * A watchdog holder abandons its section: the loss it saw must also come
 * through the lost callback (on the background thread, possibly a moment
 * after dlock_redlock_check() shows it).
 */
static void abandon(dlock_redlock *rl, int idx, int64_t token, int64_t t0, int64_t t1)
{
	static int reports;
	int64_t until = now_us() + 200000;
	pid_t pid = getpid();
	int check = dlock_redlock_check(rl, NULL);

	log_line("@A %d %" PRId64 " %" PRId64 " 1 %d\n", (int)pid, now_us(), token, check);
	while (!atomic_load(&g_lost_flag) && now_us() < until)
		dl_sleep_ms(5);
	if (atomic_load(&g_lost_flag))
		return;
	log_line("@V %d %" PRId64 " %d %d 0\n", (int)pid, now_us(), V_NO_CALLBACK, check);
	if (reports++ < 3)
		explain_member_states(rl, idx, t0, t1);
}

/*
 * The critical section on the counter file. Returns 1 completed (counter
 * written, line logged), 0 abandoned (nothing written).
 */
static int section(dlock_redlock *rl, int idx, int watchdog, int64_t token, int64_t deadline_us,
		int64_t work_ms, int64_t t0, int64_t t1)
{
	char buf[COUNTER_LEN + 1];
	long long count, last;
	int64_t begin, end, until;
	pid_t pid = getpid();
	ssize_t n;

	begin = now_us();
	n = pread(g_counter_fd, buf, COUNTER_LEN, 0);
	if (n != COUNTER_LEN) {
		log_line("@V %d %" PRId64 " %d %zd 0\n", (int)pid, begin, V_IO, n);
		return 0;
	}
	buf[COUNTER_LEN] = '\0';
	if (sscanf(buf, "%lld %lld", &count, &last) != 2) {
		log_line("@V %d %" PRId64 " %d 0 0\n", (int)pid, begin, V_COUNTER_FILE);
		return 0;
	}
	/* Kleppmann's fenced resource: it has seen `last`; a token not above it
	 * means two holders' grants were not ordered. */
	if (token <= last)
		log_line("@V %d %" PRId64 " %d %" PRId64 " %lld\n", (int)pid, begin, V_FENCE, token,
				last);
	/* The work: sleep in slices, a watchdog holder giving up as soon as it
	 * hears of a loss. */
	until = begin + work_ms * 1000;
	for (;;) {
		int64_t left = until - now_us();

		if (left <= 0)
			break;
		if (!still_held(rl, watchdog, deadline_us))
			break;
		dl_sleep_ms(left > 20000 ? 20 : (left + 999) / 1000);
	}
	if (!still_held(rl, watchdog, deadline_us)) {
		if (watchdog)
			abandon(rl, idx, token, t0, t1);
		else
			log_line("@A %d %" PRId64 " %" PRId64 " 0 0\n", (int)pid, now_us(), token);
		return 0;
	}
	snprintf(buf, sizeof(buf), "%020lld %020lld\n", count + 1, (long long)token);
	if (pwrite(g_counter_fd, buf, COUNTER_LEN, 0) != COUNTER_LEN) {
		log_line("@V %d %" PRId64 " %d 0 0\n", (int)pid, now_us(), V_IO);
		return 0;
	}
	end = now_us();
	log_line("%" PRId64 " %" PRId64 " %" PRId64 " %d\n", token, begin, end, (int)pid);
	if (!watchdog && end > deadline_us)
		log_line("@T %d %" PRId64 " %" PRId64 " 0 0\n", (int)pid, end,
				(end - deadline_us) / 1000);
	return 1;
}

static int cmp_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x > y ? -1 : x < y;
}

/*
 * The validity is "the time the caller may rely on holding the lock"
 * (redlock.h): when try returned (t1), a quorum of the members it took must
 * have had at least that long left on their keys. Reads the PTTL of every
 * member that voted ACQUIRED; a member's time left at t1 is at most
 * PTTL + (reply time - t1). Returns the time the quorum had left at most
 * (the quorum-th largest), or INT64_MAX when too few members answered to tell.
 */
static int64_t quorum_time_left(dlock_redlock *rl, int64_t t1_us)
{
	int64_t left[NSERVERS];
	size_t i, n = dlock_redlock_size(rl), k = 0, quorum = NSERVERS / 2 + 1;

	for (i = 0; i < n && i < NSERVERS; i++) {
		dlock_member_status ms;
		int64_t ttl;

		if (dlock_redlock_member_status(&ms, rl, i) != 0 || ms.vote != DLOCK_VOTE_ACQUIRED)
			continue;
		if (dlock_lock_remaining_ttl_ms(&ttl, dlock_redlock_member(rl, i)) != 0 || ttl < -2)
			continue; /* paused or dropped meanwhile: unknown */
		if (ttl == -1)
			ttl = INT64_MAX / 2; /* no expiry at all */
		left[k++] = (ttl < 0 ? 0 : ttl) + (now_us() - t1_us + 999) / 1000;
	}
	if (k < quorum)
		return INT64_MAX;
	qsort(left, k, sizeof(left[0]), cmp_desc);
	return left[quorum - 1];
}

static int rc_allowed(int rc)
{
	return rc == DLOCK_ENOTACQUIRED || rc == DLOCK_ENOQUORUM || rc == DLOCK_EEXPIRED ||
			rc == DLOCK_ETIMEDOUT;
}

static int worker_main(int idx)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	const char *uris[NSERVERS];
	dlock_redlock *rl = NULL;
	int watchdog = idx % 2 == 0, i, exit_code = 0, lost_logged = 0;
	int64_t lease = watchdog ? DLOCK_LEASE_WATCHDOG : LEASE_MS;
	int64_t bound_ms = 2 * CMD_TIMEOUT_MS + g_margin_ms;
	pid_t pid = getpid();
	wstats st;

	memset(&st, 0, sizeof(st));
	rng_seed((uint64_t)now_us() * 2654435761u ^ (uint64_t)pid << 32);
	g_log_fd = open(g_log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	g_counter_fd = open(g_counter_path, O_RDWR | O_CLOEXEC);
	if (g_log_fd < 0 || g_counter_fd < 0) {
		fprintf(stderr, "worker %d: open: %s\n", idx, strerror(errno));
		return 2;
	}
	co.command_timeout_ms = CMD_TIMEOUT_MS;
	co.connect_timeout_ms = CMD_TIMEOUT_MS;
	co.watchdog_timeout_ms = WATCHDOG_MS;
	ro.fenced = 1; /* restart_guard_ms stays -1: the default window */
	for (i = 0; i < NSERVERS; i++)
		uris[i] = g_uris[i];
	if (dlock_redlock_new_from_uris(&rl, uris, NSERVERS, LOCK_NAME, &co, &ro) != 0) {
		fprintf(stderr, "worker %d: dlock_redlock_new_from_uris: %s\n", idx,
				dlock_errmsg_last());
		return 2;
	}
	dlock_redlock_set_lost_cb(rl, on_lost, NULL);

	while (!stop_requested()) {
		int64_t wait = rnd(100) < 20 ? 0 : 100 + rnd(MAX_WAIT_MS - 100 + 1);
		int64_t validity = -1, token = -1, t0, t1, elapsed, deadline_us = 0, work_ms;
		int rc, lost_now;

		if (now_us() > g_hard_end_us) {
			fprintf(stderr, "worker %d: no stop file by the hard deadline\n", idx);
			exit_code = 3;
			break;
		}
		atomic_store(&g_lost_flag, 0);
		t0 = now_us();
		rc = dlock_redlock_acquire_fenced(&token, rl, NULL, wait, lease);
		t1 = now_us();
		if (rc == 0 && dlock_redlock_validity_ms(&validity, rl, NULL) < 0)
			validity = 0; /* lost already: the checks below see it */
		elapsed = (t1 - t0) / 1000;
		st.tries++;
		if (elapsed - wait > st.max_overrun_ms)
			st.max_overrun_ms = elapsed - wait;
		if (elapsed > wait + bound_ms) {
			log_line("@V %d %" PRId64 " %d %" PRId64 " %" PRId64 "\n", (int)pid, t1,
					V_SLOW_TRY, elapsed, wait);
			fprintf(stderr,
					"worker %d: try(wait %" PRId64 ") took %" PRId64
					" ms, rc %d: %s\n",
					idx, wait, elapsed, rc,
					rc ? dlock_redlock_errmsg(rl) : "acquired");
		}
		if (rc != 0) {
			log_line("@E %d %" PRId64 " %d %" PRId64 " %" PRId64 "\n", (int)pid, t1, rc,
					elapsed, wait);
			if (!rc_allowed(rc)) {
				log_line("@V %d %" PRId64 " %d %d 0\n", (int)pid, t1, V_BAD_RC, rc);
				fprintf(stderr, "worker %d: try: %s\n", idx,
						dlock_redlock_errmsg(rl));
			}
			dl_sleep_ms(10 + rnd(40));
			continue;
		}
		st.acquired++;
		log_line("@G %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "\n", (int)pid, t0,
				t1, token, validity);
		if (wait == 0) {
			/* One parallel attempt: the library measured its elapsed time
			 * from (about) t0; what it did not count came after its decision. */
			int64_t counted = LEASE_MS - DRIFT_MS - 2 - validity;

			if (elapsed - counted > st.max_stale_ms)
				st.max_stale_ms = elapsed - counted;
		}
		{
			int64_t left = quorum_time_left(rl, t1);

			/* 5 ms: PTTL's rounding and the server's cached clock. */
			if (left != INT64_MAX && left + 5 < validity) {
				log_line("@V %d %" PRId64 " %d %" PRId64 " %" PRId64 "\n", (int)pid,
						t1, V_VALIDITY, validity, left);
				if (st.validity_reports++ < 3)
					fprintf(stderr,
							"worker %d: try(wait %" PRId64
							") took %" PRId64
							" ms and reported validity %" PRId64
							" ms, but the quorum's"
							" keys had at most %" PRId64 " ms left\n",
							idx, wait, elapsed, validity, left);
			}
		}
		if (watchdog) {
			work_ms = rnd(100) < 25 ? 100 + rnd(1100) : rnd(4);
			if (atomic_load(&g_lost_flag) || dlock_redlock_check(rl, NULL) != 0) {
				abandon(rl, idx, token, t0, t1);
				st.abandoned++;
			} else if (section(rl, idx, 1, token, 0, work_ms, t0, t1)) {
				st.sections++;
			} else {
				st.abandoned++;
			}
		} else {
			/* The library's word: validity ms from the return. */
			deadline_us = t1 + validity * 1000;
			work_ms = rnd(100) < 10 ? 50 + rnd(250) : rnd(4);
			if (validity <= 0 || deadline_us - now_us() < (work_ms + 100) * 1000) {
				log_line("@S %d %" PRId64 " %" PRId64 " 0 0\n", (int)pid, now_us(),
						validity);
				st.skipped++;
			} else if (section(rl, idx, 0, token, deadline_us, work_ms, t0, t1)) {
				st.sections++;
			} else {
				st.abandoned++;
			}
		}
		t0 = now_us();
		rc = dlock_redlock_release(rl, NULL);
		t1 = now_us();
		elapsed = (t1 - t0) / 1000;
		if (elapsed > st.max_unlock_ms)
			st.max_unlock_ms = elapsed;
		if (elapsed > bound_ms) {
			log_line("@V %d %" PRId64 " %d %" PRId64 " 0\n", (int)pid, t1,
					V_SLOW_UNLOCK, elapsed);
			fprintf(stderr, "worker %d: unlock took %" PRId64 " ms, rc %d\n", idx,
					elapsed, rc);
		}
		/* An unlock cancels renewal (whatever it returned): no member hold of
		 * this thread may still be held-and-renewed by its client. */
		for (i = 0; watchdog && i < NSERVERS; i++) {
			if (dlock_lock_check(dlock_redlock_member(rl, (size_t)i), NULL) != 0)
				continue;
			log_line("@V %d %" PRId64 " %d %d %d\n", (int)pid, now_us(), V_RENEWED, rc,
					i);
			if (st.renewed_reports++ < 3) {
				/* What the server holds tells a surplus count from a lost answer. */
				int64_t count = -1;
				int qrc = dlock_lock_hold_count(
						&count, dlock_redlock_member(rl, (size_t)i), NULL);

				fprintf(stderr,
						"worker %d: unlock returned %d (%s) but member %d (%s) is"
						" still held and renewed (the server counts %" PRId64
						" holds%s)\n",
						idx, rc, rc ? dlock_redlock_errmsg(rl) : "ok", i,
						g_uris[i], count,
						qrc == 0 ? "" : ", as far as it answered");
			}
		}
		if (rc != 0) {
			if (getenv("SOAK_DEBUG"))
				fprintf(stderr, "worker %d: unlock (%s, token %" PRId64 "): %s\n",
						idx, watchdog ? "watchdog" : "lease", token,
						dlock_redlock_errmsg(rl));
			st.unlock_errors++;
			log_line("@U %d %" PRId64 " %d 0 0\n", (int)pid, t1, rc);
		}
		lost_now = atomic_load(&g_lost_events);
		if (lost_now != lost_logged) {
			log_line("@L %d %" PRId64 " %d 0 0\n", (int)pid, now_us(),
					lost_now - lost_logged);
			lost_logged = lost_now;
		}
		dl_sleep_ms(rnd(20));
	}
	/* Every hold is released. Stay (clients open, watchdogs running) until
	 * the parent has looked at Redis: an unlock must cancel renewal. */
	log_line("@Q %d %" PRId64 " 0 0 0\n", (int)pid, now_us());
	while (access(g_exit_path, F_OK) != 0 && now_us() < g_hard_end_us)
		dl_sleep_ms(20);
	dlock_redlock_free(rl);
	lost_logged = atomic_load(&g_lost_events) - lost_logged;
	if (lost_logged > 0)
		log_line("@L %d %" PRId64 " %d 0 0\n", (int)pid, now_us(), lost_logged);
	log_line("@X %d %d %ld %ld %ld %ld %ld %ld %" PRId64 " %" PRId64 " %" PRId64 "\n", (int)pid,
			watchdog, st.tries, st.acquired, st.sections, st.skipped, st.abandoned,
			st.unlock_errors, st.max_overrun_ms, st.max_unlock_ms, st.max_stale_ms);
	if (g_io_failed) {
		fprintf(stderr, "worker %d: writing the log failed\n", idx);
		exit_code = exit_code ? exit_code : 4;
	}
	close(g_log_fd);
	close(g_counter_fd);
	return exit_code;
}

/* ---- the parent: chaos ---------------------------------------------------- */

enum { S_UP, S_PAUSED, S_KILLED, S_UNSEEDED };

typedef struct srv {
	rh_server *h;
	int state;
	int64_t until_ms; /* PAUSED: resume at; KILLED: restart at */
	int64_t floor;    /* UNSEEDED: the fencing counter the others had */
} srv;

typedef struct chaos {
	srv s[NSERVERS];
	long actions, kills, kills_p1, immediate, pauses, conn_killed, client_kill_cmds;
	long restart_failures;
	int immediate_held; /* the victim of the immediate restart had a holder's key */
} chaos;

static FILE *g_journal; /* the parent's chaos, timestamped like the log */

static void journal(const chaos *c, int i, const char *what)
{
	if (g_journal)
		fprintf(g_journal, "%" PRId64 " %s server %d (port %d)\n", now_us(), what, i,
				rh_server_port(c->s[i].h));
}

static int64_t get_token(rh_server *s)
{
	redisReply *r = rh_command(s, "GET %s", TOKEN_KEY);
	int64_t v = -1;

	if (r && r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	else if (r && r->type == REDIS_REPLY_NIL)
		v = 0;
	if (r)
		freeReplyObject(r);
	return v;
}

static int down_count(const chaos *c)
{
	int i, k = 0;

	for (i = 0; i < NSERVERS; i++)
		k += c->s[i].state != S_UP;
	return k;
}

/* The largest fencing counter of the servers that are up (except `skip`). */
static int64_t max_token_up(chaos *c, int skip)
{
	int64_t m = 0, v;
	int i;

	for (i = 0; i < NSERVERS; i++)
		if (i != skip && c->s[i].state == S_UP && (v = get_token(c->s[i].h)) > m)
			m = v;
	return m;
}

static void restart_now(chaos *c, int i)
{
	if (rh_server_restart(c->s[i].h) != 0) {
		c->restart_failures++;
		fprintf(stderr, "chaos: restart of server %d failed\n", i);
		return;
	}
	c->s[i].state = S_UNSEEDED;
	c->s[i].floor = max_token_up(c, i);
	journal(c, i, "restarted");
}

static void kill_server(chaos *c, int i, int64_t restart_at)
{
	if (rh_server_kill(c->s[i].h) != 0) {
		fprintf(stderr, "chaos: kill of server %d failed\n", i);
		return;
	}
	journal(c, i, "killed");
	c->kills++;
	c->s[i].state = S_KILLED;
	c->s[i].until_ms = restart_at;
}

/* Resume, restart and seed what is due. */
static void chaos_tick(chaos *c)
{
	int64_t now = now_ms();
	int i;

	for (i = 0; i < NSERVERS; i++) {
		srv *s = &c->s[i];

		if (s->state == S_PAUSED && now >= s->until_ms) {
			rh_server_resume(s->h);
			journal(c, i, "resumed");
			s->state = S_UP;
		} else if (s->state == S_KILLED && now >= s->until_ms) {
			restart_now(c, i);
		} else if (s->state == S_UNSEEDED && get_token(s->h) >= s->floor) {
			journal(c, i, "has the counter back:");
			s->state = S_UP;
		}
	}
}

static int pick_up(chaos *c)
{
	int up[NSERVERS], n = 0, i;

	for (i = 0; i < NSERVERS; i++)
		if (c->s[i].state == S_UP)
			up[n++] = i;
	return n ? up[rnd(n)] : -1;
}

static void client_kill(chaos *c)
{
	int i = pick_up(c);
	redisReply *r;

	if (i < 0)
		return;
	journal(c, i, "CLIENT KILL TYPE normal on");
	r = rh_command(c->s[i].h, "CLIENT KILL TYPE normal");
	c->client_kill_cmds++;
	if (r && r->type == REDIS_REPLY_INTEGER)
		c->conn_killed += (long)r->integer;
	if (r)
		freeReplyObject(r);
}

/* A server whose lock key a holder has right now (so the restart matters). */
static int pick_held(chaos *c)
{
	int i, start = (int)rnd(NSERVERS);

	for (i = 0; i < NSERVERS; i++) {
		int k = (start + i) % NSERVERS;

		if (c->s[k].state == S_UP && rh_command_int(c->s[k].h, "PTTL %s", LOCK_NAME) > 300)
			return k;
	}
	return -1;
}

static void phase1(chaos *c, int64_t end_ms)
{
	int64_t immediate_at = now_ms() + (end_ms - now_ms()) * 2 / 5, next = now_ms() + 500;

	while (now_ms() < end_ms) {
		int64_t now;
		int did = 0;

		chaos_tick(c);
		now = now_ms();
		if (!c->immediate && now >= immediate_at && down_count(c) < MAX_DOWN) {
			/* Once: kill a server that carries a holder's key and restart it at
			 * once, empty. Only the restart guard keeps that holder's lock safe
			 * (its vote is young while another server shows the holder). */
			int i = pick_held(c);

			if (i < 0 && now >= immediate_at + 10000)
				i = pick_up(c);
			if (i >= 0) {
				c->immediate_held = rh_command_int(c->s[i].h, "EXISTS %s",
								    LOCK_NAME) == 1;
				kill_server(c, i, now);
				restart_now(c, i);
				c->immediate++;
				c->kills_p1++;
				next = now + 300 + rnd(700);
				did = 1;
			}
		}
		if (!did && now >= next) {
			/* The first three are one of each, the rest at random. */
			int64_t action = c->actions < 3 ? c->actions * 35 : rnd(100), i;

			c->actions++;

			if (action < 35 && down_count(c) < MAX_DOWN && (i = pick_up(c)) >= 0) {
				/* The delayed restart: after the longest TTL, plus some. */
				kill_server(c, (int)i, now + LONGEST_TTL_MS + 300 + rnd(1500));
				c->kills_p1++;
			} else if (action < 70 && down_count(c) < MAX_DOWN &&
					(i = pick_up(c)) >= 0) {
				if (rh_server_pause(c->s[i].h) == 0) {
					journal(c, (int)i, "paused");
					c->s[i].state = S_PAUSED;
					c->s[i].until_ms = now + 100 + rnd(1900);
					c->pauses++;
				}
			} else {
				client_kill(c);
			}
			next = now + 200 + rnd(800);
		}
		dl_sleep_ms(20);
	}
}

/* Everything back up and seeded (restarts still delayed). 0, or -1 on timeout. */
static int quiesce(chaos *c, int64_t limit_ms)
{
	int64_t deadline = now_ms() + limit_ms;
	int i;

	for (i = 0; i < NSERVERS; i++)
		if (c->s[i].state == S_PAUSED)
			c->s[i].until_ms = 0;
	while (down_count(c) > 0) {
		if (now_ms() > deadline)
			return -1;
		chaos_tick(c);
		dl_sleep_ms(20);
	}
	return 0;
}

/* ---- the parent: checking the log ---------------------------------------- */

typedef struct sect {
	int64_t token, begin, end;
	int pid;
} sect;

/* "@K pid t a b c": K the kind, t when (us), a b c its figures. */
typedef struct event {
	char kind;
	int pid;
	int64_t t, a, b, c;
} event;

typedef struct logdata {
	sect *s;
	size_t ns, caps;
	event *e;
	size_t ne, cape;
	long bad_lines;
	/* summaries (@X) */
	long x_workers, tries, acquired, sections, skipped, abandoned, unlock_errors;
	int64_t max_overrun, max_unlock, max_stale;
} logdata;

static int cmp_begin(const void *a, const void *b)
{
	const sect *x = a, *y = b;

	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static void push_sect(logdata *d, sect s)
{
	if (d->ns == d->caps) {
		d->caps = d->caps ? 2 * d->caps : 1024;
		d->s = realloc(d->s, d->caps * sizeof(*d->s));
		if (!d->s)
			abort();
	}
	d->s[d->ns++] = s;
}

static void push_event(logdata *d, event e)
{
	if (d->ne == d->cape) {
		d->cape = d->cape ? 2 * d->cape : 1024;
		d->e = realloc(d->e, d->cape * sizeof(*d->e));
		if (!d->e)
			abort();
	}
	d->e[d->ne++] = e;
}

static int read_log(logdata *d)
{
	FILE *f = fopen(g_log_path, "r");
	char line[512];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		long long a, b, c, x[8];
		int pid, w;

		if (line[0] == '@' && line[1] == 'X') {
			if (sscanf(line + 2, "%d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld",
					    &pid, &w, &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &a,
					    &b, &c) != 11) {
				d->bad_lines++;
				continue;
			}
			d->x_workers++;
			d->tries += (long)x[0];
			d->acquired += (long)x[1];
			d->sections += (long)x[2];
			d->skipped += (long)x[3];
			d->abandoned += (long)x[4];
			d->unlock_errors += (long)x[5];
			if (a > d->max_overrun)
				d->max_overrun = a;
			if (b > d->max_unlock)
				d->max_unlock = b;
			if (c > d->max_stale)
				d->max_stale = c;
			continue;
		}
		if (line[0] == '@') {
			long long t;
			event e;

			if (sscanf(line + 2, "%d %lld %lld %lld %lld", &pid, &t, &a, &b, &c) != 5) {
				d->bad_lines++;
				continue;
			}
			e.kind = line[1];
			e.pid = pid;
			e.t = t;
			e.a = a;
			e.b = b;
			e.c = c;
			push_event(d, e);
			continue;
		}
		if (sscanf(line, "%lld %lld %lld %d", &a, &b, &c, &pid) == 4) {
			sect s = { a, b, c, pid };

			push_sect(d, s);
		} else {
			d->bad_lines++;
		}
	}
	fclose(f);
	qsort(d->s, d->ns, sizeof(*d->s), cmp_begin);
	return 0;
}

/* ---- main ------------------------------------------------------------------ */

static int passed, failed;

#define CHECK(cond, ...) \
	do { \
		if (cond) { \
			passed++; \
			printf("PASS "); \
			printf(__VA_ARGS__); \
			printf("\n"); \
		} else { \
			failed++; \
			printf("FAIL "); \
			printf(__VA_ARGS__); \
			printf("\n"); \
		} \
		fflush(stdout); \
	} while (0)

/* How many workers said they left their loop ("@Q" lines). */
static int quiesced_pids(pid_t *pids, int max)
{
	FILE *f = fopen(g_log_path, "r");
	char line[512];
	int n = 0, pid;

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f))
		if (line[0] == '@' && line[1] == 'Q' && sscanf(line + 2, "%d", &pid) == 1)
			pids[n++] = pid;
	fclose(f);
	return n;
}

/*
 * Wait until every worker has left its loop (loop_only: done[i] = 1 when it
 * logged "@Q") or exited (done[i] = 2, status in wstatus[i]), or the deadline.
 */
static void reap(const pid_t *workers, int *done, int *wstatus, int64_t deadline, int loop_only)
{
	for (;;) {
		pid_t q[NWORKERS];
		int i, j, nq = loop_only ? quiesced_pids(q, NWORKERS) : 0, left = 0;

		for (i = 0; i < NWORKERS; i++) {
			if (done[i] == 2)
				continue;
			if (waitpid(workers[i], &wstatus[i], WNOHANG) == workers[i]) {
				done[i] = 2;
				continue;
			}
			for (j = 0; j < nq; j++)
				if (q[j] == workers[i])
					done[i] = 1;
			left += loop_only ? done[i] == 0 : 1;
		}
		if (left == 0 || now_ms() >= deadline)
			return;
		dl_sleep_ms(20);
	}
}

static int slow_factor(void)
{
	const char *preload = getenv("LD_PRELOAD");
	int f = 1;

#if defined(__SANITIZE_THREAD__)
	f = 4;
#elif defined(__SANITIZE_ADDRESS__)
	f = 2;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
	f = 4;
#elif __has_feature(address_sanitizer)
	f = 2;
#endif
#endif
	if (preload && strstr(preload, "vgpreload"))
		f = 10; /* valgrind */
	return f;
}

static void remove_tree(void)
{
	unlink(g_log_path);
	unlink(g_counter_path);
	unlink(g_stop_path);
	unlink(g_journal_path);
	unlink(g_exit_path);
	rmdir(g_dir);
}

static const char *rc_name(int64_t rc)
{
	switch ((int)rc) {
	case DLOCK_ENOTACQUIRED:
		return "not acquired";
	case DLOCK_ENOQUORUM:
		return "no quorum";
	case DLOCK_EEXPIRED:
		return "expired while acquiring";
	case DLOCK_ETIMEDOUT:
		return "timed out";
	default:
		return dlock_strerror((int)rc);
	}
}

int main(void)
{
	const char *env = getenv("DLOCK_SOAK_SECONDS");
	int total_s = env && atoi(env) > 0 ? atoi(env) : 60;
	int phase1_s = total_s - 15 >= 10 ? total_s - 15 : 10;
	int factor = slow_factor(), i, fd, exited_ok = 0, killed_workers = 0, late_workers = 0;
	rh_server *servers[NSERVERS];
	pid_t workers[NWORKERS], parent = getpid();
	int wstatus[NWORKERS];
	int done[NWORKERS];
	chaos c;
	logdata d;
	int64_t t_start, t_p1_end, t_p2_begin, t_p2_down, t_p2_restart, t_p2_up, t_stop;
	int victims[3];
	long overlaps = 0, token_bad = 0, worker_v = 0, fence_v = 0, p2_sections_down = 0;
	long validity_v = 0, renewed_v = 0, nocb_v = 0, p2_bad_rc = 0, noquorum_p2 = 0,
	     p2_errors = 0;
	long sections_after = 0;
	long sections_p1 = 0;
	long lost_events = 0, abandoned = 0, skipped = 0, late = 0, errors_by[16], unlock_by[16];
	long long counter = -1, counter_token = -1;
	int64_t max_end = 0, quiesce_rc;
	int keys_left = 0;
	size_t k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	memset(errors_by, 0, sizeof(errors_by));
	memset(unlock_by, 0, sizeof(unlock_by));
	memset(done, 0, sizeof(done));
	g_margin_ms = 150 * factor;
	rng_seed((uint64_t)now_us() ^ (uint64_t)parent);
	printf("soak_chaos: %d servers, %d workers (3 watchdog %d ms, 3 lease %d ms), "
	       "command timeout %d ms, margin %d ms; phase 1 %d s, phase 2 ~%d s\n",
			NSERVERS, NWORKERS, WATCHDOG_MS, LEASE_MS, CMD_TIMEOUT_MS, g_margin_ms,
			phase1_s, (PHASE2_DOWN_MS + PHASE2_AFTER_MS) / 1000 + 3);

	if (rh_servers_start(servers, NSERVERS, NULL) != 0) {
		fprintf(stderr, "could not start redis-server\n");
		return 2;
	}
	for (i = 0; i < NSERVERS; i++) {
		c.s[i].h = servers[i];
		c.s[i].state = S_UP;
		snprintf(g_uris[i], sizeof(g_uris[i]), "%s", rh_server_uri(servers[i]));
	}
	snprintf(g_dir, sizeof(g_dir), "%s/dlock-soak-%ld-XXXXXX",
			getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
			(long)parent);
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(g_log_path, sizeof(g_log_path), "%s/sections.log", g_dir);
	snprintf(g_counter_path, sizeof(g_counter_path), "%s/counter", g_dir);
	snprintf(g_stop_path, sizeof(g_stop_path), "%s/stop", g_dir);
	snprintf(g_journal_path, sizeof(g_journal_path), "%s/chaos.log", g_dir);
	snprintf(g_exit_path, sizeof(g_exit_path), "%s/exit", g_dir);
	fd = open(g_log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror("log");
		return 2;
	}
	close(fd);
	fd = open(g_counter_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || dprintf(fd, "%020lld %020lld\n", 0LL, 0LL) != COUNTER_LEN) {
		perror("counter");
		return 2;
	}
	close(fd);

	t_start = now_ms();
	g_hard_end_us = (t_start + (int64_t)(total_s + 120) * 1000 * factor) * 1000;
	fflush(NULL);
	for (i = 0; i < NWORKERS; i++) {
		workers[i] = fork();
		if (workers[i] < 0) {
			perror("fork");
			rh_cleanup_all();
			return 2;
		}
		if (workers[i] == 0) {
			/* The child: library only, never the harness (its servers are the
			 * parent's; _exit skips the harness's atexit cleanup). */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(2);
			_exit(worker_main(i));
		}
	}

	g_journal = fopen(g_journal_path, "w");
	if (g_journal)
		setvbuf(g_journal, NULL, _IOLBF, 0);

	/* ---- phase 1 ---- */
	t_p1_end = t_start + (int64_t)phase1_s * 1000;
	phase1(&c, t_p1_end);
	quiesce_rc = quiesce(&c, 15000L * factor);
	/* All servers up and given the counter; a little more so that every
	 * counter holds the latest token before three of them lose theirs. */
	dl_sleep_ms(1500);

	/* ---- phase 2: 3 of 5 down ---- */
	victims[0] = (int)rnd(NSERVERS);
	victims[1] = (victims[0] + 1 + (int)rnd(NSERVERS - 1)) % NSERVERS;
	do
		victims[2] = (int)rnd(NSERVERS);
	while (victims[2] == victims[0] || victims[2] == victims[1]);
	t_p2_begin = now_us();
	for (i = 0; i < 3; i++)
		kill_server(&c, victims[i], 0);
	t_p2_down = now_us();
	dl_sleep_ms(PHASE2_DOWN_MS);
	t_p2_restart = now_us();
	for (i = 0; i < 3; i++)
		restart_now(&c, victims[i]);
	t_p2_up = now_us();
	{
		int64_t end = now_ms() + PHASE2_AFTER_MS;

		while (now_ms() < end) {
			chaos_tick(&c); /* only seeds: nothing is due */
			dl_sleep_ms(50);
		}
	}

	/* ---- stop: every worker must leave its loop by itself ---- */
	fd = open(g_stop_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	t_stop = now_ms();
	/* The longest a worker may need: a try, a long hold, an unlock. */
	reap(workers, done, wstatus,
			t_stop +
					(int64_t)(MAX_WAIT_MS + 1200 +
							4 * (2 * CMD_TIMEOUT_MS + g_margin_ms) +
							2000) *
							factor,
			1);
	for (i = 0; i < NWORKERS; i++)
		if (done[i] == 0) {
			fprintf(stderr, "worker %d (pid %d) did not leave its loop in time\n", i,
					(int)workers[i]);
			late_workers++;
		}

	/* Every worker has unlocked, and its clients (watchdogs) still run:
	 * nothing may stay in Redis longer than a lease - an unlock cancels
	 * renewal; what a lost reply left behind (an acquire that ran on a
	 * paused server after its client gave up) expires by its TTL, at most
	 * a provisional lease of 2 x the wait. */
	{
		int64_t deadline = now_ms() + (int64_t)(2 * MAX_WAIT_MS + 1500) * factor;

		for (;;) {
			keys_left = 0;
			for (i = 0; i < NSERVERS; i++)
				keys_left += rh_command_int(servers[i], "EXISTS %s", LOCK_NAME) !=
						0;
			if (keys_left == 0 || now_ms() >= deadline)
				break;
			dl_sleep_ms(100);
		}
		for (i = 0; keys_left > 0 && i < NSERVERS; i++) {
			redisReply *r = rh_command(servers[i], "HGETALL %s", LOCK_NAME);
			size_t j;

			if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
				fprintf(stderr, "server %d still has %s (PTTL %" PRId64 "):", i,
						LOCK_NAME,
						rh_command_int(servers[i], "PTTL %s", LOCK_NAME));
				for (j = 0; j + 1 < r->elements; j += 2)
					fprintf(stderr, " %s=%s", r->element[j]->str,
							r->element[j + 1]->str);
				fprintf(stderr, "\n");
			}
			if (r)
				freeReplyObject(r);
		}
	}
	fd = open(g_exit_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	reap(workers, done, wstatus, now_ms() + 5000L * factor, 0);
	for (i = 0; i < NWORKERS; i++) {
		if (done[i] == 2) {
			if (WIFEXITED(wstatus[i]) && WEXITSTATUS(wstatus[i]) == 0)
				exited_ok++;
			else
				fprintf(stderr, "worker %d (pid %d) ended with %s %d\n", i,
						(int)workers[i],
						WIFEXITED(wstatus[i]) ? "status" : "signal",
						WIFEXITED(wstatus[i]) ? WEXITSTATUS(wstatus[i])
								      : WTERMSIG(wstatus[i]));
			continue;
		}
		fprintf(stderr, "worker %d (pid %d) did not %s: kill -9\n", i, (int)workers[i],
				done[i] ? "exit" : "leave its loop");
		kill(workers[i], SIGKILL);
		waitpid(workers[i], &wstatus[i], 0);
		killed_workers++;
	}

	/* ---- the checker ---- */
	if (read_log(&d) != 0) {
		fprintf(stderr, "cannot read %s\n", g_log_path);
		return 2;
	}
	fd = open(g_counter_path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char buf[COUNTER_LEN + 1];

		if (read(fd, buf, COUNTER_LEN) == COUNTER_LEN) {
			buf[COUNTER_LEN] = '\0';
			if (sscanf(buf, "%lld %lld", &counter, &counter_token) != 2)
				counter = -1;
		}
		close(fd);
	}
	for (k = 0; k < d.ns; k++) {
		const sect *s = &d.s[k];

		if (k > 0 && s->begin < max_end) {
			if (overlaps++ < 5)
				fprintf(stderr,
						"overlap: token %" PRId64 " pid %d [%" PRId64
						", %" PRId64
						"] begins before an earlier section ends (%" PRId64
						")\n",
						s->token, s->pid, s->begin, s->end, max_end);
		}
		if (k > 0 && s->token <= d.s[k - 1].token) {
			if (token_bad++ < 5)
				fprintf(stderr,
						"token order: %" PRId64 " (pid %d, begin %" PRId64
						") after %" PRId64 " (pid %d, begin %" PRId64 ")\n",
						s->token, s->pid, s->begin, d.s[k - 1].token,
						d.s[k - 1].pid, d.s[k - 1].begin);
		}
		if (s->end > max_end)
			max_end = s->end;
		if (s->begin < t_p1_end * 1000)
			sections_p1++;
		if (s->begin > t_p2_up)
			sections_after++;
	}
	for (k = 0; k < d.ne; k++) {
		const event *e = &d.e[k];

		switch (e->kind) {
		case 'V': {
			int64_t kind = e->a;

			if (kind == V_FENCE)
				fence_v++;
			else if (kind == V_VALIDITY)
				validity_v++;
			else if (kind == V_RENEWED)
				renewed_v++;
			else if (kind == V_NO_CALLBACK)
				nocb_v++;
			else
				worker_v++;
			if ((kind == V_VALIDITY && validity_v > 5) ||
					(kind == V_RENEWED && renewed_v > 5))
				break;
			fprintf(stderr,
					"worker %d reported at +%" PRId64 " ms: %s (%" PRId64
					", %" PRId64 ")\n",
					e->pid, e->t / 1000 - t_start,
					kind > 0 && kind <= V_NO_CALLBACK ? v_names[kind] : "?",
					e->b, e->c);
			break;
		}
		case 'E':
			if (e->a > -16 && e->a < 0)
				errors_by[-e->a]++;
			if (e->t >= t_p2_begin &&
					e->t <= t_p2_up + (int64_t)CMD_TIMEOUT_MS * 1000) {
				p2_errors++;
				noquorum_p2 += e->a == DLOCK_ENOQUORUM;
			}
			/* Tries begun with 3 of 5 down (t - elapsed): no quorum, or
			 * (a young or stale vote) not acquired, or a timeout. */
			if (e->t - e->b * 1000 > t_p2_down && e->t < t_p2_restart &&
					e->a != DLOCK_ENOQUORUM && e->a != DLOCK_ENOTACQUIRED &&
					e->a != DLOCK_ETIMEDOUT) {
				if (p2_bad_rc++ < 5)
					fprintf(stderr,
							"phase 2: try failed with %s (%" PRId64
							")\n",
							rc_name(e->a), e->a);
			}
			break;
		case 'G':
			/* With 3 of 5 servers down nobody can hold a quorum: a try that
			 * began after the third kill and returned before the first
			 * restart must have failed. */
			if (e->t > t_p2_down && e->a < t_p2_restart && p2_sections_down++ < 5)
				fprintf(stderr,
						"phase 2: a try begun %" PRId64
						" ms after 3 of 5 servers"
						" were killed was granted %" PRId64
						" ms later (token %" PRId64 ")\n",
						(e->t - t_p2_down) / 1000, (e->a - e->t) / 1000,
						e->b);
			break;
		case 'U':
			if (e->a > -16 && e->a < 0)
				unlock_by[-e->a]++;
			break;
		case 'L':
			lost_events += (long)e->a;
			break;
		case 'A':
			abandoned++;
			break;
		case 'S':
			skipped++;
			break;
		case 'T':
			late++;
			break;
		default:
			break;
		}
	}

	/* ---- figures ---- */
	printf("\nfigures:\n");
	printf("  critical sections completed: %zu (phase 1: %ld, after the phase-2 restart: %ld)\n",
			d.ns, sections_p1, sections_after);
	printf("  acquisitions: %ld of %ld tries; failures:", d.acquired, d.tries);
	for (i = 1; i < 16; i++)
		if (errors_by[i])
			printf(" %s %ld,", rc_name(-i), errors_by[i]);
	printf("\n");
	printf("  servers killed: %ld (phase 1: %ld, of which %ld restarted at once%s; phase 2: 3"
	       " for %d ms), paused: %ld, restart failures: %ld\n",
			c.kills, c.kills_p1, c.immediate,
			c.immediate_held ? " while a holder had its key there" : "", PHASE2_DOWN_MS,
			c.pauses, c.restart_failures);
	printf("  connections killed: %ld (in %ld CLIENT KILL TYPE normal)\n", c.conn_killed,
			c.client_kill_cmds);
	printf("  lost-lock events: %ld; sections abandoned (lock lost or lease running out): %ld;"
	       " skipped (validity too short): %ld; leased sections that ended past their"
	       " validity (preempted after the last look): %ld\n",
			lost_events, abandoned, skipped, late);
	printf("  unlock errors: %ld;", d.unlock_errors);
	for (i = 1; i < 16; i++)
		if (unlock_by[i])
			printf(" %s %ld,", rc_name(-i), unlock_by[i]);
	printf("\n");
	printf("  no-quorum errors in phase 2: %ld (of %ld failed tries in phase 2)\n", noquorum_p2,
			p2_errors);
	printf("  slowest try beyond its wait: %" PRId64 " ms; slowest unlock: %" PRId64
	       " ms (bound %d ms); validity overstated by up to %" PRId64 " ms\n",
			d.max_overrun, d.max_unlock, 2 * CMD_TIMEOUT_MS + g_margin_ms, d.max_stale);
	printf("  violations: %ld (overlaps %ld, token order %ld, fence %ld, validity %ld, renewed"
	       " after unlock %ld, loss without callback %ld, worker-reported %ld, phase-2 grants"
	       " %ld, phase-2 error codes %ld, keys left %d, counter %s)\n",
			overlaps + token_bad + fence_v + validity_v + renewed_v + nocb_v +
					worker_v + p2_sections_down + p2_bad_rc + keys_left +
					((long long)d.ns != counter),
			overlaps, token_bad, fence_v, validity_v, renewed_v, nocb_v, worker_v,
			p2_sections_down, p2_bad_rc, keys_left,
			(long long)d.ns == counter ? "exact" : "WRONG");
	printf("  run: %.1f s\n\n", (double)(now_ms() - t_start) / 1000.0);

	/* ---- the invariants, one check each ---- */
	CHECK(d.bad_lines == 0, "the log is well formed (%ld bad lines)", d.bad_lines);
	CHECK(overlaps == 0, "no two critical sections overlap (%zu sections, %ld overlaps)", d.ns,
			overlaps);
	CHECK(token_bad == 0, "fencing tokens strictly increase in begin order (%ld out of order)",
			token_bad);
	CHECK(fence_v == 0, "the resource never saw a token <= the last one it accepted (%ld)",
			fence_v);
	CHECK((long long)d.ns == counter,
			"the shared counter (%lld) equals the completed sections"
			" (%zu)",
			counter, d.ns);
	CHECK(d.ns > 0 && counter_token == d.s[d.ns - 1].token,
			"the counter file holds the last"
			" section's token (%lld)",
			counter_token);
	CHECK(validity_v == 0,
			"the validity a grant reported was no longer than its quorum's keys"
			" had left (%ld grants overstated it)",
			validity_v);
	CHECK(renewed_v == 0,
			"no watchdog kept renewing a member hold after its RedLock was"
			" unlocked (%ld unlocks left one renewed)",
			renewed_v);
	CHECK(nocb_v == 0,
			"every loss a watchdog holder saw (dlock_redlock_check) also came through"
			" the lost callback (%ld did not)",
			nocb_v);
	CHECK(worker_v == 0,
			"every try returned within wait + 2 x %d ms + %d ms, every unlock"
			" within 2 x %d ms + %d ms, only documented error codes (%ld reports)",
			CMD_TIMEOUT_MS, g_margin_ms, CMD_TIMEOUT_MS, g_margin_ms, worker_v);
	CHECK(exited_ok == NWORKERS && killed_workers == 0 && late_workers == 0,
			"all %d workers"
			" left by themselves, in time, when told (%d did; %d late, %d killed)",
			NWORKERS, exited_ok, late_workers, killed_workers);
	CHECK(d.x_workers == NWORKERS, "every worker reported its figures (%ld)", d.x_workers);
	CHECK(sections_p1 > 0, "sections completed under phase-1 chaos (%ld)", sections_p1);
	CHECK(c.kills_p1 > 0 && c.pauses > 0 && c.client_kill_cmds > 0 && c.immediate == 1,
			"the chaos happened (kills %ld, pauses %ld, CLIENT KILLs %ld, immediate restarts %ld)",
			c.kills_p1, c.pauses, c.client_kill_cmds, c.immediate);
	CHECK(c.restart_failures == 0 && quiesce_rc == 0,
			"every server came back and got the counter before phase 2");
	CHECK(p2_sections_down == 0, "no grant while 3 of 5 servers were down (%ld)",
			p2_sections_down);
	CHECK(noquorum_p2 > 0 && p2_bad_rc == 0,
			"phase 2: tries failed with no quorum (%ld) and"
			" only not-acquired/no-quorum/timed-out (%ld others)",
			noquorum_p2, p2_bad_rc);
	CHECK(sections_after > 0, "work resumed after the servers returned (%ld sections)",
			sections_after);
	CHECK(keys_left == 0,
			"no lock key outlived the workers' unlocks by more than a lease, their"
			" clients still open (%d servers still have one)",
			keys_left);

	rh_cleanup_all();
	if (g_journal)
		fclose(g_journal);
	if (failed == 0)
		remove_tree();
	else
		fprintf(stderr, "the log is kept in %s (the chaos in %s)\n", g_log_path,
				g_journal_path);
	free(d.s);
	free(d.e);
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
