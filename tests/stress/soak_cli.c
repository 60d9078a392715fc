/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * soak_cli - the chaos soak's `dlock run` phase: what an operator's job sees.
 *
 * 5 real redis-servers; 4 worker processes, each in a loop running
 *
 *   dlock -n <5 servers> --timeout 200 --watchdog 1500 \
 *         run -w 20000 --grace 2000 soak:cli -- sh -c '"$0" --section "$1" & wait' SELF DIR
 *
 * so the critical section is dlock's GRANDCHILD (a shell's background job,
 * which a signal to the shell alone does not stop). The section claims a
 * shared "owner" file (its pid), then works for 30 ms - 3 s, checking every
 * 10 ms that the file still names it, and at the end increments a counter
 * file. Meanwhile the parent SIGSTOPs 3 of 5 servers for longer than the
 * watchdog timeout (holders then lose the lock: dlock must stop the whole
 * process tree before the servers come back and someone else takes it),
 * SIGKILLs and restarts single servers, pauses them briefly and drops client
 * connections.
 *
 * Checks: no section ever sees another one's claim (two holders at once),
 * and none starts while a previous claimant is still alive; a section
 * whose `dlock run` has exited is gone within 1 s (no orphan keeps
 * working); every `dlock run` exits 0 (done), 70 (lost: its section was
 * stopped), 75 or 69 (not acquired within the wait) and within its wait +
 * section + grace + margin; the counter equals the sections completed; the
 * losses happened (the chaos did its job). Prints figures and
 * "N passed, N failed"; exits non-zero on any failure.
 *
 * DLOCK_SOAK_CLI_SECONDS sets the length (default 40, at least 15).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
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
#define NWORKERS 4
#define LOCK_NAME "soak:cli"
#define WAIT_MS 20000
#define GRACE_MS 2000
#define WATCHDOG_MS 1500
#define MAJORITY_PAUSE_MS 2300 /* > WATCHDOG_MS: the holders' keys expire */
#define MAX_SECTION_MS 3000
#define ORPHAN_GRACE_MS 1000 /* a stopped section is gone within this */

static char g_dir[PATH_MAX], g_self[PATH_MAX];

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t g_rng;

static int64_t rnd(int64_t n)
{
	g_rng ^= g_rng >> 12;
	g_rng ^= g_rng << 25;
	g_rng ^= g_rng >> 27;
	return n <= 0 ? 0 : (int64_t)((g_rng * 0x2545f4914f6cdd1dULL >> 11) % (uint64_t)n);
}

static void path_of(char *buf, size_t size, const char *file)
{
	snprintf(buf, size, "%s/%s", g_dir, file);
}

/* One line, one write() to the O_APPEND event log shared by every process. */
__attribute__((format(printf, 1, 2))) static void event(const char *fmt, ...)
{
	char path[PATH_MAX + 16], buf[256];
	va_list ap;
	int fd, n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	path_of(path, sizeof(path), "events");
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (fd >= 0) {
		if (n > 0 && write(fd, buf, (size_t)n) < 0) {
			/* nothing better to do: the check reports missing lines */
		}
		close(fd);
	}
}

static long read_long(const char *file)
{
	char path[PATH_MAX + 16], buf[32] = "";
	int fd;
	ssize_t n;

	path_of(path, sizeof(path), file);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return atol(buf);
}

static void write_long(const char *file, long v)
{
	char path[PATH_MAX + 16], buf[32];
	int fd, n = snprintf(buf, sizeof(buf), "%ld\n", v);

	path_of(path, sizeof(path), file);
	fd = open(path, O_WRONLY | O_TRUNC | O_CREAT, 0644);
	if (fd < 0 || write(fd, buf, (size_t)n) != n)
		event("V io %s\n", file);
	if (fd >= 0)
		close(fd);
}

/* Running, and not a zombie waiting to be reaped. */
static int alive(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	int ok = 0;

	if (pid <= 0 || kill(pid, 0) != 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL)
		ok = p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
	fclose(f);
	return ok;
}

/* ---- the critical section (dlock's grandchild) --------------------------- */

