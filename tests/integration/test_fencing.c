/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fencing tokens on real redis-servers (SPEC §5, reference §5.1):
 * Redisson's RFencedLock numbering on one server (every acquisition, re-entry
 * included, INCRs redisson_lock_token:{name}); a fenced RedLock whose tokens
 * grow strictly from one holder to the next although each server counts on
 * its own (the quorum's maximum, written back to the quorum); the same under
 * four competing processes while servers are killed and restarted empty; and
 * a fenced MultiLock.
 *
 * Forked children never call Criterion or harness functions and leave with
 * _exit() (an exit() would run the harness's atexit cleanup, which kills the
 * servers).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

/* Redisson's own scripts (the oracle) are in tests/support/redisson_scripts.c. */

/* ---- helpers ------------------------------------------------------------- */

/* CLOCK_MONOTONIC in microseconds: one clock for every process of the machine. */
static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static dlock_client_options client_opts(void)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.command_timeout_ms = 300;
	o.connect_timeout_ms = 300;
	return o;
}

static dlock_redlock_options fenced_opts(void)
{
	dlock_redlock_options o = DLOCK_REDLOCK_OPTIONS_INIT;

	o.fenced = 1;
	o.restart_guard_ms = 0;
	return o;
}

static dlock_client *open_client(rh_server *s)
{
	dlock_client_options o = client_opts();
	dlock_client *c = NULL;
	int rc = dlock_client_new(&c, rh_server_uri(s), &o);

	cr_assert_eq(rc, 0, "client_open %s: %s (%s)", rh_server_uri(s), dlock_strerror(rc),
			dlock_errmsg_last());
	return c;
}

