/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * soak_family - the other single-server objects under chaos: expirable
 * semaphore permits (Redisson's RPermitExpirableSemaphore) and the two
 * halves of a read-write lock, while a real redis-server is paused, killed
 * and has its client connections dropped. soak_chaos does this for RedLock;
 * this program reuses its approach: forked worker processes that only use
 * the library, one O_APPEND write per log line, an invariant checker that
 * reads the log afterwards.
 *
 * One server (tests/harness). Two phases of DLOCK_SOAK_SECONDS / 2 each
 * (default 40 s in total, at least 10 s a phase): ~4 s before its end the
 * chaos stops, the server comes back and work goes on calmly; then the
 * stop file appears. The chaos (from the parent, which never uses the
 * library while workers live): SIGSTOP for 0.1-2 s, CLIENT KILL TYPE
 * normal, and SIGKILL with a delayed restart - the server comes back empty
 * only after the longest lease/watchdog timeout (plus 0.3-1.8 s), so every
 * holder has seen its permit or hold lost before it does. Clients: command
 * and connect timeout 200 ms, watchdog timeout 1500 ms; leases 1500 ms.
 *
 * Semaphore phase: N = 3 expirable permits of `soak:family:sem` (the parent
 * sets the count, and sets it again after a restart emptied the server, as
 * a service would with trySetPermits), 7 workers, the even ones with the
 * watchdog (a tenth of their sections last 0.6-3 s, across renewals, so
 * that a pause or kill finds some of them inside), the odd ones with a
 * lease. Each loops: acquire a permit (wait 0, or 0.1-1.5 s), a critical
 * section, release. A section works in slices while
 * dlock_semaphore_check() says held and no lost callback named the
 * permit, takes its end time, looks once more and only then logs
 * "P <begin_us> <end_us> <pid>" (CLOCK_MONOTONIC): a loss is final, so
 * the whole interval was held. A leased permit that the check still calls
 * held past acquire-start + lease (one attempt) is a violation. At no
 * instant more than N sections overlap (a sweep of the begin/end events),
 * and at some instant N did. After the workers released everything (their
 * clients still open) and a lease has passed, a fresh client counts N
 * permits available and the `{name}:timeout` ZSET is gone.
 *
 * Read-write phase: `soak:family:rw`, 4 readers and 3 writers (watchdog and
 * leased mixed). A writer reads a counter file, works, and - while still
 * held - writes count + 1, then logs "W begin end pid"; a reader reads the
 * counter at its begin and end and logs "R begin end pid c1 c2" if it still
 * held the lock after its end; readers pause 50-300 ms between sections,
 * so that writers (not preferred over arriving readers) get their turn.
 * Invariants: no writer section overlaps any other section, readers did
 * overlap each other (at least once), a reader saw the counter unchanged,
 * the counter equals the writer sections; after every worker unlocked,
 * neither the hash nor any `{name}:*:rwlock_timeout:*` key outlives a
 * lease.
 *
 * Both phases: every acquire returns within wait + 2 x command timeout +
 * margin, every release/unlock within 2 x command timeout + margin (margin
 * 150 ms, more under sanitizers and valgrind), only the error codes the
 * headers document; a loss a watchdog holder sees through the check also
 * comes through the lost callback (within a renewal period and a renewal
 * on a dead connection); a release ends the hold locally; workers
 * leave by themselves when the stop file appears. Prints the figures and
 * "N passed, N failed"; exits non-zero on any failure, keeping the logs and
 * the chaos journal (same clock). SOAK_ONLY=semaphore or rwlock runs one
 * phase; SOAK_DEBUG=1 prints failed releases as they happen.
 */
#include <dlock.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
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

#define NPERMITS 3
#define SEM_WORKERS 7
#define RW_READERS 4
#define RW_WRITERS 3
#define RW_WORKERS (RW_READERS + RW_WRITERS)
#define MAX_WORKERS 8
#define CMD_TIMEOUT_MS 200
#define WATCHDOG_MS 1500
#define LEASE_MS 1500
#define LONGEST_TTL_MS 1500 /* max(lease, watchdog timeout) */
#define MAX_WAIT_MS 1500
#define CALM_MS 4000 /* each phase ends with this long without chaos */
#define SEM_NAME "soak:family:sem"
#define SEM_TIMEOUTS "{" SEM_NAME "}:timeout"
#define SEM_CHANNEL "redisson_sc:{" SEM_NAME "}"
#define RW_NAME "soak:family:rw"
#define RW_TIMEOUT_PATTERN "{" RW_NAME "}:*rwlock_timeout*"
#define COUNTER_LEN 21 /* "%020lld\n" */
/* A lost callback may come a renewal period and a renewal that meets a
 * dead connection (connect and command timeout) after the check shows the
 * loss. */
#define CALLBACK_WINDOW_MS (WATCHDOG_MS / 3 + 2 * CMD_TIMEOUT_MS)

enum phase { PH_SEM, PH_RW };

/* Worker-reported violation kinds ("@V pid t kind a b"). */
enum {
	V_SLOW_ACQUIRE = 1,
	V_SLOW_RELEASE,
	V_BAD_RC,
	V_IO,
	V_CHECK_TOO_LONG,
	V_RENEWED,
	V_NO_CALLBACK,
	V_NKINDS
};

static const char *const v_names[] = { "", "acquire exceeded wait + 2 x command timeout + margin",
	"release exceeded 2 x command timeout + margin",
	"undocumented error code (a = call, b = rc)",
	"log/counter I/O failed",
	"a leased hold was still called held past acquire-start + lease (a ms past)",
	"released, but still held and renewed (rc a)",
	"the check said lost (a), and no lost callback came in time" };

/* ---- shared by parent and workers (set before fork) -------------------- */

static char g_uri[64];
static char g_dir[PATH_MAX], g_log_path[PATH_MAX + 32], g_counter_path[PATH_MAX + 32],
		g_stop_path[PATH_MAX + 32], g_exit_path[PATH_MAX + 32],
		g_journal_path[PATH_MAX + 32];
static int64_t g_hard_end_us; /* a worker gives up by itself after this */
static int g_margin_ms;       /* scheduling slack on top of the library's bounds */
static int g_factor = 1;

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
static int g_io_failed;

/* Losses told by the lost callbacks (the client's background thread). */
static atomic_int g_lost_events;
static atomic_int g_lost_flag; /* a lock loss since the current acquisition began */
static pthread_mutex_t g_lost_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_lost_ids[8][DLOCK_PERMIT_ID_SIZE]; /* the last permits told lost */
static int g_lost_next;

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

static void on_permit_lost(const dlock_lost_event *ev, void *userdata)
{
	(void)userdata;
	pthread_mutex_lock(&g_lost_mu);
	snprintf(g_lost_ids[g_lost_next], DLOCK_PERMIT_ID_SIZE, "%s", ev->owner);
	g_lost_next = (g_lost_next + 1) % 8;
	pthread_mutex_unlock(&g_lost_mu);
	atomic_fetch_add(&g_lost_events, 1);
}

static int permit_told_lost(const char *id)
{
	int i, found = 0;

	pthread_mutex_lock(&g_lost_mu);
	for (i = 0; i < 8 && !found; i++)
		found = strcmp(g_lost_ids[i], id) == 0;
	pthread_mutex_unlock(&g_lost_mu);
	return found;
}

static void on_lock_lost(const dlock_lost_event *ev, void *userdata)
{
	(void)ev, (void)userdata;
	atomic_fetch_add(&g_lost_events, 1);
	atomic_store(&g_lost_flag, 1);
}

static int stop_requested(void)
{
	return access(g_stop_path, F_OK) == 0;
}

/* What a worker holds: one permit, or one half of the read-write lock. */
typedef struct hold {
	enum phase ph;
	int watchdog, writer;
	dlock_semaphore *sem;
	dlock_lock *lock;
	char id[DLOCK_PERMIT_ID_SIZE];
	int64_t t0_us; /* when the acquire began */
	int64_t wait;  /* its wait */
} hold;

typedef struct wstats {
	long tries, acquired, sections, skipped, abandoned, release_errors;
	int64_t max_overrun_ms, max_release_ms, max_callback_ms;
} wstats;

/*
 * Still held, by the library's word: the check, no loss told, and for a
 * lease, time left beyond `slack_us` (0: the check alone). A permit's lease
 * is known to last at least from the acquire's start (its attempt was sent
 * later), less the drift allowance: the time left a leased permit worker
 * plans with.
 */
static int still_held(const hold *h, int64_t slack_us)
{
	int64_t t = now_us();

	if (h->ph == PH_SEM) {
		if (dlock_semaphore_check(h->sem, h->id) != 0 || permit_told_lost(h->id))
			return 0;
		int64_t until = h->t0_us + (int64_t)(LEASE_MS - LEASE_MS / 100 - 2) * 1000;

		if (!h->watchdog && slack_us > 0 && until - t < slack_us)
			return 0;
	} else {
		int64_t ms = 0;

		if (atomic_load(&g_lost_flag) || dlock_lock_check(h->lock, NULL) != 0)
			return 0;
		if (!h->watchdog && slack_us > 0 &&
				(dlock_lock_validity_ms(&ms, h->lock, NULL) != 0 ||
						ms * 1000 < slack_us))
			return 0;
	}
	/* One attempt (wait 0) began at t0: the library never calls its leased
	 * hold held past t0 + lease (held at a check that came after t). */
	if (!h->watchdog && h->wait == 0 && t > h->t0_us + (int64_t)LEASE_MS * 1000) {
		log_line("@V %d %" PRId64 " %d %" PRId64 " 0\n", (int)getpid(), t,
				V_CHECK_TOO_LONG, (t - h->t0_us) / 1000 - LEASE_MS);
		return 0;
	}
	return 1;
}

/* The library's local answer, for messages and the callback check. */
static int check_rc(const hold *h)
{
	return h->ph == PH_SEM ? dlock_semaphore_check(h->sem, h->id)
			       : dlock_lock_check(h->lock, NULL);
}

/*
 * A watchdog holder gives its section up: the loss the check shows must
 * also come through the lost callback (on the background thread, up to a
 * renewal retry later).
 */
static void abandon(const hold *h, wstats *st)
{
	int64_t t = now_us(), until = t + (int64_t)(CALLBACK_WINDOW_MS + g_margin_ms) * 1000;
	int rc = check_rc(h);

	log_line("@A %d %" PRId64 " %d %d 0\n", (int)getpid(), t, h->watchdog, rc);
	st->abandoned++;
	if (!h->watchdog || rc == 0)
		return; /* a lease ran out, or the section stopped on the callback */
	for (;;) {
		int told = h->ph == PH_SEM ? permit_told_lost(h->id) : atomic_load(&g_lost_flag);

		if (told) {
			if ((now_us() - t) / 1000 > st->max_callback_ms)
				st->max_callback_ms = (now_us() - t) / 1000;
			return;
		}
		if (now_us() >= until)
			break;
		dl_sleep_ms(5);
	}
	log_line("@V %d %" PRId64 " %d %d 0\n", (int)getpid(), now_us(), V_NO_CALLBACK, rc);
}

/* Work for work_ms in slices while held. 1 the time was worked, 0 not held. */
static int work(const hold *h, int64_t work_ms)
{
	int64_t until = now_us() + work_ms * 1000;

	for (;;) {
		int64_t left = until - now_us();

		if (!still_held(h, 5000))
			return 0;
		if (left <= 0)
			return 1;
		dl_sleep_ms(left > 20000 ? 20 : (left + 999) / 1000);
	}
}

static int read_counter(long long *out)
{
	char buf[COUNTER_LEN + 1];

	if (pread(g_counter_fd, buf, COUNTER_LEN, 0) != COUNTER_LEN)
		return -1;
	buf[COUNTER_LEN] = '\0';
	return sscanf(buf, "%lld", out) == 1 ? 0 : -1;
}

/*
 * The critical section. Returns 1 completed (logged), 0 abandoned (nothing
 * logged; a writer wrote nothing).
 */
static int section(const hold *h, int64_t work_ms, wstats *st)
{
	int64_t begin = now_us(), end;
	long long c1 = 0, c2 = 0;
	pid_t pid = getpid();

	if (h->ph == PH_RW && read_counter(&c1) != 0) {
		log_line("@V %d %" PRId64 " %d 0 0\n", (int)pid, begin, V_IO);
		return 0;
	}
	if (!work(h, work_ms)) {
		abandon(h, st);
		return 0;
	}
	if (h->ph == PH_SEM) {
		end = now_us();
		/* Held after the end: held all along (a loss is never undone). */
		if (!still_held(h, 0)) {
			abandon(h, st);
			return 0;
		}
		log_line("P %" PRId64 " %" PRId64 " %d\n", begin, end, (int)pid);
		return 1;
	}
	if (h->writer) {
		char buf[COUNTER_LEN + 1];

		if (!still_held(h, 5000)) {
			abandon(h, st);
			return 0;
		}
		snprintf(buf, sizeof(buf), "%020lld\n", c1 + 1);
		if (pwrite(g_counter_fd, buf, COUNTER_LEN, 0) != COUNTER_LEN) {
			log_line("@V %d %" PRId64 " %d 0 0\n", (int)pid, now_us(), V_IO);
			return 0;
		}
		end = now_us();
		/* Written: logged whatever comes; the sweep judges it. */
		log_line("W %" PRId64 " %" PRId64 " %d\n", begin, end, (int)pid);
		if (!still_held(h, 0))
			log_line("@T %d %" PRId64 " 0 0 0\n", (int)pid, now_us());
		return 1;
	}
	if (read_counter(&c2) != 0) {
		log_line("@V %d %" PRId64 " %d 0 0\n", (int)pid, now_us(), V_IO);
		return 0;
	}
	end = now_us();
	if (!still_held(h, 0)) {
		abandon(h, st);
		return 0;
	}
	log_line("R %" PRId64 " %" PRId64 " %d %lld %lld\n", begin, end, (int)pid, c1, c2);
	return 1;
}

static int acquire_rc_allowed(int rc)
{
	/* A wait rides out connection loss and timeouts and returns the last
	 * when its time is up (errors.h, "a wait's final errors"). */
	return rc == DLOCK_ENOTACQUIRED || rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT;
}

static int release_rc_allowed(int rc)
{
	return rc == 0 || rc == DLOCK_ELOST || rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT;
}

static const char *handle_errmsg(const hold *h)
{
	return h->ph == PH_SEM ? dlock_semaphore_errmsg(h->sem) : dlock_lock_errmsg(h->lock);
}

static int worker_main(enum phase ph, int idx)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *client = NULL;
	hold h;
	int i, exit_code = 0, lost_logged = 0, rc, held;
	int64_t lease, bound_ms = 2 * CMD_TIMEOUT_MS + g_margin_ms;
	pid_t pid = getpid();
	wstats st;

	memset(&st, 0, sizeof(st));
	memset(&h, 0, sizeof(h));
	h.ph = ph;
	h.writer = ph == PH_RW && idx >= RW_READERS;
	h.watchdog = ph == PH_SEM ? idx % 2 == 0 : (h.writer ? idx - RW_READERS : idx) % 2 == 0;
	lease = h.watchdog ? DLOCK_LEASE_WATCHDOG : LEASE_MS;
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
	co.lazy_connect = 1;
	if (dlock_client_new(&client, g_uri, &co) != 0) {
		fprintf(stderr, "worker %d: dlock_client_new: %s\n", idx, dlock_errmsg_last());
		return 2;
	}
	if (ph == PH_SEM) {
		dlock_semaphore_options so = DLOCK_SEMAPHORE_OPTIONS_INIT;

		so.kind = DLOCK_SEMAPHORE_EXPIRABLE;
		rc = dlock_semaphore_new(&h.sem, client, SEM_NAME, &so);
		if (rc == 0)
			rc = dlock_semaphore_set_lost_cb(h.sem, on_permit_lost, NULL);
	} else {
		dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;

		lo.kind = h.writer ? DLOCK_LOCK_WRITE : DLOCK_LOCK_READ;
		rc = dlock_lock_new(&h.lock, client, RW_NAME, &lo);
		if (rc == 0)
			rc = dlock_lock_set_lost_cb(h.lock, on_lock_lost, NULL);
	}
	if (rc != 0) {
		fprintf(stderr, "worker %d: new handle: %s\n", idx, dlock_errmsg_last());
		return 2;
	}

	while (!stop_requested()) {
		int64_t wait = rnd(100) < 20 ? 0 : 100 + rnd(MAX_WAIT_MS - 100 + 1);
		int64_t t0, t1, elapsed, work_ms, r = rnd(100);

		if (now_us() > g_hard_end_us) {
			fprintf(stderr, "worker %d: no stop file by the hard deadline\n", idx);
			exit_code = 3;
			break;
		}
		atomic_store(&g_lost_flag, 0);
		t0 = now_us();
		if (ph == PH_SEM)
			rc = dlock_semaphore_acquire_permit(h.id, h.sem, wait, lease);
		else
			rc = dlock_lock_acquire(h.lock, NULL, wait, lease);
		t1 = now_us();
		h.t0_us = t0;
		h.wait = wait;
		elapsed = (t1 - t0) / 1000;
		st.tries++;
		if (elapsed - wait > st.max_overrun_ms)
			st.max_overrun_ms = elapsed - wait;
		if (elapsed > wait + bound_ms) {
			log_line("@V %d %" PRId64 " %d %" PRId64 " %" PRId64 "\n", (int)pid, t1,
					V_SLOW_ACQUIRE, elapsed, wait);
			fprintf(stderr, "worker %d: acquire(wait %" PRId64 ") took %" PRId64
					" ms, rc %d: %s\n",
					idx, wait, elapsed, rc,
					rc ? handle_errmsg(&h) : "acquired");
		}
		if (rc != 0) {
			log_line("@E %d %" PRId64 " %d %" PRId64 " %" PRId64 "\n", (int)pid, t1, rc,
					elapsed, wait);
			if (!acquire_rc_allowed(rc)) {
				log_line("@V %d %" PRId64 " %d 1 %d\n", (int)pid, t1, V_BAD_RC, rc);
				fprintf(stderr, "worker %d: acquire: %s\n", idx, handle_errmsg(&h));
			}
			dl_sleep_ms(10 + rnd(40));
			continue;
		}
		st.acquired++;
		log_line("@G %d %" PRId64 " %" PRId64 " 0 0\n", (int)pid, t0, t1);
		/* Mostly short sections, some long: a watchdog holder's across
		 * renewals, a leased one's well inside its lease. Readers linger
		 * so that they meet. */
		if (h.watchdog)
			work_ms = r < 10 ? 600 + rnd(2400) : r < 30 ? 60 + rnd(240) : 5 + rnd(55);
		else
			work_ms = r < 10 ? 100 + rnd(500) : r < 30 ? 60 + rnd(240) : 5 + rnd(55);
		if (ph == PH_RW && h.writer && work_ms > 1200)
			work_ms = 600 + rnd(600); /* everybody else waits meanwhile */
		if (!h.watchdog && !still_held(&h, (work_ms + 100) * 1000)) {
			log_line("@S %d %" PRId64 " 0 0 0\n", (int)pid, now_us());
			st.skipped++;
		} else if (section(&h, work_ms, &st)) {
			st.sections++;
		}
		held = still_held(&h, 0);
		t0 = now_us();
		if (ph == PH_SEM)
			rc = dlock_semaphore_release_permit(h.sem, h.id);
		else
			rc = dlock_lock_release(h.lock, NULL);
		t1 = now_us();
		elapsed = (t1 - t0) / 1000;
		if (elapsed > st.max_release_ms)
			st.max_release_ms = elapsed;
		if (elapsed > bound_ms) {
			log_line("@V %d %" PRId64 " %d %" PRId64 " 0\n", (int)pid, t1,
					V_SLOW_RELEASE, elapsed);
			fprintf(stderr, "worker %d: release took %" PRId64 " ms, rc %d\n", idx,
					elapsed, rc);
		}
		if (!release_rc_allowed(rc)) {
			log_line("@V %d %" PRId64 " %d 2 %d\n", (int)pid, t1, V_BAD_RC, rc);
			fprintf(stderr, "worker %d: release: %s\n", idx, handle_errmsg(&h));
		}
		/* A release ends renewal whatever it returned. */
		if (check_rc(&h) == 0)
			log_line("@V %d %" PRId64 " %d %d 0\n", (int)pid, now_us(), V_RENEWED, rc);
		/* Held when the release began, and the release says it was lost:
		 * possible (the lease ran out on the way), but worth a figure. */
		if (rc == DLOCK_ELOST && held) {
			log_line("@Z %d %" PRId64 " %" PRId64 " 0 0\n", (int)pid, t1, elapsed);
			if (getenv("SOAK_DEBUG"))
				fprintf(stderr, "worker %d: held, then the release said: %s\n", idx,
						handle_errmsg(&h));
		}
		if (rc != 0) {
			if (getenv("SOAK_DEBUG"))
				fprintf(stderr, "worker %d: release: %s\n", idx, handle_errmsg(&h));
			st.release_errors++;
			log_line("@U %d %" PRId64 " %d 0 0\n", (int)pid, t1, rc);
		}
		i = atomic_load(&g_lost_events);
		if (i != lost_logged) {
			log_line("@L %d %" PRId64 " %d 0 0\n", (int)pid, now_us(), i - lost_logged);
			lost_logged = i;
		}
		/* Readers come back soon enough to meet, and leave gaps in which
		 * the read mode ends (a waiting writer is not preferred). */
		dl_sleep_ms(ph == PH_RW && !h.writer ? 50 + rnd(250) : rnd(20));
	}
	/* Everything is released. Stay (client open, renewals running) until
	 * the parent has looked at Redis. */
	log_line("@Q %d %" PRId64 " 0 0 0\n", (int)pid, now_us());
	while (access(g_exit_path, F_OK) != 0 && now_us() < g_hard_end_us)
		dl_sleep_ms(20);
	dlock_semaphore_free(h.sem);
	dlock_lock_free(h.lock);
	dlock_client_free(client);
	i = atomic_load(&g_lost_events) - lost_logged;
	if (i > 0)
		log_line("@L %d %" PRId64 " %d 0 0\n", (int)pid, now_us(), i);
	log_line("@X %d %d %ld %ld %ld %ld %ld %ld %" PRId64 " %" PRId64 " %" PRId64 "\n",
			(int)pid, h.watchdog, st.tries, st.acquired, st.sections, st.skipped,
			st.abandoned, st.release_errors, st.max_overrun_ms, st.max_release_ms,
			st.max_callback_ms);
	if (g_io_failed) {
		fprintf(stderr, "worker %d: writing the log failed\n", idx);
		exit_code = exit_code ? exit_code : 4;
	}
	close(g_log_fd);
	close(g_counter_fd);
	return exit_code;
}