static int section(void)
{
	pid_t me = getpid(), before = (pid_t)read_long("owner");
	const char *worker = getenv("SOAK_WORKER");
	char pidfile[32];
	int64_t len, end;
	sigset_t term;
	long count;

	g_rng = (uint64_t)me * 0x9e3779b97f4a7c15ULL;
	snprintf(pidfile, sizeof(pidfile), "section.%s", worker ? worker : "x");
	write_long(pidfile, me);
	if (before != 0 && before != me && alive(before))
		event("V overlap-at-start %d %d\n", (int)me, (int)before);
	write_long("owner", me);
	count = read_long("counter");
	len = rnd(10) < 7 ? 30 + rnd(170) : 1000 + rnd(MAX_SECTION_MS - 1000);
	write_long("until", (long)(now_ms() + len)); /* for the chaos to aim at */
	for (end = now_ms() + len; now_ms() < end; dl_sleep_ms(10)) {
		pid_t o = (pid_t)read_long("owner");

		if (o != me) {
			event("V overlap %d %d\n", (int)me, (int)o);
			return 1;
		}
	}
	/* The finish is not cut in half by the stop signal (SIGKILL still can,
	 * after the grace period: then the check reports a counter mismatch). */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigprocmask(SIG_BLOCK, &term, NULL);
	write_long("counter", count + 1);
	event("E %d\n", (int)me);
	write_long("owner", 0);
	return 0;
}

/* ---- workers ------------------------------------------------------------- */

static char *const *g_dlock_argv;

static int stop_requested(void)
{
	char path[PATH_MAX + 16];

	path_of(path, sizeof(path), "stop");
	return access(path, F_OK) == 0;
}