static dlock_redlock *open_fenced_redlock(rh_server **s, int n, const char *name)
{
	const char *uris[8];
	dlock_client_options co = client_opts();
	dlock_redlock_options ro = fenced_opts();
	dlock_redlock *r = NULL;

	for (int i = 0; i < n; i++)
		uris[i] = rh_server_uri(s[i]);
	int rc = dlock_redlock_new_from_uris(&r, uris, (size_t)n, name, &co, &ro);
	cr_assert_eq(rc, 0, "redlock_open: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	return r;
}

/* The token counter redisson_lock_token:{name} on s (0 when absent). */
static int64_t counter_on(rh_server *s, const char *name)
{
	redisReply *r = rh_command(s, "GET redisson_lock_token:{%s}", name);

	cr_assert_not_null(r, "GET on port %d failed", rh_server_port(s));
	int64_t v = 0;
	if (r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	else
		cr_assert_eq(r->type, REDIS_REPLY_NIL, "GET token: reply type %d", r->type);
	freeReplyObject(r);
	return v;
}

/* "1:ACQUIRED 2:NONE ..." for messages. */
static void votes_str(dlock_redlock *r, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < dlock_redlock_size(r) && n < len; i++) {
		dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
		cr_assert_eq(dlock_redlock_member_status(&st, r, i), 0);
		n += (size_t)snprintf(buf + n, len - n, "%zu:%s ", i + 1, dl_vote_name(st.vote));
	}
}

/* ---- 1. token numbering on a fenced RLock --------------------------------- */

Test(fencing, fenced_rlock_numbers_every_acquisition, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client *c = open_client(s);
	dlock_lock *l = NULL, *plain = NULL;
	int64_t tok = -1;

	dl_pass(dlock_lock_new(&l, c, "fence:one", dl_kind(DLOCK_LOCK_FENCED)));
	cr_assert_eq(dlock_lock_token(&tok, l), 0);
	cr_assert_eq(tok, 0, "token before any acquisition: %" PRId64, tok);

	int rc = dlock_lock_acquire_fenced(&tok, l, NULL, 0, 30000);
	cr_assert_eq(rc, 0, "lock: %s (%s)", dlock_strerror(rc), dlock_lock_errmsg(l));
	cr_assert_eq(tok, 1, "first token %" PRId64, tok);
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));

	rc = dlock_lock_acquire_fenced(&tok, l, NULL, 0, 30000);
	cr_assert_eq(rc, 0, "lock: %s (%s)", dlock_strerror(rc), dlock_lock_errmsg(l));
	cr_assert_eq(tok, 2, "second token %" PRId64, tok);
	/* Re-entry counts too (Redisson's RFencedLock). */
	rc = dlock_lock_acquire_fenced(&tok, l, NULL, 0, 30000);
	cr_assert_eq(rc, 0, "re-entry: %s (%s)", dlock_strerror(rc), dlock_lock_errmsg(l));
	cr_assert_eq(tok, 3, "re-entry token %" PRId64, tok);
	int64_t cnt = -1;
	cr_assert_eq(dlock_lock_hold_count(&cnt, l, NULL), 0);
	cr_assert_eq(cnt, 2);

	int64_t cur = -1;
	cr_assert_eq(dlock_lock_token(&cur, l), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(cur, 3, "dlock_lock_token: %" PRId64, cur);
	redisReply *r = rh_command(s, "GET redisson_lock_token:{fence:one}");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING, "token key missing (type %d)", r->type);
	cr_assert_str_eq(r->str, "3");
	freeReplyObject(r);

	/* A Redisson RFencedLock waiter is refused while dlock holds it. */
	r = rh_command(s, "EVAL %s 2 fence:one redisson_lock_token:{fence:one} 30000 %s",
			dl_redisson_fenced_acquire, DL_REDISSON_OWNER);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->elements, 2);
	cr_assert_gt(r->element[0]->integer, 0,
			"Redisson's acquire got in while dlock held the lock");
	cr_assert_eq(r->element[1]->integer, -1);
	freeReplyObject(r);
	cr_assert_eq(counter_on(s, "fence:one"), 3, "a refused acquisition counted");

	cr_assert_eq(dlock_lock_release(l, NULL), 0);
	cr_assert_eq(dlock_lock_release(l, NULL), 0);
	cr_assert_eq(rh_command_int(s, "EXISTS fence:one"), 0);

	/* Redisson takes the next number from the same counter, and dlock continues after it. */
	r = rh_command(s, "EVAL %s 2 fence:one redisson_lock_token:{fence:one} 30000 %s",
			dl_redisson_fenced_acquire, DL_REDISSON_OWNER);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->elements, 2);
	cr_assert_eq(r->element[0]->integer, -1, "Redisson's acquire of a free lock: %lld",
			r->element[0]->integer);
	cr_assert_eq(r->element[1]->integer, 4, "Redisson's token %lld", r->element[1]->integer);
	freeReplyObject(r);
	rc = dlock_lock_acquire_fenced(&tok, l, NULL, 0, 30000);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "dlock while Redisson holds it: %s",
			dlock_strerror(rc));
	cr_assert_eq(counter_on(s, "fence:one"), 4, "a refused acquisition counted");
	r = rh_command(s,
			"EVAL %s 3 fence:one redisson_lock__channel:{fence:one} "
			"redisson_unlock_latch:{fence:one}:00000000000000000000000000000001 0 30000 %s publish 16000",
			dl_redisson_unlock, DL_REDISSON_OWNER);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
	cr_assert_eq(r->integer, 1);
	freeReplyObject(r);
	rc = dlock_lock_acquire_fenced(&tok, l, NULL, 0, 30000);
	cr_assert_eq(rc, 0, "lock: %s (%s)", dlock_strerror(rc), dlock_lock_errmsg(l));
	cr_assert_eq(tok, 5, "token after Redisson's 4: %" PRId64, tok);
	cr_assert_eq(dlock_lock_release(l, NULL), 0);

	/* A plain acquisition of a fenced lock counts as well (Redisson's lock() on an RFencedLock). */
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 30000), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(counter_on(s, "fence:one"), 6);
	cr_assert_eq(dlock_lock_release(l, NULL), 0);

	/* A plain lock has no tokens: refused, nothing taken, no counter made. */
	cr_assert_eq(dlock_lock_new(&plain, c, "fence:plain", NULL), 0);
	tok = 77;
	rc = dlock_lock_acquire_fenced(&tok, plain, NULL, 0, 30000);
	cr_assert_eq(rc, DLOCK_EINVAL, "try_fenced on a plain lock: %s", dlock_strerror(rc));
	cr_assert_eq(rh_command_int(s, "EXISTS fence:plain"), 0, "the plain lock was taken");
	cr_assert_eq(rh_command_int(s, "EXISTS redisson_lock_token:{fence:plain}"), 0);
	int held = -1;
	cr_assert_eq(dlock_lock_is_held(&held, plain, NULL), 0);
	cr_assert_eq(held, 0);

	dlock_lock_free(plain);
	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

