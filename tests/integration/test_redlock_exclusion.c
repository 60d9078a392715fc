/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RedLock mutual exclusion and liveness against real redis-server processes:
 * Redisson's test shape (7 members over 2 servers, many threads), forked
 * processes on 5 servers while one server is killed and restarted empty,
 * Kleppmann's restart scenario with and without the restart guard (and its
 * strict mode), and split votes among contenders on 5 servers.
 *
 * Worker threads and child processes never call cr_assert: threads record
 * dl_failures for the main thread; children write them to the shared log and
 * exit non-zero. Children call no harness function.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

/* ---- helpers ------------------------------------------------------------ */

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static dlock_client_options client_opts(int watchdog_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.command_timeout_ms = 500;
	o.connect_timeout_ms = 500;
	if (watchdog_ms > 0)
		o.watchdog_timeout_ms = watchdog_ms;
	return o;
}

static dlock_redlock_options redlock_opts(int64_t guard_ms, int strict)
{
	dlock_redlock_options o = DLOCK_REDLOCK_OPTIONS_INIT;
	o.restart_guard_ms = guard_ms;
	o.restart_guard_strict = strict;
	return o;
}

static dlock_client *open_client(rh_server *s, int watchdog_ms)
{
	dlock_client_options o = client_opts(watchdog_ms);
	dlock_client *c = NULL;
	int rc = dlock_client_new(&c, rh_server_uri(s), &o);
	cr_assert_eq(rc, 0, "client_open %s: %s (%s)", rh_server_uri(s), dlock_strerror(rc),
			dlock_errmsg_last());
	return c;
}

/* A RedLock on `name` over servers s[0..n-1], its own clients (dlock_redlock_new_from_uris). */
static dlock_redlock *open_redlock(rh_server **s, int n, const char *name, int watchdog_ms,
		int64_t guard_ms, int strict)
{
	const char *uris[16];
	cr_assert_leq(n, 16);
	for (int i = 0; i < n; i++)
		uris[i] = rh_server_uri(s[i]);
	dlock_client_options co = client_opts(watchdog_ms);
	dlock_redlock_options ro = redlock_opts(guard_ms, strict);
	dlock_redlock *r = NULL;
	int rc = dlock_redlock_new_from_uris(&r, uris, (size_t)n, name, &co, &ro);
	cr_assert_eq(rc, 0, "redlock_open: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	return r;
}

static int64_t exists(rh_server *s, const char *key)
{
	int64_t e = rh_command_int(s, "EXISTS %s", key);
	cr_assert_neq(e, INT64_MIN, "EXISTS on port %d failed", rh_server_port(s));
	return e;
}

/* Assert that the hash `key` on s is exactly { field: "1" }. */
static void assert_only_field(rh_server *s, const char *key, const char *field)
{
	int64_t n = rh_command_int(s, "HLEN %s", key);
	cr_assert_eq(n, 1, "port %d: HLEN %s = %" PRId64 ", expected exactly one holder",
			rh_server_port(s), key, n);
	redisReply *r = rh_command(s, "HGET %s %s", key, field);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING, "port %d: %s is not held by %s",
			rh_server_port(s), key, field);
	cr_assert_str_eq(r->str, "1");
	freeReplyObject(r);
}

/* Assert that `key` is absent on s; if not, say who holds it and for how long. */
static void assert_no_key(rh_server *s, const char *key, const char *what)
{
	if (exists(s, key) == 0)
		return;
	char fields[256] = "";
	size_t off = 0;
	redisReply *r = rh_command(s, "HGETALL %s", key);
	if (r != NULL && r->type == REDIS_REPLY_ARRAY)
		for (size_t i = 0; i + 1 < r->elements && off < sizeof fields; i += 2)
			off += (size_t)snprintf(fields + off, sizeof fields - off, "%s%s=%s",
					i ? ", " : "", r->element[i]->str, r->element[i + 1]->str);
	if (r != NULL)
		freeReplyObject(r);
	cr_assert_fail("%s: port %d still has %s {%s} with PTTL %" PRId64 " ms", what,
			rh_server_port(s), key, fields, rh_command_int(s, "PTTL %s", key));
}

/* A counter threads bump and the main thread waits on, with a deadline. */
/*
 * The guarded section shared by the thread tests: read the counter, sleep,
 * write it + 1 (a lost update shows a second holder), with an occupancy
 * count that must be 0 on entry. Relaxed atomics only keep TSan quiet.
 */