/* ---- the parent: chaos ---------------------------------------------------- */

enum { S_UP, S_PAUSED, S_KILLED };

typedef struct chaos {
	rh_server *s;
	enum phase ph;
	int state;
	int64_t until_ms; /* PAUSED: resume at; KILLED: restart at */
	long actions, kills, pauses, conn_killed, client_kill_cmds, restart_failures, reseeds;
} chaos;

static FILE *g_journal; /* the parent's chaos, timestamped like the log */

static void journal(const chaos *c, const char *what)
{
	if (g_journal)
		fprintf(g_journal, "%" PRId64 " %s\n", now_us(), what);
	(void)c;
}

/* The semaphore's count, as a service sets it (trySetPermits), and a word
 * to its waiters. */
static int seed_permits(chaos *c)
{
	redisReply *r = rh_command(c->s, "SET %s %d NX", SEM_NAME, NPERMITS);
	int ok = r != NULL && r->type != REDIS_REPLY_ERROR;

	if (r)
		freeReplyObject(r);
	if (!ok)
		return -1;
	r = rh_command(c->s, "PUBLISH %s %d", SEM_CHANNEL, NPERMITS);
	if (r)
		freeReplyObject(r);
	return 0;
}

static void restart_now(chaos *c)
{
	if (rh_server_restart(c->s) != 0) {
		c->restart_failures++;
		fprintf(stderr, "chaos: restart failed\n");
		return;
	}
	c->state = S_UP;
	journal(c, "restarted (empty)");
	if (c->ph == PH_SEM) {
		if (seed_permits(c) != 0) {
			c->restart_failures++;
			fprintf(stderr, "chaos: could not set the permits again\n");
		}
		c->reseeds++;
		journal(c, "permits set again");
	}
}