/* ---- 2. fenced RedLock on 5 servers ---------------------------------------- */

#define N5 5

/*
 * A quorum of the members that voted "acquired" in the last acquisition
 * has a counter >= token: what the next token's growth rests on. (The
 * raise also goes to the other members, but the call returns once a quorum
 * has it: on a busy machine the last raise may still be on its way.)
 */
static void assert_voters_raised(rh_server **s, dlock_redlock *r, const char *name, int64_t token)
{
	char votes[128], counters[128] = "";
	int voters = 0, raised = 0;

	votes_str(r, votes, sizeof votes);
	for (int i = 0; i < N5; i++) {
		dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
		cr_assert_eq(dlock_redlock_member_status(&st, r, (size_t)i), 0);
		if (st.vote != DLOCK_VOTE_ACQUIRED)
			continue;
		voters++;
		int64_t v = counter_on(s[i], name);
		raised += v >= token;
		snprintf(counters + strlen(counters), sizeof counters - strlen(counters),
				"%d:%" PRId64 " ", i + 1, v);
	}
	cr_assert_geq(voters, 3, "only %d acquired votes for a granted RedLock (votes %s)", voters,
			votes);
	cr_assert_geq(raised, 3,
			"token %" PRId64
			": only %d voters' counters reached it (counters %s, votes %s)",
			token, raised, counters, votes);
}

