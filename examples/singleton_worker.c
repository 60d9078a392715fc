/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * singleton_worker - one active instance of an HA service, the others on
 * standby (leader election with a watchdog lock).
 *
 * Start the program on several machines (or several times on one). Each
 * instance waits for the lock "service:leader"; the one that gets it is the
 * leader and does the work (here: a heartbeat line every second). It holds
 * the lock without a lease: the client's watchdog keeps renewing it while
 * the process lives, and if the leader dies its lock expires within the
 * watchdog timeout and a standby takes over.
 *
 * If the leader loses the lock while it works (the server was restarted
 * without its data, an operator ran `dlock unlock --force service:leader`,
 * the network was down longer than the watchdog timeout), the lost-lock
 * callback fires on the client's background thread: it only sets a flag,
 * and the work loop, which checks that flag before every unit of work,
 * stops at once, logs "lost leadership" and goes back to waiting.
 *
 * SIGINT or SIGTERM (Ctrl-C, `kill`) stop the program cleanly: the leader
 * releases the lock, so a standby takes over at once instead of after the
 * watchdog timeout.
 *
 *   singleton_worker [--runtime SECONDS] [--watchdog MS] [--id NAME] [URI]
 *
 *   --runtime SECONDS  exit by itself after that long (default: run until signalled)
 *   --watchdog MS      the watchdog lease, renewed every third of it (default 30000);
 *                      a dead leader is replaced after at most this long
 *   --id NAME          how this instance names itself in its output (default: pid-<pid>)
 *   URI                redis://[[user]:password@]host[:port][/db]; default: the first URI
 *                      of $DLOCK_NODES, else redis://127.0.0.1:6379
 *
 * Try it: run two instances in two terminals, stop the leader with Ctrl-C
 * (the standby takes over at once), or run
 *   dlock -n redis://127.0.0.1:6379 -m rlock unlock --force service:leader
 * while one leads (it reports "lost leadership" within a third of the
 * watchdog timeout, then competes for the lock again).
 *
 * Exit status: 0 on a clean stop, 1 when the arguments or the URI are bad.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlock.h>

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOCK_NAME "service:leader"
/* How long one lock attempt waits before the loop looks at the stop flags
 * again (the attempt wakes at once when the leader releases). */
#define WAIT_SLICE_MS 1000
/* The work loop's granularity: how fast a loss or a signal is acted on. */
#define TICK_MS 100

static volatile sig_atomic_t stop_signal; /* set by SIGINT/SIGTERM */
static atomic_int lost;                   /* set by the lost-lock callback */
static char self[64];

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL); /* a signal cuts it short: the caller checks the flags */
}

/* A log line with the wall-clock time and the instance's name. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	char stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
	printf("%s.%03ld [%s] ", stamp, ts.tv_nsec / 1000000, self);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* Runs on the client's background thread: keep it short, only raise the flag. */
static void on_lost(const dlock_lost_event *ev, void *userdata)
{
	(void)ev;
	(void)userdata;
	atomic_store(&lost, 1);
}

static int finished(int64_t deadline)
{
	return stop_signal != 0 || (deadline > 0 && now_ms() >= deadline);
}

/* The service's real work would go here. It must be cut into short units so
 * that a lost lock stops it quickly. */
static void do_work(long beat)
{
	say("leader: heartbeat %ld (doing the work)", beat);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: singleton_worker [--runtime SECONDS] [--watchdog MS] [--id NAME] [URI]\n");
}