/* One `dlock run`; returns its exit status (-1 when it could not start). */
static int run_once(int worker, int64_t *took)
{
	char id[16];
	int64_t start = now_ms();
	int status;
	pid_t pid;

	snprintf(id, sizeof(id), "%d", worker);
	pid = fork();
	if (pid == 0) {
		setenv("SOAK_WORKER", id, 1);
		execv(g_dlock_argv[0], g_dlock_argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	*took = now_ms() - start;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void worker_loop(int worker)
{
	char pidfile[32];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	snprintf(pidfile, sizeof(pidfile), "section.%d", worker);
	while (!stop_requested()) {
		int64_t took = 0, gone_by;
		int rc = run_once(worker, &took);
		pid_t sec = (pid_t)read_long(pidfile);

		event("R %d %d %" PRId64 "\n", worker, rc, took);
		if (rc != 0 && rc != 70 && rc != 75 && rc != 69)
			event("V exit %d %d\n", worker, rc);
		if (took > WAIT_MS + MAX_SECTION_MS + GRACE_MS + 3000)
			event("V slow %d %" PRId64 "\n", worker, took);
		/* Whatever ended the run, its section must not outlive it. */
		for (gone_by = now_ms() + ORPHAN_GRACE_MS; alive(sec) && now_ms() < gone_by;)
			dl_sleep_ms(5);
		if (alive(sec)) {
			event("V orphan %d %d\n", worker, (int)sec);
			kill(sec, SIGKILL);
		}
		write_long(pidfile, 0);
		dl_sleep_ms(rnd(30));
	}
	_exit(0);
}

/* ---- chaos (the parent) ---------------------------------------------------- */

typedef struct chaos_stats {
	long majority_pauses, kills, short_pauses, client_kills;
} chaos_stats;

static void chaos_step(rh_server **s, chaos_stats *st)
{
	int64_t what = rnd(10);
	int i = (int)rnd(NSERVERS), k;

	if (what < 3) {
		/* 3 of 5 gone for longer than the watchdog timeout, aimed at a
		 * section that runs on long enough to be cut: its holder must
		 * find the lock lost and stop it. */
		int64_t give_up = now_ms() + 10000;

		while (now_ms() < give_up &&
				!(alive((pid_t)read_long("owner")) &&
						read_long("until") - now_ms() > WATCHDOG_MS + 300))
			dl_sleep_ms(5);
		for (k = 0; k < 3; k++)
			rh_server_pause(s[(i + k) % NSERVERS]);
		dl_sleep_ms(MAJORITY_PAUSE_MS);
		for (k = 0; k < 3; k++)
			rh_server_resume(s[(i + k) % NSERVERS]);
		st->majority_pauses++;
	} else if (what < 5) { /* one dies; back empty after the longest TTL */
		rh_server_kill(s[i]);
		dl_sleep_ms(WATCHDOG_MS + 200);
		rh_server_restart(s[i]);
		st->kills++;
	} else if (what < 8) {
		rh_server_pause(s[i]);
		dl_sleep_ms(100 + rnd(800));
		rh_server_resume(s[i]);
		st->short_pauses++;
	} else {
		redisReply *r = rh_command(s[i], "CLIENT KILL TYPE normal");

		freeReplyObject(r);
		st->client_kills++;
	}
}

/* ---- checks ---------------------------------------------------------------- */

static int g_passed, g_failed;

__attribute__((format(printf, 2, 3))) static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("  %s: ", ok ? "ok" : "FAILED");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (ok)
		g_passed++;
	else
		g_failed++;
}

typedef struct tally {
	long runs, done, lost, not_acquired, no_quorum, completed;
	long overlaps, starts_over_live, orphans, bad_exits, slow, io;
	int64_t slowest;
} tally;

static void read_events(tally *t)
{
	char path[PATH_MAX + 16], line[256];
	FILE *f;

	memset(t, 0, sizeof(*t));
	path_of(path, sizeof(path), "events");
	f = fopen(path, "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		int w, rc;
		long long took;

		if (sscanf(line, "R %d %d %lld", &w, &rc, &took) == 3) {
			t->runs++;
			t->done += rc == 0;
			t->lost += rc == 70;
			t->not_acquired += rc == 75;
			t->no_quorum += rc == 69;
			if (took > t->slowest)
				t->slowest = took;
		} else if (line[0] == 'E') {
			t->completed++;
		} else if (strncmp(line, "V overlap-at-start", 18) == 0) {
			t->starts_over_live++;
		} else if (strncmp(line, "V overlap", 9) == 0) {
			t->overlaps++;
		} else if (strncmp(line, "V orphan", 8) == 0) {
			t->orphans++;
		} else if (strncmp(line, "V exit", 6) == 0) {
			t->bad_exits++;
		} else if (strncmp(line, "V slow", 6) == 0) {
			t->slow++;
		} else if (strncmp(line, "V io", 4) == 0) {
			t->io++;
		}
		if (line[0] == 'V')
			fprintf(stderr, "soak_cli: %s", line);
	}
	fclose(f);
}

/* ---- main -------------------------------------------------------------------- */

static char *g_argv_store[24];

static void build_dlock_argv(rh_server **s)
{
	static char nodes[NSERVERS * 40], wait[16], grace[16], watchdog[16];
	static char script[] = "\"$0\" --section \"$1\" & wait";
	int i, n = 0;

	nodes[0] = '\0';
	for (i = 0; i < NSERVERS; i++) {
		if (i)
			strcat(nodes, ",");
		strcat(nodes, rh_server_uri(s[i]));
	}
	snprintf(wait, sizeof(wait), "%d", WAIT_MS);
	snprintf(grace, sizeof(grace), "%d", GRACE_MS);
	snprintf(watchdog, sizeof(watchdog), "%d", WATCHDOG_MS);
	g_argv_store[n++] = (char *)DLOCK_CLI_PATH;
	g_argv_store[n++] = (char *)"-n";
	g_argv_store[n++] = nodes;
	g_argv_store[n++] = (char *)"--timeout";
	g_argv_store[n++] = (char *)"200";
	g_argv_store[n++] = (char *)"--watchdog";
	g_argv_store[n++] = watchdog;
	g_argv_store[n++] = (char *)"run";
	g_argv_store[n++] = (char *)"-w";
	g_argv_store[n++] = wait;
	g_argv_store[n++] = (char *)"--grace";
	g_argv_store[n++] = grace;
	g_argv_store[n++] = (char *)LOCK_NAME;
	g_argv_store[n++] = (char *)"--";
	g_argv_store[n++] = (char *)"sh";
	g_argv_store[n++] = (char *)"-c";
	g_argv_store[n++] = script;
	g_argv_store[n++] = g_self;
	g_argv_store[n++] = g_dir;
	g_argv_store[n] = NULL;
	g_dlock_argv = g_argv_store;
}

int main(int argc, char **argv)
{
	rh_server *s[NSERVERS];
	pid_t workers[NWORKERS];
	const char *env = getenv("DLOCK_SOAK_CLI_SECONDS");
	int64_t seconds = env ? atoll(env) : 40, end;
	char path[PATH_MAX + 16];
	chaos_stats st = { 0 };
	tally t;
	int i;

	if (argc == 3 && strcmp(argv[1], "--section") == 0) {
		snprintf(g_dir, sizeof(g_dir), "%s", argv[2]);
		return section();
	}
	if (seconds < 15)
		seconds = 15;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (realpath("/proc/self/exe", g_self) == NULL) {
		perror("soak_cli: realpath");
		return 1;
	}
	snprintf(g_dir, sizeof(g_dir), "/tmp/dlock-soak-cli.XXXXXX");
	if (mkdtemp(g_dir) == NULL || rh_servers_start(s, NSERVERS, NULL) != 0) {
		fprintf(stderr, "soak_cli: cannot set up (%s)\n", strerror(errno));
		return 1;
	}
	g_rng = (uint64_t)getpid() * 0x2545f4914f6cdd1dULL + (uint64_t)now_ms();
	build_dlock_argv(s);
	printf("soak_cli: %d workers, `dlock run` with a grandchild section, %lld s, dir %s\n",
			NWORKERS, (long long)seconds, g_dir);

	for (i = 0; i < NWORKERS; i++) {
		workers[i] = fork();
		if (workers[i] == 0) {
			g_rng ^= (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL;
			worker_loop(i);
		}
	}
	dl_sleep_ms(1000);
	for (end = now_ms() + (seconds - 5) * 1000; now_ms() < end;) {
		chaos_step(s, &st);
		dl_sleep_ms(500 + rnd(1500));
	}
	path_of(path, sizeof(path), "stop");
	close(open(path, O_WRONLY | O_CREAT, 0644));
	for (i = 0; i < NWORKERS; i++) {
		int64_t give_up = now_ms() + WAIT_MS + MAX_SECTION_MS + GRACE_MS + 5000;
		int status;

		while (waitpid(workers[i], &status, WNOHANG) == 0 && now_ms() < give_up)
			dl_sleep_ms(50);
		if (kill(workers[i], 0) == 0) {
			event("V hung-worker %d\n", i);
			kill(workers[i], SIGKILL);
			waitpid(workers[i], &status, 0);
		}
	}

	read_events(&t);
	printf("soak_cli: %ld runs: %ld done, %ld lost (exit 70), %ld not acquired (75), "
	       "%ld no quorum (69); %ld sections completed; slowest run %lld ms\n",
			t.runs, t.done, t.lost, t.not_acquired, t.no_quorum, t.completed,
			(long long)t.slowest);
	printf("soak_cli: chaos: %ld majority pauses of %d ms, %ld kills, %ld short pauses, "
	       "%ld CLIENT KILLs\n",
			st.majority_pauses, MAJORITY_PAUSE_MS, st.kills, st.short_pauses,
			st.client_kills);
	check(t.overlaps == 0, "no section saw another one's claim (%ld did)", t.overlaps);
	check(t.starts_over_live == 0, "no section started while an earlier one ran (%ld did)",
			t.starts_over_live);
	check(t.orphans == 0, "every section was gone within %d ms of its dlock run (%ld not)",
			ORPHAN_GRACE_MS, t.orphans);
	check(t.bad_exits == 0, "every run exited 0, 70, 75 or 69 (%ld other)", t.bad_exits);
	check(t.slow == 0, "every run returned within wait + section + grace (%ld slow)", t.slow);
	check(t.completed == read_long("counter") && t.io == 0,
			"counter %ld == sections completed %ld (I/O errors %ld)",
			read_long("counter"), t.completed, t.io);
	/* A section may finish after its lock was lost (found at release): exit 70. */
	check(t.done <= t.completed && t.completed <= t.done + t.lost,
			"runs that exited 0 (%ld) <= sections completed (%ld) <= those + lost runs",
			t.done, t.completed);
	check(t.done >= seconds / 4, "the lock changed hands (%ld sections in %lld s)", t.done,
			(long long)seconds);
	check(st.majority_pauses == 0 || t.lost > 0,
			"the majority pauses cost holders their lock (%ld runs lost it)", t.lost);
	for (i = 0; i < NSERVERS; i++)
		rh_server_free(s[i]);
	printf("%d passed, %d failed\n", g_passed, g_failed);
	if (g_failed == 0) {
		snprintf(path, sizeof(path), "rm -rf '%s'", g_dir);
		if (system(path) != 0) {
			/* a leftover temporary directory is harmless */
		}
	} else {
		printf("soak_cli: kept %s (events: R worker exit ms, E pid, V violation)\n", g_dir);
	}
	return g_failed == 0 ? 0 : 1;
}
