/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test support shared by the unit, integration and stress tests: fixtures
 * that fail the test with the library's own message, time, Redisson's
 * reference scripts, and the allocation-failure torture runner.
 *
 * support.c needs no test framework (the stress programs run under
 * ThreadSanitizer, where Criterion's runner cannot start); fixtures.c and
 * torture.c are for Criterion tests.
 */
#ifndef DLOCK_TEST_SUPPORT_H
#define DLOCK_TEST_SUPPORT_H

#include <pthread.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include <dlock.h>

/* ---- support.c: no framework --------------------------------------------- */

/* Sleep, resuming after signals. */
void dl_sleep_ms(int64_t ms);

/* Open descriptors of this process. */
int dl_count_fds(void);

/* Threads in this process (/proc/self/task), or -1. */
int dl_count_threads(void);

/* Drive `loop` (dlock_loop_run with turn_ms) for for_ms; the longest turn,
 * ms (how long the loop was kept from other work), or -1 on an error. */
int64_t dl_longest_loop_turn(dlock_loop *loop, int64_t for_ms, int64_t turn_ms);

/* Append one line with one write(): O_APPEND keeps it whole against the
 * other processes writing the same log. Truncated past 1 KiB. */
void dl_log_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The int at the start of a shared counter file, or -1. */
int dl_read_counter(int fd);

/* Reap, without waiting, the children that exited since (exited[i] set,
 * status[i] filled); returns how many did. */
int dl_reap_exited(const pid_t *kids, int *exited, int *status, int n);

/* SIGKILL and reap the children that have not exited (exited[i] == 0). */
void dl_kill_unexited(const pid_t *kids, const int *exited, int *status, int n);

/* "ACQUIRED", "NONE", ... for messages. */
const char *dl_vote_name(dlock_vote v);

/* A counter threads wait on (start gates, "n are inside" barriers). */
typedef struct dl_gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int value;
} dl_gate;

void dl_gate_init(dl_gate *g);
void dl_gate_destroy(dl_gate *g);
void dl_gate_add(dl_gate *g, int delta);
int dl_gate_get(dl_gate *g);
/* Wait until value >= want or `deadline` (monotonic ms, rh_now_ms's clock); returns the value. */
int dl_gate_wait(dl_gate *g, int want, int64_t deadline);

/*
 * Records lost callbacks (any kind of lock: the callback passes its handle
 * as `lock`); the test thread waits on it with a deadline.
 */
typedef struct dl_lost {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fired;
	int64_t at_ms; /* of the first callback (monotonic) */
	char name[128];
	char owner[128];
	char node[128]; /* "(null)" when the event named none */
	int reason;
} dl_lost;

void dl_lost_init(dl_lost *r);
void dl_lost_destroy(dl_lost *r);
/* What a lost callback calls with its event (ud is the dl_lost). */
void dl_lost_note(void *ud, const dlock_lost_event *ev);
/* Wait until a callback fired or `deadline` (monotonic ms); returns how many fired. */
int dl_lost_wait(dl_lost *r, int64_t deadline);
int dl_lost_count(dl_lost *r);

/*
 * Failures seen by worker threads, which must not assert (Criterion's
 * assertions belong to the test's main thread): a count and the first
 * message; the main thread asserts none with dl_failures_assert_none().
 */
typedef struct dl_failures {
	pthread_mutex_t mu;
	int count;
	char first[512];
} dl_failures;

