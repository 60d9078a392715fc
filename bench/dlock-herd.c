/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock-herd - the thundering herd on one lock (SPEC §9, 0.3): W waiting
 * processes, one client each, on one lock of a running server.
 *
 * handoff: every process takes the lock K times (lock, hold --hold-us,
 *   unlock, again), all starting together; the run ends when every
 *   process has had its K holds (a lost wake-up never ends). Reported:
 *   hand-offs/s, acquire scripts per acquisition (INFO commandstats:
 *   evalsha + eval calls over the acquisitions, the releases subtracted)
 *   and server CPU per acquisition (INFO cpu, user + sys).
 * crash: a holder takes the lock with a lease of --ttl-ms and is SIGKILLed
 *   while W processes wait; reported: the time from the key's expiry to
 *   the next holder, and the acquire scripts the server ran in the first
 *   millisecond after the expiry (MONITOR's server timestamps); with --json,
 *   as one JSON document (tool "dlock-herd") for bench/compare-table.js.
 * fanout: the floor under any client's design: W connections subscribed
 *   to one channel, --holds K messages published to them; reported: the
 *   server CPU per message (what each unlock's "0" costs the server).
 *
 * usage: dlock-herd --uri redis://127.0.0.1:PORT --waiters W [--holds K]
 *                   [--hold-us N] [--crash [--json]] [--ttl-ms N] [--fanout] [--name LOCK]
 */
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <dlock.h>

#include "clock.h"

static struct {
	const char *uri, *name;
	int waiters, holds, crash, fanout, json;
	long hold_us, ttl_ms;
} opt = { "redis://127.0.0.1:6379", "herd-bench", 8, 4, 0, 0, 0, 200, 1000 };

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "dlock-herd: %s: %s\n", what, msg);
	exit(1);
}

static void spin_us(long us)
{
	uint64_t end = now_ns() + (uint64_t)us * 1000;

	while (now_ns() < end)
		;
}

static redisContext *admin(void)
{
	const char *p = strrchr(opt.uri, ':');
	redisContext *c = redisConnect("127.0.0.1", p != NULL ? atoi(p + 1) : 6379);

	if (c == NULL || c->err)
		die("connect", c != NULL ? c->errstr : "out of memory");
	return c;
}

/* A field of INFO section `sec`, e.g. "used_cpu_sys:" (0 when absent). */
static double info_field(redisContext *c, const char *sec, const char *field)
{
	redisReply *r = redisCommand(c, "INFO %s", sec);
	double v = 0;
	const char *at;

	if (r == NULL || r->type != REDIS_REPLY_STRING)
		die("INFO", c->errstr);
	at = strstr(r->str, field);
	if (at != NULL)
		v = strtod(at + strlen(field), NULL);
	freeReplyObject(r);
	return v;
}

static double calls(redisContext *c, const char *cmd)
{
	char f[64];

	snprintf(f, sizeof(f), "cmdstat_%s:calls=", cmd);
	return info_field(c, "commandstats", f);
}

static double server_cpu(redisContext *c)
{
	return info_field(c, "cpu", "used_cpu_sys:") + info_field(c, "cpu", "used_cpu_user:");
}

/* One waiting process: K holds, started by a byte on `go`; writes the
 * monotonic ns of its first acquisition on `out`. */
static void waiter(int go, int out)
{
	dlock_client *client = NULL;
	dlock_lock *l = NULL;
	char b;
	uint64_t first = 0;
	int i;

	if (dlock_client_new(&client, opt.uri, NULL) < 0)
		die("dlock_client_new", dlock_errmsg_last());
	if (dlock_lock_new(&l, client, opt.name, NULL) < 0)
		die("dlock_lock_new", dlock_errmsg_last());
	if (read(go, &b, 1) != 1)
		_exit(1);
	for (i = 0; i < opt.holds; i++) {
		if (dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, opt.crash ? 10000 : -1) < 0)
			die("dlock_lock_acquire", dlock_lock_errmsg(l));
		if (first == 0)
			first = now_ns();
		spin_us(opt.hold_us);
		if (dlock_lock_release(l, NULL) < 0)
			die("dlock_lock_release", dlock_lock_errmsg(l));
	}
	if (write(out, &first, sizeof(first)) != (ssize_t)sizeof(first))
		_exit(1);
	dlock_lock_free(l);
	dlock_client_free(client);
	_exit(0);
}