typedef struct section {
	atomic_int counter;
	atomic_int inside;
	atomic_int overlaps;
} section;

static void section_init(section *s)
{
	atomic_init(&s->counter, 0);
	atomic_init(&s->inside, 0);
	atomic_init(&s->overlaps, 0);
}

static void critical_section(section *s, int sleep_for_ms)
{
	if (atomic_fetch_add(&s->inside, 1) != 0)
		atomic_fetch_add(&s->overlaps, 1);
	int v = atomic_load_explicit(&s->counter, memory_order_relaxed);
	dl_sleep_ms(sleep_for_ms);
	atomic_store_explicit(&s->counter, v + 1, memory_order_relaxed);
	atomic_fetch_sub(&s->inside, 1);
}

/* ---- 1. Redisson's shape: 7 members on 2 servers, 10 threads ------------- */

#define R1_MEMBERS 7
#define R1_THREADS 10
#define R1_ROUNDS 5

typedef struct r1_shared {
	dlock_redlock *r;
	int use_try; /* 0: lock(2000); 1: try(4000, 2000) */
	pthread_barrier_t start;
	section sec;
	dl_failures fail;
	dl_gate done;
} r1_shared;

typedef struct r1_arg {
	r1_shared *sh;
	int id;
} r1_arg;

static void *r1_worker(void *p)
{
	r1_arg *a = p;
	r1_shared *sh = a->sh;
	pthread_barrier_wait(&sh->start);
	for (int i = 0; i < R1_ROUNDS; i++) {
		int64_t validity = -1;
		int rc = sh->use_try ? dl_redlock_acquire_v(&validity, sh->r, NULL, 4000, 2000)
				     : dl_redlock_acquire_v(&validity, sh->r, NULL, DLOCK_WAIT_FOREVER, 2000);
		if (rc != 0) {
			dl_failures_record(&sh->fail, "thread %d round %d: %s: %s (%s)", a->id, i,
					sh->use_try ? "try(4000, 2000)" : "lock(2000)",
					dlock_strerror(rc), dlock_redlock_errmsg(sh->r));
			continue;
		}
		int64_t t0 = rh_now_ms();
		if (validity <= 0 || validity > 2000)
			dl_failures_record(&sh->fail,
					"thread %d round %d: validity %" PRId64
					" ms for a 2000 ms lease",
					a->id, i, validity);
		critical_section(&sh->sec, 10);
		int64_t took = rh_now_ms() - t0;
		if (took >= validity)
			dl_failures_record(&sh->fail,
					"thread %d round %d: section took %" PRId64
					" ms, validity %" PRId64,
					a->id, i, took, validity);
		rc = dlock_redlock_release(sh->r, NULL);
		if (rc != 0)
			dl_failures_record(&sh->fail, "thread %d round %d: unlock: %s (%s)", a->id,
					i, dlock_strerror(rc), dlock_redlock_errmsg(sh->r));
	}
	dl_gate_add(&sh->done, 1);
	return NULL;
}