/* Resume and restart what is due. */
static void chaos_tick(chaos *c)
{
	int64_t now = now_ms();

	if (c->state == S_PAUSED && now >= c->until_ms) {
		rh_server_resume(c->s);
		journal(c, "resumed");
		c->state = S_UP;
	} else if (c->state == S_KILLED && now >= c->until_ms) {
		restart_now(c);
	}
}

static void client_kill(chaos *c)
{
	redisReply *r;

	journal(c, "CLIENT KILL TYPE normal");
	r = rh_command(c->s, "CLIENT KILL TYPE normal");
	c->client_kill_cmds++;
	if (r && r->type == REDIS_REPLY_INTEGER)
		c->conn_killed += (long)r->integer;
	if (r)
		freeReplyObject(r);
}

static void run_chaos(chaos *c, int64_t end_ms)
{
	int64_t next = now_ms() + 300;

	while (now_ms() < end_ms) {
		int64_t now;

		chaos_tick(c);
		now = now_ms();
		if (now >= next && c->state == S_UP) {
			/* The first three are one of each, the rest at random. */
			int64_t action = c->actions < 3 ? (c->actions + 1) % 3 * 40 : rnd(100);

			c->actions++;
			if (action < 15) {
				/* The delayed restart: after the longest TTL, plus some. */
				if (rh_server_kill(c->s) == 0) {
					journal(c, "killed");
					c->kills++;
					c->state = S_KILLED;
					c->until_ms = now + LONGEST_TTL_MS + 300 + rnd(1500);
				}
			} else if (action < 55) {
				if (rh_server_pause(c->s) == 0) {
					journal(c, "paused");
					c->state = S_PAUSED;
					c->until_ms = now + 100 + rnd(1900);
					c->pauses++;
				}
			} else {
				client_kill(c);
			}
			next = now + 200 + rnd(800);
		}
		dl_sleep_ms(20);
	}
	/* Back up for the calm end (a restart still waits its time). */
	if (c->state == S_PAUSED)
		c->until_ms = 0;
	while (c->state != S_UP && c->restart_failures == 0) {
		chaos_tick(c);
		dl_sleep_ms(20);
	}
}