void dl_failures_init(dl_failures *f);
void dl_failures_record(dl_failures *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The count and the first message (copied). */
int dl_failures_get(dl_failures *f, char *first, size_t len);

/* ---- fixtures.c: Criterion ------------------------------------------------ */

/*
 * Pass when expr (a dlock call) returns >= 0; otherwise fail the test with
 * the expression, the code's name and the library's message for it - as
 * libgit2's cl_git_pass, so a failure says why, not only that.
 */
#define dl_pass(expr) dl__pass((expr), #expr, __FILE__, __LINE__)
void dl__pass(int rc, const char *expr, const char *file, int line);

/* A client on uri; timeout_ms (connect and command) and watchdog_ms of 0
 * keep the library's defaults. Fails the test when it cannot open. */
dlock_client *dl_client(const char *uri, int64_t timeout_ms, int64_t watchdog_ms);

/* A client on uri with these options (NULL: defaults), which must open. */
dlock_client *dl_client_opts(const char *uri, const dlock_client_options *o);

struct rh_server;

/* Subscribers of channel on s (PUBSUB NUMSUB), and a wait (bounded) until
 * there are exactly `want` (checks.c). */
int64_t dl_numsub(struct rh_server *s, const char *channel);
void dl_await_numsub(struct rh_server *s, const char *channel, int64_t want, int64_t timeout_ms);

/* ---- one asynchronous operation (async_outcome.c) ---- */

/* What an op's one callback said (dl_note fills it; pass &outcome as
 * userdata). Set `starting` around the starting call: `inside` then tells
 * a callback that came from inside it. */
typedef struct dl_outcome {
	int calls, code, has_holder, lost_reason;
	int starting, inside;
	int64_t value, validity, token, at; /* at: rh_now_ms() of the callback */
	dlock_lock_info *lock_info;           /* the callback's: the test frees it */
	dlock_semaphore_info *semaphore_info; /* likewise */
	dlock_holder holder;
	char message[512];
} dl_outcome;

void dl_note(dlock_op *op, const dlock_result *r, void *ud);

/* dl_note, for a callback on the test's own thread (a loop it drives): a
 * failure must carry its line. */
void dl_note_checked(dlock_op *op, const dlock_result *r, void *ud);

/* A client on the test's server driven by `loop` (label may be NULL). */
dlock_client *dl_client_on(dlock_loop *loop, const char *label);

/* The op started (rc 0, no callback from inside the call): drive the loop
 * to its one callback, 10 s at most. dl_drive: the driving alone (an op
 * whose callback may have come while the loop ran for another). */
void dl_wait_one(dlock_loop *loop, int rc, const dl_outcome *o);
void dl_drive(dlock_loop *loop, const dl_outcome *o);

/* Turn the loop 200 ms more: no second callback comes. */
void dl_no_second(dlock_loop *loop, const dl_outcome *o);

/* Drive the loop to the op's one callback (within_ms at most), which did not
 * come from inside the starting call; then dl_no_second(). */
void dl_await_one(dlock_loop *loop, const dl_outcome *o, int64_t within_ms);

/* How many of the n outcomes had their callback; drive the loop until
 * `want` of them did, within_ms at most (none had two). */
int dl_ended(const dl_outcome *o, int n);
void dl_drive_until(dlock_loop *loop, const dl_outcome *o, int n, int want, int64_t within_ms);

/* A lock handle, failing the test when it cannot be made. */
dlock_lock *dl_lock(dlock_client *client, const char *name);

/* Lock options of a kind, with the other fields at their defaults (static:
 * never freed), for dlock_lock_new(&l, c, name, dl_kind(DLOCK_LOCK_FAIR)). */
const dlock_lock_options *dl_kind(dlock_lock_kind kind);

/* dlock_redlock_acquire(_fenced), then its validity (dlock_redlock_validity_ms)
 * into *validity_ms, 0 when not acquired: what a test of the quorum's
 * timing reads right after acquiring. */
int dl_redlock_acquire_v(int64_t *validity_ms, dlock_redlock *r, const char *owner,
		int64_t wait_ms, int64_t lease_ms);
int dl_redlock_acquire_fenced_v(int64_t *validity_ms, int64_t *token, dlock_redlock *r,
		const char *owner, int64_t wait_ms, int64_t lease_ms);

/* The calling thread's owner string on client. */
void dl_owner(dlock_client *client, char *buf, size_t len);

/* One redis-server per test: TestSuite(name, .init = dl_server_start, .fini = dl_server_stop). */
extern struct rh_server *dl_srv;
void dl_server_start(void);
void dl_server_stop(void);

/*
 * One server of the test's own, a client on it (dl_client's timeout_ms and
 * watchdog_ms) and a lock `name`: what most single-server cases start from.
 * dl_single_down frees the three.
 */
typedef struct dl_single {
	struct rh_server *s;
	dlock_client *c;
	dlock_lock *l;
} dl_single;

void dl_single_up(dl_single *t, const char *name, int64_t timeout_ms, int64_t watchdog_ms);
void dl_single_down(dl_single *t);

/* l, held once by this thread on s: a hold count of 1; then the unlock
 * succeeds and takes the key with it. */
void dl_assert_held_once_then_release(struct rh_server *s, dlock_lock *l);

/* Fail the test when a worker thread recorded a failure (naming the first). */
void dl_failures_assert_none(dl_failures *f);

/* ---- procs.c: tests of forked children contending for a lock (Criterion) --- */

#define DL_PROCS_MAX_SERVERS 8

/*
 * The servers (their URIs copied for the children) and the scratch files of
 * such a test: an append-only log, optional notes and a counter file that
 * holds an int, open as cfd in the test process.
 */
typedef struct dl_procs {
	struct rh_server *s[DL_PROCS_MAX_SERVERS];
	char uris[DL_PROCS_MAX_SERVERS][64];
	int n;
	char dir[64];
	char log_path[128], counter_path[128], note_path[128];
	int cfd;
} dl_procs;

/* Start nservers servers and make dir_template (mkdtemp) with an empty
 * sections.log, notes.log (with_notes) and a counter holding 0. */
void dl_procs_start(dl_procs *p, int nservers, const char *dir_template, int with_notes);

/* Fork nkids children that run child(p, test's pid), which never returns. */
void dl_procs_fork(const dl_procs *p, pid_t *kids, int nkids,
		void (*child)(const dl_procs *p, pid_t parent));

/* None still running, no child reported a failure, each exited 0. */
void dl_procs_assert_children_ok(
		int running, int counter, const char *first_fail, const int *status, int nkids);

/* Remove the scratch files and free the servers. */
void dl_procs_free(dl_procs *p);

/* A child's first call: die with the test process (exit 3 when it is gone already). */
void dl_child_prologue(pid_t parent);

/* A child's RedLock on `name` over p's servers; on failure an "F <pid> open"
 * line in log_fd and _exit(5). */
dlock_redlock *dl_child_redlock(const dl_procs *p, const char *name, const dlock_client_options *co,
		const dlock_redlock_options *ro, int log_fd);

/* ---- raw.c: hiredis, bypassing dlock (Criterion) --------------------------- */

/* A connection to 127.0.0.1:port with timeout_ms for connect and commands. */
redisContext *dl_raw_connect(int port, int timeout_ms);

/* The next reply on a (subscribed) connection within timeout_ms, or NULL when
 * none came. Polls the socket itself, so a timeout leaves the context usable. */
redisReply *dl_next_reply(redisContext *c, int timeout_ms);

/* A raw subscriber on `channel`, confirmed by the server. */
redisContext *dl_subscribe(int port, const char *channel);

/* The next pub/sub message must be `payload` on `channel`, within timeout_ms. */
void dl_expect_message(redisContext *c, const char *channel, const char *payload, int timeout_ms);

/* ---- redisson_scripts.c --------------------------------------------------- */

/* A Redisson client id and thread id, as a Java service writes them. */
#define DL_REDISSON_OWNER "11111111-2222-3333-4444-555555555555:77"

extern const char dl_redisson_acquire[];
extern const char dl_redisson_unlock[];
extern const char dl_redisson_fenced_acquire[];
extern const char dl_redisson_fair_acquire[];
extern const char dl_redisson_fair_unlock[];
extern const char dl_redisson_read_force_unlock[];
extern const char dl_redisson_write_force_unlock[];

/* ---- torture.c: allocation failures (Criterion) --------------------------- */

/*
 * One operation, run with the k-th allocation the library makes on the
 * calling thread failing, for k = 1, 2, ... until it runs without reaching
 * its k-th: run() must return 0 or DLOCK_ENOMEM (the latter only when a
 * failure was injected), check() then asserts what that result means, and
 * after teardown() the library's live allocations and this process's
 * descriptors are back where they were (no leak). setup, check and teardown
 * may be NULL; errmsg says whose message to show.
 */
typedef struct dl_torture {
	const char *op; /* named in every failure */
	void (*setup)(void *ctx);
	int (*run)(void *ctx);
	void (*check)(void *ctx, int rc, long k);
	void (*teardown)(void *ctx);
	const char *(*errmsg)(void *ctx);
} dl_torture;

/* Install the counting allocator (before any dlock object exists). */
void dl_torture_install(void);

/* Run t over every k; ctx is passed to each step. */
void dl_torture_run(const dl_torture *t, void *ctx);

/* Live blocks the library allocated, on any thread. */
long dl_torture_live(void);

/* ---- checks.c: repeated assertion sequences (Criterion) ------------------- */

/*
 * dlock_lock_acquire(l, NULL, wait_ms, lease_ms) / dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, lease_ms) must
 * return `want` after lo_ms..hi_ms (both inclusive); a failure names the
 * call, the code and the lock's message. Return how long the call took.
 */
int64_t dl_assert_try(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, int want, int64_t lo_ms,
		int64_t hi_ms);
int64_t dl_assert_lock(dlock_lock *l, int64_t lease_ms, int want, int64_t lo_ms, int64_t hi_ms);

/* The end of a test: dl_free_locks(a, b) frees each lock, dl_close_clients(c, d) closes each client. */
#define dl_free_locks(...) \
	dl__free_locks((dlock_lock *const[]){ __VA_ARGS__ }, \
			sizeof((dlock_lock *const[]){ __VA_ARGS__ }) / sizeof(dlock_lock *))
#define dl_close_clients(...) \
	dl__close_clients((dlock_client *const[]){ __VA_ARGS__ }, \
			sizeof((dlock_client *const[]){ __VA_ARGS__ }) / sizeof(dlock_client *))
void dl__free_locks(dlock_lock *const *locks, size_t n);
void dl__close_clients(dlock_client *const *clients, size_t n);

/* `a` and `b` (two clients' handles, e.g. over TCP and over TLS) are one
 * lock: while a holds, b is kept out; after a's unlock b gets in. */
void dl_assert_one_lock(dlock_lock *a, dlock_lock *b);

/*
 * A client waiting in a thread: dlock_lock_acquire(l, owner, wait_ms,
 * watchdog) as `owner` (the starting thread's owner on c, so the test
 * thread can release what the waiter took), with when it started and
 * returned (monotonic ms). Join with dl_waiter_join().
 */
typedef struct dl_waiter {
	dlock_lock *l;
	char owner[128];
	int64_t wait_ms;
	int rc;
	int64_t started, returned;
	pthread_t th;
} dl_waiter;

void dl_waiter_start(dl_waiter *w, dlock_client *c, dlock_lock *l, int64_t wait_ms);
void dl_waiter_join(dl_waiter *w);

/* The server of cluster c that serves key's slot now (asserts there is one). */
struct rh_cluster;
struct rh_server *dl_slot_owner(struct rh_cluster *c, const char *key);
/* A primary of cluster c other than s (asserts there is one). */
struct rh_server *dl_other_primary(struct rh_cluster *c, const struct rh_server *s);

/* A lost callback (any kind's) that records into the dl_lost passed as userdata. */
void dl_on_lost(const dlock_lost_event *ev, void *ud);

/* `waiter`, blocked on the lock `holder` holds (20 s lease), wakes within
 * 2 s of holder's unlock: the unlock message reached it. */
void dl_assert_unlock_wakes(dlock_lock *holder, dlock_lock *waiter);

#endif