static void run_redisson_shape(int use_try, const char *prefix)
{
	rh_server *s[2];
	cr_assert_eq(rh_servers_start(s, 2, NULL), 0);
	dlock_client *c[2] = { open_client(s[0], 0), open_client(s[1], 0) };
	dlock_lock *members[R1_MEMBERS];
	char names[R1_MEMBERS][32];
	for (int i = 0; i < R1_MEMBERS; i++) {
		snprintf(names[i], sizeof names[i], "%s%d", prefix, i);
		members[i] = dl_lock(c[i < 4 ? 0 : 1], names[i]);
	}
	dlock_redlock_options ro = redlock_opts(0, 0);
	r1_shared sh;
	int rc = dlock_redlock_new(&sh.r, members, R1_MEMBERS, &ro);
	cr_assert_eq(rc, 0, "redlock_new: %s", dlock_strerror(rc));
	cr_assert_eq(dlock_redlock_size(sh.r), R1_MEMBERS);
	sh.use_try = use_try;
	pthread_barrier_init(&sh.start, NULL, R1_THREADS);
	section_init(&sh.sec);
	dl_failures_init(&sh.fail);
	dl_gate_init(&sh.done);

	r1_arg args[R1_THREADS];
	pthread_t th[R1_THREADS];
	int64_t t0 = rh_now_ms();
	for (int i = 0; i < R1_THREADS; i++) {
		args[i] = (r1_arg){ &sh, i };
		cr_assert_eq(pthread_create(&th[i], NULL, r1_worker, &args[i]), 0);
	}
	int n = dl_gate_wait(&sh.done, R1_THREADS, t0 + 80000);
	cr_assert_eq(n, R1_THREADS, "%s: only %d of %d threads finished within 80 s (counter %d)",
			use_try ? "try" : "lock", n, R1_THREADS, atomic_load(&sh.sec.counter));
	for (int i = 0; i < R1_THREADS; i++)
		pthread_join(th[i], NULL);
	cr_log_info("redlock 7 members / 2 servers, %s: %d sections in %" PRId64 " ms",
			use_try ? "try(4000, 2000)" : "lock(2000)", R1_THREADS * R1_ROUNDS,
			rh_now_ms() - t0);

	dl_failures_assert_none(&sh.fail);
	cr_assert_eq(atomic_load(&sh.sec.overlaps), 0, "%d entries found another thread inside",
			atomic_load(&sh.sec.overlaps));
	cr_assert_eq(atomic_load(&sh.sec.counter), R1_THREADS * R1_ROUNDS,
			"counter %d, expected %d", atomic_load(&sh.sec.counter),
			R1_THREADS * R1_ROUNDS);
	for (int i = 0; i < R1_MEMBERS; i++)
		assert_no_key(s[i < 4 ? 0 : 1], names[i], "after every thread released");

	dlock_redlock_free(sh.r);
	for (int i = 0; i < R1_MEMBERS; i++)
		dlock_lock_free(members[i]);
	dlock_client_free(c[0]);
	dlock_client_free(c[1]);
	pthread_barrier_destroy(&sh.start);
	dl_gate_destroy(&sh.done);
	rh_server_free(s[0]);
	rh_server_free(s[1]);
}

Test(redlock_exclusion, seven_members_two_servers_lock, .timeout = 90)
{
	run_redisson_shape(0, "L");
}

Test(redlock_exclusion, seven_members_two_servers_try, .timeout = 90)
{
	run_redisson_shape(1, "T");
}

/* ---- 2. forked processes on 5 servers, one killed and restarted ---------- */

#define P_SERVERS 5
#define P_PROCS 4
#define P_SECTIONS 50
#define P_TOTAL (P_PROCS * P_SECTIONS)
#define P_NAME "rl:procs"