/* ---- the parent: checking the log ---------------------------------------- */

typedef struct sect {
	char kind; /* P, R, W */
	int pid;
	int64_t begin, end;
	long long c1, c2;
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
	long x_workers, tries, acquired, sections, skipped, abandoned, release_errors;
	int64_t max_overrun, max_release, max_callback;
} logdata;

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return p;
	*cap = *cap ? 2 * *cap : 1024;
	p = realloc(p, *cap * size);
	if (!p)
		abort();
	return p;
}

static int read_log(logdata *d)
{
	FILE *f = fopen(g_log_path, "r");
	char line[512];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		long long a, b, c, x[8], t;
		int pid, w;
		sect s;

		memset(&s, 0, sizeof(s));
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
			d->release_errors += (long)x[5];
			d->max_overrun = a > d->max_overrun ? a : d->max_overrun;
			d->max_release = b > d->max_release ? b : d->max_release;
			d->max_callback = c > d->max_callback ? c : d->max_callback;
			continue;
		}
		if (line[0] == '@') {
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
			d->e = grow(d->e, &d->cape, d->ne, sizeof(*d->e));
			d->e[d->ne++] = e;
			continue;
		}
		s.kind = line[0];
		if (((s.kind == 'P' || s.kind == 'W') &&
				    sscanf(line + 1, "%lld %lld %d", &a, &b, &pid) == 3) ||
				(s.kind == 'R' && sscanf(line + 1, "%lld %lld %d %lld %lld", &a, &b,
							  &pid, &s.c1, &s.c2) == 5)) {
			s.begin = a;
			s.end = b;
			s.pid = pid;
			d->s = grow(d->s, &d->caps, d->ns, sizeof(*d->s));
			d->s[d->ns++] = s;
		} else {
			d->bad_lines++;
		}
	}
	fclose(f);
	return 0;
}