Test(fencing, fenced_redlock_tokens_grow_and_follow_the_highest_counter, .timeout = 60)
{
	const char *name = "fence:redlock";
	rh_server *s[N5];
	cr_assert_eq(rh_servers_start(s, N5, NULL), 0);
	dlock_redlock *r = open_fenced_redlock(s, N5, name);
	int64_t prev = 0, tok = 0, validity = 0;
	char votes[128];

	for (int i = 0; i < 10; i++) {
		int rc = dl_redlock_acquire_fenced_v(&validity, &tok, r, NULL, 1000, 5000);
		cr_assert_eq(rc, 0, "acquisition %d: %s (%s)", i, dlock_strerror(rc),
				dlock_redlock_errmsg(r));
		votes_str(r, votes, sizeof votes);
		cr_assert_gt(tok, prev,
				"acquisition %d: token %" PRId64 " after %" PRId64 " (votes %s)", i,
				tok, prev, votes);
		assert_voters_raised(s, r, name, tok);
		prev = tok;
		cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	}

	/* Server 3's counter jumps far ahead: the next token must pass it. */
	redisReply *rep = rh_command(s[2], "SET redisson_lock_token:{%s} 1000", name);
	cr_assert_not_null(rep);
	freeReplyObject(rep);
	/*
	 * The quorum is decided as soon as 3 members took the lock, so server 3
	 * may be left out (vote "none") when its reply comes last; then only the
	 * strict growth is owed, and the next acquisition that server 3 votes
	 * for must pass 1000. (On loopback it practically always votes.)
	 */
	int rc, attempts = 0;
	dlock_member_status st3 = DLOCK_MEMBER_STATUS_INIT;
	do {
		rc = dl_redlock_acquire_fenced_v(&validity, &tok, r, NULL, 1000, 5000);
		cr_assert_eq(rc, 0, "%s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
		votes_str(r, votes, sizeof votes);
		cr_assert_eq(dlock_redlock_member_status(&st3, r, 2), 0);
		cr_log_info("fenced redlock: token %" PRId64
			    " after server 3 was set to 1000; votes %s",
				tok, votes);
		cr_assert_gt(tok, prev, "token %" PRId64 " after %" PRId64 " (votes %s)", tok, prev,
				votes);
		if (st3.vote == DLOCK_VOTE_ACQUIRED)
			cr_assert_gt(tok, 1000,
					"token %" PRId64
					" from a quorum including server 3, whose counter was "
					"set to 1000 (previous %" PRId64 ", votes %s)",
					tok, prev, votes);
		assert_voters_raised(s, r, name, tok);
		prev = tok;
		cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	} while (st3.vote != DLOCK_VOTE_ACQUIRED && ++attempts < 20);
	cr_assert_eq(st3.vote, DLOCK_VOTE_ACQUIRED,
			"server 3 never voted in 20 acquisitions (votes %s)", votes);

	/* And from there on, still strictly growing. */
	for (int i = 0; i < 3; i++) {
		rc = dl_redlock_acquire_fenced_v(&validity, &tok, r, NULL, 1000, 5000);
		cr_assert_eq(rc, 0, "%s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
		votes_str(r, votes, sizeof votes);
		cr_assert_gt(tok, prev, "token %" PRId64 " after %" PRId64 " (votes %s)", tok, prev,
				votes);
		assert_voters_raised(s, r, name, tok);
		prev = tok;
		cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	}

	/* A RedLock of plain members refuses to fence. */
	{
		const char *uris[N5];
		dlock_client_options co = client_opts();
		dlock_redlock_options ro = fenced_opts();
		dlock_redlock *p = NULL;
		ro.fenced = 0;
		for (int i = 0; i < N5; i++)
			uris[i] = rh_server_uri(s[i]);
		cr_assert_eq(dlock_redlock_new_from_uris(
					     &p, uris, N5, "fence:plain-redlock", &co, &ro),
				0);
		rc = dl_redlock_acquire_fenced_v(&validity, &tok, p, NULL, 0, 5000);
		cr_assert_eq(rc, DLOCK_EINVAL, "try_fenced on a plain RedLock: %s",
				dlock_strerror(rc));
		for (int i = 0; i < N5; i++)
			cr_assert_eq(rh_command_int(s[i], "EXISTS fence:plain-redlock"), 0);
		dlock_redlock_free(p);
	}

	dlock_redlock_free(r);
	for (int i = 0; i < N5; i++)
		rh_server_free(s[i]);
}

/* ---- 3. four processes, servers killed and restarted ----------------------- */

#define P_PROCS 4
#define P_TOTAL 200
#define P_LEASE 2000
#define P_NAME "fence:procs"
#define P_WORK_US 50000 /* time spent inside each critical section */

/* A child: its own fenced RedLock; acquire until the shared total is reached. Never returns. */
static void proc_child(const dl_procs *p, pid_t parent)
{
	dl_child_prologue(parent);
	int log_fd = open(p->log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	int cnt_fd = open(p->counter_path, O_RDWR | O_CLOEXEC);
	int note_fd = open(p->note_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (log_fd < 0 || cnt_fd < 0 || note_fd < 0)
		_exit(4);
	int me = (int)getpid();
	dlock_client_options co = client_opts();
	dlock_redlock_options ro = fenced_opts();
	dlock_redlock *r = dl_child_redlock(p, P_NAME, &co, &ro, note_fd);
	int64_t give_up = mono_us() + 100 * 1000000LL;
	int sections = 0, failed = 0, unlock_errs = 0, refused[16] = { 0 };
	for (;;) {
		if (dl_read_counter(cnt_fd) >= P_TOTAL)
			break;
		if (mono_us() > give_up) {
			dl_log_line(note_fd, "F %d gave up after 100 s with %d sections\n", me,
					sections);
			failed++;
			break;
		}
		int64_t validity = -1, token = -1;
		int rc = dl_redlock_acquire_fenced_v(&validity, &token, r, NULL, 5000, P_LEASE);
		if (rc != 0) {
			refused[-rc < 16 ? -rc : 15]++;
			if (rc != DLOCK_ENOTACQUIRED && rc != DLOCK_ENOQUORUM &&
					rc != DLOCK_EEXPIRED) {
				dl_log_line(note_fd, "F %d try_fenced: %s (%s)\n", me,
						dlock_strerror(rc), dlock_redlock_errmsg(r));
				failed++;
			}
			continue;
		}
		int64_t b = mono_us();
		int v = dl_read_counter(cnt_fd);
		if (v >= P_TOTAL) { /* the total was reached meanwhile: not a counted section */
			dlock_redlock_release(r, NULL);
			break;
		}
		usleep(P_WORK_US);
		v++;
		ssize_t w = pwrite(cnt_fd, &v, sizeof v, 0);
		int64_t e = mono_us();
		dl_log_line(log_fd, "%" PRId64 " %" PRId64 " %" PRId64 " %d\n", token, b, e, me);
		sections++;
		if (w != (ssize_t)sizeof v) {
			dl_log_line(note_fd, "F %d counter write failed\n", me);
			failed++;
		}
		if ((e - b) / 1000 >= validity) {
			dl_log_line(note_fd,
					"F %d section took %" PRId64 " us, validity %" PRId64
					" ms\n",
					me, e - b, validity);
			failed++;
		}
		if (dlock_redlock_release(r, NULL) != 0)
			unlock_errs++; /* a member on a killed server; the others were released */
	}
	dl_log_line(note_fd,
			"S %d sections %d notacquired %d noquorum %d expired %d unlock_errors %d\n",
			me, sections, refused[-DLOCK_ENOTACQUIRED], refused[-DLOCK_ENOQUORUM],
			refused[-DLOCK_EEXPIRED], unlock_errs);
	dlock_redlock_free(r);
	close(log_fd);
	close(cnt_fd);
	close(note_fd);
	_exit(failed ? 1 : 0);
}

typedef struct section {
	int64_t token, begin, end;
	int pid;
} section;

static int by_begin(const void *a, const void *b)
{
	const section *x = a, *y = b;

	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

Test(fencing, fenced_redlock_processes_with_servers_killed_and_restarted, .timeout = 120)
{
	dl_procs p;
	dl_procs_start(&p, N5, "/tmp/dlock-fence-procs-XXXXXX", 1);

	unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	srand(seed);

	pid_t kids[P_PROCS];
	dl_procs_fork(&p, kids, P_PROCS, proc_child);

	/*
	 * Kill a server now and then, never more than 2 down at once, and bring
	 * each back (empty) only after the lease has run out and after at least
	 * two sections were granted since the kill. The second condition keeps
	 * the token argument valid: a section granted while the server was down
	 * wrote its token back to a quorum that excludes it, so at its restart
	 * at least 3 servers that stay up hold a counter >= the last token and
	 * every later quorum meets one of them. (Why two: the section counted
	 * first after the kill may have been granted just before it.)
	 */
	int down[N5] = { 0 };
	int64_t kill_at[N5] = { 0 };
	int kill_count[N5] = { 0 };
	int ndown = 0, kills = 0, restarts = 0, max_down = 0, last_kill_count = 0;
	int64_t last_kill = 0;
	int64_t t0 = rh_now_ms(), deadline = t0 + 110000;
	int running = P_PROCS;
	int status[P_PROCS];
	int exited[P_PROCS] = { 0 };
	char events[2048];
	size_t en = 0;
	events[0] = '\0';
	while (running > 0 && rh_now_ms() < deadline) {
		int v = dl_read_counter(p.cfd);
		int64_t now = rh_now_ms();
		for (int i = 0; i < N5; i++) {
			if (down[i] && now - kill_at[i] >= P_LEASE + 100 &&
					v >= kill_count[i] + 2) {
				cr_assert_eq(rh_server_restart(p.s[i]), 0, "restart server %d",
						i + 1);
				down[i] = 0;
				ndown--;
				restarts++;
				if (en < sizeof events)
					en += (size_t)snprintf(events + en, sizeof events - en,
							"+%d@%d ", i + 1, v);
			}
		}
		if (ndown < 2 && v < P_TOTAL - 10 && v >= last_kill_count + 5 &&
				now - last_kill >= 400) {
			int victim;
			do
				victim = rand() % N5;
			while (down[victim]);
			cr_assert_eq(rh_server_kill(p.s[victim]), 0, "kill server %d", victim + 1);
			down[victim] = 1;
			ndown++;
			kills++;
			if (ndown > max_down)
				max_down = ndown;
			kill_at[victim] = last_kill = rh_now_ms();
			kill_count[victim] = last_kill_count = dl_read_counter(p.cfd);
			if (en < sizeof events)
				en += (size_t)snprintf(events + en, sizeof events - en, "-%d@%d ",
						victim + 1, kill_count[victim]);
		}
		running -= dl_reap_exited(kids, exited, status, P_PROCS);
		dl_sleep_ms(5);
	}
	dl_kill_unexited(kids, exited, status, P_PROCS);
	int counter = dl_read_counter(p.cfd);
	close(p.cfd);
	cr_log_info("fenced processes: %d sections in %" PRId64
		    " ms, %d kills, %d restarts, max %d down (seed %u): %s",
			counter, rh_now_ms() - t0, kills, restarts, max_down, seed, events);

	/* The children's notes: failures (F) and statistics (S). */
	char first_fail[700] = "";
	FILE *fp = fopen(p.note_path, "r");
	cr_assert_not_null(fp);
	char line[700];
	while (fgets(line, sizeof line, fp) != NULL) {
		if (line[0] == 'F' && first_fail[0] == '\0')
			snprintf(first_fail, sizeof first_fail, "%s", line);
		if (line[0] == 'S')
			cr_log_info("child %s", line);
	}
	fclose(fp);

	/* The sections, in time order. */
	static section sec[P_TOTAL + 16];
	int n = 0;
	fp = fopen(p.log_path, "r");
	cr_assert_not_null(fp);
	while (fgets(line, sizeof line, fp) != NULL) {
		long long tk, b, e;
		int pid;
		cr_assert_eq(sscanf(line, "%lld %lld %lld %d", &tk, &b, &e, &pid), 4,
				"garbled log line: %s", line);
		cr_assert_lt(n, P_TOTAL + 16, "too many sections in the log");
		sec[n].token = tk;
		sec[n].begin = b;
		sec[n].end = e;
		sec[n].pid = pid;
		n++;
	}
	fclose(fp);
	qsort(sec, (size_t)n, sizeof sec[0], by_begin);
	for (int i = 1; i < n; i++) {
		cr_assert_geq(sec[i].begin, sec[i - 1].end,
				"sections overlap: pid %d [%" PRId64 ", %" PRId64 "] token %" PRId64
				" and pid %d [%" PRId64 ", %" PRId64 "] token %" PRId64,
				sec[i - 1].pid, sec[i - 1].begin, sec[i - 1].end, sec[i - 1].token,
				sec[i].pid, sec[i].begin, sec[i].end, sec[i].token);
		cr_assert_gt(sec[i].token, sec[i - 1].token,
				"section %d (pid %d) has token %" PRId64
				" after section %d (pid %d) had %" PRId64,
				i, sec[i].pid, sec[i].token, i - 1, sec[i - 1].pid,
				sec[i - 1].token);
	}

	dl_procs_assert_children_ok(running, counter, first_fail, status, P_PROCS);
	cr_assert_eq(counter, P_TOTAL, "counter %d, want %d", counter, P_TOTAL);
	cr_assert_eq(n, P_TOTAL, "%d sections in the log, want %d", n, P_TOTAL);
	cr_assert_geq(kills, 3, "only %d servers were killed", kills);
	cr_assert_geq(restarts, 2, "only %d servers were restarted", restarts);
	cr_assert_eq(max_down, 2, "never two servers down at once");

	dl_procs_free(&p);
}

/* ---- 3b. delayed restarts must not let a token go back ---------------------- */

/*
 * redlock.h: "A server that restarts empty forgets its counter, as it forgets
 * the lock: the restart guard or a delayed restart covers both." Here every
 * restart is delayed past the lease, never more than 2 servers are down at
 * once, and no acquisition is in flight at any kill or restart; yet after
 * two servers of the last write-back quorum restart empty while the servers
 * outside it are stale, a quorum without any counter >= the last token can
 * form, and SPEC §5 ("a token that grows strictly from one holder to the
 * next") is owed nonetheless.
 */
/*
 * Every server restarts at some point, a majority of them one after the
 * other: the counters survive because the servers persist them (the
 * documented requirement, redlock.h). Without persistence the last step
 * would meet only servers that restarted empty or never saw the counter.
 */
Test(fencing, fenced_redlock_token_survives_restarts_with_persistence, .timeout = 60)
{
	const char *name = "fence:restarts";
	const char *const persistent[] = { "--appendonly", "yes", "--appendfsync", "always", NULL };
	rh_server *s[N5];
	cr_assert_eq(rh_servers_start(s, N5, persistent), 0);
	dlock_redlock *r = open_fenced_redlock(s, N5, name);
	int64_t tok = 0, prev = 0, validity = 0;
	char votes[128];

	/* Servers 4 and 5 are down while ten holders come and go: the counters
	 * of servers 1-3 reach 10, 4 and 5 stay behind. */
	cr_assert_eq(rh_server_kill(s[3]), 0);
	cr_assert_eq(rh_server_kill(s[4]), 0);
	for (int i = 0; i < 10; i++) {
		int rc = dl_redlock_acquire_fenced_v(&validity, &tok, r, NULL, 1000, P_LEASE);
		cr_assert_eq(rc, 0, "acquisition %d: %s (%s)", i, dlock_strerror(rc),
				dlock_redlock_errmsg(r));
		cr_assert_gt(tok, prev);
		prev = tok;
		cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	}
	for (int i = 0; i < 3; i++)
		cr_assert_eq(counter_on(s[i], name), prev, "server %d's counter", i + 1);

	/* Delayed restart of 4 and 5 (they come back with what they had: nothing). */
	dl_sleep_ms(P_LEASE + 100);
	cr_assert_eq(rh_server_restart(s[3]), 0);
	cr_assert_eq(rh_server_restart(s[4]), 0);

	/* Servers 1 and 2 crash; delayed restart (from their append-only files),
	 * nobody acquires meanwhile. */
	cr_assert_eq(rh_server_kill(s[0]), 0);
	cr_assert_eq(rh_server_kill(s[1]), 0);
	dl_sleep_ms(P_LEASE + 100);
	cr_assert_eq(rh_server_restart(s[0]), 0);
	cr_assert_eq(rh_server_restart(s[1]), 0);

	/* Server 3 goes down: one server down, four up, a quorum is there. */
	cr_assert_eq(rh_server_kill(s[2]), 0);
	int rc = dl_redlock_acquire_fenced_v(&validity, &tok, r, NULL, 1000, P_LEASE);
	votes_str(r, votes, sizeof votes);
	if (rc == 0) {
		cr_log_info("after the restarts: token %" PRId64 " (previous holder's %" PRId64
			    "), votes %s",
				tok, prev, votes);
		cr_assert_gt(tok, prev,
				"the next holder got token %" PRId64
				" after the previous holder's %" PRId64
				" (votes %s): the persisted counters were not counted",
				tok, prev, votes);
		cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	} else {
		/* Refusing is safe (no token is handed out); it must be an infrastructure error. */
		cr_log_info("after the restarts: refused with %s (%s)", dlock_strerror(rc),
				dlock_redlock_errmsg(r));
		cr_assert_eq(rc, DLOCK_ENOQUORUM, "%s (%s)", dlock_strerror(rc),
				dlock_redlock_errmsg(r));
	}

	dlock_redlock_free(r);
	for (int i = 0; i < N5; i++)
		rh_server_free(s[i]);
}

/* ---- 4. fenced MultiLock ---------------------------------------------------- */

Test(fencing, fenced_multilock_token_is_the_members_maximum, .timeout = 30)
{
	const char *name = "fence:multi";
	rh_server *s[3];
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	dlock_client *c[3];
	dlock_lock *m[3];
	for (int i = 0; i < 3; i++) {
		c[i] = open_client(s[i]);
		dl_pass(dlock_lock_new(&m[i], c[i], name, dl_kind(DLOCK_LOCK_FENCED)));
	}
	dlock_multilock *ml = NULL;
	cr_assert_eq(dlock_multilock_new(&ml, m, 3, NULL), 0, "%s", dlock_errmsg_last());

	/* Member 2's counter starts ahead. */
	redisReply *r = rh_command(s[1], "SET redisson_lock_token:{%s} 50", name);
	cr_assert_not_null(r);
	freeReplyObject(r);

	int64_t prev = 0;
	for (int k = 0; k < 6; k++) {
		int64_t tok = -1;
		int rc = dlock_multilock_acquire_fenced(&tok, ml, NULL, k % 2 ? 1000 : 0, 5000);
		cr_assert_eq(rc, 0, "acquisition %d: %s (%s)", k, dlock_strerror(rc),
				dlock_multilock_errmsg(ml));
		int64_t ctr[3], max = 0;
		for (int i = 0; i < 3; i++) {
			ctr[i] = counter_on(s[i], name);
			if (ctr[i] > max)
				max = ctr[i];
		}
		cr_assert_gt(tok, prev, "acquisition %d: token %" PRId64 " after %" PRId64, k, tok,
				prev);
		cr_assert_eq(tok, max,
				"acquisition %d: token %" PRId64 ", members' counters %" PRId64
				" %" PRId64 " %" PRId64,
				k, tok, ctr[0], ctr[1], ctr[2]);
		/* Written back to every member. */
		for (int i = 0; i < 3; i++)
			cr_assert_eq(ctr[i], tok,
					"acquisition %d: member %d's counter %" PRId64
					", token %" PRId64,
					k, i + 1, ctr[i], tok);
		if (k == 0)
			cr_assert_eq(tok, 51, "first token %" PRId64 " (member 2 was at 50)", tok);
		prev = tok;
		cr_assert_eq(dlock_multilock_release(ml, NULL), 0, "%s", dlock_multilock_errmsg(ml));
	}
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(s[i], "EXISTS %s", name), 0);

	/* Plain members cannot fence; fenced and plain cannot be mixed. */
	dlock_lock *p[3];
	for (int i = 0; i < 3; i++)
		cr_assert_eq(dlock_lock_new(&p[i], c[i], "fence:multi-plain", NULL), 0);
	dlock_multilock *pl = NULL;
	cr_assert_eq(dlock_multilock_new(&pl, p, 3, NULL), 0);
	int64_t tok = -1;
	cr_assert_eq(dlock_multilock_acquire_fenced(&tok, pl, NULL, 0, 5000), DLOCK_EINVAL);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(s[i], "EXISTS fence:multi-plain"), 0);
	dlock_multilock_free(pl);
	dlock_lock *mixed[2] = { m[0], p[1] };
	dlock_multilock *mx = NULL;
	cr_assert_eq(dlock_multilock_new(&mx, mixed, 2, NULL), DLOCK_EINVAL);

	dlock_multilock_free(ml);
	for (int i = 0; i < 3; i++) {
		dlock_lock_free(p[i]);
		dlock_lock_free(m[i]);
		dlock_client_free(c[i]);
		rh_server_free(s[i]);
	}
}

/* ---- 5. the fenced writer example: a paused holder's late write is refused ---- */

#ifdef DLOCK_EXAMPLES_DIR
Test(fencing, example_storage_refuses_the_paused_holders_write, .timeout = 60)
{
	rh_server *s = rh_server_start(NULL);
	char out[4096];
	size_t len = 0;
	int pipefd[2], status = 0;
	pid_t pid;

	cr_assert_not_null(s);
	cr_assert_eq(pipe(pipefd), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		execl(DLOCK_EXAMPLES_DIR "/fenced_writer", "fenced_writer", rh_server_uri(s),
				(char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		ssize_t n = read(pipefd[0], out + len, sizeof(out) - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(pipefd[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fenced_writer failed (%d):\n%s",
			status, out);
	/* The story it tells: A paused with the older token, B accepted, A refused. */
	cr_assert_not_null(
			strstr(out, "writer B: got the lock, token 2, wrote: ACCEPTED"), "%s", out);
	cr_assert_not_null(strstr(out, "token 1: REFUSED (stale token)"), "%s", out);
	rh_server_free(s);
}
#endif