/* A child: its own RedLock, P_SECTIONS critical sections. Never returns. */
static void proc_child(const dl_procs *p, pid_t parent)
{
	dl_child_prologue(parent);
	int log_fd = open(p->log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	int cnt_fd = open(p->counter_path, O_RDWR | O_CLOEXEC);
	if (log_fd < 0 || cnt_fd < 0)
		_exit(4);
	pid_t me = getpid();
	dlock_client_options co = client_opts(0);
	dlock_redlock_options ro = redlock_opts(0, 0);
	dlock_redlock *r = dl_child_redlock(p, P_NAME, &co, &ro, log_fd);
	int failed = 0;
	for (int i = 0; i < P_SECTIONS; i++) {
		int64_t validity = -1;
		int64_t t_try = now_us();
		int rc = dl_redlock_acquire_v(&validity, r, NULL, 10000, 2000);
		if (rc != 0) {
			dl_log_line(log_fd,
					"F %d section %d: try(10000, 2000) after %" PRId64
					" ms: %s (%s)\n",
					(int)me, i, (now_us() - t_try) / 1000, dlock_strerror(rc),
					dlock_redlock_errmsg(r));
			failed++;
			continue;
		}
		int64_t t_b = now_us();
		dl_log_line(log_fd, "B %d %" PRId64 "\n", (int)me, t_b);
		int v = dl_read_counter(cnt_fd);
		usleep(1000);
		v++;
		ssize_t w = pwrite(cnt_fd, &v, sizeof v, 0);
		int64_t t_e = now_us();
		dl_log_line(log_fd, "E %d %" PRId64 "\n", (int)me, t_e);
		if (w != (ssize_t)sizeof v) {
			dl_log_line(log_fd, "F %d section %d: counter write failed\n", (int)me, i);
			failed++;
		}
		if ((t_e - t_b) / 1000 >= validity) {
			dl_log_line(log_fd,
					"F %d section %d: took %" PRId64 " us, validity %" PRId64
					" ms\n",
					(int)me, i, t_e - t_b, validity);
			failed++;
		}
		rc = dlock_redlock_release(r, NULL);
		if (rc != 0) /* a killed member may make this fail; the lock is still released */
			dl_log_line(log_fd, "U %d section %d: unlock: %s (%s)\n", (int)me, i,
					dlock_strerror(rc), dlock_redlock_errmsg(r));
	}
	dlock_redlock_free(r);
	close(log_fd);
	close(cnt_fd);
	_exit(failed ? 1 : 0);
}

/* Parse the log: sections never overlap, in file order and in time. */
static void check_log(const char *path, int *sections, char *first_fail, size_t fail_len,
		int *unlock_errs)
{
	FILE *fp = fopen(path, "r");
	cr_assert_not_null(fp, "open %s: %s", path, strerror(errno));
	char line[640];
	int open_pid = 0, lineno = 0, fails = 0;
	int64_t open_t = 0, last_end = 0;
	*sections = 0;
	*unlock_errs = 0;
	first_fail[0] = '\0';
	while (fgets(line, sizeof line, fp) != NULL) {
		lineno++;
		char kind = line[0];
		int pid = 0;
		long long t = 0;
		if (kind == 'F') {
			if (fails++ == 0)
				snprintf(first_fail, fail_len, "%s", line);
			continue;
		}
		if (kind == 'U') {
			(*unlock_errs)++;
			continue;
		}
		cr_assert(kind == 'B' || kind == 'E', "log line %d is garbled: %s", lineno, line);
		cr_assert_eq(sscanf(line + 1, " %d %lld", &pid, &t), 2,
				"log line %d is garbled: %s", lineno, line);
		if (kind == 'B') {
			cr_assert_eq(open_pid, 0,
					"line %d: pid %d began while pid %d was inside (since %" PRId64
					" us)",
					lineno, pid, open_pid, open_t);
			cr_assert_geq(t, last_end,
					"line %d: pid %d began at %lld us, before the previous section ended (%" PRId64
					" us)",
					lineno, pid, t, last_end);
			open_pid = pid;
			open_t = t;
		} else {
			cr_assert_eq(open_pid, pid,
					"line %d: pid %d ended a section opened by pid %d", lineno,
					pid, open_pid);
			cr_assert_geq(t, open_t);
			open_pid = 0;
			last_end = t;
			(*sections)++;
		}
	}
	fclose(fp);
	cr_assert_eq(open_pid, 0, "the log ends inside a section of pid %d", open_pid);
	if (fails)
		cr_log_error("%d failure line(s) in the log", fails);
}

Test(redlock_exclusion, processes_exclude_while_a_server_is_killed_and_restarted, .timeout = 120)
{
	dl_procs p;
	dl_procs_start(&p, P_SERVERS, "/tmp/dlock-rl-procs-XXXXXX", 0);
	pid_t kids[P_PROCS];
	dl_procs_fork(&p, kids, P_PROCS, proc_child);

	/* Kill server 3 after ~25% of the sections, restart it (empty) after ~60%. */
	const int victim = 2;
	int64_t t0 = rh_now_ms(), deadline = t0 + 110000;
	int killed_at = -1, restarted_at = -1, running = P_PROCS;
	int status[P_PROCS];
	int exited[P_PROCS] = { 0 };
	while (running > 0 && rh_now_ms() < deadline) {
		int v = dl_read_counter(p.cfd);
		if (killed_at < 0 && v >= P_TOTAL / 4) {
			cr_assert_eq(rh_server_kill(p.s[victim]), 0);
			killed_at = v;
		}
		if (killed_at >= 0 && restarted_at < 0 && v >= P_TOTAL * 6 / 10) {
			cr_assert_eq(rh_server_restart(p.s[victim]), 0);
			restarted_at = v;
		}
		running -= dl_reap_exited(kids, exited, status, P_PROCS);
		dl_sleep_ms(5);
	}
	if (running > 0)
		dl_kill_unexited(kids, exited, status, P_PROCS);
	int counter = dl_read_counter(p.cfd);
	close(p.cfd);
	cr_log_info("redlock processes: %d sections in %" PRId64
		    " ms; server %d killed at %d, restarted at %d",
			counter, rh_now_ms() - t0, victim + 1, killed_at, restarted_at);

	int sections = 0, unlock_errs = 0;
	char first_fail[640];
	check_log(p.log_path, &sections, first_fail, sizeof first_fail, &unlock_errs);
	if (unlock_errs)
		cr_log_info("%d unlock(s) reported an error (a member on the killed server)",
				unlock_errs);
	dl_procs_assert_children_ok(running, counter, first_fail, status, P_PROCS);
	cr_assert_geq(killed_at, 0, "the server was never killed");
	cr_assert_geq(restarted_at, 0, "the server was never restarted");
	cr_assert_eq(sections, P_TOTAL, "%d complete sections in the log, expected %d", sections,
			P_TOTAL);
	cr_assert_eq(counter, P_TOTAL,
			"counter %d, expected %d (lost updates: overlapping sections)", counter,
			P_TOTAL);
	for (int i = 0; i < P_SERVERS; i++)
		assert_no_key(p.s[i], P_NAME, "after every process released");

	dl_procs_free(&p);
}

/* ---- 3. the restart guard: Kleppmann's scenario -------------------------- */

#define K_NAME "rl:kleppmann"

/* The only field of the hash `key` on s, which must be the calling thread's
 * (`<some client uuid>:<tid>`), into buf. */
static void only_field_of_this_thread(rh_server *s, const char *key, char *buf, size_t len)
{
	redisReply *r = rh_command(s, "HKEYS %s", key);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->elements, 1, "port %d: %s has %zu fields, expected one", rh_server_port(s),
			key, r->elements);
	snprintf(buf, len, "%s", r->element[0]->str);
	freeReplyObject(r);
	char suffix[32];
	snprintf(suffix, sizeof suffix, ":%" PRIu64, dlock_thread_id());
	size_t n = strlen(buf), k = strlen(suffix);
	cr_assert(n == 36 + k && strcmp(buf + n - k, suffix) == 0,
			"port %d: field %s is not this thread's", rh_server_port(s), buf);
}