/* A section's begin (+1) or end (-1); at one instant the ends go first. */
typedef struct edge {
	int64_t t;
	int delta;
	size_t i; /* the section */
} edge;

static int cmp_edge(const void *a, const void *b)
{
	const edge *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->delta - y->delta;
}

typedef struct sweep {
	long violations;  /* instants where the invariant broke */
	int max_all;      /* most sections at once */
	int max_readers;  /* most reader sections at once */
	long reader_meet; /* times a reader began while another read */
} sweep;

/* Sweep the begin/end events. Semaphore: never more than NPERMITS at once.
 * Read-write: a writer never beside another section. */
static void sweep_sections(const logdata *d, enum phase ph, sweep *out)
{
	edge *ev = calloc(2 * d->ns + 1, sizeof(*ev));
	int all = 0, readers = 0, writers = 0;
	size_t k;

	memset(out, 0, sizeof(*out));
	if (!ev)
		abort();
	for (k = 0; k < d->ns; k++) {
		ev[2 * k] = (edge){ d->s[k].begin, 1, k };
		ev[2 * k + 1] = (edge){ d->s[k].end, -1, k };
	}
	qsort(ev, 2 * d->ns, sizeof(*ev), cmp_edge);
	for (k = 0; k < 2 * d->ns; k++) {
		const sect *s = &d->s[ev[k].i];
		int bad;

		all += ev[k].delta;
		if (s->kind == 'R') {
			if (ev[k].delta > 0 && readers > 0)
				out->reader_meet++;
			readers += ev[k].delta;
		}
		if (s->kind == 'W')
			writers += ev[k].delta;
		if (ev[k].delta < 0)
			continue;
		if (all > out->max_all)
			out->max_all = all;
		if (readers > out->max_readers)
			out->max_readers = readers;
		bad = ph == PH_SEM ? all > NPERMITS : writers > 0 && all > 1;
		if (bad && out->violations++ < 5)
			fprintf(stderr,
					"overlap: %c section of pid %d [%" PRId64 ", %" PRId64
					"] begins with %d sections open (%d readers, %d writers)\n",
					s->kind, s->pid, s->begin, s->end, all - 1,
					readers - (s->kind == 'R'), writers - (s->kind == 'W'));
	}
	free(ev);
}

/* ---- main ------------------------------------------------------------------ */

static int passed, failed;