int main(int argc, char **argv)
{
	dlock_client_options opts = DLOCK_CLIENT_OPTIONS_INIT;
	const char *uri = getenv("DLOCK_NODES");
	char first[1024];
	dlock_client *client = NULL;
	dlock_lock *lock = NULL;
	struct sigaction sa;
	int64_t deadline = 0;
	long runtime_s = 0, terms = 0;
	int rc, i, last_err = 0;

	snprintf(self, sizeof(self), "pid-%ld", (long)getpid());
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--runtime") == 0 && i + 1 < argc) {
			runtime_s = strtol(argv[++i], NULL, 10);
			if (runtime_s <= 0) {
				fprintf(stderr, "singleton_worker: --runtime needs a positive number of seconds\n");
				return 1;
			}
		} else if (strcmp(argv[i], "--watchdog") == 0 && i + 1 < argc) {
			opts.watchdog_timeout_ms = (int)strtol(argv[++i], NULL, 10);
			if (opts.watchdog_timeout_ms < 300) {
				fprintf(stderr, "singleton_worker: --watchdog needs at least 300 ms\n");
				return 1;
			}
		} else if (strcmp(argv[i], "--id") == 0 && i + 1 < argc) {
			snprintf(self, sizeof(self), "%s", argv[++i]);
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-') {
			usage(stderr);
			return 1;
		} else {
			uri = argv[i];
		}
	}
	if (uri == NULL || *uri == '\0') {
		uri = "redis://127.0.0.1:6379";
	} else if (strchr(uri, ',') != NULL) {
		snprintf(first, sizeof first, "%.*s", (int)strcspn(uri, ","), uri);
		uri = first;
	}
	if (runtime_s > 0)
		deadline = now_ms() + runtime_s * 1000;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	/* A standby must survive the server being down for a while: connect
	 * lazily, and keep a server failure from stalling us for long. */
	opts.lazy_connect = 1;
	opts.command_timeout_ms = 500;
	opts.connect_timeout_ms = 500;
	rc = dlock_client_new(&client, uri, &opts);
	if (rc == 0)
		rc = dlock_lock_new(&lock, client, LOCK_NAME, NULL);
	if (rc == 0)
		rc = dlock_lock_set_lost_cb(lock, on_lost, NULL);
	if (rc != 0) {
		fprintf(stderr, "singleton_worker: %s: %s\n", dlock_strerror(rc),
			client != NULL ? dlock_client_errmsg(client) : dlock_errmsg_last());
		dlock_lock_free(lock);
		dlock_client_free(client);
		return 1;
	}
	say("standby: waiting for %s on %s (watchdog %lld ms)", LOCK_NAME,
	    dlock_client_node(client), (long long)opts.watchdog_timeout_ms);

	while (!finished(deadline)) {
		/* Wait for leadership in slices, so a signal or the runtime ends the wait. */
		rc = dlock_lock_acquire(lock, NULL, WAIT_SLICE_MS, DLOCK_LEASE_WATCHDOG);
		if (rc == DLOCK_ENOTACQUIRED) {
			last_err = 0;
			continue;
		}
		if (rc != 0) {
			/* The server is down or refuses us: say so once, retry calmly. */
			if (rc != last_err)
				say("standby: cannot reach the lock: %s: %s", dlock_strerror(rc),
				    dlock_lock_errmsg(lock));
			last_err = rc;
			sleep_ms(WAIT_SLICE_MS);
			continue;
		}
		last_err = 0;
		terms++;
		atomic_store(&lost, 0);
		say("leader: acquired %s (term %ld)", LOCK_NAME, terms);

		/* The work: one unit per second, the loss flag checked every tick. */
		for (long beat = 1, tick = 0; !atomic_load(&lost) && !finished(deadline); tick++) {
			if (tick % (1000 / TICK_MS) == 0)
				do_work(beat++);
			sleep_ms(TICK_MS);
		}

		if (atomic_load(&lost)) {
			say("leader: lost leadership: stopped the work; back to standby");
			/* Drop the local record of the lost hold. The server has none,
			 * or cannot be reached (then there is nothing to clean up). */
			rc = dlock_lock_release(lock, NULL);
			if (rc != 0 && rc != DLOCK_ELOST && rc != DLOCK_ENOTOWNER &&
			    rc != DLOCK_ECONN && rc != DLOCK_ETIMEDOUT)
				say("standby: cleaning up the lost hold: %s: %s", dlock_strerror(rc),
				    dlock_lock_errmsg(lock));
			continue;
		}
		/* Stopping: hand over at once instead of after the watchdog timeout. */
		rc = dlock_lock_release(lock, NULL);
		if (rc == 0)
			say("leader: released %s", LOCK_NAME);
		else
			say("leader: releasing %s: %s: %s (it expires within %lld ms)", LOCK_NAME,
			    dlock_strerror(rc), dlock_lock_errmsg(lock), (long long)opts.watchdog_timeout_ms);
	}

	say("stopping (%s)", stop_signal == SIGINT ? "SIGINT" : stop_signal == SIGTERM ? "SIGTERM"
			     : "runtime over");
	dlock_lock_free(lock);
	dlock_client_free(client);
	return 0;
}