static void status_of(dlock_redlock *r, size_t i, dlock_member_status *st)
{
	cr_assert_eq(dlock_redlock_member_status(st, r, i), 0);
}

/* Keep a server busy for `ms` (it answers nobody meanwhile). DEBUG SLEEP, not
 * a script that loops on TIME: on Redis 8.2 TIME inside a script stays at
 * the script's start, so such a loop never ends (7.0 and 6.2 advance it). */
typedef struct busy_server {
	rh_server *s;
	int ms;
	pthread_t th;
} busy_server;

static void *busy_main(void *arg)
{
	busy_server *b = arg;
	freeReplyObject(rh_command(b->s, "DEBUG SLEEP %d.%03d", b->ms / 1000, b->ms % 1000));
	return NULL;
}

/*
 * The same scenario, with the node that still shows A's hold slow to answer
 * (busy for 150 ms) while the two restarted nodes answer at once: B's
 * parallel attempt must not decide at the bare quorum of young votes before
 * it has heard the node that makes them doubtful (found under load: the
 * holder's answer came after the quorum's grace, and B took the lock).
 */
Test(redlock_exclusion, restart_guard_hears_a_slow_holder, .timeout = 60)
{
	rh_server *s[3];
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	cr_assert_eq(rh_server_kill(s[2]), 0);
	dlock_redlock *a = open_redlock(s, 3, K_NAME, 30000, -1, 0);
	int rc = dlock_redlock_acquire(a, NULL, 0, 30000);
	cr_assert_eq(rc, 0, "A: %s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(a));
	cr_assert_eq(rh_server_kill(s[1]), 0);
	cr_assert_eq(rh_server_restart(s[1]), 0);
	cr_assert_eq(rh_server_restart(s[2]), 0);

	dlock_redlock *b = open_redlock(s, 3, K_NAME, 30000, -1, 0);
	cr_assert_eq(dlock_redlock_acquire(b, NULL, 0, 1), DLOCK_ENOTACQUIRED, "B's warm-up try");
	busy_server busy = { s[0], 150, 0 };
	cr_assert_eq(pthread_create(&busy.th, NULL, busy_main, &busy), 0);
	dl_sleep_ms(30); /* the script is running */
	rc = dlock_redlock_acquire(b, NULL, 0, 30000);
	pthread_join(busy.th, NULL);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED,
			"B took the lock while node 1 still showed A's hold: "
			"%s (%s)",
			dlock_strerror(rc), dlock_redlock_errmsg(b));
	status_of(b, 0, &st);
	cr_assert_eq(st.vote, DLOCK_VOTE_HELD, "B: node 1 voted %s", dl_vote_name(st.vote));
	for (int i = 1; i < 3; i++)
		cr_assert_eq(exists(s[i], K_NAME), 0, "node %d: B's vote was not given back",
				i + 1);

	dlock_redlock_free(b);
	dlock_redlock_release(a, NULL); /* its hold on node 2 went with the restart: not the point here */
	dlock_redlock_free(a);
	for (int i = 0; i < 3; i++)
		rh_server_free(s[i]);
}