#define CHECK(cond, ...) \
	do { \
		if (cond) { \
			passed++; \
			printf("PASS "); \
		} else { \
			failed++; \
			printf("FAIL "); \
		} \
		printf(__VA_ARGS__); \
		printf("\n"); \
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
static void reap(const pid_t *workers, int n, int *done, int *wstatus, int64_t deadline,
		int loop_only)
{
	for (;;) {
		pid_t q[MAX_WORKERS];
		int i, j, nq = loop_only ? quiesced_pids(q, MAX_WORKERS) : 0, left = 0;

		for (i = 0; i < n; i++) {
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

static const char *rc_name(int64_t rc)
{
	return rc == DLOCK_ENOTACQUIRED ? "not acquired" : dlock_strerror((int)rc);
}

/*
 * The permits available as a fresh client counts them (which first takes
 * back the permits whose leases passed): from a child of its own, so that
 * the parent never has library threads when it forks workers. -1 on error.
 */
static int64_t count_available(void)
{
	int fds[2], status;
	int64_t v = -1;
	pid_t kid;

	if (pipe(fds) != 0)
		return -1;
	fflush(NULL);
	kid = fork();
	if (kid == 0) {
		dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
		dlock_semaphore_options so = DLOCK_SEMAPHORE_OPTIONS_INIT;
		dlock_client *c = NULL;
		dlock_semaphore *s = NULL;
		int64_t n = -1;

		close(fds[0]);
		so.kind = DLOCK_SEMAPHORE_EXPIRABLE;
		if (dlock_client_new(&c, g_uri, &co) != 0 ||
				dlock_semaphore_new(&s, c, SEM_NAME, &so) != 0 ||
				dlock_semaphore_available(&n, s) != 0)
			fprintf(stderr, "count: %s\n", dlock_errmsg_last());
		if (write(fds[1], &n, sizeof(n)) != (ssize_t)sizeof(n))
			_exit(1);
		dlock_semaphore_free(s);
		dlock_client_free(c);
		_exit(0);
	}
	close(fds[1]);
	if (kid < 0 || read(fds[0], &v, sizeof(v)) != (ssize_t)sizeof(v))
		v = -1;
	close(fds[0]);
	if (kid > 0)
		waitpid(kid, &status, 0);
	return v;
}

/* Keys of the read-write lock left on the server: the hash and its timeout keys. */
static long rw_keys_left(rh_server *s, int print)
{
	redisReply *r = rh_command(s, "KEYS %s", RW_TIMEOUT_PATTERN);
	long n = -1;
	size_t j;

	if (r && r->type == REDIS_REPLY_ARRAY) {
		n = (long)r->elements;
		for (j = 0; print && j < r->elements; j++)
			fprintf(stderr, "left: %s (PTTL %" PRId64 ")\n", r->element[j]->str,
					rh_command_int(s, "PTTL %s", r->element[j]->str));
	}
	if (r)
		freeReplyObject(r);
	if (n < 0)
		return 1;
	if (rh_command_int(s, "EXISTS %s", RW_NAME) != 0) {
		n++;
		if (print) {
			r = rh_command(s, "HGETALL %s", RW_NAME);
			fprintf(stderr, "left: %s (PTTL %" PRId64 "):", RW_NAME,
					rh_command_int(s, "PTTL %s", RW_NAME));
			for (j = 0; r && r->type == REDIS_REPLY_ARRAY && j + 1 < r->elements;
					j += 2)
				fprintf(stderr, " %s=%s", r->element[j]->str,
						r->element[j + 1]->str);
			fprintf(stderr, "\n");
			if (r)
				freeReplyObject(r);
		}
	}
	return n;
}

static void remove_files(void)
{
	unlink(g_log_path);
	unlink(g_counter_path);
	unlink(g_stop_path);
	unlink(g_journal_path);
	unlink(g_exit_path);
}

static void set_paths(const char *tag)
{
	snprintf(g_log_path, sizeof(g_log_path), "%s/%s.log", g_dir, tag);
	snprintf(g_counter_path, sizeof(g_counter_path), "%s/%s.counter", g_dir, tag);
	snprintf(g_stop_path, sizeof(g_stop_path), "%s/%s.stop", g_dir, tag);
	snprintf(g_journal_path, sizeof(g_journal_path), "%s/%s.chaos", g_dir, tag);
	snprintf(g_exit_path, sizeof(g_exit_path), "%s/%s.exit", g_dir, tag);
}

static int touch(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int ok = fd >= 0;

	if (ok && content && write(fd, content, strlen(content)) != (ssize_t)strlen(content))
		ok = 0;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* What a phase did and what the checker found. */
typedef struct phase_out {
	enum phase ph;
	const char *tag;
	int nworkers;
	pid_t workers[MAX_WORKERS];
	int wstatus[MAX_WORKERS], done[MAX_WORKERS];
	int exited_ok, killed_workers, late_workers;
	int64_t t_start, t_chaos_end, avail, left_ms;
	long worker_v[V_NKINDS], errors_by[32], release_by[32], lost_events, late;
	long sections_calm, stale_reads, writers, readers, keys_left, lost_on_release;
	long long counter;
	long zset_left, count_raw, taken_at_stop;
	chaos c;
	logdata d;
	sweep sw;
} phase_out;

/* Fork the workers, make chaos, then let them work calmly. 0, or -1. */
static int start_phase(phase_out *o, enum phase ph, rh_server *srv, int phase_s, pid_t parent)
{
	int i;

	memset(o, 0, sizeof(*o));
	o->ph = ph;
	o->tag = ph == PH_SEM ? "semaphore" : "rwlock";
	o->nworkers = ph == PH_SEM ? SEM_WORKERS : RW_WORKERS;
	o->avail = o->left_ms = -1;
	o->counter = -1;
	o->zset_left = o->count_raw = o->taken_at_stop = -1;
	o->c.s = srv;
	o->c.ph = o->ph;
	set_paths(o->tag);
	if (touch(g_log_path, NULL) != 0 || touch(g_counter_path, "00000000000000000000\n") != 0) {
		perror("log");
		return -1;
	}
	if (o->ph == PH_SEM && seed_permits(&o->c) != 0) {
		fprintf(stderr, "could not set the permits\n");
		return -1;
	}
	printf("\n== %s phase: %d workers, %d s (chaos %d s, then %d s calm) ==\n", o->tag,
			o->nworkers, phase_s, phase_s - CALM_MS / 1000, CALM_MS / 1000);
	o->t_start = now_ms();
	g_hard_end_us = (o->t_start + (int64_t)(phase_s + 60) * 1000 * g_factor) * 1000;
	fflush(NULL);
	for (i = 0; i < o->nworkers; i++) {
		o->workers[i] = fork();
		if (o->workers[i] < 0) {
			perror("fork");
			return -1;
		}
		if (o->workers[i] == 0) {
			/* The child: library only, never the harness (the server is the
			 * parent's; _exit skips the harness's atexit cleanup). */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(2);
			_exit(worker_main(o->ph, i));
		}
	}
	g_journal = fopen(g_journal_path, "w");
	if (g_journal)
		setvbuf(g_journal, NULL, _IOLBF, 0);

	o->t_chaos_end = o->t_start + (int64_t)phase_s * 1000 - CALM_MS;
	run_chaos(&o->c, o->t_chaos_end);
	o->t_chaos_end = now_ms(); /* the server is up again */
	dl_sleep_ms(CALM_MS);
	return 0;
}

/* Stop: every worker must leave its loop by itself; then what Redis keeps
 * once they released everything (their clients still open); then exit. */
static void stop_workers(phase_out *o, rh_server *srv)
{
	int64_t t_stop;
	int i;

	touch(g_stop_path, NULL);
	t_stop = now_ms();
	/* The longest a worker may need: a try, a long hold, a callback, a release. */
	t_stop += (int64_t)(MAX_WAIT_MS + 3000 + 4 * (2 * CMD_TIMEOUT_MS + g_margin_ms) +
				    CALLBACK_WINDOW_MS + 2000) *
			g_factor;
	reap(o->workers, o->nworkers, o->done, o->wstatus, t_stop, 1);
	for (i = 0; i < o->nworkers; i++)
		if (o->done[i] == 0) {
			fprintf(stderr, "worker %d (pid %d) did not leave its loop in time\n", i,
					(int)o->workers[i]);
			o->late_workers++;
		}

	/* Everything released, the clients still open (renewals would run):
	 * what an abandoned attempt left behind comes back within a lease. */
	if (o->ph == PH_SEM) {
		o->taken_at_stop = (long)rh_command_int(srv, "ZCARD %s", SEM_TIMEOUTS);
		dl_sleep_ms((LONGEST_TTL_MS + 300) * g_factor);
		o->avail = count_available();
		o->zset_left = (long)rh_command_int(srv, "EXISTS %s", SEM_TIMEOUTS);
		{
			redisReply *r = rh_command(srv, "GET %s", SEM_NAME);

			if (r && r->type == REDIS_REPLY_STRING)
				o->count_raw = strtol(r->str, NULL, 10);
			if (r)
				freeReplyObject(r);
		}
	} else {
		int64_t t = now_ms(), deadline = t + (int64_t)(LONGEST_TTL_MS + 500) * g_factor;

		while ((o->keys_left = rw_keys_left(srv, 0)) != 0 && now_ms() < deadline)
			dl_sleep_ms(50);
		o->left_ms = now_ms() - t;
		if (o->keys_left != 0)
			rw_keys_left(srv, 1);
	}
	touch(g_exit_path, NULL);
	reap(o->workers, o->nworkers, o->done, o->wstatus, now_ms() + 5000L * g_factor, 0);
	for (i = 0; i < o->nworkers; i++) {
		if (o->done[i] == 2) {
			if (WIFEXITED(o->wstatus[i]) && WEXITSTATUS(o->wstatus[i]) == 0)
				o->exited_ok++;
			else
				fprintf(stderr, "worker %d (pid %d) ended with %s %d\n", i,
						(int)o->workers[i],
						WIFEXITED(o->wstatus[i]) ? "status" : "signal",
						WIFEXITED(o->wstatus[i])
								? WEXITSTATUS(o->wstatus[i])
								: WTERMSIG(o->wstatus[i]));
			continue;
		}
		fprintf(stderr, "worker %d (pid %d) did not %s: kill -9\n", i, (int)o->workers[i],
				o->done[i] ? "exit" : "leave its loop");
		kill(o->workers[i], SIGKILL);
		waitpid(o->workers[i], &o->wstatus[i], 0);
		o->killed_workers++;
	}
	if (g_journal)
		fclose(g_journal);
	g_journal = NULL;
}

/* Read the log and tally it. 0, or -1 when it cannot be read. */
static int tally(phase_out *o)
{
	size_t k;

	if (read_log(&o->d) != 0) {
		fprintf(stderr, "cannot read %s\n", g_log_path);
		return -1;
	}
	{
		int fd = open(g_counter_path, O_RDONLY | O_CLOEXEC);
		char buf[COUNTER_LEN + 1];

		if (fd >= 0 && read(fd, buf, COUNTER_LEN) == COUNTER_LEN) {
			buf[COUNTER_LEN] = '\0';
			if (sscanf(buf, "%lld", &o->counter) != 1)
				o->counter = -1;
		}
		if (fd >= 0)
			close(fd);
	}
	sweep_sections(&o->d, o->ph, &o->sw);
	for (k = 0; k < o->d.ns; k++) {
		const sect *s = &o->d.s[k];

		o->writers += s->kind == 'W';
		o->readers += s->kind == 'R';
		if (s->begin > o->t_chaos_end * 1000)
			o->sections_calm++;
		if (s->kind == 'R' && s->c1 != s->c2 && o->stale_reads++ < 5)
			fprintf(stderr, "reader pid %d saw the counter change from %lld to %lld"
					" in [%" PRId64 ", %" PRId64 "]\n",
					s->pid, s->c1, s->c2, s->begin, s->end);
	}
	for (k = 0; k < o->d.ne; k++) {
		const event *e = &o->d.e[k];

		switch (e->kind) {
		case 'V':
			if (e->a > 0 && e->a < V_NKINDS) {
				if (o->worker_v[e->a]++ < 5)
					fprintf(stderr,
							"worker %d reported at +%" PRId64
							" ms: %s (%" PRId64 ", %" PRId64 ")\n",
							e->pid, e->t / 1000 - o->t_start,
							v_names[e->a], e->b, e->c);
			} else {
				o->worker_v[0]++;
			}
			break;
		case 'E':
			if (e->a > -32 && e->a < 0)
				o->errors_by[-e->a]++;
			break;
		case 'U':
			if (e->a > -32 && e->a < 0)
				o->release_by[-e->a]++;
			break;
		case 'L':
			o->lost_events += (long)e->a;
			break;
		case 'T':
			o->late++;
			break;
		case 'Z':
			o->lost_on_release++;
			break;
		default:
			break;
		}
	}
	return 0;
}

static void print_figures(const phase_out *o)
{
	const logdata *d = &o->d;
	const sweep *sw = &o->sw;
	const chaos *c = &o->c;
	int i;

	printf("figures (%s):\n", o->tag);
	if (o->ph == PH_SEM)
		printf("  sections: %zu (after the chaos: %ld); most at once: %d of %d permits\n",
				d->ns, o->sections_calm, sw->max_all, NPERMITS);
	else
		printf("  sections: %zu (%ld writer, %ld reader; after the chaos: %ld);"
		       " most at once: %d (readers %d); a reader joined other readers"
		       " %ld times\n",
				d->ns, o->writers, o->readers, o->sections_calm, sw->max_all,
				sw->max_readers, sw->reader_meet);
	printf("  acquisitions: %ld of %ld tries; failures:", d->acquired, d->tries);
	for (i = 1; i < 32; i++)
		if (o->errors_by[i])
			printf(" %s %ld,", rc_name(-i), o->errors_by[i]);
	printf("\n  releases that failed: %ld;", d->release_errors);
	for (i = 1; i < 32; i++)
		if (o->release_by[i])
			printf(" %s %ld,", rc_name(-i), o->release_by[i]);
	printf("\n  releases that said lost though the check said held as they began: %ld",
			o->lost_on_release);
	printf("\n  server killed: %ld (restarted empty after > %d ms%s), paused: %ld,"
	       " connections killed: %ld (in %ld CLIENT KILL TYPE normal), restart failures: %ld\n",
			c->kills, LONGEST_TTL_MS, o->ph == PH_SEM ? ", permits set again" : "",
			c->pauses, c->conn_killed, c->client_kill_cmds, c->restart_failures);
	printf("  lost events: %ld; sections abandoned: %ld; skipped (lease too short): %ld;"
	       " writes the holder could not confirm afterwards: %ld; slowest lost callback"
	       " after the check: %" PRId64 " ms\n",
			o->lost_events, d->abandoned, d->skipped, o->late, d->max_callback);
	printf("  slowest acquire beyond its wait: %" PRId64 " ms; slowest release: %" PRId64
	       " ms (bound %d ms)\n",
			d->max_overrun, d->max_release, 2 * CMD_TIMEOUT_MS + g_margin_ms);
	if (o->ph == PH_SEM)
		printf("  at the stop %ld permits were recorded taken; a lease later %" PRId64
		       " available (count key %ld), timeout ZSET %s\n",
				o->taken_at_stop, o->avail, o->count_raw,
				o->zset_left == 0 ? "gone" : "LEFT");
	else
		printf("  counter %lld (writer sections %ld); keys left after the unlocks: gone"
		       " within %" PRId64 " ms (%ld left)\n",
				o->counter, o->writers, o->left_ms, o->keys_left);
	{
		long wv = 0;

		for (i = 0; i < V_NKINDS; i++)
			wv += o->worker_v[i];
		printf("  violations: %ld (overlaps %ld, worker-reported %ld%s)\n",
				sw->violations + wv + o->stale_reads, sw->violations, wv,
				o->ph == PH_RW ? ", readers that saw a write" : "");
	}
	printf("  run: %.1f s\n", (double)(now_ms() - o->t_start) / 1000.0);
}

/* The invariants, one check each. */
static void judge(const phase_out *o)
{
	const logdata *d = &o->d;
	const sweep *sw = &o->sw;
	const chaos *c = &o->c;
	const long *v = o->worker_v;

	CHECK(d->bad_lines == 0, "%s: the log is well formed (%ld bad lines)", o->tag,
			d->bad_lines);
	if (o->ph == PH_SEM) {
		CHECK(sw->violations == 0,
				"%s: never more than %d sections at once (%zu sections, most at"
				" once %d, %ld violations)",
				o->tag, NPERMITS, d->ns, sw->max_all, sw->violations);
		CHECK(sw->max_all == NPERMITS, "%s: all %d permits were in use at once (most %d)",
				o->tag, NPERMITS, sw->max_all);
		CHECK(o->avail == NPERMITS && o->count_raw == NPERMITS && o->zset_left == 0,
				"%s: every permit came back: %" PRId64 " available (count %ld),"
				" {name}:timeout %s",
				o->tag, o->avail, o->count_raw,
				o->zset_left == 0 ? "gone" : "still there");
	} else {
		CHECK(sw->violations == 0,
				"%s: no writer section overlapped another section (%ld writer, %ld"
				" reader sections, %ld violations)",
				o->tag, o->writers, o->readers, sw->violations);
		CHECK(sw->max_readers >= 2 && sw->reader_meet > 0,
				"%s: readers held the lock together (most at once %d, %ld times)",
				o->tag, sw->max_readers, sw->reader_meet);
		CHECK(o->writers > 0, "%s: writers got their turn (%ld sections)", o->tag,
				o->writers);
		CHECK(o->stale_reads == 0, "%s: no reader saw the counter change (%ld did)", o->tag,
				o->stale_reads);
		CHECK(o->counter == o->writers,
				"%s: the counter (%lld) equals the writer sections (%ld)", o->tag,
				o->counter, o->writers);
		CHECK(o->keys_left == 0,
				"%s: no key of the lock (hash, rwlock_timeout keys) outlived the"
				" unlocks by more than a lease (%ld left after %" PRId64 " ms)",
				o->tag, o->keys_left, o->left_ms);
	}
	CHECK(v[V_CHECK_TOO_LONG] == 0, "%s: no leased hold was called held past its lease (%ld)",
			o->tag, v[V_CHECK_TOO_LONG]);
	CHECK(v[V_RENEWED] == 0, "%s: a release always ended the hold locally (%ld did not)",
			o->tag, v[V_RENEWED]);
	CHECK(v[V_NO_CALLBACK] == 0,
			"%s: every loss a watchdog holder saw also came through the lost callback"
			" within %d ms (%ld did not)",
			o->tag, CALLBACK_WINDOW_MS + g_margin_ms, v[V_NO_CALLBACK]);
	CHECK(v[V_SLOW_ACQUIRE] + v[V_SLOW_RELEASE] + v[V_BAD_RC] + v[V_IO] + v[0] == 0,
			"%s: every acquire within wait + 2 x %d ms + %d ms, every release within"
			" 2 x %d ms + %d ms, only documented error codes (slow %ld + %ld,"
			" codes %ld, I/O %ld)",
			o->tag, CMD_TIMEOUT_MS, g_margin_ms, CMD_TIMEOUT_MS, g_margin_ms,
			v[V_SLOW_ACQUIRE], v[V_SLOW_RELEASE], v[V_BAD_RC], v[V_IO]);
	CHECK(o->exited_ok == o->nworkers && o->killed_workers == 0 && o->late_workers == 0,
			"%s: all %d workers left by themselves, in time, when told (%d did;"
			" %d late, %d killed)",
			o->tag, o->nworkers, o->exited_ok, o->late_workers, o->killed_workers);
	CHECK(d->x_workers == o->nworkers, "%s: every worker reported its figures (%ld)", o->tag,
			d->x_workers);
	CHECK(c->kills > 0 && c->pauses > 0 && c->client_kill_cmds > 0 && c->restart_failures == 0,
			"%s: the chaos happened (kills %ld, pauses %ld, CLIENT KILLs %ld) and the"
			" server always came back",
			o->tag, c->kills, c->pauses, c->client_kill_cmds);
	CHECK((long)d->ns - o->sections_calm > 0 && o->sections_calm > 0,
			"%s: sections completed under chaos (%ld) and after it (%ld)", o->tag,
			(long)d->ns - o->sections_calm, o->sections_calm);
}



/* One phase: workers, chaos, a calm end, stop, the checks. 0, or -1 when
 * it could not run at all. */
static int run_phase(enum phase ph, rh_server *srv, int phase_s)
{
	pid_t parent = getpid();
	int failed_before = failed, rc;
	phase_out *o = malloc(sizeof(*o));

	if (!o)
		return -1;
	rc = start_phase(o, ph, srv, phase_s, parent);
	if (rc == 0) {
		stop_workers(o, srv);
		rc = tally(o);
	}
	if (rc == 0) {
		print_figures(o);
		judge(o);
		if (failed == failed_before)
			remove_files();
		else
			fprintf(stderr, "the %s log is kept in %s (the chaos in %s)\n", o->tag,
					g_log_path, g_journal_path);
	}
	free(o->d.s);
	free(o->d.e);
	free(o);
	return rc;
}

int main(void)
{
	const char *env = getenv("DLOCK_SOAK_SECONDS");
	int total_s = env && atoi(env) > 0 ? atoi(env) : 40;
	int phase_s = total_s / 2 >= 10 ? total_s / 2 : 10;
	const char *only;
	rh_server *srv;
	int64_t t_start = now_ms();
	int ok = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	g_factor = slow_factor();
	g_margin_ms = 150 * g_factor;
	rng_seed((uint64_t)now_us() ^ (uint64_t)getpid());
	printf("soak_family: 1 server; semaphore (%d permits, %d workers) and read-write lock"
	       " (%d readers, %d writers), %d s each; command timeout %d ms, watchdog %d ms,"
	       " lease %d ms, margin %d ms\n",
			NPERMITS, SEM_WORKERS, RW_READERS, RW_WRITERS, phase_s, CMD_TIMEOUT_MS,
			WATCHDOG_MS, LEASE_MS, g_margin_ms);

	srv = rh_server_start(NULL);
	if (!srv) {
		fprintf(stderr, "could not start redis-server\n");
		return 2;
	}
	snprintf(g_uri, sizeof(g_uri), "%s", rh_server_uri(srv));
	snprintf(g_dir, sizeof(g_dir), "%s/dlock-soak-family-%ld-XXXXXX",
			getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir,
			(long)getpid());
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 2;
	}
	only = getenv("SOAK_ONLY"); /* "semaphore" or "rwlock": that phase alone */
	if ((!only || strcmp(only, "rwlock") != 0) && run_phase(PH_SEM, srv, phase_s) != 0)
		ok = 0;
	if (ok && (!only || strcmp(only, "semaphore") != 0) && run_phase(PH_RW, srv, phase_s) != 0)
		ok = 0;
	if (!ok) {
		rh_cleanup_all();
		fprintf(stderr, "a phase could not run (files in %s)\n", g_dir);
		return 2;
	}
	rh_cleanup_all();
	if (failed == 0)
		rmdir(g_dir);
	printf("\nrun: %.1f s\n%d passed, %d failed\n", (double)(now_ms() - t_start) / 1000.0,
			passed, failed);
	return failed == 0 ? 0 : 1;
}