/* A holder that takes the lock with a lease and waits to be killed. */
static pid_t holder(int out)
{
	pid_t pid = fork();

	if (pid == 0) {
		dlock_client *client = NULL;
		dlock_lock *l = NULL;
		uint64_t t;

		if (dlock_client_new(&client, opt.uri, NULL) < 0 ||
				dlock_lock_new(&l, client, opt.name, NULL) < 0 ||
				dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, opt.ttl_ms) < 0)
			die("holder", dlock_errmsg_last());
		t = now_ns();
		if (write(out, &t, sizeof(t)) != (ssize_t)sizeof(t))
			_exit(1);
		for (;;)
			pause();
	}
	return pid;
}

/* MONITOR in a child: the server-clock times (us) of the acquire scripts
 * ("EVALSHA"/"EVAL" with the lock's name as the key) on `out`, until killed. */
static pid_t monitor(int out, int ready)
{
	pid_t pid = fork();

	if (pid == 0) {
		redisContext *c = admin();
		redisReply *r;
		char ok = 1;

		r = redisCommand(c, "MONITOR");
		freeReplyObject(r);
		if (write(ready, &ok, 1) != 1)
			_exit(1);
		while (redisGetReply(c, (void **)&r) == REDIS_OK) {
			if (r->type == REDIS_REPLY_STATUS && strcasestr(r->str, "\"EVAL") != NULL) {
				/* 1 or 2 keys, the name first: an acquire (a release has 3). */
				char k1[256], k2[256];

				snprintf(k1, sizeof(k1), "\"1\" \"%s\"", opt.name);
				snprintf(k2, sizeof(k2), "\"2\" \"%s\"", opt.name);
				if (strstr(r->str, k1) != NULL || strstr(r->str, k2) != NULL) {
					double ts = strtod(r->str, NULL);
					int64_t us = (int64_t)(ts * 1e6);

					if (write(out, &us, sizeof(us)) != (ssize_t)sizeof(us))
						_exit(1);
				}
			}
			freeReplyObject(r);
		}
		_exit(0);
	}
	return pid;
}

/* The fan-out floor: server CPU per PUBLISH to W subscribers. */
static void fanout(void)
{
	redisContext **subs = calloc((size_t)opt.waiters, sizeof(*subs)), *c = admin();
	double cpu0, cpu1;
	int i, ready[2];
	pid_t reader;
	char b;

	if (pipe(ready) < 0)
		die("pipe", "failed");
	/* The subscribers in a child that reads every message, as a waiting
	 * process does (unread, the server's writes would fill its buffers). */
	if ((reader = fork()) == 0) {
		struct pollfd *fds = calloc((size_t)opt.waiters, sizeof(*fds));

		for (i = 0; i < opt.waiters; i++) {
			subs[i] = admin();
			freeReplyObject(redisCommand(subs[i], "SUBSCRIBE fanout:%s", opt.name));
			fds[i].fd = subs[i]->fd;
			fds[i].events = POLLIN;
		}
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		for (;;) {
			if (poll(fds, (nfds_t)opt.waiters, -1) < 0)
				_exit(1);
			for (i = 0; i < opt.waiters; i++) {
				void *r;

				if (!(fds[i].revents & POLLIN))
					continue;
				if (redisBufferRead(subs[i]) != REDIS_OK)
					_exit(1);
				while (redisGetReplyFromReader(subs[i], &r) == REDIS_OK && r != NULL)
					freeReplyObject(r);
			}
		}
	}
	if (read(ready[0], &b, 1) != 1)
		die("fanout", "subscribers did not start");
	cpu0 = server_cpu(c);
	for (i = 0; i < opt.holds; i++)
		freeReplyObject(redisCommand(c, "PUBLISH fanout:%s 0", opt.name));
	usleep(100000);
	cpu1 = server_cpu(c);
	kill(reader, SIGKILL);
	waitpid(reader, NULL, 0);
	printf("fanout: %d subscribers, %d messages: %.1f us server CPU per message\n",
			opt.waiters, opt.holds, (cpu1 - cpu0) * 1e6 / opt.holds);
	redisFree(c);
	free(subs);
}