Test(redlock_exclusion, restart_guard_refuses_quorum_of_restarted_nodes, .timeout = 60)
{
	rh_server *s[3];
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);

	/* Node 3 is down while client A acquires: A holds nodes 1 and 2. */
	cr_assert_eq(rh_server_kill(s[2]), 0);
	dlock_redlock *a = open_redlock(s, 3, K_NAME, 30000, -1, 0);
	int64_t validity = -1;
	int rc = dl_redlock_acquire_v(&validity, a, NULL, 0, 30000);
	cr_assert_eq(rc, 0, "A: try(0, 30000): %s (%s)", dlock_strerror(rc),
			dlock_redlock_errmsg(a));
	cr_assert(validity > 25000 && validity < 30000, "A's validity %" PRId64, validity);
	status_of(a, 2, &st);
	cr_assert_eq(st.vote, DLOCK_VOTE_ERROR, "A: node 3 (down) voted %s", dl_vote_name(st.vote));
	char field_a1[128], field_a2[128];
	only_field_of_this_thread(s[0], K_NAME, field_a1, sizeof field_a1);
	only_field_of_this_thread(s[1], K_NAME, field_a2, sizeof field_a2);

	/* Node 2 crashes and comes back empty; node 3 comes back empty. */
	cr_assert_eq(rh_server_kill(s[1]), 0);
	cr_assert_eq(rh_server_restart(s[1]), 0);
	cr_assert_eq(rh_server_restart(s[2]), 0);
	cr_assert_eq(exists(s[1], K_NAME), 0);
	cr_assert_eq(exists(s[2], K_NAME), 0);

	/* Client B, guard on (default window: the 30 s lease/watchdog): refused. */
	dlock_redlock *b = open_redlock(s, 3, K_NAME, 30000, -1, 0);
	int64_t t0 = rh_now_ms();
	rc = dlock_redlock_acquire(b, NULL, 0, 30000);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "B (guard on): try(0, 30000) = %s (%s)",
			dlock_strerror(rc), dlock_redlock_errmsg(b));
	cr_assert_lt(took, 1000, "B's refused try took %" PRId64 " ms", took);
	status_of(b, 0, &st);
	cr_assert_eq(st.vote, DLOCK_VOTE_HELD, "B: node 1 voted %s, expected HELD",
			dl_vote_name(st.vote));
	cr_assert(st.ttl_ms > 25000 && st.ttl_ms <= 30000, "B: node 1 HELD with ttl_ms %" PRId64,
			st.ttl_ms);
	for (int i = 1; i < 3; i++) {
		status_of(b, (size_t)i, &st);
		cr_assert_eq(st.vote, DLOCK_VOTE_YOUNG, "B: node %d voted %s (%s), expected YOUNG",
				i + 1, dl_vote_name(st.vote), st.message);
		cr_assert(st.uptime_s >= 0 && st.uptime_s < 30, "B: node %d uptime_s %" PRId64,
				i + 1, st.uptime_s);
	}
	cr_assert_eq(exists(s[1], K_NAME), 0, "B left its vote on node 2");
	cr_assert_eq(exists(s[2], K_NAME), 0, "B left its vote on node 3");
	assert_only_field(s[0], K_NAME, field_a1);
	cr_assert_eq(dlock_redlock_check(b, NULL), DLOCK_ENOTOWNER);

	/* Client C, guard off: takes nodes 2 and 3 while A still holds: the hazard. */
	dlock_redlock *c = open_redlock(s, 3, K_NAME, 30000, 0, 0);
	rc = dl_redlock_acquire_v(&validity, c, NULL, 0, 30000);
	cr_assert_eq(rc, 0, "C (guard off): try(0, 30000) = %s (%s)", dlock_strerror(rc),
			dlock_redlock_errmsg(c));
	cr_assert_gt(validity, 25000);
	char field_c2[128], field_c3[128];
	only_field_of_this_thread(s[1], K_NAME, field_c2, sizeof field_c2);
	only_field_of_this_thread(s[2], K_NAME, field_c3, sizeof field_c3);
	cr_assert_str_neq(field_c2, field_a2);
	assert_only_field(s[0], K_NAME, field_a1);
	cr_assert_eq(dlock_redlock_check(a, NULL),
			0); /* A believes it holds it: no network check */
	cr_assert_eq(dlock_redlock_check(c, NULL), 0);

	rc = dlock_redlock_release(c, NULL);
	cr_assert_eq(rc, 0, "C: unlock: %s", dlock_strerror(rc));
	cr_assert_eq(exists(s[1], K_NAME), 0);
	cr_assert_eq(exists(s[2], K_NAME), 0);
	dlock_redlock_release(a, NULL); /* node 2 lost A's hold: the result is not this test's concern */
	cr_assert_eq(exists(s[0], K_NAME), 0, "A's release did not reach node 1");

	dlock_redlock_free(a);
	dlock_redlock_free(b);
	dlock_redlock_free(c);
	for (int i = 0; i < 3; i++)
		rh_server_free(s[i]);
}

#define S_NAME "rl:strict"

Test(redlock_exclusion, strict_guard_refuses_young_nodes_without_a_holder, .timeout = 30)
{
	rh_server *s[3];
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);

	/* Every node is seconds old: with a 60 s strict window none counts. */
	dlock_redlock *r = open_redlock(s, 3, S_NAME, 0, 60000, 1);
	int rc = dlock_redlock_acquire(r, NULL, 0, 5000);
	cr_log_info("strict guard, fresh nodes, no holder: try(0, 5000) = %d %s (%s)", rc,
			dlock_strerror(rc), dlock_redlock_errmsg(r));
	cr_assert_neq(rc, 0, "strict guard: acquired on nodes younger than the window");
	cr_assert(rc == DLOCK_ENOTACQUIRED || rc == DLOCK_ENOQUORUM, "strict guard: %s",
			dlock_strerror(rc));
	int young = 0;
	for (size_t i = 0; i < 3; i++) {
		dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
		cr_assert_eq(dlock_redlock_member_status(&st, r, i), 0);
		cr_assert_neq(st.vote, DLOCK_VOTE_ACQUIRED, "node %zu counted", i + 1);
		cr_assert_neq(st.vote, DLOCK_VOTE_HELD, "node %zu HELD with no holder", i + 1);
		young += st.vote == DLOCK_VOTE_YOUNG;
	}
	cr_assert_geq(young, 2, "only %d YOUNG votes", young);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(exists(s[i], S_NAME), 0, "node %d kept a hold after the refused try",
				i + 1);
	cr_assert_eq(dlock_redlock_check(r, NULL), DLOCK_ENOTOWNER);

	/* With a wait, still refused, and within the wait. */
	int64_t t0 = rh_now_ms();
	rc = dlock_redlock_acquire(r, NULL, 500, 5000);
	int64_t took = rh_now_ms() - t0;
	cr_assert_neq(rc, 0, "strict guard with a wait: acquired on young nodes");
	cr_assert_lt(took, 2000, "try(500, ...) took %" PRId64 " ms", took);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(exists(s[i], S_NAME), 0, "node %d kept a hold after the refused wait",
				i + 1);

	/* Strict but window 0: the guard is off, and the lock is had. */
	dlock_redlock *r0 = open_redlock(s, 3, S_NAME, 0, 0, 1);
	rc = dlock_redlock_acquire(r0, NULL, 0, 5000);
	cr_assert_eq(rc, 0, "strict, window 0: %s (%s)", dlock_strerror(rc),
			dlock_redlock_errmsg(r0));
	rc = dlock_redlock_release(r0, NULL);
	cr_assert_eq(rc, 0, "unlock: %s", dlock_strerror(rc));
	for (int i = 0; i < 3; i++)
		cr_assert_eq(exists(s[i], S_NAME), 0);

	dlock_redlock_free(r);
	dlock_redlock_free(r0);
	for (int i = 0; i < 3; i++)
		rh_server_free(s[i]);
}