static void usage(void)
{
	fprintf(stderr, "usage: dlock-herd --uri URI --waiters W [--holds K] [--hold-us N]\n"
			"                  [--crash [--json]] [--ttl-ms N] [--fanout] [--name LOCK]\n");
	exit(64);
}

int main(int argc, char **argv)
{
	static const struct option longs[] = { { "uri", 1, NULL, 'u' }, { "waiters", 1, NULL, 'w' },
		{ "holds", 1, NULL, 'k' }, { "hold-us", 1, NULL, 'h' }, { "crash", 0, NULL, 'c' },
		{ "ttl-ms", 1, NULL, 't' }, { "fanout", 0, NULL, 'f' }, { "name", 1, NULL, 'n' },
		{ "json", 0, NULL, 'j' }, { NULL, 0, NULL, 0 } };
	int ch, go[2], out[2], hp[2], mp[2], mready[2], i, status;
	pid_t *pids, hpid = 0, mpid = 0;
	redisContext *c;
	double e0, e1, r0, r1, cpu0, cpu1;
	uint64_t t0, t1, held_at = 0, first_next = UINT64_MAX, v;

	while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (ch) {
		case 'u': opt.uri = optarg; break;
		case 'w': opt.waiters = atoi(optarg); break;
		case 'k': opt.holds = atoi(optarg); break;
		case 'h': opt.hold_us = atol(optarg); break;
		case 'c': opt.crash = 1; opt.holds = 1; break;
		case 't': opt.ttl_ms = atol(optarg); break;
		case 'f': opt.fanout = 1; break;
		case 'n': opt.name = optarg; break;
		case 'j': opt.json = 1; break;
		default: usage();
		}
	}
	if (opt.waiters < 1 || opt.holds < 1)
		usage();
	signal(SIGPIPE, SIG_IGN);
	if (opt.fanout) {
		fanout();
		return 0;
	}
	c = admin();
	freeReplyObject(redisCommand(c, "DEL %s", opt.name));
	if (pipe(go) < 0 || pipe(out) < 0 || pipe(hp) < 0 || pipe(mp) < 0 || pipe(mready) < 0)
		die("pipe", "failed");
	if (opt.crash) {
		mpid = monitor(mp[1], mready[1]);
		if (read(mready[0], &ch, 1) != 1)
			die("monitor", "did not start");
		hpid = holder(hp[1]);
		if (read(hp[0], &held_at, sizeof(held_at)) != (ssize_t)sizeof(held_at))
			die("holder", "did not acquire");
	}
	pids = calloc((size_t)opt.waiters, sizeof(*pids));
	for (i = 0; i < opt.waiters; i++) {
		if ((pids[i] = fork()) == 0)
			waiter(go[0], out[1]);
		if (pids[i] < 0)
			die("fork", "failed");
	}
	usleep(200000 + 2000 * (useconds_t)opt.waiters); /* every client connected */
	e0 = calls(c, "evalsha") + calls(c, "eval");
	r0 = 0;
	cpu0 = server_cpu(c);
	t0 = now_ns();
	for (i = 0; i < opt.waiters; i++)
		if (write(go[1], "g", 1) != 1)
			die("go", "failed");
	if (opt.crash) {
		usleep(100000); /* all waiting on the holder */
		kill(hpid, SIGKILL);
		waitpid(hpid, NULL, 0);
	}
	for (i = 0; i < opt.waiters; i++) {
		if (read(out[0], &v, sizeof(v)) != (ssize_t)sizeof(v))
			die("waiter", "ended without its holds");
		if (v < first_next)
			first_next = v;
	}
	t1 = now_ns();
	for (i = 0; i < opt.waiters; i++) {
		waitpid(pids[i], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			die("waiter", "failed");
	}
	cpu1 = server_cpu(c);
	e1 = calls(c, "evalsha") + calls(c, "eval");
	r1 = (double)opt.waiters * opt.holds; /* one release script per hold */
	if (!opt.crash) {
		double acq = (double)opt.waiters * opt.holds, secs = (double)(t1 - t0) / 1e9;

		printf("waiters %d holds %d hold_us %ld: %.0f acquisitions in %.2f s, %.0f hand-offs/s, "
		       "%.2f acquire scripts/acquisition, %.1f us server CPU/acquisition\n",
				opt.waiters, opt.holds, opt.hold_us, acq, secs, acq / secs,
				(e1 - e0 - r1 + r0) / acq, (cpu1 - cpu0) * 1e6 / acq);
	} else {
		/* The key expired ttl after the holder's acquire (its monitor line). */
		int64_t us, hold_us = -1, n1 = 0, n10 = 0, total = 0, per_ms[50] = { 0 }, peak = 0;

		usleep(100000);
		kill(mpid, SIGKILL);
		waitpid(mpid, NULL, 0);
		close(mp[1]);
		while (read(mp[0], &us, sizeof(us)) == (ssize_t)sizeof(us)) {
			if (hold_us < 0) {
				hold_us = us; /* the holder's */
				continue;
			}
			total++;
			if (us >= hold_us + opt.ttl_ms * 1000 && us < hold_us + opt.ttl_ms * 1000 + 1000)
				n1++;
			if (us >= hold_us + opt.ttl_ms * 1000 && us < hold_us + opt.ttl_ms * 1000 + 10000)
				n10++;
			if (us >= hold_us + opt.ttl_ms * 1000 && us < hold_us + opt.ttl_ms * 1000 + 50000)
				per_ms[(us - hold_us - opt.ttl_ms * 1000) / 1000]++;
		}
		for (i = 0; i < 50; i++)
			if (per_ms[i] > peak)
				peak = per_ms[i];
		double after = ((double)first_next - (double)held_at) / 1e6 - (double)opt.ttl_ms;

		if (opt.json) {
			printf("{\"tool\":\"dlock-herd\",\"dlock_version\":\"%s\",\"results\":[{"
			       "\"impl\":\"dlock\",\"scenario\":7,\"what\":\"crash\",\"servers\":1,"
			       "\"paused\":0,\"waiters\":%d,\"ttl_ms\":%ld,"
			       "\"next_holder_after_expiry_ms\":%.3f,\"next_holder_after_acquire_ms\":%.3f,"
			       "\"acquires_first_ms\":%" PRId64 ",\"busiest_ms\":%" PRId64 ","
			       "\"acquires_first_10ms\":%" PRId64 ",\"acquires_total\":%" PRId64 "}]}\n",
					DLOCK_VERSION_STRING, opt.waiters, opt.ttl_ms, after,
					after + (double)opt.ttl_ms, n1, peak, n10, total);
		}
		fprintf(opt.json ? stderr : stdout,
		       "crash: waiters %d ttl %ld ms: next holder %.1f ms after the expiry; "
		       "acquire scripts in the first ms after it %" PRId64 ", busiest ms of the first 50 %"
		       PRId64 ", first 10 ms %" PRId64 ", all %" PRId64 " (%.2f/acquisition)\n",
				opt.waiters, opt.ttl_ms, after, n1, peak,
				n10, total, (double)total / opt.waiters);
	}
	redisFree(c);
	free(pids);
	return 0;
}