/* ---- 4. split votes: 5 contenders on 5 servers all make progress --------- */

#define V_SERVERS 5
#define V_THREADS 5
#define V_ROUNDS 10
#define V_NAME "rl:split"

typedef struct v_shared {
	pthread_barrier_t start;
	section sec;
	dl_failures fail;
	dl_gate done;
	atomic_int completed;
} v_shared;

typedef struct v_arg {
	v_shared *sh;
	dlock_redlock *r;
	int id;
	int64_t max_wait_ms;
} v_arg;

static void *v_worker(void *p)
{
	v_arg *a = p;
	v_shared *sh = a->sh;
	pthread_barrier_wait(&sh->start);
	for (int i = 0; i < V_ROUNDS; i++) {
		int64_t t0 = rh_now_ms();
		int rc = dlock_redlock_acquire(a->r, NULL, DLOCK_WAIT_FOREVER, 2000);
		int64_t waited = rh_now_ms() - t0;
		if (waited > a->max_wait_ms)
			a->max_wait_ms = waited;
		if (rc != 0) {
			dl_failures_record(&sh->fail, "thread %d round %d: lock(2000): %s (%s)",
					a->id, i, dlock_strerror(rc), dlock_redlock_errmsg(a->r));
			continue;
		}
		critical_section(&sh->sec, 2);
		rc = dlock_redlock_release(a->r, NULL);
		if (rc != 0)
			dl_failures_record(&sh->fail, "thread %d round %d: unlock: %s (%s)", a->id,
					i, dlock_strerror(rc), dlock_redlock_errmsg(a->r));
		atomic_fetch_add(&sh->completed, 1);
	}
	dl_gate_add(&sh->done, 1);
	return NULL;
}

Test(redlock_exclusion, split_votes_resolve_and_every_contender_progresses, .timeout = 90)
{
	rh_server *s[V_SERVERS];
	cr_assert_eq(rh_servers_start(s, V_SERVERS, NULL), 0);
	v_shared sh;
	v_arg args[V_THREADS];
	pthread_t th[V_THREADS];

	pthread_barrier_init(&sh.start, NULL, V_THREADS);
	section_init(&sh.sec);
	dl_failures_init(&sh.fail);
	dl_gate_init(&sh.done);
	atomic_init(&sh.completed, 0);
	for (int i = 0; i < V_THREADS; i++)
		args[i] = (v_arg){ &sh, open_redlock(s, V_SERVERS, V_NAME, 0, 0, 0), i, 0 };
	int64_t t0 = rh_now_ms();
	for (int i = 0; i < V_THREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, v_worker, &args[i]), 0);
	int n = dl_gate_wait(&sh.done, V_THREADS, t0 + 60000);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(n, V_THREADS,
			"only %d of %d contenders finished within 60 s; %d of %d rounds done", n,
			V_THREADS, atomic_load(&sh.completed), V_THREADS * V_ROUNDS);
	int64_t max_wait = 0;
	for (int i = 0; i < V_THREADS; i++) {
		pthread_join(th[i], NULL);
		if (args[i].max_wait_ms > max_wait)
			max_wait = args[i].max_wait_ms;
	}
	cr_log_info("split votes: %d rounds in %" PRId64 " ms, longest wait %" PRId64 " ms",
			V_THREADS * V_ROUNDS, took, max_wait);

	dl_failures_assert_none(&sh.fail);
	cr_assert_eq(atomic_load(&sh.completed), V_THREADS * V_ROUNDS);
	cr_assert_eq(atomic_load(&sh.sec.overlaps), 0, "%d entries found another contender inside",
			atomic_load(&sh.sec.overlaps));
	cr_assert_eq(atomic_load(&sh.sec.counter), V_THREADS * V_ROUNDS);
	for (int i = 0; i < V_SERVERS; i++)
		assert_no_key(s[i], V_NAME, "after every contender released");

	for (int i = 0; i < V_THREADS; i++)
		dlock_redlock_free(args[i].r);
	pthread_barrier_destroy(&sh.start);
	dl_gate_destroy(&sh.done);
	for (int i = 0; i < V_SERVERS; i++)
		rh_server_free(s[i]);
}
